"""``text``: the two steps are the same text, up to case, spacing and punctuation.

The strictest rule: what it keeps, the base model would have written itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import Agreement, RuleSpec

_NOT_WORD = re.compile(r"[^a-z0-9.]+")


def normal_text(step: str) -> str:
    """Lower-cased words and numbers, single-spaced."""
    return _NOT_WORD.sub(" ", step.lower()).strip(" .")


@dataclass(frozen=True)
class TextRule:
    """Agree when the normalised texts are equal."""

    def agree(self, draft: str, base: str) -> Agreement:
        """Compare the normalised texts."""
        return Agreement(normal_text(draft) == normal_text(base))


SPEC = RuleSpec(
    name="text",
    description="the two steps are the same text up to case, spacing and punctuation",
    build=lambda settings: TextRule(),
)
