"""`specreason serve`'s memory plan: the arithmetic, the refusal, the override flag, replica KV
sizing and GPU shares (no process is started, no model fetched)."""

from __future__ import annotations

import sys
import types

import pytest

from langchain_specreason.cli import build_parser, main, serve_launcher
from langchain_specreason.errors import ConfigError, MemoryPlanError
from langchain_specreason.serving import launcher as launcher_module
from langchain_specreason.serving import memory
from langchain_specreason.serving.launcher import Launcher
from langchain_specreason.serving.memory import (
    GIB,
    MIB,
    MemoryPlan,
    ServerNeed,
    check_gpu_shares,
    kv_bytes,
    mem_available,
    parse_bytes,
    replica_kv,
    split_share,
    weight_bytes,
)
from langchain_specreason.serving.profiles import load_profile

SMOL = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64}
QWEN_15 = {"num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
           "hidden_size": 1536}  # fmt: skip


def _args(*argv: str):
    return build_parser().parse_args(["serve", "--profile", "cpu-test", *argv])


@pytest.fixture
def host(monkeypatch):
    """The host's memory as the plan reads it, settable; models sized as fetched."""
    state = {"available": 22 * GIB, "total": 24 * GIB}
    monkeypatch.setattr(
        launcher_module, "host_memory", lambda: (state["available"], state["total"])
    )
    sizes = {"smollm2-135m": (272_589_282, SMOL), "qwen2.5-coder-0.5b": (1_271_806_763, None)}
    monkeypatch.setattr(launcher_module, "model_facts", lambda model: sizes[model])
    return state


def test_the_calibration_points_of_serve_readme():
    # cpu-test draft (135M folder, float32, 1 GiB KV): measured 3.6 GiB
    draft = ServerNeed("draft", kv=GIB, weights=weight_bytes(272_589_282, 4, 2))
    assert draft.total / GIB == pytest.approx(3.76, abs=0.01)
    # cpu-test base (0.5B folder, float32, 1 GiB KV): measured 6.7 GiB
    base = ServerNeed("base", kv=GIB, weights=weight_bytes(1_271_806_763, 4, 2))
    assert base.total / GIB == pytest.approx(6.55, abs=0.01)
    # four 135M servers with 256 MiB each and two routers: measured 11.7 GiB
    small = ServerNeed("x", kv=256 * MIB, weights=weight_bytes(272_589_282, 4, 2))
    plan = MemoryPlan((small,) * 4, available=22 * GIB, routers=2)
    assert plan.need / GIB == pytest.approx(12.2, abs=0.05)


def test_kv_cache_is_read_as_vllm_reads_it():
    assert kv_bytes({"VLLM_CPU_KVCACHE_SPACE": "2"}, ["--kv-cache-memory-bytes=1G"], 0) == 2 * GIB
    assert kv_bytes({}, ["--kv-cache-memory-bytes=268435456"], 0) == 256 * MIB
    assert kv_bytes({}, ["--kv-cache-memory-bytes", "512M"], 0) == 512 * MIB
    # a share is the worker's whole reservation: KV cache is what its weights and runtime leave
    util = ["--gpu-memory-utilization", "0.25"]
    assert kv_bytes({}, util, 8 * GIB) == 2 * GIB - memory.WORKER_RUNTIME
    assert kv_bytes({}, util, 8 * GIB, weights=GIB) == GIB - memory.WORKER_RUNTIME
    assert kv_bytes({}, util, 8 * GIB, weights=5 * GIB) == 0  # vLLM refuses; not negative
    assert kv_bytes({}, [], 100 * GIB) == 92 * GIB - memory.WORKER_RUNTIME  # vLLM's default
    assert parse_bytes("1.5g") == 1_500_000_000 and parse_bytes("2K") == 2048
    with pytest.raises(ConfigError, match="whole GiB"):
        kv_bytes({"VLLM_CPU_KVCACHE_SPACE": "0.5"}, [], 0)
    with pytest.raises(ConfigError, match="byte count"):
        parse_bytes("lots")


def test_replica_kv_holds_one_full_sequence():
    assert replica_kv(SMOL, 4096, 4) == 256 * MIB  # 180 MiB a sequence: the floor
    # the 1.5B at 8192 tokens in float32: 448 MiB a sequence, an eighth more, in 64 MiB steps
    assert replica_kv(QWEN_15, 8192, 4) == 512 * MIB
    assert replica_kv(None, 8192, 4) == 256 * MIB  # not fetched: the measured point


def test_meminfo():
    text = "MemTotal:       24000000 kB\nMemFree:  1 kB\nMemAvailable:   20000000 kB\n"
    assert mem_available(text) == (20_000_000 * 1024, 24_000_000 * 1024)
    with pytest.raises(ConfigError):
        mem_available("MemTotal: 1 kB\n")


