"""The rule every quantity rule shares for steps that hold no quantity (plans, restatements).

Two steps without a number agree when they say much the same: the Jaccard overlap of their
words is at least ``overlap`` (``SpecReasonConfig.agree_overlap``). A step with numbers never
agrees with one without.
"""

from __future__ import annotations

from .quantities import content_words


def words_agree(draft: str, base: str, overlap: float) -> tuple[bool, float]:
    """``(agree, overlap measured)`` of two steps without quantities."""
    a, b = content_words(draft), content_words(base)
    measured = len(a & b) / len(a | b) if a | b else 1.0
    return measured >= overlap, round(measured, 4)
