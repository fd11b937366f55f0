"""Batches of chat-model calls whose runs are cancelled when the batch stops early.

Unlike langchain-core's, a failed run (without ``return_exceptions``), or an iteration that
stops early (cancelled, closed, an error raised), cancels the runs still going, so none keeps
its servers busy for an answer nobody will read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, cast

from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import get_config_list

from ..sync_bridge import iter_sync, run_sync


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


class CancellingBatches(BaseChatModel):
    """Batches, sync and async, whose runs are cancelled when the batch stops early.

    A base of :class:`~.model.ChatSpecReason`.
    """

    def batch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[AIMessage]:
        """Answer several inputs at once (``max_concurrency`` in ``config`` bounds them).

        Runs :meth:`abatch` on the sync API's event loop rather than ``invoke`` on a thread
        pool, so Ctrl-C cancels every run (and its server requests) instead of waiting for
        the threads to finish them; a run that fails cancels the others (see :meth:`abatch`).
        """
        if not inputs:
            return []
        return run_sync(self.abatch(inputs, config, return_exceptions=return_exceptions, **kwargs))

    async def abatch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[AIMessage]:
        """Answer several inputs at once (``max_concurrency`` in ``config`` bounds them).

        Unlike langchain-core's, when a run fails (and ``return_exceptions`` is off) the runs
        still going are cancelled before the error is raised, so none keeps its servers busy
        for an answer nobody will read.
        """
        if not inputs:
            return []
        replies = self.abatch_as_completed(
            inputs, config, return_exceptions=return_exceptions, **kwargs
        )
        return await in_order(replies, len(inputs))

    def batch_as_completed(  # type: ignore[override]
        self,
        inputs: Sequence[LanguageModelInput],
        config: RunnableConfig | Sequence[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> Iterator[tuple[int, AIMessage | Exception]]:
        """Yield (index, reply) of each input as its run ends.

        Runs :meth:`abatch_as_completed` on the sync API's event loop: Ctrl-C, or closing
        the iterator, cancels the runs still going.
        """
        if not inputs:
            return
        yield from iter_sync(
            self.abatch_as_completed(inputs, config, return_exceptions=return_exceptions, **kwargs)
        )

    def abatch_as_completed(  # type: ignore[override]
        self,
        inputs: Sequence[LanguageModelInput],
        config: RunnableConfig | Sequence[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> AsyncIterator[tuple[int, AIMessage | Exception]]:
        """Yield (index, reply) of each input as its run ends (``max_concurrency`` bounds them).

        Unlike langchain-core's, the runs are cancelled when the iteration stops early
        (cancelled, closed, or an error raised), so none keeps its servers busy.
        """
        return as_completed(self.ainvoke, inputs, config, return_exceptions, kwargs)
