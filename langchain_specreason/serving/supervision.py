"""The supervision loop: started processes that exited are restarted, the others keep running.

Each exit is said on stderr; a restart that fails is retried with exponential back-off
(``restart_backoff`` s, doubling, at most 60 s); a process restarted ``max_restarts`` times that
exits again is a :class:`~langchain_specreason.errors.ServerDiedError`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from ..errors import ServeError, ServerDiedError
from .processes import _last_error, _Running, kill_group


def supervise(
    running: list[_Running],
    respawn: Callable[[_Running], None],
    *,
    max_restarts: int,
    restart_backoff: float,
) -> None:
    """Restart every process of ``running`` that has exited; the others keep running.

    Each restart is said on stderr, and ``respawn`` starts the process again and waits until it
    is healthy. A start that fails (:class:`ServeError`) is retried with exponential back-off
    (``restart_backoff`` s, doubling, at most 60 s). A process that has been restarted
    ``max_restarts`` times and exits again is a :class:`ServerDiedError`.
    """
    # every exit is said first: a restart blocks until healthy, and a second server that
    # died meanwhile should not go unreported that long
    dead = [(run, code) for run in list(running) if (code := run.proc.poll()) is not None]
    for run, code in dead:
        why = f"{_last_error(run.log_path)} (log: {run.log_path})"
        if run.restarts >= max_restarts:
            raise ServerDiedError(
                f"{run.label} server exited with code {code} after {run.restarts} "
                f"restarts; giving up: {why}"
            )
        print(
            f"{run.label} ({run.url}) exited with code {code}; restarting it, the others "
            f"keep serving: {why}",
            file=sys.stderr,
            flush=True,
        )
    for run, _ in dead:
        kill_group(run)
        retrying = Retrying(
            stop=stop_after_attempt(max_restarts - run.restarts),
            wait=wait_exponential(multiplier=restart_backoff, max=60),
            retry=retry_if_exception_type(ServeError),
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                respawn(run)
        print(
            f"{run.label} ({run.url}) is serving again (restart {run.restarts} of at most "
            f"{max_restarts})",
            file=sys.stderr,
            flush=True,
        )
