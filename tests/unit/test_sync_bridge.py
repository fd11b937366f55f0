"""The sync bridge: context travels, Ctrl-C cancels what runs on the bridge's loop."""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import threading

import pytest

from langchain_specreason.sync_bridge import iter_sync, run_sync

WHO = contextvars.ContextVar("who", default="nobody")


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends


def test_the_callers_context_variables_reach_the_coroutine():
    async def who() -> str:
        return WHO.get()

    token = WHO.set("caller")
    try:
        assert run_sync(who()) == "caller"
    finally:
        WHO.reset(token)


def test_ctrl_c_while_waiting_cancels_the_coroutine():
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    timer = threading.Timer(0.2, _ctrl_c)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        run_sync(forever())
    assert cancelled.wait(5), "the coroutine kept running after Ctrl-C"


def test_ctrl_c_while_iterating_cancels_and_closes_the_stream():
    closed = threading.Event()

    async def stream():
        try:
            yield 1
            await asyncio.sleep(3600)
            yield 2
        finally:
            closed.set()

    items = iter_sync(stream())
    assert next(items) == 1
    timer = threading.Timer(0.2, _ctrl_c)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        next(items)
    items.close()
    assert closed.wait(5), "the stream was left running after Ctrl-C"