def test_the_readme_replica_line_fits_a_24_gb_host_and_says_what_each_server_got(host):
    launcher = serve_launcher(_args("--replicas", "2"))
    # every replica runs with 256 MiB of KV cache, set by bytes (the GiB variable unset)
    for spec in launcher.plan.servers():
        assert ("VLLM_CPU_KVCACHE_SPACE", "") in spec.env
        assert spec.args[-1] == f"--kv-cache-memory-bytes={256 * MIB}"
    assert launcher.one_at_a_time and launcher.check_memory
    plan = launcher.memory_plan()
    assert plan.fits
    assert plan.need / GIB == pytest.approx(17.8, abs=0.1)
    assert plan.servers[0].describe() == (
        "draft replica 1: 3.0 GiB (KV cache 256 MiB, weights 0.8 GiB)"
    )
    # a KV cache given on the command line is kept
    mine = serve_launcher(_args("--replicas", "2", "--base-env", "VLLM_CPU_KVCACHE_SPACE=1"))
    assert all(("VLLM_CPU_KVCACHE_SPACE", "1") in s.env for s in mine.plan.replicas["base"])
    assert all(s.args[-1].startswith("--kv-cache") for s in mine.plan.replicas["draft"])


def test_a_plan_that_does_not_fit_is_refused_before_anything_starts(host, monkeypatch, capsys):
    started = []
    monkeypatch.setattr(launcher_module.subprocess, "Popen", lambda *a, **k: started.append(a))
    monkeypatch.setattr(launcher_module, "check_port_free", lambda host, port: None)
    host["available"] = 12 * GIB
    with pytest.raises(MemoryPlanError) as caught:
        serve_launcher(_args("--replicas", "3")).start()
    message = str(caught.value)
    assert message.startswith("not enough memory: the plan needs 26.6 GiB plus a 1.5 GiB reserve")
    assert "12.0 GiB is available" in message
    for fix in ("--replicas 2", "VLLM_CPU_KVCACHE_SPACE", "--only", "--ignore-memory-plan"):
        assert fix in message
    assert started == []
    assert main(["serve", "--profile", "cpu-test", "--replicas", "3"]) == 2
    assert "error: not enough memory" in capsys.readouterr().err
    assert started == []


def test_the_override_flag_starts_anyway(host, monkeypatch):
    host["available"] = 2 * GIB
    launcher = serve_launcher(_args("--ignore-memory-plan"))
    assert not launcher.check_memory
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setattr(launcher_module, "check_port_free", lambda host, port: None)
    monkeypatch.setattr(launcher_module, "server_command", lambda spec, device: ["true"])
    spawned = []
    monkeypatch.setattr(Launcher, "_spawn", lambda self, cmd, *a, **k: spawned.append(cmd))
    monkeypatch.setattr(Launcher, "_wait_healthy", lambda self, runs=None: None)
    launcher.start()
    assert len(spawned) == 2
    with pytest.raises(MemoryPlanError):
        serve_launcher(_args()).start()


def test_gpu_shares_per_device():
    check_gpu_shares([("draft", "0", 0.12), ("base", "0", 0.78), ("other", "1", 0.9)])
    with pytest.raises(
        MemoryPlanError, match=r"GPU 0 .* adds up to 1\.02 \(draft 0\.12, base 0\.9\)"
    ):
        check_gpu_shares([("draft", "0", 0.12), ("base", "0,1", 0.9)])
    assert split_share(0.78, 2) == 0.39 and split_share(0.9, 3) == 0.3


def test_gpu_plans_are_checked_by_their_shares():
    launcher = Launcher(load_profile("gpu-1x"))
    assert launcher.memory_plan() is None  # 0.12 + 0.78 on device 0
    over = Launcher(load_profile("gpu-1x", extra_args={"base": ["--gpu-memory-utilization=0.9"]}))
    with pytest.raises(MemoryPlanError, match="GPU 0"):
        over.memory_plan()
    # replicas sharing a device split it: still fits
    from langchain_specreason.serving.replicas import plan_replicas

    plan = plan_replicas(load_profile("gpu-1x"), 2, gpus=1)
    assert {a for s in plan.servers() for a in s.args if "utilization=" in a} == {
        "--gpu-memory-utilization=0.06",
        "--gpu-memory-utilization=0.39",
    }
    assert memory.RESERVE == 1.5 * GIB


