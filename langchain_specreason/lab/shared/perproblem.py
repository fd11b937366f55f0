"""Work done problem by problem into a folder, resumable, with a progress bar.

The loop ``specreason label`` and ``specreason arbitrage label`` share.
Each finished problem appends its rows to ``labels.jsonl`` and one line to ``problems.jsonl``
(its id, its summary, its seconds); a rerun skips the problems listed there. Problems run
``concurrency`` at once (vLLM batches their requests), with a progress bar.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ...errors import ConfigError
from .datasets import Problem
from .results import JsonlAppender, read_records

LABELS = "labels.jsonl"
PROBLEMS = "problems.jsonl"

Work = Callable[[Problem], Awaitable[tuple[list[dict[str, Any]], dict[str, Any]]]]
"""One problem's work: its rows (``labels.jsonl``) and summary (``problems.jsonl``)."""


@dataclass(frozen=True)
class Finished:
    """What one call of :func:`for_each_problem` did."""

    records: list[dict[str, Any]]
    """This call's ``problems.jsonl`` lines (the problems it finished)."""
    skipped: int
    """Problems already finished by an earlier run."""
    seconds: float

    def counts(self, flag: str) -> tuple[int, int, int, int, float]:
        """Problems finished, skipped, their steps, their steps marked ``flag``, seconds."""
        return (
            len(self.records),
            self.skipped,
            sum(r["steps"] for r in self.records),
            sum(r[flag] for r in self.records),
            self.seconds,
        )


def steps_note(flag: str, what: str) -> Callable[[list[dict[str, Any]]], str]:
    """The progress bar's note: the finished problems' steps, and how many are ``flag``."""
    return lambda done: (
        f"{sum(r['steps'] for r in done)} steps, {sum(r[flag] for r in done)} {what}"
    )


async def for_each_problem(
    problems: Sequence[Problem],
    out: Path,
    work: Work,
    *,
    concurrency: int = 1,
    progress: bool = True,
    postfix: Callable[[list[dict[str, Any]]], str] | None = None,
    round_seconds: int | None = None,
) -> Finished:
    """Run ``work`` on each problem not yet in ``out/problems.jsonl``, writing as each ends.

    ``postfix`` turns the finished records into the progress bar's note.
    """
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
    done = {str(r["problem_id"]) for r in read_records(out / PROBLEMS)}
    todo = [p for p in problems if p.id not in done]
    gate = asyncio.Semaphore(concurrency)
    start = time.perf_counter()
    records: list[dict[str, Any]] = []

    async def one(problem: Problem) -> tuple[Problem, list[dict[str, Any]], dict[str, Any], float]:
        async with gate:
            t0 = time.perf_counter()
            rows, summary = await work(problem)
            return problem, rows, summary, time.perf_counter() - t0

    with (
        JsonlAppender(out / LABELS) as labels,
        JsonlAppender(out / PROBLEMS) as finished,
        tqdm(
            total=len(problems),
            initial=len(problems) - len(todo),
            desc="label",
            unit="problem",
            disable=not progress,
            dynamic_ncols=True,
        ) as bar,
    ):
        for next_done in asyncio.as_completed([one(p) for p in todo]):
            problem, rows, summary, seconds = await next_done
            for row in rows:
                labels.write(row)
            record = {
                "problem_id": problem.id,
                **summary,
                "seconds": seconds if round_seconds is None else round(seconds, round_seconds),
            }
            finished.write(record)
            records.append(record)
            if postfix is not None:
                bar.set_postfix_str(postfix(records))
            bar.update(1)
    return Finished(records, len(problems) - len(todo), time.perf_counter() - start)
