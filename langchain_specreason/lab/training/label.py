"""Label router training data: run the oracle over problems, keep every judged position.

The oracle is the graph itself with :class:`~.oracle.OracleJudge` (one implementation of the
loop). After each problem, every position where both models wrote a step becomes one
:class:`~.features.LabelledStep` line in ``labels.jsonl``; the problem's id goes to
``problems.jsonl``, which is what a resumed run skips.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from ...arbitrage.features import LabelledStep, PrefixStep
from ...arbitrage.oracle import OracleJudge
from ...config import SpecReasonConfig
from ...endpoint import Endpoint, TokenScorer
from ...errors import ConfigError
from ...formats import get_format
from ...graph import create_specreason_graph
from ...judges import BaseModelScorer, LikelihoodScorer, StepScorer
from ...state import StepRecord
from ..shared.datasets import Problem
from ..shared.grading import grade
from ..shared.perproblem import for_each_problem, steps_note
from ..shared.prompts import build_prompt
from .settings import OracleSettings


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
    settings: OracleSettings | None = None,
    progress: bool = True,
) -> LabelSummary:
    """Run the oracle on each unfinished problem and append its labelled steps to ``out``.

    ``settings`` (:class:`~.settings.OracleSettings`; None: its defaults): ``concurrency``
    problems run at once (vLLM batches their requests: more labels per hour; latency is not
    what labels measure), and each problem's lines are written when it finishes. ``scorer``
    rates both steps: ``score`` (the base model's 0-9 rating, read with ``score_method``) or
    ``likelihood`` (the base model's token log-probability of the step, aggregated by
    ``config.logprob_aggregate``).
    """
    settings = settings or OracleSettings()
    fmt = get_format(family)
    scorer: StepScorer
    if settings.scorer == "likelihood":
        if not isinstance(base, TokenScorer):
            raise ConfigError("the likelihood scorer needs a vLLM base endpoint (token scoring)")
        scorer = LikelihoodScorer(base, fmt, logprob_aggregate=config.logprob_aggregate)
    else:
        scorer = BaseModelScorer(
            base, fmt, score_method=settings.score_method, top_logprobs=config.judge_top_logprobs
        )
    judge = OracleJudge(base, scorer, tau=settings.tau)
    graph = create_specreason_graph(
        draft, base, judge=judge, config=config, family=fmt, name="arbitrage-oracle"
    )

    async def oracle(problem: Problem) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        state = await graph.ainvoke({"messages": [HumanMessage(build_prompt(problem))]})
        rows = labelled_steps(problem.id, problem.question, state.get("steps") or [])
        graded = grade(problem.grader, state.get("answer", ""), problem.gold)
        summary = {
            "steps": len(rows),
            "escalated": sum(r["escalated"] for r in rows),
            "correct": graded.correct,
        }
        return [dict(r) for r in rows], summary

    run = await for_each_problem(
        problems,
        out,
        oracle,
        concurrency=settings.concurrency,
        progress=progress,
        postfix=steps_note("escalated", "base-better"),
    )
    return LabelSummary(*run.counts("escalated"))
