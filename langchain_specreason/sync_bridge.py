"""Sync calls over async code: one private event loop thread shared by all sync calls.

LangChain's sync API (``invoke``, ``stream``, ``get_num_tokens``) runs the async graph and
endpoints here, so sync and async share one implementation; the endpoints keep one HTTP
client per event loop.

An interrupted wait (Ctrl-C) cancels the task and waits, up to :data:`UNWIND_SECONDS`, for it
to unwind (server streams closed, callbacks told) before the interrupt reaches the caller: a
program that exits right after Ctrl-C would otherwise shut down under a loop that is still
cancelling, and its exit could wait on that loop's threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

UNWIND_SECONDS = 10.0
"""How long an interrupted sync call waits for its cancelled task to finish unwinding."""

_LOOP: asyncio.AbstractEventLoop | None = None
_THREAD: threading.Thread | None = None
_LOCK = threading.Lock()


def _loop() -> asyncio.AbstractEventLoop:
    global _LOOP, _THREAD
    with _LOCK:
        if _LOOP is None:
            _LOOP = asyncio.new_event_loop()
            _THREAD = threading.Thread(
                target=_LOOP.run_forever, name="specreason-sync", daemon=True
            )
            _THREAD.start()
        return _LOOP


def on_bridge_thread() -> bool:
    """Whether the caller is code the bridge's loop runs (a sync callback of a sync call)."""
    return _THREAD is not None and threading.current_thread() is _THREAD


def _settle(done: concurrent.futures.Future[T], task: asyncio.Task[T]) -> None:
    """Copy the finished ``task``'s outcome onto ``done``, the future the caller waits on."""
    if task.cancelled():
        done.cancel()
        done.set_running_or_notify_cancel()  # wakes concurrent.futures.wait, as executors do
    elif (exc := task.exception()) is not None:
        done.set_exception(exc)
    else:
        done.set_result(task.result())


def _wait(coro: Coroutine[Any, Any, T], context: contextvars.Context | None = None) -> T:
    """Run ``coro`` as a task on the bridge's loop (in ``context``) and wait for its result.

    If the wait is interrupted, the task is cancelled and the interrupt is raised once the task
    has finished (or after :data:`UNWIND_SECONDS`); a second Ctrl-C stops that wait at once.
    """
    if on_bridge_thread():
        # waiting here on the bridge's loop would wait on itself forever: a loop of its own
        with concurrent.futures.ThreadPoolExecutor(1, "specreason-nested") as pool:
            run = context.run if context is not None else (lambda f, *a: f(*a))
            return pool.submit(run, asyncio.run, coro).result()
    loop = _loop()
    done: concurrent.futures.Future[T] = concurrent.futures.Future()
    started: list[asyncio.Task[T]] = []

    def start() -> None:
        task = loop.create_task(coro, context=context)
        task.add_done_callback(lambda finished: _settle(done, finished))
        started.append(task)

    def cancel() -> None:
        for task in started:  # start() ran first: both go through the loop's queue in order
            task.cancel()

    loop.call_soon_threadsafe(start)
    try:
        return done.result()
    except BaseException:
        if not done.done():
            loop.call_soon_threadsafe(cancel)
            concurrent.futures.wait([done], timeout=UNWIND_SECONDS)
        raise


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the bridge's loop and wait for its result (from any thread).

    The caller's context variables (LangChain's run config, tracing) travel with it; if the
    wait is interrupted (Ctrl-C), the coroutine is cancelled and has unwound (its requests
    closed) by the time the interrupt reaches the caller.
    """
    return _wait(coro, contextvars.copy_context())


def iter_sync(agen: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator from sync code; closing the iterator closes ``agen``.

    An interrupted step is cancelled and unwound like :func:`run_sync`'s coroutine. From
    code the bridge's loop runs (a sync callback of a sync call) it raises
    :class:`~langchain_specreason.errors.SpecReasonError`: the stream would wait on itself.
    """
    if on_bridge_thread():
        from .errors import SpecReasonError

        raise SpecReasonError(
            "a sync stream was started from code running on the sync API's event loop (a "
            "sync callback of another sync call): it would wait on itself; use invoke() there, "
            "or the async API (astream) throughout"
        )
    iterator = aiter(agen)

    async def step() -> T:
        return await anext(iterator)

    try:
        while True:
            try:
                item = _wait(step())
            except StopAsyncIteration:
                return
            yield item
    finally:
        closer = getattr(agen, "aclose", None)
        if closer is not None:
            _wait(closer())
