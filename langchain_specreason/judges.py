"""Judges decide whether a draft step is kept. One protocol, several implementations.

:class:`BaseModelJudge` is SpecReason's: the base model reads the prefix and the draft step,
is asked (in a short follow-up turn) to rate the last step 0-9, and its reply is pre-filled so
that the next token is the digit: one output token, scored from its logprobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .config import ScoreMethod
from .endpoint import ChatRequest, Endpoint
from .formats import PromptFormat
from .scoring import average_score, greedy_score

JUDGE_QUESTION = (
    "Rate only the last paragraph of your reply above: is it factually correct and "
    "logically sound? Answer with one digit, 0 (wrong) to 9 (certainly right)."
)
"""The follow-up turn. Short on purpose: it is prefilled on every judge call."""

JUDGE_PREFILL = "Score: "
"""The pre-filled start of the judge's reply; the next token is the digit."""


@dataclass(frozen=True)
class Verdict:
    """A judge's decision on one draft step."""

    score: float
    accept: bool
    seconds: float = 0.0
    prompt_tokens: int = 0
    cached_tokens: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class Judge(Protocol):
    """Decides whether a draft step is kept."""

    async def judge(
        self, conversation: list[dict[str, Any]], steps: Sequence[str], step: str
    ) -> Verdict:
        """Score ``step`` written after ``steps`` in reply to ``conversation``."""
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


class BaseModelJudge:
    """SpecReason's judge: the base model scores the step in one forward pass."""

    def __init__(
        self,
        endpoint: Endpoint,
        fmt: PromptFormat,
        *,
        threshold: float = 7.0,
        method: ScoreMethod = "greedy",
        top_logprobs: int = 10,
    ) -> None:
        self.endpoint = endpoint
        self.fmt = fmt
        self.threshold = threshold
        self.method = method
        self.top_logprobs = top_logprobs

    async def judge(
        self, conversation: list[dict[str, Any]], steps: Sequence[str], step: str
    ) -> Verdict:
        """Ask the base model for one token and turn it into a score and a decision."""
        done = await self.endpoint.complete(ChatRequest(
            messages=judge_messages(conversation, self.fmt, steps, step),
            max_tokens=1, continue_final=True, temperature=0.0,
            top_logprobs=self.top_logprobs,
        ))
        if self.method == "average":
            score = average_score(done.top_logprobs)
        else:
            score = greedy_score(done.text)
        return Verdict(
            score=score, accept=score >= self.threshold, seconds=done.seconds,
            prompt_tokens=done.prompt_tokens, cached_tokens=done.cached_tokens,
            detail={"token": done.text, "top_logprobs": done.top_logprobs[:10]},
        )
