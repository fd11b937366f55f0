"""The judge contract: what a judge sees (:class:`StepContext`) and says (:class:`Verdict`).

A verdict may carry the replacement step (``rewrite``) when the judge already wrote it; the
graph then keeps that text instead of asking the base model again. A :class:`StepScorer` only
rates a step (higher is better); judges built on one compare its score with a threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..endpoint import ChatRequest
from ..state import Author


@dataclass(frozen=True)
class StepContext:
    """Everything a judge may look at for one draft step."""

    conversation: list[dict[str, Any]]
    """The conversation in OpenAI chat format (roles merged)."""
    steps: Sequence[str]
    """The trace so far: its steps, in order."""
    authors: Sequence[Author]
    """Who wrote each step of the trace."""
    step: str
    """The draft step under judgement."""
    request: ChatRequest
    """The request that wrote the draft step; sent to the base model it writes the same
    position (what the oracle does)."""
    step_logprobs: Sequence[float] | None = None
    """The draft model's log-probability of each token of ``step`` as it wrote it (``None``
    when the draft server did not return them, e.g. a step that is not a draft)."""
    step_tokens: Sequence[str] | None = None
    """The text of those tokens."""
    delimiter: str = "\n\n"
    """The text that ends a step (the graph's ``SpecReasonConfig.delimiter``)."""
    thinking_end: str | None = None
    """The text that ends the thinking (``</think>``), for a family that has one."""

    @property
    def question(self) -> str:
        """Text of the last user turn."""
        for message in reversed(self.conversation):
            if message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                return " ".join(
                    str(part.get("text", "")) for part in content or [] if isinstance(part, dict)
                )
        return ""


@dataclass(frozen=True)
class Rewrite:
    """A step the judge already wrote in place of the draft (plain values, checkpointable)."""

    text: str
    tokens: int
    seconds: float
    finish_reason: str | None = None
    stop_reason: str | int | None = None


@dataclass(frozen=True)
class Verdict:
    """A judge's decision on one draft step."""

    score: float
    """Higher is better for the draft. Base-model judge: 0-9; router: ``1 - p(escalate)``."""
    accept: bool
    seconds: float = 0.0
    """Time spent judging (for the oracle, including writing the base step)."""
    prompt_tokens: int = 0
    cached_tokens: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    """Judge-specific, JSON-serialisable (kept in the step record as ``verdict``)."""
    rewrite: Rewrite | None = None
    """The replacement step, when the judge wrote one and rejected the draft."""


class Judge(Protocol):
    """Decides whether a draft step is accepted."""

    async def judge(self, ctx: StepContext) -> Verdict:
        """Decide on ``ctx.step``."""
        ...


@dataclass(frozen=True)
class Score:
    """A step scorer's rating of one step (higher is better)."""

    value: float
    seconds: float = 0.0
    prompt_tokens: int = 0
    cached_tokens: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class StepScorer(Protocol):
    """Rates one step in context; higher is better."""

    async def score(
        self, conversation: list[dict[str, Any]], steps: Sequence[str], step: str
    ) -> Score:
        """Rate ``step`` written after ``steps`` in reply to ``conversation``."""
        ...


def threshold_verdict(score: Score, threshold: float) -> Verdict:
    """The one rule of threshold judges: keep the step when its score is at least ``threshold``.

    The score's costs and details carry over.
    """
    return Verdict(
        score=score.value,
        accept=score.value >= threshold,
        seconds=score.seconds,
        prompt_tokens=score.prompt_tokens,
        cached_tokens=score.cached_tokens,
        detail=score.detail,
    )
