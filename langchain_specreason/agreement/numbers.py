"""``numbers``: the two steps write the same set of quantities.

Stricter than ``result`` on which numbers appear, looser on order and on which one is the
result. Steps without a quantity agree by :mod:`.numberless`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Agreement, RuleSpec
from .numberless import words_agree
from .quantities import quantities


@dataclass(frozen=True)
class NumbersRule:
    """Agree when both steps write the same set of quantities."""

    overlap: float = 0.5

    def agree(self, draft: str, base: str) -> Agreement:
        """Compare the sets of quantities of the two steps."""
        qd, qb = set(quantities(draft)), set(quantities(base))
        if not qd and not qb:
            same, measured = words_agree(draft, base, self.overlap)
            return Agreement(same, {"overlap": measured})
        return Agreement(qd == qb, {"draft": sorted(qd), "base": sorted(qb)})


SPEC = RuleSpec(
    name="numbers",
    description="both steps write the same set of quantities; steps without numbers agree "
    "when their words overlap by agree_overlap",
    build=lambda settings: NumbersRule(settings["agree_overlap"]),
)
