"""The run of one chat-model call: the graph's stream under a deadline, the servers' windows."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar

from ..endpoint import WindowedEndpoint
from ..errors import ConfigError, DeadlineError, EndpointError

T = TypeVar("T")


async def _until(deadline: float | None, stream: AsyncIterator[T]) -> AsyncIterator[T]:
    """The items of ``stream`` until ``deadline`` seconds have passed; then DeadlineError.

    The timeout covers only the waits on the stream (in this task), so the cancellation lands
    inside the graph's run, which cancels its server calls.
    """
    if deadline is not None and not deadline > 0:
        raise ConfigError(f"deadline must be a positive number of seconds, got {deadline}")
    loop = asyncio.get_running_loop()
    until = None if deadline is None else loop.time() + deadline
    items = aiter(stream)
    try:
        while True:
            scope = asyncio.timeout_at(until)
            try:
                async with scope:
                    item = await anext(items)
            except StopAsyncIteration:
                return
            except TimeoutError:
                if not scope.expired():
                    raise
                raise DeadlineError(
                    f"the run took longer than its deadline of {deadline:g} s and was "
                    "cancelled; with a checkpointer, repeat the call on the same thread_id to "
                    "resume it"
                ) from None
            yield item
    finally:  # the caller stopped early, or the deadline passed: end the graph's run now
        close = getattr(items, "aclose", None)
        if close is not None:
            await close()


async def _known_window(endpoint: WindowedEndpoint) -> int | None:
    """The window the run already asked for (cached); ``None`` for a server that is down.

    A draft down since the start: the base model answered alone, nothing is lost.
    """
    try:
        return await endpoint.max_model_len()
    except EndpointError:
        return None
