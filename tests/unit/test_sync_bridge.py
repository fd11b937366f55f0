"""The sync bridge: context travels, Ctrl-C cancels what runs on the bridge's loop."""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import threading
import time

import pytest

from langchain_specreason import sync_bridge
from langchain_specreason.sync_bridge import iter_sync, run_sync

WHO = contextvars.ContextVar("who", default="nobody")


def _ctrl_c_soon() -> None:
    """Ctrl-C in 0.2 s (a SIGINT to this process, as a terminal sends it)."""
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()


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

    _ctrl_c_soon()
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
    _ctrl_c_soon()
    with pytest.raises(KeyboardInterrupt):
        next(items)
    items.close()
    assert closed.wait(5), "the stream was left running after Ctrl-C"


def test_ctrl_c_returns_only_once_the_coroutine_has_unwound():
    unwound = threading.Event()

    async def slow_to_unwind() -> None:
        try:
            await asyncio.sleep(3600)
        finally:  # like closing a server stream: a few loop turns of clean-up
            await asyncio.shield(asyncio.sleep(0.3))
            unwound.set()

    _ctrl_c_soon()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_sync(slow_to_unwind())
    assert unwound.is_set(), "the interrupt reached the caller before the clean-up ran"
    assert time.monotonic() - started < sync_bridge.UNWIND_SECONDS / 2  # not the bound's wait


def test_a_clean_up_that_never_ends_does_not_hold_ctrl_c_beyond_the_bound(monkeypatch):
    monkeypatch.setattr(sync_bridge, "UNWIND_SECONDS", 0.3)
    release = threading.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            while not release.is_set():  # ignores the cancellation until released
                try:
                    await asyncio.sleep(0.05)
                except asyncio.CancelledError:
                    pass

    _ctrl_c_soon()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_sync(stubborn())
        assert time.monotonic() - started < 3
    finally:
        release.set()


def test_ctrl_c_while_iterating_unwinds_the_step_before_the_stream_is_closed():
    events: list[str] = []

    async def stream():
        try:
            yield 1
            try:
                await asyncio.sleep(3600)
            finally:
                await asyncio.shield(asyncio.sleep(0.3))
                events.append("step unwound")
            yield 2
        finally:
            events.append("closed")

    items = iter_sync(stream())
    assert next(items) == 1
    _ctrl_c_soon()
    with pytest.raises(KeyboardInterrupt):
        next(items)
    assert events == ["step unwound", "closed"]


def test_errors_and_results_pass_through_unchanged():
    async def fails() -> None:
        raise ValueError("bad input")

    async def items():
        yield "a"
        yield "b"

    with pytest.raises(ValueError, match="bad input"):
        run_sync(fails())
    assert list(iter_sync(items())) == ["a", "b"]


@pytest.mark.timeout(30)  # the bug this pins was a wait without end
def test_a_sync_call_from_code_the_bridge_runs_does_not_wait_on_itself():
    async def inner() -> str:
        return WHO.get()

    async def outer() -> str:
        # what a sync callback of a sync call does: a sync call on the bridge's own thread
        return run_sync(inner())

    token = WHO.set("caller")
    try:
        assert run_sync(outer()) == "caller"  # answered (a loop of its own), context kept
    finally:
        WHO.reset(token)


@pytest.mark.timeout(30)
def test_a_sync_stream_from_code_the_bridge_runs_is_a_typed_error():
    from langchain_specreason.errors import SpecReasonError

    async def numbers():
        yield 1

    async def outer() -> list[int]:
        return list(iter_sync(numbers()))

    with pytest.raises(SpecReasonError, match="would wait on itself"):
        run_sync(outer())
