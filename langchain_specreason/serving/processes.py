"""One started server process: its record, its start in its own session, its group killed.

Also the start-up checks of a process: a port that must be free, ``/health`` waited for, and the
most telling line of its log when it exits.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from ..endpoint import server_root
from ..errors import PortInUseError, ServeError, ServerDiedError
from .profiles import Role


def check_port_free(host: str, port: int) -> None:
    """Raise :class:`PortInUseError` if ``host:port`` cannot be bound.

    SO_REUSEADDR as uvicorn sets it: connections lingering in TIME_WAIT after a server stopped
    do not count, only a socket listening there.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise PortInUseError(
                f"port {port} on {host} is already in use; stop what listens there or pick "
                f"another port (--draft-port / --base-port)"
            ) from None


@dataclass
class _Running:
    role: Role
    url: str
    """OpenAI base URL (``/v1``) of the process."""
    what: str
    """How errors name it: the served model, or ``vllm-router``."""
    proc: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]
    public: bool = True
    """Listed in :attr:`Launcher.urls` (a single server, a router; not a replica)."""
    label: str = ""
    """Name in messages (``draft``, ``draft replica 2``, ``draft router``)."""
    cmd: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    restarts: int = 0
    """Times :meth:`Launcher.supervise` restarted it."""
    warm: str | None = None
    """Served model name to warm with one completion (None: not a generating server)."""
    healthy_since: float | None = None
    """When supervision last saw it start serving (``time.monotonic``; None: not seen yet)."""
    dropped: bool = False
    """A replica supervision gave up on (its role's other replicas serve): not restarted."""

    def __post_init__(self) -> None:
        self.label = self.label or self.role


def popen(cmd: Sequence[str], env: dict[str, str], log_file: IO[bytes]) -> Any:
    """Start ``cmd`` in its own session (process group), its output into ``log_file``."""
    return subprocess.Popen(
        list(cmd),
        stdout=log_file,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )


def kill_group(run: _Running) -> None:
    """What is left of a dead server's process group (its engine core) is killed."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(run.proc.pid, signal.SIGKILL)


def wait_healthy(
    runs: list[_Running],
    *,
    startup_timeout: float,
    router_key: str | None,
    echo: bool,
    log_dir: Path,
) -> None:
    """Block until each of ``runs`` answers ``/health`` (a guarded router: with ``router_key``).

    A process that exits meanwhile is a :class:`ServerDiedError`; one not healthy after
    ``startup_timeout`` s a :class:`ServeError`. With ``echo``, each healthy one is said.
    """
    deadline = time.monotonic() + startup_timeout
    pending = list(runs)
    key = {"Authorization": f"Bearer {router_key}"} if router_key else {}
    with httpx.Client(timeout=5.0, headers=key) as client:
        while pending:
            for run in list(pending):
                code = run.proc.poll()
                if code is not None:
                    raise ServerDiedError(
                        f"{run.label} server ({run.what}) exited with code "
                        f"{code} during start-up: {_last_error(run.log_path)} "
                        f"(full log: {run.log_path})"
                    )
                health = server_root(run.url) + "/health"
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(health).status_code == 200:
                        pending.remove(run)
                        if echo:
                            # routers and single servers on stdout (`role: url`, what
                            # clients read); replicas on stderr
                            print(
                                f"{run.role if run.public else run.label}: {run.url}",
                                flush=True,
                                file=sys.stdout if run.public else sys.stderr,
                            )
            if pending and time.monotonic() > deadline:
                names = ", ".join(r.label for r in pending)
                raise ServeError(
                    f"{names} server not healthy after {startup_timeout:.0f} s; "
                    f"see logs in {log_dir}"
                )
            if pending:
                time.sleep(1.0)


def _last_error(log_path: Path) -> str:
    """The most telling line of a server log: the last error-looking line, else the last line."""
    try:
        lines = [
            ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()
        ]
    except OSError:
        return "no log"
    for line in reversed(lines):
        if re.search(r"(Error|error:|Exception|No such file|not found)", line):
            return line[-300:]
    return lines[-1][-300:] if lines else "empty log"
