"""The routing key of a run: one header that sends every call of a run to one replica.

Behind ``vllm-router`` with its ``consistent_hash`` policy (``specreason serve --replicas N``),
a request goes to the replica its *hash key* maps to. The router reads the key from the first
of these headers that is set: ``X-Session-ID``, ``X-User-ID``, ``X-Tenant-ID``,
``X-Correlation-ID``, ``X-Request-ID``, ``X-Trace-ID``; then from the body
(``session_params.session_id``, ``user``, ``session_id``, ``user_id``); without any of them it
hashes the request body, so the calls of one run scatter over the replicas and each judge call
misses the prefix its predecessors left in another replica's cache.

A run sets its key once (:func:`routing_key`); every call made inside it, in this task or in
tasks it starts, carries ``X-Session-ID: <key>`` (:func:`routing_headers`)::

    with routing_key(thread_id):
        await graph.ainvoke(...)

:class:`RoutingHeaders` is the same thing as a live mapping for an HTTP client's default
headers: it is read again at every request, so one client serves every run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

ROUTING_HEADER = "X-Session-ID"
"""The header ``vllm-router``'s ``consistent_hash`` policy reads first."""

_KEY: ContextVar[str | None] = ContextVar("specreason_routing_key", default=None)


def current_routing_key() -> str | None:
    """The routing key of the run this code runs in (``None``: outside a run)."""
    return _KEY.get()


def routing_headers() -> dict[str, str]:
    """``{"X-Session-ID": key}`` inside a run with a key, else ``{}``."""
    key = _KEY.get()
    return {ROUTING_HEADER: key} if key else {}


@contextlib.contextmanager
def routing_key(key: str | None) -> Iterator[None]:
    """Give the calls made inside the block the routing key ``key`` (``None``: none)."""
    token = _KEY.set(str(key) if key else None)
    try:
        yield
    finally:
        # an async generator may be closed from another task's context: the key dies with
        # that context then, which is all that matters
        with contextlib.suppress(ValueError):
            _KEY.reset(token)


class RoutingHeaders(Mapping[str, str]):
    """``base`` plus :func:`routing_headers`, read again at each use.

    As an HTTP client's default headers
    (``openai.AsyncOpenAI(default_headers=RoutingHeaders(headers))``) they follow the run of
    each request.

    Always true, even when empty, so that ``headers or {}`` keeps it.
    """

    def __init__(self, base: Mapping[str, str] | None = None) -> None:
        self._base = dict(base or {})

    def _now(self) -> dict[str, str]:
        return {**self._base, **routing_headers()}

    def __getitem__(self, name: str) -> str:
        return self._now()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"RoutingHeaders({self._now()!r})"
