"""Serving safety: API keys reach the servers by their environment, an exposed dev-mode server
without a key is refused, and secrets never reach logs or ``meta.json``. No server is started.
"""

from __future__ import annotations

import json
import sys
import types

import pytest

from langchain_specreason.cli import build_parser, serve_launcher
from langchain_specreason.errors import ConfigError
from langchain_specreason.lab.bench.command import make_plan
from langchain_specreason.lab.shared.meta import MetaFile
from langchain_specreason.lab.shared.servers import (
    ServerPair,
    ServerSource,
    api_key_of,
    reset_prefix_cache,
    served_models,
)
from langchain_specreason.serving import launcher as launcher_module
from langchain_specreason.serving.launcher import Launcher, server_command, server_env
from langchain_specreason.serving.profiles import load_profile
from langchain_specreason.serving.secrets import (
    check_exposure,
    client_api_key,
    dev_mode,
    is_loopback,
    redact_args,
    redact_env,
    redact_record,
)

from .fakes import loopback_server

KEY = "sk-very-secret-0123"
HF = "hf_also_secret_4567"
URLS = ["--draft-url", "http://d.invalid/v1", "--base-url", "http://b.invalid/v1"]


@pytest.fixture(autouse=True)
def _no_keys_in_env(monkeypatch):
    for name in ("VLLM_API_KEY", "SPECREASON_BASE_API_KEY", "VLLM_SERVER_DEV_MODE"):
        monkeypatch.delenv(name, raising=False)


def serve_args(*flags: str):
    return build_parser().parse_args(["serve", "--profile", "cpu-test", *flags])


# --- refusal -------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "node-a.example"])
def test_an_exposed_dev_mode_server_without_a_key_is_refused(host):
    with pytest.raises(
        ConfigError,
        match=r"VLLM_SERVER_DEV_MODE=1 and no API key.*--api-key KEY "
        r"or VLLM_API_KEY=KEY.*127\.0\.0\.1",
    ):
        serve_launcher(serve_args("--host", host))


def test_an_exposed_dev_mode_server_with_a_key_is_accepted_with_a_warning(monkeypatch, capsys):
    launcher = serve_launcher(serve_args("--host", "0.0.0.0", "--api-key", KEY))
    assert launcher.api_key == KEY
    err = capsys.readouterr().err
    assert "guards vLLM's /v1 routes only" in err and KEY not in err
    # the key does not guard dev mode's admin routes: exposed, the servers run without them
    assert "VLLM_SERVER_DEV_MODE is off for it" in err
    assert all("VLLM_SERVER_DEV_MODE" not in env for env in launcher.check_exposure())
    assert err.count("warning: the draft server") == 1
    monkeypatch.setenv("VLLM_API_KEY", KEY)  # the variable serves as well as the flag
    assert serve_launcher(serve_args("--host", "0.0.0.0")).api_key == KEY


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_hosts_need_no_key(host, capsys):
    launcher = serve_launcher(serve_args("--host", host))
    assert launcher.api_key is None
    assert capsys.readouterr().err == ""
    assert serve_launcher(serve_args()).api_key is None  # the default host


def test_without_dev_mode_an_exposed_server_needs_no_key():
    # gpu-2x across two nodes (serve/README.md): no dev mode, so today's behaviour stays.
    profile = load_profile("gpu-2x", host="0.0.0.0")
    assert len(Launcher(profile).check_exposure()) == 2


def test_dev_mode_inherited_from_the_callers_environment_counts(monkeypatch):
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")
    with pytest.raises(ConfigError, match=r"base server on 0\.0\.0\.0 .* no API key"):
        Launcher(load_profile("gpu-2x", host="0.0.0.0"), roles=("base",)).check_exposure()


def test_the_exposure_rules():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]")
    assert is_loopback("localhost") and is_loopback("LOCALHOST")
    assert not any(is_loopback(h) for h in ("0.0.0.0", "", "::", "10.0.0.1", "example.org"))
    assert dev_mode({"VLLM_SERVER_DEV_MODE": "1"}) and not dev_mode({"VLLM_SERVER_DEV_MODE": "0"})
    assert not dev_mode({})
    dev = {"VLLM_SERVER_DEV_MODE": "1"}
    assert check_exposure("draft", "127.0.0.1", dev) is None
    with pytest.raises(ConfigError, match="--api-key"):
        check_exposure("draft", "0.0.0.0", {**dev, "VLLM_API_KEY": ""})  # empty: no key
    assert check_exposure("draft", "0.0.0.0", {**dev, "VLLM_API_KEY": KEY})
    assert check_exposure("draft", "0.0.0.0", dev, ["--api-key", KEY])  # vLLM's own flag
    assert check_exposure("draft", "0.0.0.0", dev, [f"--api-key={KEY}"])


