"""One request per problem at once, a bounded number in flight, each line timed as it ends.

What the replica comparison's batch and a ``--modes`` cell share: the caller says how one
problem is asked and how its result line is made (from the answer or the exception).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from tqdm import tqdm

from ..shared.datasets import Problem

T = TypeVar("T")


class Sink(Protocol):
    """Where result lines go (:class:`~..shared.results.JsonlAppender`, or a list in tests)."""

    def write(self, record: dict[str, Any]) -> None:
        """Keep one result line."""
        ...


def progress_bar(total: int, progress: bool) -> tqdm[Any]:
    """``bench load``'s bar over ``total`` requests (hidden unless ``progress``)."""
    return tqdm(
        total=total,
        desc="bench load",
        unit="request",
        disable=not progress,
        dynamic_ncols=True,
    )


async def send_all(
    problems: Sequence[Problem],
    concurrency: int,
    ask: Callable[[int, Problem], Awaitable[T]],
    line: Callable[[int, Problem, T | None, Exception | None], dict[str, Any]],
    sink: Sink,
    bar: tqdm[Any] | None = None,
) -> list[dict[str, Any]]:
    """Ask every problem at once, ``concurrency`` in flight at most; the lines in order.

    ``line`` makes a request's result line from ``ask``'s answer or its exception (a failed
    request is a result, not the end); its times are added: latency from the send (past the
    gate) to the answer, ``started_s``/``ended_s`` from the start. Each line goes to ``sink``
    as it comes.
    """
    gate = asyncio.Semaphore(concurrency)
    start = time.perf_counter()

    async def one(index: int, problem: Problem) -> dict[str, Any]:
        async with gate:
            sent = time.perf_counter()
            try:
                got = await ask(index, problem)
            except Exception as exc:  # a failed request is a result, not the end
                ended = time.perf_counter()
                record = line(index, problem, None, exc)
            else:
                ended = time.perf_counter()
                record = line(index, problem, got, None)
            record.update(
                latency_s=ended - sent,
                started_s=sent - start,
                ended_s=ended - start,
                finished_at=datetime.now(UTC).isoformat(),
            )
            sink.write(record)
            if bar is not None:
                bar.update(1)
            return record

    return list(await asyncio.gather(*(one(i, p) for i, p in enumerate(problems))))
