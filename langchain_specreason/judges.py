"""Judges decide whether a draft step is kept. One protocol, several implementations.

* :class:`BaseModelJudge` is SpecReason's: the base model reads the prefix and the draft step,
  is asked (in a short follow-up turn) to rate the last step 0-9, and its reply is pre-filled
  so that the next token is the digit: one output token, scored from its logprobs
  (:class:`BaseModelScorer`), then compared with the threshold.
* :class:`~langchain_specreason.arbitrage.router.RouterJudge` (Arbitrage) asks a small trained
  classifier whether the base model would write a better step; no base call on kept steps.
* :class:`~langchain_specreason.arbitrage.oracle.OracleJudge` writes the base step too and
  keeps the better one (labelling and analysis).

A judge sees a :class:`StepContext` and returns a :class:`Verdict`. A verdict may carry the
replacement step (``rewrite``) when the judge already wrote it; the graph then keeps that
text instead of asking the base model again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .config import ScoreMethod
from .endpoint import ChatRequest, Endpoint
from .formats import PromptFormat
from .scoring import average_score, greedy_score
from .state import Author

JUDGE_QUESTION = (
    "Rate only the last paragraph of your reply above: is it factually correct and "
    "logically sound? Answer with one digit, 0 (wrong) to 9 (certainly right)."
)
"""The follow-up turn. Short on purpose: it is prefilled on every judge call."""

JUDGE_PREFILL = "Score: "
"""The pre-filled start of the judge's reply; the next token is the digit."""


@dataclass(frozen=True)
class StepContext:
    """Everything a judge may look at for one draft step."""

    conversation: list[dict[str, Any]]
    """The conversation in OpenAI chat format (roles merged)."""
    steps: Sequence[str]
    """The kept steps so far, in order."""
    authors: Sequence[Author]
    """Who wrote each kept step."""
    step: str
    """The draft step under judgement."""
    request: ChatRequest
    """The request that wrote the draft step; sent to the base model it writes the same
    position (what the oracle does)."""

    @property
    def question(self) -> str:
        """Text of the last user turn."""
        for message in reversed(self.conversation):
            if message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                return " ".join(str(part.get("text", "")) for part in content or []
                                if isinstance(part, dict))
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
    """Decides whether a draft step is kept."""

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


def judge_messages(
    conversation: list[dict[str, Any]], fmt: PromptFormat, steps: Sequence[str], step: str
) -> list[dict[str, Any]]:
    """The judge prompt: the reply so far (thinking left open), the question, the prefill."""
    return [
        *conversation,
        {"role": "assistant", "content": fmt.render([*steps, step])},
        {"role": "user", "content": JUDGE_QUESTION},
        {"role": "assistant", "content": JUDGE_PREFILL},
    ]


class BaseModelScorer:
    """The base model rates a step 0-9 in one forward pass (one token, top logprobs)."""

    def __init__(self, endpoint: Endpoint, fmt: PromptFormat, *,
                 method: ScoreMethod = "greedy", top_logprobs: int = 10) -> None:
        self.endpoint = endpoint
        self.fmt = fmt
        self.method = method
        self.top_logprobs = top_logprobs

    async def score(
        self, conversation: list[dict[str, Any]], steps: Sequence[str], step: str
    ) -> Score:
        """Ask the base model for one token and read the score from it."""
        done = await self.endpoint.complete(ChatRequest(
            messages=judge_messages(conversation, self.fmt, steps, step),
            max_tokens=1, continue_final=True, temperature=0.0,
            top_logprobs=self.top_logprobs,
        ))
        if self.method == "average":
            value = average_score(done.top_logprobs)
        else:
            value = greedy_score(done.text)
        return Score(
            value=value, seconds=done.seconds, prompt_tokens=done.prompt_tokens,
            cached_tokens=done.cached_tokens,
            detail={"token": done.text,
                    "top_logprobs": [[t, round(lp, 4)] for t, lp in done.top_logprobs[:10]]},
        )


class BaseModelJudge:
    """SpecReason's judge: the base model scores the step; kept when score >= threshold."""

    def __init__(
        self,
        endpoint: Endpoint,
        fmt: PromptFormat,
        *,
        threshold: float = 7.0,
        method: ScoreMethod = "greedy",
        top_logprobs: int = 10,
    ) -> None:
        self.scorer = BaseModelScorer(endpoint, fmt, method=method, top_logprobs=top_logprobs)
        self.threshold = threshold

    async def judge(self, ctx: StepContext) -> Verdict:
        """Score the draft step with the base model and compare with the threshold."""
        s = await self.scorer.score(ctx.conversation, ctx.steps, ctx.step)
        return Verdict(
            score=s.value, accept=s.value >= self.threshold, seconds=s.seconds,
            prompt_tokens=s.prompt_tokens, cached_tokens=s.cached_tokens, detail=s.detail,
        )
