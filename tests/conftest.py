"""Session fixture: the real cpu-test servers, started once through `specreason serve`.

If SPECREASON_DRAFT_URL and SPECREASON_BASE_URL are set, those servers are used instead.
If the servers cannot start, every integration test errors with the launcher's message:
nothing is skipped.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
LOG_DIR = ROOT / "runs" / "test-logs"


@dataclass
class ServeProcess:
    """A `specreason serve` child process and what it printed."""

    proc: subprocess.Popen[str]
    urls: dict[str, str] = field(default_factory=dict)
    stderr_path: Path | None = None

    def server_pids(self) -> list[int]:
        try:
            return [c.pid for c in psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def interrupt(self, timeout: float = 120.0) -> int:
        """Send Ctrl-C (SIGINT) to the CLI only, as a terminal would, and wait for it."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=timeout)


def start_serve(
    profile: str = "cpu-test",
    *extra: str,
    log_dir: Path = LOG_DIR,
    timeout: float = 1200.0,
    roles: tuple[str, ...] = ("draft", "base"),
    name: str = "serve-cli",
) -> ServeProcess:
    """Run `specreason serve --profile ...` and wait for a `<role>: <url>` line per role."""
    log_dir.mkdir(parents=True, exist_ok=True)
    stderr_path = log_dir / f"{name}.err"
    cmd = [
        sys.executable,
        "-m",
        "langchain_specreason.cli",
        "serve",
        "--profile",
        profile,
        "--log-dir",
        str(log_dir),
        *extra,
    ]
    with stderr_path.open("w") as err:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err, text=True, stdin=subprocess.DEVNULL
        )
    serve = ServeProcess(proc, stderr_path=stderr_path)
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()  # read by a thread: no line waits in a buffer
    threading.Thread(
        target=lambda: [lines.put(line) for line in proc.stdout or []] + [lines.put("")],
        daemon=True,
    ).start()
    while len(serve.urls) < len(roles):
        # wait for a line at most until the deadline: a server that hangs silently fails here
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            serve.interrupt()
            raise RuntimeError(
                f"servers not up after {timeout:.0f} s (nothing printed); logs in {log_dir}"
            ) from None
        if not line:
            proc.wait(timeout=60)
            raise RuntimeError(
                f"`specreason serve` exited with {proc.returncode}: "
                f"{stderr_path.read_text()[-2000:]}"
            )
        role, _, url = line.strip().partition(": ")
        if role in roles:
            serve.urls[role] = url
    return serve


def left_running(pids: list[int], timeout: float = 30.0) -> list[int]:
    """The processes of ``pids`` still running (zombies count as gone) after up to ``timeout``
    seconds of waiting for them to end."""

    def running(pid: int) -> bool:
        return psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"

    deadline = time.monotonic() + timeout
    alive = [p for p in pids if running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.5)
        alive = [p for p in alive if running(p)]
    return alive


@dataclass
class Servers:
    draft_url: str
    base_url: str
    family: str
    serve: ServeProcess | None


@pytest.fixture(scope="session")
def servers():
    draft, base = os.environ.get("SPECREASON_DRAFT_URL"), os.environ.get("SPECREASON_BASE_URL")
    if draft and base:
        yield Servers(draft, base, os.environ.get("SPECREASON_FAMILY", "instruct"), None)
        return
    # Ports of their own, so `make test` runs beside a developer's `make serve` (8101/8102).
    serve = start_serve("cpu-test", "--draft-port", "8111", "--base-port", "8112")
    try:
        yield Servers(serve.urls["draft"], serve.urls["base"], "instruct", serve)
    finally:
        if serve.proc.poll() is None:
            serve.interrupt()


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "after_shutdown: needs the memory the session's servers hold, so it runs "
        "after the `shutdown` tests stopped them",
    )


def pytest_collection_modifyitems(config, items):
    """Run tests marked `shutdown` last: they stop the session's servers; `after_shutdown`
    tests (more servers of their own) after them."""
    items.sort(
        key=lambda item: (
            item.get_closest_marker("after_shutdown") is not None,
            item.get_closest_marker("shutdown") is not None,
        )
    )
