"""Cores: a server started alone gets the cores its mode leaves free; bad bindings are refused."""

from __future__ import annotations

import json
import sys
import types

import pytest

from langchain_specreason.cli import build_parser, main, serve_launcher
from langchain_specreason.errors import ConfigError
from langchain_specreason.serving import cores as cores_module
from langchain_specreason.serving import launcher as launcher_module
from langchain_specreason.serving import profiles as profiles_module
from langchain_specreason.serving.cores import (
    BIND_ENV,
    check_cores,
    format_cores,
    listening,
    parse_cores,
)
from langchain_specreason.serving.launcher import Launcher
from langchain_specreason.serving.profiles import bind_cores, load_profile
from tests.unit.fakes import FakeProc


@pytest.fixture
def machine(monkeypatch):
    """A 2-core machine on which no server of the profiles listens yet."""
    listening_ports: set[int] = set()
    monkeypatch.setattr(cores_module, "machine_cores", lambda: frozenset({0, 1}))
    monkeypatch.setattr(profiles_module, "machine_cores", lambda: frozenset({0, 1}))
    monkeypatch.setattr(profiles_module, "listening", lambda host, port: port in listening_ports)
    return listening_ports


@pytest.fixture
def spawned(monkeypatch):
    """Popen recorded instead of run; port checks and health waits made no-ops."""
    started: list[tuple[list[str], dict[str, str]]] = []

    def popen(cmd, *, env, stdout, **kwargs):
        started.append((list(cmd), dict(env)))
        return FakeProc(1_000_000 + len(started))

    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setattr(launcher_module.subprocess, "Popen", popen)
    monkeypatch.setattr(launcher_module, "check_port_free", lambda host, port: None)
    monkeypatch.setattr(launcher_module.os, "killpg", lambda pid, sig: None)
    monkeypatch.setattr(
        launcher_module, "server_command", lambda spec, device: ["vllm", "--port", str(spec.port)]
    )
    monkeypatch.setattr(Launcher, "_wait_healthy", lambda self, runs=None: None)
    return started


def serve(*argv: str) -> Launcher:
    """The launcher `specreason serve ARGV` builds (nothing started)."""
    return serve_launcher(build_parser().parse_args(["serve", *argv]))


def bind(launcher: Launcher) -> dict[str, str | None]:
    """Each started server's VLLM_CPU_OMP_THREADS_BIND, by role, as its process gets it."""
    return {
        spec.role: env.get(BIND_ENV)
        for spec, env in zip(launcher._specs(), launcher.check_exposure(), strict=True)
    }


def test_the_cpu_profiles_declare_each_servers_cores():
    for name in ("cpu", "cpu-test"):
        profile = load_profile(name)
        assert [s.cores for s in profile.servers()] == ["0", "1", "0"]
        assert [dict(s.env)[BIND_ENV] for s in profile.servers()] == ["0", "1", "0"]


def test_sd_base_alone_gets_both_cores_and_says_so(machine, capsys):
    launcher = serve("--profile", "cpu", "--variant", "sd", "--only", "base")
    assert bind(launcher) == {"base": "0-1"}
    assert launcher.profile.base.cores == "0-1"
    [note] = launcher.core_notes
    assert note.startswith("cores: base on cores 0-1, the whole machine")
    assert "--keep-profile-cores keeps core 1" in note


def test_a_draft_alone_gets_both_cores_too(machine):
    assert bind(serve("--profile", "cpu-test", "--only", "draft")) == {"draft": "0-1"}


def test_keep_profile_cores_opts_out(machine):
    launcher = serve(
        "--profile", "cpu", "--variant", "sd", "--only", "base", "--keep-profile-cores"
    )
    assert bind(launcher) == {"base": "1"}
    assert launcher.core_notes == ["cores: base on the profile's core 1 (--keep-profile-cores)"]


def test_a_running_other_role_keeps_its_cores(machine):
    machine.add(8201)  # the cpu profile's draft server listens here
    launcher = serve("--profile", "cpu", "--only", "base")
    assert bind(launcher) == {"base": "1"}
    assert "the draft server's port 8201 is in use" in launcher.core_notes[0]
    # its port moved by the flag is the one looked at
    assert bind(serve("--profile", "cpu", "--only", "base", "--draft-port", "9001")) == {
        "base": "0-1"
    }


def test_the_pair_and_the_router_keep_their_own_cores(machine):
    assert bind(serve("--profile", "cpu")) == {"draft": "0", "base": "1"}
    assert bind(serve("--profile", "cpu", "--with-router")) == {
        "draft": "0",
        "base": "1",
        "router": "0",
    }
    assert bind(serve("--profile", "cpu", "--only", "router")) == {"router": "0"}
    assert serve("--profile", "cpu").core_notes == []


def test_a_binding_set_by_hand_is_kept(machine):
    launcher = serve("--profile", "cpu", "--only", "base", "--base-env", f"{BIND_ENV}=1")
    assert bind(launcher) == {"base": "1"}
    assert launcher.core_notes == []


def test_gpu_profiles_are_untouched(machine):
    profile = load_profile("gpu-1x")
    assert bind_cores(profile, ("base",)) == (profile, [])


def test_replicas_of_a_lone_role_share_its_cores(machine):
    launcher = serve("--profile", "cpu-test", "--only", "base", "--replicas", "2")
    assert {env.get(BIND_ENV) for env in launcher.check_exposure()} == {"0-1"}


