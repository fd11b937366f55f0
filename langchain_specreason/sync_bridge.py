"""Sync calls over async code: one private event loop thread shared by all sync calls.

LangChain's sync API (``invoke``, ``stream``, ``get_num_tokens``) runs the async graph and
endpoints here, so sync and async share one implementation; the endpoints keep one HTTP
client per event loop.
"""

from __future__ import annotations

import asyncio
import contextvars
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
    """Run ``coro`` on the bridge's loop and wait for its result (from any thread).

    The caller's context variables (LangChain's run config, tracing) travel with it; if the
    wait is interrupted (Ctrl-C), the coroutine is cancelled, so no request keeps running.
    """
    context = contextvars.copy_context()
    future = asyncio.run_coroutine_threadsafe(_in_context(coro, context), _loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


async def _in_context(coro: Coroutine[Any, Any, T], context: contextvars.Context) -> T:
    """Await ``coro`` in a task that runs in ``context`` (a copy of the caller's)."""
    return await asyncio.get_running_loop().create_task(coro, context=context)


def iter_sync(agen: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator from sync code; closing the iterator closes ``agen``."""
    loop = _loop()
    iterator = aiter(agen)

    async def step() -> T:
        return await anext(iterator)

    try:
        while True:
            future = asyncio.run_coroutine_threadsafe(step(), loop)
            try:
                yield future.result()
            except StopAsyncIteration:
                return
            except BaseException:
                future.cancel()
                raise
    finally:
        closer = getattr(agen, "aclose", None)
        if closer is not None:
            asyncio.run_coroutine_threadsafe(closer(), loop).result()