def test_an_extra_host_flag_cannot_bypass_the_dev_mode_refusal():
    dev = {"VLLM_SERVER_DEV_MODE": "1"}
    # extra args come after the profile's --host and argparse keeps the last one
    for args in (["--host=0.0.0.0"], ["--host", "0.0.0.0"], ["--host", "::1", "--host=0.0.0.0"]):
        with pytest.raises(ConfigError, match=r"refusing to start the base server on 0\.0\.0\.0"):
            check_exposure("base", "127.0.0.1", dev, args)
    assert check_exposure("base", "0.0.0.0", dev, ["--host", "127.0.0.1"]) is None
    launcher = Launcher(load_profile("cpu-test", extra_args={"base": ["--host=0.0.0.0"]}))
    with pytest.raises(ConfigError, match="refusing to start the base server"):
        launcher.check_exposure()


# --- the key reaches the child's environment, not its argv ----------------------------------


class _FakeProc:
    pid = 999_999_999

    def poll(self):
        return None

    def wait(self, timeout=None):
        return 0


def test_the_key_reaches_every_server_by_its_environment_only(tmp_path, monkeypatch):
    profile = tmp_path / "p.toml"
    profile.write_text(f"""
device = "cpu"
[draft]
model = "{tmp_path / "draft-model"}"
port = 8901
args = ["--dtype", "float32"]
env = {{ VLLM_SERVER_DEV_MODE = "1", HF_TOKEN = "{HF}" }}
[base]
model = "{tmp_path / "base-model"}"
port = 8902
env = {{ VLLM_SERVER_DEV_MODE = "1" }}
""")
    started: list[tuple[list[str], dict[str, str]]] = []

    def popen(cmd, *, env, stdout, **kwargs):
        started.append((list(cmd), dict(env)))
        return _FakeProc()

    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))  # no vLLM import
    monkeypatch.setattr(launcher_module.subprocess, "Popen", popen)
    monkeypatch.setattr(launcher_module, "check_port_free", lambda host, port: None)
    monkeypatch.setattr(launcher_module.os, "killpg", lambda pid, sig: None)
    monkeypatch.setattr(Launcher, "_wait_healthy", lambda self: None)
    monkeypatch.setenv("VLLM_API_KEY", "inherited-key")  # the launcher's key wins over it
    loaded = load_profile(str(profile), host="0.0.0.0", extra_args={"base": [f"--hf-token={HF}"]})
    with Launcher(loaded, log_dir=tmp_path / "logs", api_key=KEY) as servers:
        assert servers.api_key == KEY
    assert [cmd[cmd.index("--port") + 1] for cmd, _ in started] == ["8901", "8902"]
    for cmd, env in started:
        assert env["VLLM_API_KEY"] == KEY
        assert not any(KEY in arg for arg in cmd) and "--api-key" not in cmd
    for role in ("draft", "base"):
        logged = (tmp_path / "logs" / f"{role}.log").read_text()
        assert logged.startswith("$ ") and KEY not in logged and HF not in logged
    assert "--hf-token=***" in (tmp_path / "logs" / "base.log").read_text()


def test_server_env_sets_the_key_over_an_inherited_one(monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "inherited")
    spec = load_profile("cpu-test").draft
    assert server_env(spec, "cpu")["VLLM_API_KEY"] == "inherited"
    assert server_env(spec, "cpu", api_key=KEY)["VLLM_API_KEY"] == KEY
    assert KEY not in server_command(spec, "cpu", fetch_missing=False)


