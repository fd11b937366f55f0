"""Label a draft step by rollouts of the base model (Math-Shepherd / Arbitrage advantage).

For draft step k of a draft trace, with the trace's first k steps as prefix:

* the base model writes its own step k (greedy, the request the graph's ``rewrite`` sends);
* ``m`` base-model completions run to a final answer from prefix + draft step k, and ``m``
  from prefix + base step k (one request with ``n=m`` each, sampled);
* each completion's whole reply (prefix + step + completion) is graded against the gold.

``draft_rate`` and ``base_rate`` are the shares graded right; ``advantage = base_rate -
draft_rate`` (what the base model's step adds); the step is ``harmful`` when ``advantage >=
harmful_gap``. When the base model writes the same step as the draft (whitespace aside) the
two rollout sets would be samples of one distribution: the draft's set serves both and the
advantage is 0 by construction (``same_step`` says so).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import Field

from ...config import Settings
from ...endpoint import ChatRequest, Completion
from ...formats import PromptFormat, continue_messages, step_stops
from ...graph import step_finish
from ..shared.datasets import Problem
from ..shared.grading import grade

_SPACES = re.compile(r"\s+")


class Sampler(Protocol):
    """A served model that completes a request once, or ``n`` times in one call."""

    name: str

    async def complete(self, request: ChatRequest) -> Completion:
        """One (greedy or sampled) completion."""
        ...

    async def sample(self, request: ChatRequest, n: int) -> list[Completion]:
        """``n`` sampled completions of one request."""
        ...


class RolloutSettings(Settings):
    """How steps are labelled. Every field is recorded with the labels (provenance)."""

    m: int = Field(default=4, ge=1)
    """Rollouts per side (after the draft step; after the base step)."""
    temperature: float = 0.7
    """Sampling temperature of the rollouts (the base step itself is greedy)."""
    top_p: float = 0.95
    """Nucleus sampling of the rollouts."""
    max_tokens: int = Field(default=512, ge=1)
    """Cap on one rollout's tokens (a rollout cut there is graded as it stands)."""
    step_max_tokens: int = Field(default=512, ge=1)
    """Cap on the base model's own step."""
    harmful_gap: float = Field(default=0.5, gt=0, le=1)
    """A draft step is harmful when the base step's success rate exceeds the draft step's by
    at least this much."""
    max_steps: int = Field(default=8, ge=1)
    """Label at most the first this many steps of a trace."""
    delimiter: str = "\n\n"
    """What ends a step."""


def success_rate(correct: Sequence[bool]) -> float:
    """Share of rollouts graded right (0.0 for none)."""
    return sum(correct) / len(correct) if correct else 0.0


def advantage(draft_rate: float, base_rate: float) -> float:
    """What the base model's step adds over the draft's: ``base_rate - draft_rate``."""
    return round(base_rate - draft_rate, 6)


def is_harmful(draft_rate: float, base_rate: float, gap: float) -> bool:
    """The draft step loses at least ``gap`` of success rate against the base step."""
    return advantage(draft_rate, base_rate) >= gap - 1e-9


def same_step(a: str, b: str) -> bool:
    """Two steps that differ at most in whitespace."""
    return _SPACES.sub(" ", a).strip() == _SPACES.sub(" ", b).strip()


@dataclass(frozen=True)
class DraftTrace:
    """A draft model's trace of one problem, split into steps as the graph splits it."""

    steps: list[str]
    logprobs: list[list[float] | None]
    """The draft model's log-probability of each token of each step (as it wrote it)."""
    finishes: list[str]


def _step_request(
    conversation: list[dict[str, Any]],
    fmt: PromptFormat,
    steps: Sequence[str],
    max_tokens: int,
    *,
    stop: list[str] | None,
    temperature: float,
    top_p: float,
) -> ChatRequest:
    messages, cont = continue_messages(conversation, fmt, steps)
    return ChatRequest(
        messages=messages,
        max_tokens=max_tokens,
        continue_final=cont,
        stop=stop,
        temperature=temperature,
        top_p=top_p,
    )


async def label_step(
    base: Sampler,
    problem: Problem,
    conversation: list[dict[str, Any]],
    fmt: PromptFormat,
    prefix: Sequence[str],
    step: str,
    settings: RolloutSettings,
) -> dict[str, Any]:
    """The label of draft ``step`` written after ``prefix`` (see the module docstring)."""
    t0 = time.perf_counter()
    stops = step_stops(fmt, settings.delimiter)
    own = await base.complete(
        _step_request(
            conversation,
            fmt,
            prefix,
            settings.step_max_tokens,
            stop=stops,
            temperature=0.0,
            top_p=1.0,
        )
    )
    base_step, _ = step_finish(own, settings.delimiter, fmt.thinking_end)
    tokens = own.completion_tokens

    async def rollouts(candidate: str) -> tuple[list[bool], list[str | None], int]:
        trace = [*prefix, candidate]
        outs = await base.sample(
            _step_request(
                conversation,
                fmt,
                trace,
                settings.max_tokens,
                stop=None,
                temperature=settings.temperature,
                top_p=settings.top_p,
            ),
            settings.m,
        )
        head = "".join(trace)
        grades = [grade(problem.grader, head + o.text, problem.gold) for o in outs]
        return (
            [g.correct for g in grades],
            [g.prediction for g in grades],
            sum(o.completion_tokens for o in outs[:1]),
        )

    same = same_step(step, base_step)
    if same:
        draft_side = await rollouts(step)
        base_side = draft_side
    else:
        draft_side, base_side = await asyncio.gather(rollouts(step), rollouts(base_step))
    draft_rate, base_rate = success_rate(draft_side[0]), success_rate(base_side[0])
    return {
        "step": step,
        "base_step": base_step,
        "same_step": same,
        "draft_correct": draft_side[0],
        "base_correct": base_side[0],
        "draft_predictions": draft_side[1],
        "base_predictions": base_side[1],
        "draft_rate": draft_rate,
        "base_rate": base_rate,
        "advantage": advantage(draft_rate, base_rate),
        "harmful": is_harmful(draft_rate, base_rate, settings.harmful_gap),
        "rollout_tokens": draft_side[2] + (0 if same else base_side[2]) + tokens,
        "seconds": round(time.perf_counter() - t0, 3),
    }


async def label_trace(
    base: Sampler,
    problem: Problem,
    conversation: list[dict[str, Any]],
    fmt: PromptFormat,
    trace: DraftTrace,
    settings: RolloutSettings,
    *,
    concurrency: int = 2,
) -> list[dict[str, Any]]:
    """The labels of a draft trace's first ``settings.max_steps`` steps, in order.

    Steps are labelled ``concurrency`` at a time (the server batches their rollouts).
    """
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(k: int) -> dict[str, Any]:
        async with gate:
            row = await label_step(
                base, problem, conversation, fmt, trace.steps[:k], trace.steps[k], settings
            )
        return {
            "problem_id": problem.id,
            "step_index": k,
            "question": problem.question,
            "gold": problem.gold,
            "steps": list(trace.steps[:k]),
            **row,
            "draft_logprobs": trace.logprobs[k],
            "finish": trace.finishes[k],
        }

    count = min(len(trace.steps), settings.max_steps)
    return list(await asyncio.gather(*(one(k) for k in range(count))))
