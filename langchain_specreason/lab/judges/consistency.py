"""Draft self-consistency: whether the draft writes the same step again when it samples.

The ``consistency`` measure of ``bench judges`` asks the draft model for a few samples of the
judged step's position and compares each with the step it wrote (higher keeps the step):

* ``numbers``: mean Jaccard similarity of the numbers written (as multisets); a step that
  writes no number reads as ``words``;
* ``words``: mean Jaccard similarity of the lower-cased word sets.

A step the draft would write differently most of the time is one it was unsure of, whatever
its token probabilities say. These are pure functions; the measure's call is in
:mod:`.command`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

SAMPLES = 4
"""Samples of the step's position per judged step (one request)."""

TEMPERATURE = 0.7
TOP_P = 0.95
MAX_TOKENS = 128
"""A sample longer than this is cut (the median dev step is ~34 tokens; 256 cost ~10 s a call
on the cpu pair)."""

_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
_WORD = re.compile(r"[a-z0-9]+")


def numbers_in(text: str) -> Counter[str]:
    """The numbers ``text`` writes, as a multiset (``1,200`` and ``1200.0`` are ``1200``)."""
    found: Counter[str] = Counter()
    for match in _NUMBER.findall(text):
        value = match.replace(",", "")
        if "." in value:
            value = value.rstrip("0").rstrip(".")
        found[value] += 1
    return found


def jaccard(a: Counter[str], b: Counter[str]) -> float:
    """Multiset Jaccard similarity (1.0 for two empty sets)."""
    union = sum((a | b).values())
    return 1.0 if union == 0 else sum((a & b).values()) / union


def words_in(text: str) -> Counter[str]:
    """The lower-cased words of ``text``, each once."""
    return Counter(set(_WORD.findall(text.lower())))


def consistency_scores(step: str, samples: Sequence[str]) -> dict[str, float]:
    """``{"numbers": ..., "words": ...}`` of ``step`` against the draft's ``samples``."""
    if not samples:
        raise ValueError("no sample to compare the step with")
    words = sum(jaccard(words_in(step), words_in(s)) for s in samples) / len(samples)
    mine = numbers_in(step)
    if not mine:
        return {"numbers": words, "words": words}
    numbers = sum(jaccard(mine, numbers_in(s)) for s in samples) / len(samples)
    return {"numbers": numbers, "words": words}
