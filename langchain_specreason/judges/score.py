"""``score``: SpecReason's judge. The base model rates the draft step 0-9 in one forward pass.

The base model reads the prefix and the draft step, is asked in a follow-up turn to rate the
last step, and its reply is pre-filled so that the next token is the digit: one output token,
read from its logprobs (``greedy``: the sampled digit; ``average``: the probability-weighted
mean of the digits among the top logprobs), then compared with the threshold.

Two wordings of the follow-up turn: ``short`` (ours: a short turn, prefilled on every call) and
``reference`` (the SpecReason reference implementation's question and prefill, word for word,
so that faithful SpecReason stays reproducible).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from ..endpoint import ChatRequest, Endpoint
from ..formats import PromptFormat
from .base import JudgeSpec, Score, ThresholdJudge

ScoreMethod = Literal["greedy", "average"]
"""How a score is read: the sampled digit, or the probability-weighted mean of the digits."""
Wording = Literal["short", "reference"]
"""The judge's question: ours, or the SpecReason reference implementation's."""

JUDGE_QUESTION = (
    "Rate only the last paragraph of your reply above: is it factually correct and "
    "logically sound? Answer with one digit, 0 (wrong) to 9 (certainly right)."
)
"""The ``short`` follow-up turn. Short on purpose: it is prefilled on every judge call."""

JUDGE_PREFILL = "Score: "
"""The pre-filled start of the ``short`` judge's reply; the next token is the digit."""

WORDINGS: dict[str, tuple[str, str]] = {
    "short": (JUDGE_QUESTION, JUDGE_PREFILL),
    "reference": (
        "Evaluate the last reasoning step solely based on factual correctness and logical "
        "validity. Ignore style, phrasing, or overall usefulness\u2014only judge whether the "
        "step is objectively correct and logically follows from prior steps. Assign a score "
        "from 0 to 9.",
        "<think>I think the quality score is: ",
    ),
}
"""Follow-up question and reply prefill of each wording."""


def digit_of(token: str) -> int | None:
    """The digit a token stands for (surrounding whitespace ignored), else ``None``."""
    text = token.strip()
    return int(text) if len(text) == 1 and text.isdigit() and text.isascii() else None


def greedy_score(text: str) -> float:
    """The sampled token's digit; anything that is not a digit scores 0."""
    digit = digit_of(text)
    return float(digit) if digit is not None else 0.0


def average_score(top_logprobs: Sequence[tuple[str, float]]) -> float:
    """Probability-weighted mean of the digits among the top logprobs, renormalised.

    Tokens that are not digits are ignored; the same digit reached through different tokens
    (``"9"`` and ``" 9"``) adds up. No digit at all scores 0.
    """
    mass = 0.0
    weighted = 0.0
    for token, logprob in top_logprobs:
        digit = digit_of(token)
        if digit is None:
            continue
        p = math.exp(logprob)
        mass += p
        weighted += p * digit
    return weighted / mass if mass > 0 else 0.0


def quote_step(text: str) -> str:
    """The step as the judge reads it, unable to close the assistant turn.

    Text that spells a chat-template control token (``<|im_end|>``, DeepSeek's
    ``<｜end▁of▁sentence｜>``, Gemma's ``<end_of_turn>``, ``[INST]``, ...) is broken with a
    zero-width joiner, so a step (or a passage it copies) cannot end the turn
    and write the judge's verdict itself.
    """
    for marker in _CONTROL_MARKERS:
        text = text.replace(marker, marker[0] + "\u200d" + marker[1:])
    return text


_CONTROL_MARKERS = (
    "<|",
    "<｜",
    "<start_of_turn>",
    "<end_of_turn>",
    "[INST]",
    "[/INST]",
    "<s>",
    "</s>",
    "<think>",
    "</think>",
)
"""Starts of the control tokens of common chat templates (ChatML, DeepSeek's fullwidth bars,
Gemma, Llama 2 / Mistral, reasoning tags): each is broken with a zero-width joiner."""


def judge_messages(
    conversation: list[dict[str, Any]],
    fmt: PromptFormat,
    steps: Sequence[str],
    step: str,
    wording: Wording = "short",
) -> list[dict[str, Any]]:
    """The judge prompt: the reply so far (thinking left open), the question, the prefill."""
    question, prefill = WORDINGS[wording]
    return [
        *conversation,
        {"role": "assistant", "content": fmt.render([*steps, quote_step(step)])},
        {"role": "user", "content": question},
        {"role": "assistant", "content": prefill},
    ]


class BaseModelScorer:
    """The base model rates a step 0-9 in one forward pass (one token, top logprobs)."""

    def __init__(
        self,
        endpoint: Endpoint,
        fmt: PromptFormat,
        *,
        score_method: ScoreMethod = "greedy",
        top_logprobs: int = 10,
        wording: Wording = "short",
    ) -> None:
        self.endpoint = endpoint
        self.fmt = fmt
        self.score_method = score_method
        self.top_logprobs = top_logprobs
        self.wording = wording

    async def score(
        self, conversation: list[dict[str, Any]], steps: Sequence[str], step: str
    ) -> Score:
        """Ask the base model for one token and read the score from it."""
        done = await self.endpoint.complete(
            ChatRequest(
                messages=judge_messages(conversation, self.fmt, steps, step, self.wording),
                max_tokens=1,
                continue_final=True,
                temperature=0.0,
                top_logprobs=self.top_logprobs,
            )
        )
        if self.score_method == "average":
            value = average_score(done.top_logprobs)
        else:
            value = greedy_score(done.text)
        return Score(
            value=value,
            seconds=done.seconds,
            prompt_tokens=done.prompt_tokens,
            cached_tokens=done.cached_tokens,
            detail={
                "token": done.text,
                "top_logprobs": [[t, round(lp, 4)] for t, lp in done.top_logprobs[:10]],
            },
        )


class BaseModelJudge(ThresholdJudge):
    """SpecReason's judge: the base model scores the step; accepted when score >= threshold."""

    def __init__(
        self,
        endpoint: Endpoint,
        fmt: PromptFormat,
        *,
        threshold: float = 7.0,
        score_method: ScoreMethod = "greedy",
        top_logprobs: int = 10,
        wording: Wording = "short",
    ) -> None:
        self.scorer = BaseModelScorer(
            endpoint, fmt, score_method=score_method, top_logprobs=top_logprobs, wording=wording
        )
        self.threshold = threshold


SPEC = JudgeSpec(
    name="score",
    description="the base model rates the step 0-9 in one token (SpecReason's judge)",
    build=lambda settings, draft, base, fmt: BaseModelJudge(
        base,
        fmt,
        threshold=settings["threshold"],
        score_method=settings["score_method"],
        top_logprobs=settings["judge_top_logprobs"],
        wording=settings["judge_wording"],
    ),
    threshold_field="threshold",
    threshold_range=(0.0, 10.0),
    needs=("base_chat",),
)
