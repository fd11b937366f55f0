"""The resumable per-problem loop of `specreason label` and `specreason arbitrage label`."""

from __future__ import annotations

import asyncio

import pytest

from langchain_specreason.errors import ConfigError
from langchain_specreason.lab.shared.datasets import Problem
from langchain_specreason.lab.shared.perproblem import (
    LABELS,
    PROBLEMS,
    Finished,
    for_each_problem,
    steps_note,
)
from langchain_specreason.lab.shared.results import read_records

PROBLEMS_ = [Problem(f"p{i}", f"What is {i}+{i}?", str(2 * i), "number") for i in range(4)]


async def test_each_problem_once_rows_and_summary_written_and_a_rerun_skips_them(tmp_path):
    running, peak, seen = 0, 0, []

    async def work(problem):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        seen.append(problem.id)
        return [{"problem_id": problem.id, "row": k} for k in range(2)], {"steps": 2}

    first = await for_each_problem(
        PROBLEMS_[:3], tmp_path, work, concurrency=2, progress=False, round_seconds=2
    )
    assert sorted(seen) == ["p0", "p1", "p2"] and peak == 2
    assert (len(first.records), first.skipped) == (3, 0)
    assert {r["problem_id"] for r in read_records(tmp_path / PROBLEMS)} == {"p0", "p1", "p2"}
    assert all(set(r) == {"problem_id", "steps", "seconds"} for r in first.records)
    assert len(read_records(tmp_path / LABELS)) == 6

    seen.clear()
    again = await for_each_problem(PROBLEMS_, tmp_path, work, progress=False)
    assert seen == ["p3"] and (len(again.records), again.skipped) == (1, 3)
    assert len(read_records(tmp_path / LABELS)) == 8


async def test_a_problem_that_fails_is_not_marked_done(tmp_path):
    async def work(problem):
        if problem.id == "p1":
            raise RuntimeError("server died")
        return [], {"steps": 0}

    with pytest.raises(RuntimeError, match="server died"):
        await for_each_problem(PROBLEMS_[:2], tmp_path, work, progress=False)
    done = {r["problem_id"] for r in read_records(tmp_path / PROBLEMS)}
    assert "p1" not in done  # a rerun does it again


async def test_concurrency_below_one_is_a_config_error(tmp_path):
    async def work(problem):
        return [], {}

    with pytest.raises(ConfigError, match="concurrency must be at least 1"):
        await for_each_problem(PROBLEMS_, tmp_path, work, concurrency=0, progress=False)


def test_counts_and_the_progress_note_sum_steps_and_a_flag_over_the_records():
    records = [{"steps": 3, "harmful": 1}, {"steps": 2, "harmful": 0}]
    run = Finished(records, skipped=4, seconds=1.5)
    assert run.counts("harmful") == (2, 4, 5, 1, 1.5)
    assert steps_note("harmful", "harmful")(records) == "5 steps, 1 harmful"
    assert steps_note("harmful", "base-better")([]) == "0 steps, 0 base-better"