def test_the_cli_refuses_an_over_asked_gpu_and_the_flag_passes_it(capsys, monkeypatch):
    monkeypatch.setattr(launcher_module.shutil, "which", lambda name: None)  # no vllm here
    monkeypatch.setattr(launcher_module, "check_port_free", lambda host, port: None)  # no net
    argv = ["serve", "--profile", "gpu-1x", "--base-arg=--gpu-memory-utilization=0.95"]
    assert main(argv) == 2
    assert "error: GPU 0 is asked for more memory than it has" in capsys.readouterr().err
    assert main([*argv, "--ignore-memory-plan"]) == 2  # past the plan, to the missing vllm
    assert "GPU profiles need the `vllm` command" in capsys.readouterr().err


def test_a_server_with_a_share_is_planned_as_its_share_plus_the_processes_beside_the_worker(
    host,
):
    share = ["--gpu-memory-utilization=0.25"]
    profile = load_profile(  # the profile's KV variable unset: vLLM reads it over the share
        "cpu-test", extra_args={"base": share}, extra_env={"base": {"VLLM_CPU_KVCACHE_SPACE": ""}}
    )
    launcher = Launcher(profile, roles=("base",))
    base = launcher.memory_plan().servers[0]
    # the weights are inside the share, not counted a second time beside it
    expected = 0.25 * 24 * GIB + memory.SERVER_OVERHEAD - memory.WORKER_RUNTIME
    assert base.total == pytest.approx(expected, abs=MIB)


QWEN_05 = (1_271_806_763, {"dtype": "bfloat16"})
QWEN_15_FOLDER = (3_570_000_000, {"dtype": "bfloat16"})


def test_the_model_loaded_through_speculative_config_is_planned_in_its_server(host, monkeypatch):
    sizes = {"qwen2.5-coder-0.5b": QWEN_05, "qwen2.5-coder-1.5b": QWEN_15_FOLDER}
    monkeypatch.setattr(launcher_module, "model_facts", lambda model: sizes[model])
    plain = Launcher(load_profile("cpu")).memory_plan()
    sd = Launcher(load_profile("cpu", variant="sd")).memory_plan()
    # the base server of `--variant sd` also holds the 0.5B drafter, in float32 as the base:
    # its folder x (1 + 4/2), about 3.5 GiB (the review's F7)
    drafter = weight_bytes(QWEN_05[0], 4, 2)
    assert drafter / GIB == pytest.approx(3.55, abs=0.01)
    assert sd.servers[1].drafter == drafter
    assert sd.servers[1].total - plain.servers[1].total == drafter
    assert sd.servers[0] == plain.servers[0]  # the draft server is as it was
    assert sd.need - plain.need == drafter
    assert "drafter 3.6 GiB" in sd.servers[1].describe()
    assert "drafter" not in plain.servers[1].describe()
    # ngram loads no model
    ngram = Launcher(load_profile("cpu", variant="ngram")).memory_plan()
    assert ngram.need == plain.need


def test_speculative_model_reads_the_configs_model():
    sc = "--speculative-config"
    assert memory.speculative_model([sc, '{"method":"draft_model","model":"{model:x}"}']) == "x"
    assert memory.speculative_model([f'{sc}={{"method":"eagle3","model":"/m/e"}}']) == "/m/e"
    assert memory.speculative_model([sc, '{"method":"ngram","num_speculative_tokens":4}']) is None
    assert memory.speculative_model(["--dtype", "float32"]) is None
    # an unknown drafter (a Hugging Face id) is said, not counted
    need = ServerNeed("base", kv=GIB, weights=GIB, drafter=None)
    assert need.total == memory.SERVER_OVERHEAD + 2 * GIB
    assert "drafter size unknown" in need.describe()


def test_ignore_memory_plan_starts_where_the_hosts_memory_cannot_be_read(
    monkeypatch, tmp_path, capsys
):
    import functools

    from langchain_specreason import cli

    missing = tmp_path / "meminfo"  # as on a host without /proc/meminfo (macOS, ...)
    monkeypatch.setattr(
        launcher_module, "host_memory", functools.partial(memory.host_memory, missing)
    )
    sizes = {"smollm2-135m": (272_589_282, SMOL), "qwen2.5-coder-0.5b": (1_271_806_763, None)}
    monkeypatch.setattr(launcher_module, "model_facts", lambda model: sizes[model])

    class Served(Exception):
        pass

    def supervise(self):
        raise Served

    monkeypatch.setattr(Launcher, "start", lambda self: self)
    monkeypatch.setattr(Launcher, "supervise", supervise)
    with pytest.raises(Served):  # started and supervising: serving
        cli._serve(_args("--ignore-memory-plan"))
    assert "no memory plan (cannot read the host's memory" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--ignore-memory-plan starts the servers without"):
        cli._serve(_args())
