"""Sync calls over async code: one private event loop thread shared by all sync calls.

LangChain's sync API (``invoke``, ``stream``, ``get_num_tokens``) runs the async graph and
endpoints here, so sync and async share one implementation; the endpoints keep one HTTP
client per event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_LOOP: asyncio.AbstractEventLoop | None = None
_LOCK = threading.Lock()


def _loop() -> asyncio.AbstractEventLoop:
    global _LOOP
    with _LOCK:
        if _LOOP is None:
            _LOOP = asyncio.new_event_loop()
            threading.Thread(target=_LOOP.run_forever, name="specreason-sync", daemon=True).start()
        return _LOOP


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the bridge's loop and wait for its result (from any thread)."""
    return asyncio.run_coroutine_threadsafe(coro, _loop()).result()


def iter_sync(agen: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator from sync code; closing the iterator closes ``agen``."""
    loop = _loop()
    iterator = aiter(agen)

    async def step() -> T:
        return await anext(iterator)

    try:
        while True:
            try:
                yield asyncio.run_coroutine_threadsafe(step(), loop).result()
            except StopAsyncIteration:
                return
    finally:
        closer = getattr(agen, "aclose", None)
        if closer is not None:
            asyncio.run_coroutine_threadsafe(closer(), loop).result()
