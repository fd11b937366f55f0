"""Serve profiles: every profile's server flags parse with vLLM's own argument parser."""

from __future__ import annotations

import json

import pytest

from langchain_specreason.errors import ConfigError, ServeError
from langchain_specreason.serving.launcher import server_command
from langchain_specreason.serving.profiles import list_profiles, load_profile


def _profiles_and_variants():
    for name in list_profiles():
        yield name, None
        for variant in load_profile(name).variants:
            yield name, variant


CASES = list(_profiles_and_variants())


def test_expected_profiles_exist():
    assert {"cpu-test", "cpu", "gpu-1x", "gpu-2x"} <= set(list_profiles())
    assert set(load_profile("cpu").variants) == {"sd", "sd-dyn", "ngram"}
    for gpu in ("gpu-1x", "gpu-2x"):
        assert set(load_profile(gpu).variants) == {"ngram", "sd", "sd-dyn", "eagle3"}


@pytest.fixture(scope="module")
def vllm_parser():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser())


@pytest.mark.needs_vllm
@pytest.mark.parametrize(("name", "variant"), CASES, ids=[f"{n}/{v}" for n, v in CASES])
def test_server_args_parse_with_vllms_parser(vllm_parser, name, variant):
    profile = load_profile(name, variant=variant)
    for spec in profile.servers():
        cmd = server_command(spec, profile.device, fetch_missing=False)
        if profile.device == "cpu":
            assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
            argv = cmd[3:]
        else:
            assert cmd[:2] == ["vllm", "serve"]
            argv = ["--model", cmd[2], *cmd[3:]]
        args = vllm_parser.parse_args(argv)
        assert args.port == spec.port
        assert args.served_model_name == [spec.served_name]
        if spec.role == "router":
            assert args.runner == "pooling"
            continue
        assert args.enable_prefix_caching is True
        # compact JSON under structured output: a small model cannot pad it with whitespace
        assert args.structured_outputs_config.disable_any_whitespace is True
        assert args.structured_outputs_config.backend == "xgrammar"
        if spec.role == "base" and variant is not None:
            config = args.speculative_config
            config = json.loads(config) if isinstance(config, str) else config
            assert config["method"] in ("ngram", "draft_model", "eagle3")
            assert "{model:" not in json.dumps(config)  # references were expanded


def test_cpu_servers_get_their_own_core():
    for name in ("cpu", "cpu-test"):
        profile = load_profile(name)
        binds = [dict(s.env)["VLLM_CPU_OMP_THREADS_BIND"] for s in profile.servers()]
        assert binds == ["0", "1", "0"]  # the router shares the draft's core


def test_router_server_of_a_profile(tmp_path, monkeypatch):
    from langchain_specreason.serving.launcher import resolve_model, router_dir

    profile = load_profile("cpu")
    assert profile.router is not None and profile.router.model == "router:cpu"
    assert [s.role for s in profile.servers()] == ["draft", "base", "router"]
    monkeypatch.setenv("SPECREASON_CACHE_DIR", str(tmp_path))
    with pytest.raises(ServeError, match="arbitrage train"):
        resolve_model("router:cpu")
    assert resolve_model("router:cpu", fetch_missing=False) == str(router_dir("cpu"))
    other = load_profile("cpu", router_model=str(tmp_path), router_port=9003)
    assert (other.router.model, other.router.port) == (str(tmp_path), 9003)
    with pytest.raises(ConfigError, match="share port"):
        load_profile("cpu", router_port=profile.base.port)
    with pytest.raises(ConfigError, match="no \\[router\\]"):
        load_profile("gpu-1x", router_port=9003)


def test_overrides():
    profile = load_profile(
        "cpu-test",
        draft_port=9001,
        base_port=9002,
        host="0.0.0.0",
        base_model="/models/other",
        extra_args={"base": ["--seed", "1"]},
    )
    assert (profile.draft.port, profile.base.port) == (9001, 9002)
    assert profile.base.url == "http://127.0.0.1:9002/v1"
    assert profile.base.served_name == "other"
    assert profile.base.args[-2:] == ("--seed", "1")


def test_unknown_profile_and_variant_errors():
    with pytest.raises(ServeError, match="unknown profile 'nope'; known profiles: cpu"):
        load_profile("nope")
    with pytest.raises(ServeError, match="has no variant 'eagle3'; variants: sd, sd-dyn, ngram"):
        load_profile("cpu", variant="eagle3")
    with pytest.raises(ConfigError, match="cannot share port"):
        load_profile("cpu", draft_port=7000, base_port=7000)


