"""`specreason serve --replicas N`: the port layout, the commands, the router, the refusals, and
the routing key a run's calls carry (no process is started, no socket opened)."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import types

import httpx
import openai
import pytest

from langchain_specreason.cli import build_parser, serve_launcher, starting_line
from langchain_specreason.endpoint.routing import (
    ROUTING_HEADER,
    RoutingHeaders,
    current_routing_key,
    routing_headers,
    routing_key,
)
from langchain_specreason.errors import ConfigError, ServeError, ServerDiedError
from langchain_specreason.serving import launcher as launcher_module
from langchain_specreason.serving import replicas as replicas_module
from langchain_specreason.serving.launcher import Launcher
from langchain_specreason.serving.profiles import load_profile
from langchain_specreason.serving.replicas import (
    DEFAULT_POLICY,
    FAILOVER_FLAGS,
    check_replicas,
    guard_routers,
    plan_replicas,
    router_command,
)
from langchain_specreason.serving.router_main import VALIDATION_FLAG, split_validation_urls

from .fakes import FakeProc

KEY = "sk-replica-key-0123456789"


def _args(*argv: str):
    return build_parser().parse_args(["serve", "--profile", "cpu-test", *argv])


# --- the plan: ports and routers ------------------------------------------------------------


def test_two_replicas_per_role_on_consecutive_ports_routers_on_the_role_ports():
    plan = plan_replicas(load_profile("cpu-test"), 2)
    assert [s.port for s in plan.replicas["draft"]] == [8201, 8202]
    assert [s.port for s in plan.replicas["base"]] == [8203, 8204]
    assert {r: (x.port, x.metrics_port) for r, x in plan.routers.items()} == {
        "draft": (8101, 8205),
        "base": (8102, 8206),
    }
    assert plan.routers["draft"].url == "http://127.0.0.1:8101/v1"
    assert plan.routers["base"].workers == ("http://127.0.0.1:8203", "http://127.0.0.1:8204")
    assert plan.routers["base"].policy == DEFAULT_POLICY == "consistent_hash"
    # a replica is the profile's server on another port, nothing else changes
    base = load_profile("cpu-test").base
    assert all(
        s.args == base.args and s.env == base.env and s.model == base.model
        for s in plan.replicas["base"]
    )


def test_the_layout_follows_the_ports_and_the_replica_port_given():
    profile = load_profile("cpu-test", draft_port=8131, base_port=8132)
    plan = plan_replicas(profile, 3, replica_port=9000, policy="cache_aware")
    assert [s.port for s in plan.servers()] == [9000, 9001, 9002, 9003, 9004, 9005]
    assert [(r.port, r.metrics_port, r.policy) for r in plan.routers.values()] == [
        (8131, 9006, "cache_aware"),
        (8132, 9007, "cache_aware"),
    ]
    only_base = plan_replicas(profile, 2, roles=("base",))
    assert [s.port for s in only_base.servers()] == [8231, 8232]
    assert list(only_base.routers) == ["base"] and only_base.routers["base"].metrics_port == 8233


MAIN = [sys.executable, "-m", "langchain_specreason.serving.router_main"]


def test_router_command_line():
    router = plan_replicas(load_profile("cpu-test", host="0.0.0.0"), 2).routers["base"]
    cmd = router_command(router)
    assert cmd[:7] == [*MAIN, "--host", "0.0.0.0", "--port", "8102"]
    i = cmd.index("--worker-urls")
    assert cmd[i + 1 : i + 3] == ["http://127.0.0.1:8203", "http://127.0.0.1:8204"]
    assert cmd[cmd.index("--policy") + 1] == "consistent_hash"
    assert cmd[cmd.index("--prometheus-port") + 1] == "8206"
    assert cmd[-len(FAILOVER_FLAGS) :] == list(FAILOVER_FLAGS)
    # the circuit breaker opens before the retries run out: the last attempts go elsewhere
    flags = dict(zip(FAILOVER_FLAGS[::2], FAILOVER_FLAGS[1::2], strict=True))
    assert int(flags["--cb-failure-threshold"]) < int(flags["--retry-max-retries"])
    assert "--api-key" not in cmd  # the router forwards the client's key
    assert VALIDATION_FLAG not in cmd  # no key: no guard


def test_with_a_key_each_router_checks_it_against_its_own_replicas():
    plan = guard_routers(plan_replicas(load_profile("cpu-test"), 2), keyed=True)
    assert plan.routers["draft"].key_check == (
        "http://127.0.0.1:8201/v1/models",
        "http://127.0.0.1:8202/v1/models",
    )
    cmd = router_command(plan.routers["base"])
    assert cmd[3:6] == [
        VALIDATION_FLAG,
        "http://127.0.0.1:8203/v1/models",
        "http://127.0.0.1:8204/v1/models",
    ]
    urls, rest = split_validation_urls(cmd[3:])
    assert urls == list(plan.routers["base"].key_check) and rest[0] == "--host"
    assert not any("sk-" in part for part in cmd)  # no secret on the command line


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::"])
def test_a_router_off_host_without_a_key_is_refused(host):
    plan = plan_replicas(load_profile("cpu-test", host=host), 2)
    with pytest.raises(ConfigError, match=r"admin\s+routes|admin routes.*/add_worker"):
        guard_routers(plan, keyed=False)
    assert guard_routers(plan, keyed=True).routers["base"].key_check  # with a key: guarded
    loopback = plan_replicas(load_profile("cpu-test"), 2)
    assert guard_routers(loopback, keyed=False).routers["base"].key_check == ()


def test_the_launcher_refuses_an_open_router_and_guards_a_keyed_one(monkeypatch):
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    # without dev mode (the servers' own refusal would come first)
    cpu_test = load_profile("cpu-test", host="0.0.0.0")
    profile = dataclasses.replace(
        cpu_test,
        draft=dataclasses.replace(cpu_test.draft, env=()),
        base=dataclasses.replace(cpu_test.base, env=()),
    )
    with pytest.raises(ConfigError, match=r"router on 0\.0\.0\.0 without an API key"):
        Launcher(profile, replicas=2).check_exposure()
    keyed = Launcher(profile, replicas=2, api_key="sk-test")
    keyed.check_exposure()
    assert keyed.plan is not None and keyed.plan.routers["draft"].key_check
    assert keyed._router_key == "sk-test"  # the guarded router's /health wants it
    # a key from the environment counts as well
    monkeypatch.setenv("VLLM_API_KEY", "sk-env")
    from_env = Launcher(profile, replicas=2)
    from_env.check_exposure()
    assert from_env.plan is not None and from_env.plan.routers["base"].key_check


def test_the_router_main_splits_its_own_flag_from_the_routers():
    assert split_validation_urls(["--host", "h"]) == ([], ["--host", "h"])
    assert split_validation_urls([VALIDATION_FLAG, "u1", "u2", "--port", "1"]) == (
        ["u1", "u2"],
        ["--port", "1"],
    )
    with pytest.raises(SystemExit, match="at least one URL"):
        split_validation_urls([VALIDATION_FLAG, "--port", "1"])


def test_the_router_executable_is_this_environments(monkeypatch, tmp_path):
    assert replicas_module.router_executable().endswith("vllm-router")  # the scale extra
    monkeypatch.setattr(replicas_module.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(replicas_module.shutil, "which", lambda name: None)
    with pytest.raises(ServeError, match=r"pip install 'langchain-specreason\[scale\]'"):
        replicas_module.router_executable()


def test_the_starting_line_names_a_model_the_flags_replaced():
    args = _args("--base-model", "smollm2-135m")
    line = starting_line(args, serve_launcher(args))
    assert line.startswith("starting cpu-test: CPU, fast: draft SmolLM2-135M-Instruct, base Qwen")
    assert "(instead: base smollm2-135m) (logs: " in line
    plain = _args()
    assert "instead" not in starting_line(plain, serve_launcher(plain))


# --- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, 33, 1000])
def test_a_pool_size_out_of_range_is_refused(bad):
    with pytest.raises(ConfigError, match=r"--replicas must be between 1 and 32, got"):
        check_replicas(bad)
    with pytest.raises(ConfigError, match=r"--replicas must be between 1 and 32"):
        Launcher(load_profile("cpu-test"), replicas=bad)
    with pytest.raises(ConfigError, match=r"--replicas must be between 1 and 32"):
        serve_launcher(_args("--replicas", str(bad)))


@pytest.mark.parametrize("bad", [2.0, "2", True])
def test_a_pool_size_that_is_not_a_whole_number_is_refused(bad):
    with pytest.raises(ConfigError, match=r"--replicas must be a whole number"):
        check_replicas(bad)


def test_the_cli_refuses_a_non_integer_replicas(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--profile", "cpu-test", "--replicas", "two"])
    assert "invalid int value: 'two'" in capsys.readouterr().err


def test_an_unknown_policy_is_refused():
    with pytest.raises(
        ConfigError,
        match=r"--router-policy must be one of consistent_hash, "
        r"cache_aware, power_of_two, round_robin, random",
    ):
        serve_launcher(_args("--replicas", "2", "--router-policy", "least_busy"))


def test_replica_ports_over_the_profiles_ports_are_refused():
    with pytest.raises(ConfigError, match=r"overlap the draft server's port 8101"):
        plan_replicas(load_profile("cpu-test"), 2, replica_port=8100)
    with pytest.raises(ConfigError, match=r"overlap the router server's port 8103"):
        plan_replicas(load_profile("cpu-test"), 2, replica_port=8103)  # 8103-8108
    with pytest.raises(ConfigError, match=r"outside 1024-65535"):
        plan_replicas(load_profile("cpu-test"), 4, replica_port=65530)


def test_the_arbitrage_router_server_is_not_replicated():
    with pytest.raises(ConfigError, match=r"Arbitrage router server is not replicated"):
        serve_launcher(_args("--replicas", "2", "--only", "router"))


def test_router_flags_without_replicas_are_refused():
    with pytest.raises(ConfigError, match=r"need --replicas N with N > 1"):
        serve_launcher(_args("--router-policy", "round_robin"))


def test_env_overrides_need_key_equals_value():
    with pytest.raises(ConfigError, match=r"--base-env takes KEY=VALUE, got 'VLLM_X'"):
        serve_launcher(_args("--base-env", "VLLM_X"))
    launcher = serve_launcher(_args("--replicas", "2", "--base-env", "VLLM_CPU_KVCACHE_SPACE=1"))
    assert dict(launcher.profile.base.env)["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert all(dict(s.env)["VLLM_CPU_KVCACHE_SPACE"] == "1" for s in launcher.plan.replicas["base"])
    assert dict(launcher.profile.draft.env)["VLLM_CPU_KVCACHE_SPACE"] == "1"  # the profile's


# --- the launcher ---------------------------------------------------------------------------


@pytest.fixture
def spawned(monkeypatch):
    """Popen recorded instead of run; health waits, port checks and kills made no-ops."""
    started: list[tuple[list[str], dict[str, str], FakeProc]] = []

    def popen(cmd, *, env, stdout, **kwargs):
        proc = FakeProc(1_000_000 + len(started))
        started.append((list(cmd), dict(env), proc))
        return proc

    waits: list[list[str]] = []
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setattr(launcher_module.subprocess, "Popen", popen)
    monkeypatch.setattr(launcher_module, "check_port_free", lambda host, port: None)
    monkeypatch.setattr(launcher_module.os, "killpg", lambda pid, sig: None)
    monkeypatch.setattr(
        launcher_module, "server_command", lambda spec, device: ["vllm", "--port", str(spec.port)]
    )
    monkeypatch.setattr(launcher_module, "router_executable", lambda: "vllm-router")
    monkeypatch.setattr(
        Launcher,
        "_wait_healthy",
        lambda self, runs=None: waits.append(
            [r.label for r in (self._running if runs is None else runs)]
        ),
    )
    return started, waits


def test_default_one_replica_starts_the_pair_as_before(spawned, tmp_path):
    started, waits = spawned
    launcher = Launcher(load_profile("cpu-test"), log_dir=tmp_path)
    assert launcher.plan is None
    with launcher as servers:
        assert servers.urls == {
            "draft": "http://127.0.0.1:8101/v1",
            "base": "http://127.0.0.1:8102/v1",
        }
        assert servers.replica_urls == {}
    assert [cmd for cmd, _, _ in started] == [
        ["vllm", "--port", "8101"],
        ["vllm", "--port", "8102"],
    ]
    assert waits == [["draft", "base"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.log", "draft.log", "meta.json"]


def test_replicas_start_first_then_one_router_per_role(spawned, tmp_path):
    started, waits = spawned
    launcher = Launcher(load_profile("cpu-test"), log_dir=tmp_path, replicas=2, api_key=KEY)
    with launcher as servers:
        assert servers.urls == {
            "draft": "http://127.0.0.1:8101/v1",
            "base": "http://127.0.0.1:8102/v1",
        }
        assert servers.replica_urls == {
            "draft": ["http://127.0.0.1:8201/v1", "http://127.0.0.1:8202/v1"],
            "base": ["http://127.0.0.1:8203/v1", "http://127.0.0.1:8204/v1"],
        }
    assert [cmd[:3] for cmd, _, _ in started] == [
        ["vllm", "--port", "8201"],
        ["vllm", "--port", "8202"],
        ["vllm", "--port", "8203"],
        ["vllm", "--port", "8204"],
        [*MAIN[:2], "langchain_specreason.serving.router_main"],
        [*MAIN[:2], "langchain_specreason.serving.router_main"],
    ]
    assert waits == [
        ["draft replica 1", "draft replica 2", "base replica 1", "base replica 2"],
        ["draft router", "base router"],
    ]
    for cmd, env, _ in started[:4]:  # every replica requires the key, from its environment
        assert env["VLLM_API_KEY"] == KEY and KEY not in " ".join(cmd)
    for cmd, _, _ in started[4:]:
        assert KEY not in " ".join(cmd)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "base-1.log",
        "base-2.log",
        "base-router.log",
        "draft-1.log",
        "draft-2.log",
        "draft-router.log",
        "meta.json",
    ]
    assert KEY not in (tmp_path / "meta.json").read_text()
    line = (tmp_path / "base-router.log").read_text()
    assert line.startswith(f"$ {' '.join(MAIN)} --api-key-validation-urls")  # a key: guarded
    assert KEY not in line
    (cmd, env, _) = started[4]
    assert KEY not in " ".join(cmd)


def test_a_dead_replica_is_dropped_a_dead_router_or_pool_is_an_error(spawned, tmp_path, capsys):
    started, _ = spawned
    launcher = Launcher(
        load_profile("cpu-test"), log_dir=tmp_path, replicas=2, max_restarts=0
    ).start()
    try:
        procs = [proc for _, _, proc in started]
        procs[2].code = -9  # base replica 1
        launcher.supervise()
        launcher.supervise()
        err = capsys.readouterr().err
        assert err.count("base replica 1 (http://127.0.0.1:8203/v1) exited with code -9") == 1
        assert "dropped" in err and len(started) == 6  # nothing restarted
        procs[3].code = -9  # base replica 2: the pool is gone
        with pytest.raises(ServerDiedError, match=r"^base replica 2 server \(the last base"):
            launcher.supervise()
        procs[3].code = None
        procs[4].code = 1  # the draft router
        with pytest.raises(ServerDiedError, match=r"^draft router server exited with code 1"):
            launcher.supervise()
    finally:
        launcher.stop()


def test_serve_launcher_builds_the_pool_from_the_flags():
    launcher = serve_launcher(
        _args(
            "--replicas",
            "3",
            "--router-policy",
            "power_of_two",
            "--draft-port",
            "8131",
            "--base-port",
            "8132",
        )
    )
    assert launcher.plan is not None
    assert {r: len(s) for r, s in launcher.plan.replicas.items()} == {"draft": 3, "base": 3}
    assert {r.policy for r in launcher.plan.routers.values()} == {"power_of_two"}
    assert serve_launcher(_args()).plan is None


# --- the routing key ------------------------------------------------------------------------


def test_routing_headers_inside_and_outside_a_run():
    assert routing_headers() == {} and current_routing_key() is None
    with routing_key("run-1"):
        assert routing_headers() == {ROUTING_HEADER: "run-1"} == {"X-Session-ID": "run-1"}
        with routing_key(None):
            assert routing_headers() == {}
        assert current_routing_key() == "run-1"
    assert routing_headers() == {}


async def test_tasks_started_in_a_run_carry_its_key_and_runs_do_not_mix():
    async def call() -> dict[str, str]:
        await asyncio.sleep(0)
        return routing_headers()

    async def run(key: str) -> list[dict[str, str]]:
        with routing_key(key):
            return list(await asyncio.gather(call(), call()))

    one, two = await asyncio.gather(run("a"), run("b"))
    assert one == [{"X-Session-ID": "a"}] * 2 and two == [{"X-Session-ID": "b"}] * 2


async def test_routing_headers_as_default_headers_of_an_openai_client_are_read_per_request():
    seen: list[tuple[str | None, str | None]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.headers.get("x-session-id"), request.headers.get("x-team")))
        return httpx.Response(200, json={"object": "list", "data": []})

    client = openai.AsyncOpenAI(
        base_url="http://router.invalid/v1",
        api_key="k",
        default_headers=RoutingHeaders({"X-Team": "t"}),
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
    )
    await client.models.list()
    with routing_key("run-7"):
        await client.models.list()
    await client.models.list()
    assert seen == [(None, "t"), ("run-7", "t"), (None, "t")]
    assert dict(RoutingHeaders()) == {} and bool(RoutingHeaders())


def test_the_routers_are_printed_as_the_roles_on_stdout_the_replicas_on_stderr(
    monkeypatch, tmp_path, capsys
):
    class _Healthy:
        status_code = 200

    class _Client:
        def __init__(self, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def get(self, url):
            return _Healthy()

    procs: list[FakeProc] = []

    def popen(cmd, **kwargs):
        procs.append(FakeProc(2_000_000 + len(procs)))
        return procs[-1]

    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setattr(launcher_module.subprocess, "Popen", popen)
    monkeypatch.setattr(launcher_module, "check_port_free", lambda host, port: None)
    monkeypatch.setattr(launcher_module.os, "killpg", lambda pid, sig: None)
    monkeypatch.setattr(launcher_module, "server_command", lambda spec, device: ["vllm"])
    monkeypatch.setattr(replicas_module, "router_executable", lambda: "vllm-router")
    monkeypatch.setattr(launcher_module.httpx, "Client", _Client)
    with Launcher(load_profile("cpu-test"), log_dir=tmp_path, replicas=2, echo=True):
        pass
    out, err = capsys.readouterr()
    assert out.splitlines() == ["draft: http://127.0.0.1:8101/v1", "base: http://127.0.0.1:8102/v1"]
    assert "draft replica 1: http://127.0.0.1:8201/v1" in err.splitlines()
    assert "base replica 2: http://127.0.0.1:8204/v1" in err.splitlines()


def test_the_router_command_parses_with_the_routers_own_parser():
    from vllm_router.launch_router import parse_router_args

    router = plan_replicas(load_profile("cpu-test"), 3, policy="cache_aware").routers["draft"]
    parsed = parse_router_args(router_command(router)[3:])
    parsed._validate_router_args()
    assert parsed.worker_urls == [f"http://127.0.0.1:{p}" for p in (8201, 8202, 8203)]
    assert (parsed.policy, parsed.port, parsed.prometheus_port) == ("cache_aware", 8101, 8207)
    assert (
        parsed.retry_max_retries,
        parsed.cb_failure_threshold,
        parsed.health_check_interval_secs,
    ) == (5, 3, 5)
    assert parsed.api_key is None


def test_gpu_replicas_each_get_their_own_devices():
    plan = plan_replicas(load_profile("gpu-2x"), 2, gpus=4)
    devices = {
        (role, i): dict(spec.env)["CUDA_VISIBLE_DEVICES"]
        for role, specs in plan.replicas.items()
        for i, spec in enumerate(specs)
    }
    assert devices == {("draft", 0): "0", ("draft", 1): "2", ("base", 0): "1", ("base", 1): "3"}
    one = plan_replicas(load_profile("gpu-1x"), 2, gpus=2)  # both roles share device 0
    assert [dict(s.env)["CUDA_VISIBLE_DEVICES"] for s in one.replicas["base"]] == ["0", "1"]
    # too few devices: the replicas share them and split each server's memory share
    shared = plan_replicas(load_profile("gpu-2x"), 2, gpus=2)
    assert [dict(s.env)["CUDA_VISIBLE_DEVICES"] for s in shared.replicas["draft"]] == ["0", "0"]
    assert all(s.args[-1] == "--gpu-memory-utilization=0.45" for s in shared.servers())
    with pytest.raises(ConfigError, match=r"uses 2 GPUs, this machine shows 1"):
        plan_replicas(load_profile("gpu-2x"), 2, gpus=1)


def test_cpu_replicas_keep_the_profile_environment():
    plan = plan_replicas(load_profile("cpu-test"), 2)
    envs = {dict(s.env).get("CUDA_VISIBLE_DEVICES") for s in plan.replicas["base"]}
    assert envs == {None}
