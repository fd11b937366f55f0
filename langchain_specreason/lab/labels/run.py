"""Label a seeded sample of problems, resumable: labels, problems done, provenance.

Each problem: the draft model writes its trace through the graph itself (every draft step
accepted, so the steps are split exactly as a SpecReason run splits them, greedy), then
:func:`~.rollout.label_trace` labels its draft steps. A problem's lines are written when it
is done; ``problems.jsonl`` lists the problems done (what a resumed run skips) with their
wall time, whose sum is the labelling's cost.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from ...config import SpecReasonConfig
from ...endpoint import Endpoint, OpenAIEndpoint
from ...errors import ConfigError
from ...formats import PromptFormat, get_format
from ...graph import create_specreason_graph
from ...judges import StepContext, Verdict
from ..shared.datasets import Problem
from ..shared.perproblem import for_each_problem, steps_note
from ..shared.prompts import build_prompt
from .rollout import DraftTrace, RolloutSettings, label_trace

META = "meta.json"


def sample_problems(
    problems: Sequence[Problem], *, seed: int, offset: int, count: int
) -> list[Problem]:
    """``count`` problems from a seeded shuffle, starting at ``offset``.

    Samples with the same seed and non-overlapping ``[offset, offset + count)`` ranges are
    disjoint: the dev and held-out label sets are two such ranges.
    """
    if count < 1 or offset < 0:
        raise ConfigError(f"need count >= 1 and offset >= 0, got {count} and {offset}")
    order = list(range(len(problems)))
    random.Random(seed).shuffle(order)
    if offset + count > len(order):
        raise ConfigError(
            f"the dataset has {len(order)} problems; offset {offset} + count "
            f"{count} is past its end"
        )
    return [problems[i] for i in order[offset : offset + count]]


class _AcceptAll:
    """Keeps every draft step and remembers the draft's token logprobs of each."""

    def __init__(self) -> None:
        self.logprobs: dict[str, list[float] | None] = {}

    async def judge(self, ctx: StepContext) -> Verdict:
        self.logprobs[ctx.step] = list(ctx.step_logprobs) if ctx.step_logprobs else None
        return Verdict(score=1.0, accept=True)


async def draft_trace(
    draft: Endpoint,
    base: Endpoint,
    problem: Problem,
    fmt: PromptFormat,
    *,
    budget: int,
    step_max_tokens: int,
    delimiter: str,
) -> DraftTrace:
    """The draft model's greedy trace of ``problem``, its draft steps only."""
    judge = _AcceptAll()
    config = SpecReasonConfig(
        temperature=0.0,
        top_p=1.0,
        lookahead=False,
        budget=budget,
        step_max_tokens=step_max_tokens,
        delimiter=delimiter,
    )
    graph = create_specreason_graph(
        draft, base, judge=judge, config=config, family=fmt, name="draft-trace"
    )
    state = await graph.ainvoke({"messages": [HumanMessage(build_prompt(problem))]})
    steps, logprobs, finishes = [], [], []
    for record in state.get("steps") or []:
        if record["author"] != "draft":  # a blank draft the base model wrote instead: stop
            break
        steps.append(record["text"])
        logprobs.append(judge.logprobs.get(record["text"]))
        finishes.append(record["finish"])
    return DraftTrace(steps, logprobs, finishes)


@dataclass(frozen=True)
class LabelRunSummary:
    """What a labelling session did."""

    problems_done: int
    problems_skipped: int
    steps: int
    harmful: int
    seconds: float

    def format(self) -> str:
        """One line for the CLI."""
        return (
            f"labelled {self.steps} draft steps from {self.problems_done} problems "
            f"({self.problems_skipped} already done); harmful {self.harmful}; "
            f"{self.seconds:.0f} s"
        )


async def label_problems(
    draft: Endpoint,
    base: OpenAIEndpoint,
    problems: Sequence[Problem],
    out: Path,
    *,
    settings: RolloutSettings,
    family: str | PromptFormat = "instruct",
    budget: int = 1024,
    concurrency: int = 2,
    provenance: dict[str, Any] | None = None,
    progress: bool = True,
) -> LabelRunSummary:
    """Label each problem not yet in ``out/problems.jsonl``; append its lines to ``labels.jsonl``.

    ``concurrency``: problems in flight (drafting one while another's rollouts run keeps
    both servers busy). ``provenance`` (models, servers, sample) goes to ``meta.json`` with
    the settings; a resumed run with other settings is refused.
    """
    fmt = get_format(family)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "settings": settings.model_dump(),
        "budget": budget,
        "draft": "greedy, temperature 0",
        "base_step": "greedy, temperature 0",
        "grading": "lab.shared.grading.grade of prefix + step + rollout against the gold",
        "harmful": f"advantage = base_rate - draft_rate >= {settings.harmful_gap}",
        **(provenance or {}),
    }
    meta_path = out / META
    if meta_path.is_file():
        old = json.loads(meta_path.read_text())
        if old.get("settings") != meta["settings"] or old.get("budget") != budget:
            raise ConfigError(
                f"{out} was labelled with other settings ({old.get('settings')}); use another --out"
            )
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")

    async def one(problem: Problem) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        trace = await draft_trace(
            draft,
            base,
            problem,
            fmt,
            budget=budget,
            step_max_tokens=settings.step_max_tokens,
            delimiter=settings.delimiter,
        )
        conversation = [{"role": "user", "content": build_prompt(problem)}]
        rows = await label_trace(base, problem, conversation, fmt, trace, settings)
        return rows, {"steps": len(rows), "harmful": sum(r["harmful"] for r in rows)}

    run = await for_each_problem(
        problems,
        out,
        one,
        concurrency=max(1, concurrency),
        progress=progress,
        postfix=steps_note("harmful", "harmful"),
        round_seconds=2,
    )
    return LabelRunSummary(*run.counts("harmful"))