def test_an_empty_env_override_unsets_the_variable_even_a_default(monkeypatch):
    monkeypatch.setenv("X_INHERITED_EMPTY", "")
    spec = load_profile(
        "cpu-test", extra_env={"base": {"VLLM_CPU_KVCACHE_SPACE": "", "X_KEEP": "0"}}
    ).base
    env = server_env(spec, "cpu")
    assert "VLLM_CPU_KVCACHE_SPACE" not in env  # the profile's 2 and the CPU default's 1 are gone
    assert env["X_KEEP"] == "0"
    assert env["X_INHERITED_EMPTY"] == ""  # only the profile's and overrides' "" unset
    assert server_env(load_profile("cpu-test").base, "cpu")["VLLM_CPU_KVCACHE_SPACE"] == "2"


# --- redaction ------------------------------------------------------------------------------


def test_redact_args_hides_secret_flag_values():
    # flags with values that are no secret: passed through as they are
    not_secret = [
        "--port",
        "8000",
        "--max-num-batched-tokens",
        "4096",
        "--tokenizer",
        "tok",
        "--enable-prompt-tokens-details",
        "--max-num-seqs",
        "8",
    ]
    args = [
        "vllm",
        "serve",
        "m",
        "--api-key",
        KEY,
        f"--api-key={KEY}",
        "--hf-token",
        HF,
        *not_secret,
        "--api-key",
        "k1",
        "k2",
        "--hf-token",
        "--dtype",
        "float32",
    ]
    shown = redact_args(args)
    assert KEY not in " ".join(shown) and HF not in " ".join(shown)
    assert shown == [
        "vllm",
        "serve",
        "m",
        "--api-key",
        "***",
        "--api-key=***",
        "--hf-token",
        "***",
        *not_secret,
        "--api-key",
        "***",
        "***",
        "--hf-token",
        "--dtype",
        "float32",
    ]


def test_redact_env_hides_secret_named_values():
    env = {
        "VLLM_API_KEY": KEY,
        "HF_TOKEN": HF,
        "AWS_SECRET_ACCESS_KEY": "a",
        "DB_PASSWORD": "p",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "CUDA_VISIBLE_DEVICES": "0",
        "EMPTY_TOKEN": "",
    }
    assert redact_env(env) == {
        "VLLM_API_KEY": "***",
        "HF_TOKEN": "***",
        "AWS_SECRET_ACCESS_KEY": "***",
        "DB_PASSWORD": "***",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "CUDA_VISIBLE_DEVICES": "0",
        "EMPTY_TOKEN": "",
    }


def test_redact_record_hides_secrets_in_a_meta_shaped_dict():
    meta = {
        "settings": {"budget": 64, "max_tokens": 8, "step_max_tokens": 16},
        "sessions": [
            {
                "command": ["specreason", "bench", f"--api-key={KEY}"],
                "servers": [
                    {
                        "base": {
                            "args": ["--api-key", KEY, "--port", "1"],
                            "env": {"HF_TOKEN": HF, "X": "1"},
                            "models": [{"id": "m", "root": "/m"}],
                        },
                        "api_key": True,
                        "router": {"hf_token": HF},
                    }
                ],
            }
        ],
    }
    shown = redact_record(meta)
    text = json.dumps(shown)
    assert KEY not in text and HF not in text
    assert shown["settings"] == meta["settings"]  # token counts are not secrets
    server = shown["sessions"][0]["servers"][0]
    assert server["base"]["args"] == ["--api-key", "***", "--port", "1"]
    assert server["base"]["env"] == {"HF_TOKEN": "***", "X": "1"}
    assert server["api_key"] is True and server["router"]["hf_token"] == "***"
    assert shown["sessions"][0]["command"][-1] == "--api-key=***"
    assert meta["sessions"][0]["command"][-1] == f"--api-key={KEY}"  # a copy: input untouched