def test_the_memory_plan_is_the_same_whatever_the_cores(machine, monkeypatch):
    monkeypatch.setattr(launcher_module, "host_memory", lambda: (20 * 2**30, 24 * 2**30))
    wide = serve("--profile", "cpu", "--variant", "sd", "--only", "base").memory_plan()
    kept = serve(
        "--profile", "cpu", "--variant", "sd", "--only", "base", "--keep-profile-cores"
    ).memory_plan()
    assert wide == kept and [s.label for s in wide.servers] == ["base"]


def test_meta_json_records_each_servers_cores(machine, spawned, tmp_path, capsys):
    launcher = serve(
        *("--profile", "cpu", "--variant", "sd", "--only", "base"),
        *("--log-dir", str(tmp_path), "--ignore-memory-plan"),
    )
    with launcher:
        pass
    [(_, env)] = spawned
    assert env[BIND_ENV] == "0-1"
    meta = json.loads((tmp_path / "meta.json").read_text())
    base = meta["servers"]["base"]
    assert (base["cores"], base["variant"], base["env"][BIND_ENV]) == ("0-1", "sd", "0-1")
    assert "cores: base on cores 0-1, the whole machine" in capsys.readouterr().err
    # a second launcher on the same log folder adds its server, keeps the other's entry
    draft = Launcher(load_profile("cpu"), roles=("draft",), log_dir=tmp_path)
    with draft:
        pass
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert {k: v["cores"] for k, v in meta["servers"].items()} == {"base": "0-1", "draft": "0-1"}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"base": {BIND_ENV: "0"}},
            "error: the draft and base servers would share core 0 "
            f"({BIND_ENV} 0 and 0); give each its own cores",
        ),
        (
            {"base": {BIND_ENV: "1-2"}},
            f"error: the base server is bound to core 2 ({BIND_ENV}=1-2), which this "
            "machine does not have (its cores: 0-1)",
        ),
        ({"base": {BIND_ENV: "one"}}, f"error: {BIND_ENV} of the base server: 'one' is not"),
    ],
)
def test_a_bad_binding_is_one_line_before_any_server_starts(
    machine, spawned, monkeypatch, tmp_path, capsys, env, message
):
    monkeypatch.setattr(launcher_module, "host_memory", lambda: (20 * 2**30, 24 * 2**30))
    flags = [f"--base-env={k}={v}" for k, v in env["base"].items()]
    code = main(["serve", "--profile", "cpu-test", "--log-dir", str(tmp_path), *flags])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(message)
    assert spawned == []


def test_the_router_may_share_the_drafts_core_and_auto_is_vllms():
    check_cores([("draft", "draft", "0"), ("base", "base", "1"), ("router", "router", "0")])
    check_cores([("draft", "draft", "auto"), ("base", "base", "auto")], frozenset({0}))
    with pytest.raises(ConfigError, match="replica 2 and base replica 1 servers would share"):
        check_cores(
            [("draft replica 2", "draft", "1"), ("base replica 1", "base", "1")], frozenset({0, 1})
        )


def test_core_lists_read_and_write_as_vllm_does():
    assert parse_cores("0,2-3|5") == {0, 2, 3, 5}
    assert format_cores({3, 0, 1, 5, 6}) == "0-1,3,5-6"
    for bad in ("", "a", "2-1", "-1", "0-"):
        with pytest.raises(ConfigError, match="is not a core list"):
            parse_cores(bad)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ('cores = "0"\nenv = { VLLM_CPU_OMP_THREADS_BIND = "0" }', "gives its cores twice"),
        ('cores = "x"', "is not a core list"),
        ('cores = "0|1"', "is one list"),
    ],
)
def test_a_profiles_cores_are_checked_when_it_loads(tmp_path, section, message):
    path = tmp_path / "p.toml"
    path.write_text(
        f'[draft]\nmodel = "m"\nport = 9001\n{section}\n[base]\nmodel = "m"\nport = 9002\n'
    )
    with pytest.raises(ConfigError, match=message):
        load_profile(str(path))
    gpu = tmp_path / "g.toml"
    gpu.write_text(
        'device = "gpu"\n[draft]\nmodel = "m"\nport = 9001\ncores = "0"\n'
        '[base]\nmodel = "m"\nport = 9002\n'
    )
    with pytest.raises(ConfigError, match="cores is for CPU profiles"):
        load_profile(str(gpu))


def test_listening_reads_proc_net(tmp_path):
    header = "  sl  local_address rem_address   st tx_queue rx_queue\n"
    (tmp_path / "tcp").write_text(
        header
        + "   0: 0100007F:1F99 00000000:0000 0A 00000000:00000000\n"  # 8089 listening
        + "   1: 0100007F:2005 0100007F:9C40 01 00000000:00000000\n"  # 8197 connected
    )
    (tmp_path / "tcp6").write_text(
        header + "   0: 00000000000000000000000000000000:2006 00000000:0000 0A 0:0\n"
    )
    assert listening("127.0.0.1", 8089, tmp_path)
    assert not listening("127.0.0.1", 8197, tmp_path)
    assert listening("::", 8198, tmp_path)
    assert not listening("127.0.0.1", 8089, tmp_path / "none")
