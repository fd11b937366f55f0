"""The supervision loop: started processes that exited are restarted, the others keep running.

The one policy for a process that exits (a single server, a replica or a router):

- each exit is said on stderr, all of them before any restart blocks;
- it is restarted on its port; a restart that fails is retried with exponential back-off
  (``restart_backoff`` s, doubling, at most :data:`BACKOFF_CAP` s), at most ``max_restarts``
  times in all;
- its budget is whole again once it has served ``healthy_reset`` s in a row since its last
  restart (default :data:`BACKOFF_CAP` x ``max_restarts``, 3 minutes at the default 3): a server
  that crashes now and then is restarted each time, one caught in a crash loop is not;
- once its budget is spent, a replica whose role still has a live replica is dropped (said on
  stderr; its router sends its requests to the others) and ``serve`` goes on; a single server, a
  router, or a role's last replica is a :class:`~langchain_specreason.errors.ServerDiedError`
  (``specreason serve`` then stops every server).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from ..errors import ServeError, ServerDiedError
from .processes import _last_error, _Running, kill_group

BACKOFF_CAP = 60.0
"""The longest wait between two tries of a restart, seconds."""


def healthy_reset_after(max_restarts: int) -> float:
    """Seconds of serving after which a process's restart count is reset (the default)."""
    return BACKOFF_CAP * max(1, max_restarts)


def supervise(
    running: list[_Running],
    respawn: Callable[[_Running], None],
    *,
    max_restarts: int,
    restart_backoff: float,
    healthy_reset: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """One pass of the policy in this module's docstring over ``running``.

    ``respawn`` starts a process again and waits until it is healthy (a failed start is a
    :class:`ServeError`). ``healthy_reset``: see the module (None: :func:`healthy_reset_after`).
    ``clock`` is read for the healthy periods (``time.monotonic``).
    """
    reset = healthy_reset_after(max_restarts) if healthy_reset is None else healthy_reset
    now = clock()
    for run in running:
        if run.dropped or run.proc.poll() is not None:
            continue
        if run.healthy_since is None:
            run.healthy_since = now  # first seen serving
        elif run.restarts and now - run.healthy_since >= reset:
            _say(
                f"{run.label} has served {now - run.healthy_since:.0f} s since its last "
                f"restart: its restart count is reset (at most {max_restarts} again)",
            )
            run.restarts = 0
    # every exit is said first: a restart blocks until healthy, and a second server that
    # died meanwhile should not go unreported that long
    dead = [
        (run, code)
        for run in list(running)
        if not run.dropped and (code := run.proc.poll()) is not None
    ]
    spent: list[tuple[_Running, str]] = []
    for run, code in dead:
        why = f"{_last_error(run.log_path)} (log: {run.log_path})"
        if run.restarts >= max_restarts:
            spent.append((run, f"exited with code {code} after {run.restarts} restarts: {why}"))
            continue
        _say(
            f"{run.label} ({run.url}) exited with code {code}; restarting it, the others "
            f"keep serving: {why}",
        )
    for run, _ in dead:
        if run.restarts >= max_restarts:
            continue
        kill_group(run)
        retrying = Retrying(
            stop=stop_after_attempt(max_restarts - run.restarts),
            wait=wait_exponential(multiplier=restart_backoff, max=BACKOFF_CAP),
            retry=retry_if_exception_type(ServeError),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    respawn(run)
        except ServeError as exc:
            spent.append((run, f"did not come back after {run.restarts} restarts: {exc}"))
            continue
        run.healthy_since = clock()
        _say(
            f"{run.label} ({run.url}) is serving again (restart {run.restarts} of at most "
            f"{max_restarts})",
        )
    for run, what in spent:
        _give_up(running, run, what)


def _give_up(running: list[_Running], run: _Running, what: str) -> None:
    """Drop ``run`` if it is a replica whose role has a live one; else ServerDiedError."""
    others = [
        r
        for r in running
        if r is not run
        and not r.public
        and r.role == run.role
        and not r.dropped
        and r.proc.poll() is None
    ]
    if run.public or not others:
        last = "" if run.public else f" (the last {run.role} replica)"
        raise ServerDiedError(f"{run.label} server{last} {what}; giving up")
    kill_group(run)
    run.dropped = True
    _say(
        f"{run.label} ({run.url}) {what}; dropped: not restarted again, its router sends its "
        f"requests to the {len(others)} other {run.role} replica(s), serve goes on",
    )


def _say(message: str) -> None:
    """One line for the operator on stderr, flushed at once."""
    print(message, file=sys.stderr, flush=True)