def test_the_vllm_plugin_reports_whether_its_patches_applied():
    from langchain_specreason.serving.vllm_plugin import report

    assert report(True, True, "0.32.0") == (
        "langchain-specreason vLLM plugin: prefix-cache reads applied (vLLM 0.32.0)"
    )
    line = report(False, True, "0.40.1")
    assert "NOT applied (request patch missing, logprob rows ok)" in line
    assert line.endswith("; untested vLLM (tested: 0.32)")


@pytest.mark.needs_vllm
def test_the_vllm_plugin_applies_to_the_installed_vllm(capsys):
    from langchain_specreason.serving import vllm_plugin

    assert vllm_plugin._patch_request() and vllm_plugin._patch_logprob_rows()
    assert vllm_plugin.vllm_version().startswith("0.32")


def _speculative_config(name: str, variant: str) -> dict:
    profile = load_profile(name, variant=variant)
    cmd = server_command(profile.base, profile.device, fetch_missing=False)
    return json.loads(cmd[cmd.index("--speculative-config") + 1])


SD_DYN = [p for p in list_profiles() if "sd-dyn" in load_profile(p).variants]
SD_DYN_SCHEDULES = {
    "cpu": [[1, 4, 4], [5, 1024, 2]],
    "gpu-1x": [[1, 2, 4], [3, 4, 2], [5, 1024, 1]],
    "gpu-2x": [[1, 2, 4], [3, 4, 2], [5, 1024, 1]],
}


def test_sd_dyn_is_on_every_profile_with_sd():
    assert SD_DYN == [p for p in list_profiles() if "sd" in load_profile(p).variants]
    assert {"cpu", "gpu-1x", "gpu-2x"} <= set(SD_DYN)


@pytest.mark.parametrize("name", SD_DYN)
def test_sd_dyn_is_sd_with_a_speculation_length_per_batch_size(name):
    sd, dyn = _speculative_config(name, "sd"), _speculative_config(name, "sd-dyn")
    schedule = dyn.pop("num_speculative_tokens_per_batch_size")
    assert dyn == sd  # the same drafter and the same longest speculation, K = 4
    # serve/README.md, "sd-dyn": cpu's chosen on dev prompts, the GPUs' provisional
    assert schedule == SD_DYN_SCHEDULES[name]


@pytest.mark.parametrize("name", SD_DYN)
def test_sd_dyn_never_stops_speculating_with_a_draft_model(name):
    # vLLM 0.32 runs a draft model's forward pass even at K = 0 (llm_base_proposer.propose keeps
    # the drafter's KV cache in step), so K = 0 pays the drafting and gains nothing: K >= 1
    config = _speculative_config(name, "sd-dyn")
    assert config["method"] == "draft_model"
    assert min(k for _, _, k in config["num_speculative_tokens_per_batch_size"]) >= 1


@pytest.mark.needs_vllm
@pytest.mark.parametrize("name", SD_DYN)
def test_vllm_accepts_the_sd_dyn_schedule(vllm_parser, name):
    from pydantic import TypeAdapter
    from vllm.config.speculative import SpeculativeConfig
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    profile = load_profile(name, variant="sd-dyn")
    cmd = server_command(profile.base, profile.device, fetch_missing=False)
    argv = cmd[3:] if profile.device == "cpu" else ["--model", cmd[2], *cmd[3:]]
    args = vllm_parser.parse_args(argv)
    config = args.speculative_config
    config = json.loads(config) if isinstance(config, str) else config
    # the field's own type (SpeculativeConfig needs a loaded model to be built whole)
    field = SpeculativeConfig.__dataclass_fields__["num_speculative_tokens_per_batch_size"]
    schedule = TypeAdapter(field.type).validate_python(
        config["num_speculative_tokens_per_batch_size"]
    )
    assert schedule == [tuple(r) for r in SD_DYN_SCHEDULES[name]]
    # the scheduler's own lookup (it validates the schedule as the engine does at start)
    max_seqs = args.max_num_seqs or 256
    lookup = build_dynamic_sd_schedule_lookup(schedule, max_seqs, config["num_speculative_tokens"])
    expected = {
        "cpu": [4, 4, 4, 4, 2],
        "gpu-1x": [4, 4, 2, 2, 1],
        "gpu-2x": [4, 4, 2, 2, 1],
    }[name]
    assert lookup[1:6] == expected and lookup[-1] == expected[-1]
