"""Batches of chat-model calls whose runs are cancelled when the batch stops early.

Unlike langchain-core's, a failed run (without ``return_exceptions``), or an iteration that
stops early (cancelled, closed, an error raised), cancels the runs still going, so none keeps
its servers busy for an answer nobody will read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, cast

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import get_config_list


async def as_completed(
    ainvoke: Callable[..., Awaitable[Any]],
    inputs: Sequence[LanguageModelInput],
    config: RunnableConfig | Sequence[RunnableConfig] | None,
    return_exceptions: bool,
    kwargs: dict[str, Any],
) -> AsyncIterator[tuple[int, AIMessage | Exception]]:
    """(index, reply) of each input as ``ainvoke`` answers it; ``max_concurrency`` bounds them.

    The runs still going are cancelled when the iteration stops.
    """
    if not inputs:
        return
    configs = get_config_list(config, len(inputs))
    limit = configs[0].get("max_concurrency")
    gate = asyncio.Semaphore(limit) if limit else contextlib.nullcontext()

    async def one(i: int) -> tuple[int, AIMessage | Exception]:
        async with gate:
            try:
                return i, cast(AIMessage, await ainvoke(inputs[i], configs[i], **kwargs))
            except Exception as exc:
                if not return_exceptions:
                    raise
                return i, exc

    tasks = [asyncio.ensure_future(one(i)) for i in range(len(inputs))]
    try:
        for finished in asyncio.as_completed(tasks):
            yield await finished
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def in_order(
    replies: AsyncIterator[tuple[int, AIMessage | Exception]], count: int
) -> list[AIMessage]:
    """The ``count`` replies of an :func:`as_completed` iteration, in the inputs' order."""
    by_index: dict[int, AIMessage | Exception] = {}
    async for i, reply in replies:
        by_index[i] = reply
    return [cast(AIMessage, by_index[i]) for i in range(count)]
