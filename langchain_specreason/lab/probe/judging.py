"""The judge on drafted steps: what it costs per step, and how many it keeps.

The draft writes a few steps of each prompt greedily, one request a step as the graph asks
for them (the trace so far continued, the step's stop strings), on its own trace: every
drafted step is kept for the next one, whatever the judge says, so the sample needs no base
rewrite. The judge (:func:`~langchain_specreason.judges.make_judge`, the default one of
:class:`~langchain_specreason.config.SpecReasonConfig` or ``--judge``) then reads each step
in context, one at a time, as the graph's judge node does. The same drafted steps can be
judged again against another base server (the ``sd`` one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...config import SpecReasonConfig
from ...endpoint import ChatRequest, Endpoint
from ...formats import PromptFormat, continue_messages, step_stops
from ...graph.steps import step_finish
from ...judges import Judge, StepContext
from .speeds import Summarised


@dataclass(frozen=True)
class Drafted:
    """One drafted step in its context."""

    context: StepContext
    tokens: int
    """Tokens of the step (the draft's completion)."""


@dataclass(frozen=True)
class Judged:
    """The judge's reading of one drafted step."""

    tokens: int
    """Tokens of the step."""
    accept: bool
    seconds: float
    prompt_tokens: int
    cached_tokens: int | None


async def draft_steps(
    draft: Endpoint,
    conversation: list[dict[str, Any]],
    fmt: PromptFormat,
    config: SpecReasonConfig,
    *,
    steps: int,
    step_max_tokens: int,
) -> list[Drafted]:
    """Up to ``steps`` greedy steps of the draft (fewer when its reasoning ends first)."""
    out: list[Drafted] = []
    texts: list[str] = []
    stops = step_stops(fmt, config.delimiter)
    for _ in range(steps):
        messages, cont = continue_messages(conversation, fmt, texts)
        request = ChatRequest(
            messages,
            step_max_tokens,
            continue_final=cont,
            stop=stops,
            temperature=0.0,
            logprobs=True,
        )
        done = await draft.complete(request)
        text, finish = step_finish(done, config.delimiter, fmt.thinking_end)
        if not text.strip():
            break
        context = StepContext(
            conversation=conversation,
            steps=list(texts),
            authors=["draft"] * len(texts),
            step=text,
            request=request,
            step_logprobs=done.token_logprobs,
            step_tokens=done.token_texts,
            delimiter=config.delimiter,
            thinking_end=fmt.thinking_end,
        )
        out.append(Drafted(context, done.completion_tokens))
        texts.append(text)
        if finish != "delimiter":
            break
    return out


async def judge_steps(judge: Judge, drafted: Sequence[Drafted]) -> list[Judged]:
    """The judge's verdict on each drafted step, one after the other."""
    out = []
    for step in drafted:
        verdict = await judge.judge(step.context)
        out.append(
            Judged(
                step.tokens,
                verdict.accept,
                verdict.seconds,
                verdict.prompt_tokens,
                verdict.cached_tokens,
            )
        )
    return out


@dataclass(frozen=True)
class JudgeSample(Summarised):
    """What the judge cost and kept on the probe's drafted steps; ``as_dict`` for the summary."""

    SUMMARY = (
        "judge",
        "steps",
        "accepted",
        "acceptance",
        "mean_s",
        "mean_step_tokens",
        "mean_prompt_tokens",
    )

    judge: str
    steps: int
    accepted: int
    mean_s: float
    """Mean seconds of a judge call."""
    mean_step_tokens: float
    """Mean tokens of a judged step."""
    mean_prompt_tokens: float

    @classmethod
    def of(cls, judge: str, judged: Sequence[Judged]) -> JudgeSample:
        """The sample's means (zeros for an empty sample)."""
        n = len(judged)
        return cls(
            judge,
            n,
            sum(j.accept for j in judged),
            sum(j.seconds for j in judged) / n if n else 0.0,
            sum(j.tokens for j in judged) / n if n else 0.0,
            sum(j.prompt_tokens for j in judged) / n if n else 0.0,
        )

    @property
    def acceptance(self) -> float | None:
        """Share of steps kept (``None``: no step judged)."""
        return self.accepted / self.steps if self.steps else None
