"""Turn the judge's one output token into a 0-9 score (pure functions, no I/O)."""

from __future__ import annotations

import math
from collections.abc import Sequence


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
