"""`Launcher.supervise`: a dead server is restarted (back-off, a limit), the others keep running
(no process is started: Popen, health waits and kills are recorded)."""

from __future__ import annotations

import sys
import types

import pytest

from langchain_specreason.errors import ServerDiedError
from langchain_specreason.serving import launcher as launcher_module
from langchain_specreason.serving import supervision
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


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_restart_count_is_reset_after_a_healthy_period(world, tmp_path, capsys):
    procs, _, _ = world
    launcher = Launcher(load_profile("cpu-test"), log_dir=tmp_path, max_restarts=1).start()
    launcher.clock = clock = Clock()
    try:
        procs[0].code = 1
        launcher.supervise()  # restart 1 of 1
        assert len(procs) == 3
        clock.now += supervision.healthy_reset_after(1) - 1
        launcher.supervise()  # not long enough yet: the budget is still spent
        assert launcher._running[0].restarts == 1
        clock.now += 1  # 60 s of serving since the restart (the back-off cap x 1)
        launcher.supervise()
        assert launcher._running[0].restarts == 0
        assert "draft has served 60 s since its last restart" in capsys.readouterr().err
        procs[2].code = 1  # exits again: restarted, not given up on
        launcher.supervise()
        assert len(procs) == 4
        procs[3].code = 1  # at once again: the budget is spent, a single server stops serve
        with pytest.raises(ServerDiedError, match=r"^draft server exited with code 1 after 1"):
            launcher.supervise()
    finally:
        launcher.stop()


def test_the_default_healthy_period_is_the_backoff_cap_times_the_restarts():
    assert supervision.healthy_reset_after(3) == 3 * supervision.BACKOFF_CAP == 180
    assert supervision.healthy_reset_after(0) == supervision.BACKOFF_CAP


@pytest.fixture
def pool(world, tmp_path, monkeypatch):
    """cpu-test with two replicas per role (fake processes): 0-1 draft, 2-3 base, 4-5 routers."""
    monkeypatch.setattr(launcher_module, "router_executable", lambda: "vllm-router")
    procs, _, health = world
    launcher = Launcher(
        load_profile("cpu-test"), log_dir=tmp_path, replicas=2, max_restarts=1
    ).start()
    launcher.clock = Clock()
    yield launcher, procs, health
    launcher.stop()


def test_a_replica_past_its_restarts_is_dropped_and_its_role_serves_on(pool, capsys):
    launcher, procs, _ = pool
    procs[2].code = -9  # base replica 1
    launcher.supervise()  # restarted once
    assert len(procs) == 7
    procs[6].code = -9  # and dies again: dropped, the other base replica serves
    launcher.supervise()
    err = capsys.readouterr().err
    assert "base replica 1 (http://127.0.0.1:8203/v1) exited with code -9 after 1 restarts" in err
    assert "dropped: not restarted again, its router sends its requests to the 1 other" in err
    assert len(procs) == 7  # not restarted
    launcher.supervise()  # a dropped replica is not looked at again
    assert capsys.readouterr().err == ""
    procs[1].code = 1  # other roles are still supervised
    launcher.supervise()
    assert len(procs) == 8
    procs[3].code = -9  # base replica 2, the role's last: restarted while it has restarts left
    launcher.supervise()
    assert len(procs) == 9
    procs[8].code = -9
    with pytest.raises(ServerDiedError, match=r"^base replica 2 server \(the last base replica\)"):
        launcher.supervise()


def test_a_replica_that_cannot_come_back_is_dropped(pool, capsys, monkeypatch):
    launcher, procs, health = pool
    monkeypatch.setattr("tenacity.nap.time.sleep", lambda s: None)
    procs[0].code = 1  # draft replica 1; its one restart dies during start-up
    health.append(ServerDiedError("died during start-up"))
    launcher.supervise()
    err = capsys.readouterr().err
    assert "draft replica 1 (http://127.0.0.1:8201/v1) did not come back after 1 restarts" in err
    assert "dropped" in err
    assert launcher._running[0].dropped and not launcher._running[1].dropped


def test_a_router_past_its_restarts_stops_serve(pool):
    launcher, procs, _ = pool
    procs[5].code = 1  # base router: restarted once
    launcher.supervise()
    procs[-1].code = 1
    with pytest.raises(ServerDiedError, match=r"^base router server exited with code 1 after 1"):
        launcher.supervise()
