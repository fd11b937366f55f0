"""`Launcher.supervise`: a dead server is restarted (back-off, a limit), the others keep running
(no process is started: Popen, health waits and kills are recorded)."""

from __future__ import annotations

import sys
import types

import pytest

from langchain_specreason.errors import ServerDiedError
from langchain_specreason.serving import launcher as launcher_module
from langchain_specreason.serving.launcher import Launcher
from langchain_specreason.serving.profiles import load_profile

from .fakes import FakeProc


@pytest.fixture
def world(monkeypatch):
    procs: list[FakeProc] = []
    killed: list[int] = []
    health: list[object] = []  # per health wait: None (healthy) or an exception to raise

    def popen(cmd, **kwargs):
        procs.append(FakeProc(3_000_000 + len(procs)))
        return procs[-1]

    def wait_healthy(self, runs=None):
        outcome = health.pop(0) if health else None
        if outcome is not None:
            raise outcome

    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setattr(launcher_module.subprocess, "Popen", popen)
    monkeypatch.setattr(launcher_module, "check_port_free", lambda host, port: None)
    monkeypatch.setattr(launcher_module.os, "killpg", lambda pid, sig: killed.append(pid))
    monkeypatch.setattr(launcher_module, "server_command", lambda spec, device: ["vllm"])
    monkeypatch.setattr(Launcher, "_wait_healthy", wait_healthy)
    monkeypatch.setattr(Launcher, "_warm", lambda self, run: None)
    return procs, killed, health


def test_a_dead_draft_is_restarted_and_the_base_keeps_running(world, tmp_path, capsys):
    procs, killed, _ = world
    launcher = Launcher(load_profile("cpu-test"), log_dir=tmp_path, max_restarts=3).start()
    try:
        draft, base = procs
        launcher.supervise()  # nothing dead: nothing happens
        assert len(procs) == 2
        draft.code = -9
        launcher.supervise()
        assert len(procs) == 3  # one new process, for the draft
        assert launcher.pids() == [procs[2].pid, base.pid]
        assert draft.pid in killed and base.pid not in killed  # its leftovers only
        err = capsys.readouterr().err
        assert "draft (http://127.0.0.1:8101/v1) exited with code -9; restarting it" in err
        assert "is serving again (restart 1 of at most 3)" in err
        assert "--- restart 1 ---" in (tmp_path / "draft.log").read_text()
    finally:
        launcher.stop()


def test_a_failing_restart_backs_off_and_the_limit_ends_serve(world, tmp_path, monkeypatch):
    procs, _, health = world
    sleeps: list[float] = []
    monkeypatch.setattr("tenacity.nap.time.sleep", sleeps.append)
    launcher = Launcher(
        load_profile("cpu-test"), log_dir=tmp_path, max_restarts=3, restart_backoff=2.0
    ).start()
    try:
        procs[0].code = 1
        # the first two restarts die during start-up, the third comes up
        health += [ServerDiedError("died"), ServerDiedError("died again"), None]
        launcher.supervise()
        assert len(procs) == 5 and sleeps == [2.0, 4.0]  # exponential back-off between tries
        procs[-1].code = 1  # dies again after 3 restarts: no more
        with pytest.raises(ServerDiedError, match=r"^draft server exited with code 1 after 3"):
            launcher.supervise()
    finally:
        launcher.stop()


def test_every_exit_is_said_before_any_restart_blocks(world, tmp_path, capsys):
    procs, _, _ = world
    launcher = Launcher(load_profile("cpu-test"), log_dir=tmp_path, max_restarts=3).start()
    try:
        procs[0].code, procs[1].code = -9, -9  # both die between two passes
        launcher.supervise()
        err = capsys.readouterr().err
        said = [
            err.index(f"{role} (http://127.0.0.1:{port}/v1) exited")
            for role, port in (("draft", 8101), ("base", 8102))
        ]
        assert max(said) < err.index("restarting draft")  # both exits, then the restarts
        assert len(procs) == 4
    finally:
        launcher.stop()


def test_max_restarts_0_stops_at_the_first_exit(world, tmp_path):
    procs, _, _ = world
    launcher = Launcher(load_profile("cpu-test"), log_dir=tmp_path, max_restarts=0).start()
    try:
        procs[1].code = 1
        with pytest.raises(ServerDiedError, match=r"^base server exited with code 1 after 0"):
            launcher.supervise()
        assert len(procs) == 2  # nothing restarted
    finally:
        launcher.stop()


def test_the_serve_flag_sets_the_restart_limit():
    from langchain_specreason.cli import build_parser, serve_launcher

    args = build_parser().parse_args(["serve", "--profile", "cpu-test", "--max-restarts", "0"])
    assert serve_launcher(args).max_restarts == 0
    args = build_parser().parse_args(["serve", "--profile", "cpu-test"])
    assert serve_launcher(args).max_restarts == 3
