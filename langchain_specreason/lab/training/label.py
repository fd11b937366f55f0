"""Label router training data: run the oracle over problems, keep every judged position.

The oracle is the graph itself with :class:`~.oracle.OracleJudge` (one implementation of the
loop). After each problem, every position where both models wrote a step becomes one
:class:`~.features.LabelledStep` line in ``labels.jsonl``; the problem's id goes to
``problems.jsonl``, which is what a resumed run skips.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from tqdm import tqdm

from ...arbitrage.features import LabelledStep, PrefixStep
from ...arbitrage.oracle import OracleJudge
from ...config import ScoreMethod, SpecReasonConfig
from ...endpoint import Endpoint, TokenScorer
from ...errors import ConfigError
from ...formats import get_format
from ...graph import create_specreason_graph
from ...judges import LikelihoodScorer
from ...state import StepRecord
from ..bench.datasets import Problem
from ..bench.grading import grade
from ..bench.prompts import build_prompt
from ..bench.results import JsonlAppender, read_records

LABELS = "labels.jsonl"
PROBLEMS = "problems.jsonl"


def labelled_steps(
    problem_id: str, question: str, steps: Sequence[StepRecord]
) -> list[LabelledStep]:
    """The judged positions of one oracle trace (positions without a draft are skipped)."""
    out: list[LabelledStep] = []
    for i, record in enumerate(steps):
        verdict = record.get("verdict") or {}
        if "advantage" not in verdict:
            continue
        draft_text = record["text"] if record["decision"] == "accepted" else record["draft_text"]
        prefix: list[PrefixStep] = [{"author": s["author"], "text": s["text"]} for s in steps[:i]]
        out.append(
            {
                "problem_id": problem_id,
                "step_index": i,
                "question": question,
                "prefix": prefix,
                "draft_step": draft_text or "",
                "base_step": str(verdict["base_step"]),
                "draft_score": float(verdict["draft_score"]),
                "base_score": float(verdict["base_score"]),
                "advantage": float(verdict["advantage"]),
                "escalated": record["decision"] == "rewritten",
            }
        )
    return out


@dataclass(frozen=True)
class LabelSummary:
    """What a labelling session did."""

    problems_done: int
    problems_skipped: int
    steps: int
    escalated: int
    seconds: float

    def format(self) -> str:
        """One line for the CLI."""
        share = self.escalated / self.steps if self.steps else 0.0
        return (
            f"labelled {self.steps} steps from {self.problems_done} problems "
            f"({self.problems_skipped} already done); base better at {self.escalated} "
            f"({share:.0%}); {self.seconds:.0f} s"
        )


async def label_problems(
    draft: Endpoint,
    base: Endpoint,
    problems: Sequence[Problem],
    out: Path,
    *,
    config: SpecReasonConfig,
    family: str = "instruct",
    score_method: ScoreMethod = "average",
    scorer: str = "score",
    tau: float = 0.0,
    concurrency: int = 1,
    progress: bool = True,
) -> LabelSummary:
    """Run the oracle on each unfinished problem and append its labelled steps to ``out``.

    ``concurrency`` problems run at once (vLLM batches their requests: more labels per hour;
    latency is not what labels measure). Each problem's lines are written when it finishes.
    ``scorer`` rates both steps: ``score`` (the base model's 0-9 rating, read with
    ``score_method``) or ``likelihood`` (the base model's token log-probability of the step,
    aggregated by ``config.logprob_aggregate``).
    """
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
    fmt = get_format(family)
    if scorer == "likelihood":
        if not isinstance(base, TokenScorer):
            raise ConfigError("--scorer likelihood needs a vLLM base endpoint")
        judge = OracleJudge(
            base, LikelihoodScorer(base, fmt, how=config.logprob_aggregate), tau=tau
        )
    elif scorer == "score":
        judge = OracleJudge.scored_by_base(
            base, fmt, tau=tau, method=score_method, top_logprobs=config.judge_top_logprobs
        )
    else:
        raise ConfigError(f"unknown step scorer {scorer!r}; scorers: score, likelihood")
    graph = create_specreason_graph(
        draft, base, judge=judge, config=config, family=fmt, name="arbitrage-oracle"
    )
    done = {str(r["problem_id"]) for r in read_records(out / PROBLEMS)}
    todo = [p for p in problems if p.id not in done]
    steps = escalated = 0
    start = time.perf_counter()
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
        gate = asyncio.Semaphore(concurrency)

        async def oracle(problem: Problem) -> tuple[Problem, dict[str, Any], float]:
            async with gate:
                t0 = time.perf_counter()
                state = await graph.ainvoke({"messages": [HumanMessage(build_prompt(problem))]})
                return problem, state, time.perf_counter() - t0

        for next_done in asyncio.as_completed([oracle(p) for p in todo]):
            problem, state, seconds = await next_done
            rows = labelled_steps(problem.id, problem.question, state.get("steps") or [])
            for row in rows:
                labels.write(dict(row))
            graded = grade(problem.grader, state.get("answer", ""), problem.gold)
            finished.write(
                {
                    "problem_id": problem.id,
                    "steps": len(rows),
                    "escalated": sum(r["escalated"] for r in rows),
                    "correct": graded.correct,
                    "seconds": seconds,
                }
            )
            steps += len(rows)
            escalated += sum(r["escalated"] for r in rows)
            bar.set_postfix_str(f"{steps} steps, {escalated} base-better")
            bar.update(1)
    return LabelSummary(
        len(todo), len(problems) - len(todo), steps, escalated, time.perf_counter() - start
    )