async def test_meta_json_never_holds_a_secret(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["specreason", "bench", "--api-key", KEY, "--limit", "2"])
    meta = MetaFile(tmp_path, {"budget": 64})
    profile = load_profile("cpu-test", extra_args={"base": [f"--api-key={KEY}", "--hf-token", HF]})
    pair = ServerPair(None, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", profile, api_key=KEY)
    assert KEY not in repr(pair)
    from langchain_specreason.lab.shared import servers

    async def no_models(url, *, api_key=None):
        assert api_key == KEY
        return []

    monkeypatch.setattr(servers, "served_models", no_models)
    description = await pair.describe()
    assert description["api_key"] is True
    meta.add_servers(description)
    meta.session["servers"].append({"env": {"VLLM_API_KEY": KEY}})
    meta.finish(0)
    text = (tmp_path / "meta.json").read_text()
    assert KEY not in text and HF not in text
    session = json.loads(text)["sessions"][0]
    assert session["command"] == ["specreason", "bench", "--api-key", "***", "--limit", "2"]
    assert "--api-key=***" in session["servers"][0]["base"]["args"]
    MetaFile(tmp_path, {"budget": 64})  # resuming with the same settings still works


# --- clients of bench and arbitrage -----------------------------------------------------------


def test_client_key_order(monkeypatch):
    assert client_api_key(None, {}) is None
    assert client_api_key(None, {"VLLM_API_KEY": "v"}) == "v"
    assert client_api_key(None, {"VLLM_API_KEY": "v", "SPECREASON_BASE_API_KEY": "s"}) == "s"
    assert client_api_key(None, {"VLLM_API_KEY": "v", "SPECREASON_BASE_API_KEY": ""}) == "v"
    assert client_api_key("flag", {"SPECREASON_BASE_API_KEY": "s"}) == "flag"


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", *URLS],
        ["bench", "judges", *URLS],
        ["arbitrage", "label", *URLS],
    ],
    ids=["bench", "bench judges", "arbitrage label"],
)
def test_bench_and_arbitrage_flags_read_the_key_from_the_environment(argv, monkeypatch):
    parser = build_parser()
    assert api_key_of(parser.parse_args(argv)) is None
    monkeypatch.setenv("VLLM_API_KEY", "from-vllm")
    assert api_key_of(parser.parse_args(argv)) == "from-vllm"
    monkeypatch.setenv("SPECREASON_BASE_API_KEY", "from-specreason")
    assert api_key_of(parser.parse_args(argv)) == "from-specreason"
    assert api_key_of(parser.parse_args([*argv, "--api-key", KEY])) == KEY


def test_the_bench_plan_carries_the_key_to_its_servers(tmp_path, monkeypatch):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "1+1?", "answer": "2"}\n')
    monkeypatch.setenv("SPECREASON_BASE_API_KEY", KEY)
    args = build_parser().parse_args(
        ["bench", *URLS, "--dataset", str(path), "--out", str(tmp_path / "o")]
    )
    plan = make_plan(args)
    assert plan.source.api_key == KEY and KEY not in json.dumps(plan.meta_settings)
    with plan.source.servers(None) as pair:
        assert pair.api_key == KEY


def test_servers_the_bench_starts_get_the_clients_key(monkeypatch):
    seen: dict[str, object] = {}

    class FakeLauncher:
        def __init__(self, profile, *, roles, api_key=None, keep_profile_cores=False):
            seen.update(roles=roles, api_key=api_key)
            self.api_key, self.log_dir, self.profile = api_key, "logs", profile
            self.urls = {"draft": "http://127.0.0.1:1/v1", "base": "http://127.0.0.1:2/v1"}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    from langchain_specreason.lab.shared import servers

    monkeypatch.setattr(servers, "Launcher", FakeLauncher)
    with ServerSource("cpu-test", api_key=KEY).servers(None) as pair:
        assert pair.api_key == KEY
    assert seen == {"roles": ("draft", "base"), "api_key": KEY}


async def test_bench_helpers_send_the_key():
    def respond(path, body):
        models = [{"id": "m", "object": "model", "created": 0, "owned_by": "x"}]
        return 200, {"object": "list", "data": models} if path == "/v1/models" else {}

    seen: list[tuple[str, str, dict[str, str]]] = []
    with loopback_server(respond, seen=seen) as url:
        assert [m["id"] for m in await served_models(f"{url}/v1", api_key=KEY)] == ["m"]
        assert await reset_prefix_cache(f"{url}/v1", api_key=KEY) is True
    assert [(path, headers.get("authorization")) for _, path, headers in seen] == [
        ("/v1/models", f"Bearer {KEY}"),
        ("/reset_prefix_cache", f"Bearer {KEY}"),
    ]


def test_announce_start_names_the_servers_and_their_log_folder(capsys, tmp_path):
    from types import SimpleNamespace

    from langchain_specreason.lab.shared.servers import announce_start

    announce_start("bench: starting the cpu servers", SimpleNamespace(log_dir=tmp_path))  # type: ignore[arg-type]
    assert capsys.readouterr().err == f"bench: starting the cpu servers (logs: {tmp_path})\n"
