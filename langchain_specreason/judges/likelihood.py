"""``likelihood`` and ``confidence``: how probable a model finds the draft step, token by token.

``likelihood`` asks the **base** model: the step is scored by the base server's
log-probabilities of its tokens after the prefix (vLLM ``prompt_logprobs``: one forward pass,
no decoding). A wrong number or operator is a token the base model would not have written, so
it stands out even when the base model, asked for a 0-9 rating, calls everything 9.

``confidence`` asks the **draft** model: the log-probabilities it gave its own tokens while
writing the step (returned with the draft step; no extra call at all).

Both aggregate the token log-probabilities of the step into one score (``mean``: the average,
``min``: the least likely token; ``math``: the least likely digit or operator token, or
``min`` for a step without one) and keep the step when the score is at least the threshold
(a log-probability, so at most 0).

Prefill: the prompt is the conversation, the trace and the draft step, as token ids. The
conversation and the trace were prefilled by the previous judge call, so with the
project's vLLM plugin (:mod:`~..serving.vllm_plugin`) the server reads them from its prefix
cache and prefills only the step and the tail of the last cache block. Without the plugin the
same request still works; vLLM then prefills the whole prompt.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Literal

from ..endpoint import TokenScorer
from ..formats import PromptFormat, continue_messages
from .base import JudgeSpec, Score, ThresholdJudge

Aggregate = Literal["mean", "min", "math"]
"""How token log-probabilities become one score (see :func:`aggregate`)."""

MATH_CHARS = frozenset("0123456789+-*/=×÷·%$")
"""A token holding one of these is a *math token* (the ``math`` aggregate reads only those)."""


def aggregate(
    logprobs: Sequence[float], how: Aggregate, tokens: Sequence[str | None] | None = None
) -> float:
    """One score from token log-probabilities (an empty step scores 0: nothing unlikely).

    ``math`` needs the tokens' text: the least likely token holding a digit or an operator;
    a step without any is read as ``min`` (its least likely word), never accepted for having
    no digit.
    """
    if how == "math":
        if tokens is None:
            raise ValueError("the math aggregate needs the tokens' text")
        maths = [
            lp
            for lp, tok in zip(logprobs, tokens, strict=True)
            if tok and MATH_CHARS.intersection(tok)
        ]
        logprobs = maths or list(logprobs)
        how = "min"
    if not logprobs:
        return 0.0
    if how == "min":
        return min(logprobs)
    return math.fsum(logprobs) / len(logprobs)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token-id lists."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class LikelihoodScorer:
    """Rates a step by a served model's log-probabilities of its tokens after the prefix."""

    def __init__(
        self,
        endpoint: TokenScorer,
        fmt: PromptFormat,
        *,
        logprob_aggregate: Aggregate = "mean",
        read_cache: bool = True,
    ) -> None:
        self.endpoint = endpoint
        self.fmt = fmt
        self.logprob_aggregate = logprob_aggregate
        self.read_cache = read_cache
        self._prefixes: OrderedDict[str, list[int]] = OrderedDict()
        self._seen: OrderedDict[tuple[int, ...], tuple[list[float | None], list[str | None]]] = (
            OrderedDict()
        )

    async def _ids(self, conversation: list[dict[str, Any]], steps: Sequence[str]) -> list[int]:
        messages, cont = continue_messages(conversation, self.fmt, steps)
        return await self.endpoint.tokenize(messages, continue_final=cont)

    async def _prefix_ids(
        self, conversation: list[dict[str, Any]], steps: Sequence[str]
    ) -> list[int]:
        key = repr((conversation, list(steps)))
        ids = self._prefixes.get(key)
        if ids is None:
            ids = await self._ids(conversation, steps)
            self._prefixes[key] = ids
            while len(self._prefixes) > 16:
                self._prefixes.popitem(last=False)
        return ids

    def _remember(
        self, ids: list[int], logprobs: list[float | None], tokens: list[str | None]
    ) -> None:
        self._seen[tuple(ids)] = (logprobs, tokens)
        while len(self._seen) > 32:
            self._seen.popitem(last=False)

    def _recall(self, ids: list[int], position: int) -> tuple[float | None, str | None]:
        """``ids[position]``'s logprob and text from an earlier call that computed it."""
        for seen, (logprobs, tokens) in reversed(self._seen.items()):
            if (
                len(seen) > position
                and logprobs[position] is not None
                and common_prefix(seen, ids) > position
            ):
                return logprobs[position], tokens[position]
        return None, None

    async def score(
        self, conversation: list[dict[str, Any]], steps: Sequence[str], step: str
    ) -> Score:
        """The aggregated log-probability of ``step``'s tokens after ``steps``."""
        prefix = await self._prefix_ids(conversation, steps)
        full = await self._ids(conversation, [*steps, step])
        start = max(common_prefix(prefix, full), 1)
        done = await self.endpoint.prompt_logprobs(full, read_cache=self.read_cache)
        logprobs = list(done.logprobs)
        tokens = list(done.tokens) or [None] * len(logprobs)
        # positions of the step read from the cache: an earlier call computed them
        for position in range(start, len(logprobs)):
            if logprobs[position] is None:
                logprobs[position], tokens[position] = self._recall(full, position)
        seconds, recomputed, skipped_first = done.seconds, False, False
        if (
            self.logprob_aggregate == "math"
            and logprobs[start] is None
            and all(lp is not None for lp in logprobs[start + 1 :])
        ):
            # The cache ended exactly where the step begins: vLLM computed no logprob for the
            # step's first token (it needs the hidden state of the cached position before).
            # Its text is the step minus the other tokens' text; a word can be skipped here.
            rest = "".join(t or "" for t in tokens[start + 1 :])
            first = step[: len(step) - len(rest)] if step.endswith(rest) else None
            if first is not None and not MATH_CHARS.intersection(first):
                tokens[start], skipped_first = first, True
        missing = any(lp is None for lp in logprobs[start + 1 :]) or (
            logprobs[start] is None and not skipped_first
        )
        if missing:
            # cached by a call this scorer did not see: score the prompt without the cache
            done = await self.endpoint.prompt_logprobs(full, read_cache=False)
            seconds += done.seconds
            logprobs, recomputed = list(done.logprobs), True
            tokens = list(done.tokens) or [None] * len(logprobs)
        self._remember(full, logprobs, tokens)
        self._prefixes[repr((conversation, [*steps, step]))] = full
        pairs = [
            (lp, tok)
            for lp, tok in zip(logprobs[start:], tokens[start:], strict=True)
            if lp is not None
        ]
        values = [lp for lp, _ in pairs]
        texts = [tok for _, tok in pairs]
        detail: dict[str, Any] = {
            "aggregate": self.logprob_aggregate,
            "step_tokens": len(full) - start,
            "mean_logprob": round(aggregate(values, "mean"), 4),
            "min_logprob": round(aggregate(values, "min"), 4),
            "math_logprob": round(aggregate(values, "math", texts), 4),
            "token_logprobs": [round(v, 3) for v in values],
            "tokens": texts,
        }
        if recomputed:
            detail["recomputed"] = True
        if skipped_first:
            detail["first_token_unscored"] = True
        return Score(
            value=aggregate(values, self.logprob_aggregate, texts),
            seconds=seconds,
            prompt_tokens=done.prompt_tokens,
            cached_tokens=done.cached_tokens,
            detail=detail,
        )


class LikelihoodJudge(ThresholdJudge):
    """``likelihood``: keep the step when the base model finds it likely enough."""

    def __init__(
        self,
        endpoint: TokenScorer,
        fmt: PromptFormat,
        *,
        threshold: float,
        logprob_aggregate: Aggregate = "mean",
    ) -> None:
        self.scorer = LikelihoodScorer(endpoint, fmt, logprob_aggregate=logprob_aggregate)
        self.threshold = threshold


SPEC = JudgeSpec(
    name="likelihood",
    description="the base model's log-probability of the step's tokens (one forward pass)",
    build=lambda settings, draft, base, fmt: LikelihoodJudge(
        base,  # type: ignore[arg-type]  # the registry checks the base_prompt_logprobs need
        fmt,
        threshold=settings["likelihood_threshold"],
        logprob_aggregate=settings["logprob_aggregate"],
    ),
    threshold_field="likelihood_threshold",
    threshold_range=(float("-inf"), 0.0),
    needs=("base_prompt_logprobs",),
)
