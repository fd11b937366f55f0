"""The judge contract: what a judge sees (:class:`StepContext`) and says (:class:`Verdict`).

A judge is declared once, in its own file, by a :class:`JudgeSpec`: its name, a one-line
description, its threshold field and range, what it needs from the servers, and a builder.
:mod:`.registry` collects the specs; config validation, :func:`~.registry.make_judge`, the CLI
help, Studio's form and the lab read that one table.

A verdict may carry the replacement step (``rewrite``) when the judge already wrote it; the
graph then keeps that text instead of asking the base model again. A :class:`StepScorer` only
rates a step (higher is better); judges built on one compare its score with a threshold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..endpoint import ChatRequest, Endpoint
from ..formats import PromptFormat
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


class ThresholdJudge:
    """A judge whose ``scorer`` rates the step, kept at ``threshold`` or above.

    The base of the threshold judges: each sets ``scorer`` and ``threshold`` in its
    ``__init__``.
    """

    scorer: StepScorer
    threshold: float

    async def judge(self, ctx: StepContext) -> Verdict:
        """Score the draft step and compare with the threshold (:func:`threshold_verdict`)."""
        s = await self.scorer.score(ctx.conversation, ctx.steps, ctx.step)
        return threshold_verdict(s, self.threshold)


Need = Literal["base_chat", "base_prompt_logprobs", "draft_logprobs"]
"""What a judge needs beyond the step's text: ``base_chat``, a chat request to the base server;
``base_prompt_logprobs``, a base endpoint that tokenizes and returns prompt logprobs (a
:class:`~..endpoint.TokenScorer`: an ``OpenAIEndpoint`` on a vLLM server); ``draft_logprobs``,
the draft's own token logprobs, which the graph asks for with every draft step."""


@dataclass(frozen=True)
class JudgeSpec:
    """How a judge describes itself: one per judge file, collected by :mod:`.registry`."""

    name: str
    """What ``SpecReasonConfig.judge`` calls it (``a+b`` cascades two)."""
    description: str
    """One line: what the judge reads (the CLI help, Studio's form and the docs show it)."""
    build: Callable[[Mapping[str, Any], Endpoint, Endpoint, PromptFormat], Judge]
    """``build(settings, draft, base, fmt)``: the judge with its settings, read from the
    config's fields (``config.as_dict()``). Judges import nothing from :mod:`~..config`, which
    reads this table to validate names."""
    threshold_field: str | None = None
    """The :class:`~..config.SpecReasonConfig` field holding its threshold (``None``: it has
    none, e.g. ``arithmetic``)."""
    threshold_range: tuple[float, float] | None = None
    """The threshold's scale, lowest and highest meaningful value."""
    needs: tuple[Need, ...] = ()
    """What it needs from the servers (empty: no call at all)."""

    def describe(self) -> str:
        """``description``, with the threshold field and scale when it has one."""
        if self.threshold_field is None:
            return self.description
        low, high = self.threshold_range or (float("-inf"), float("inf"))
        return f"{self.description}; threshold `{self.threshold_field}` ({low:g} to {high:g})"
