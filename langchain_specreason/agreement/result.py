"""``result``: the two steps reach the same result (the last quantity each writes).

The default rule. Intermediate numbers may differ in form or order (``380 - 300 = 80`` and
``300 kg fewer than 380 kg: 80 kg``); the number a step ends on is what the next step builds
on. Steps without a quantity agree by :mod:`.numberless`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Agreement, RuleSpec
from .numberless import words_agree
from .quantities import quantities


@dataclass(frozen=True)
class ResultRule:
    """Agree when both steps end on the same quantity."""

    overlap: float = 0.5

    def agree(self, draft: str, base: str) -> Agreement:
        """Compare the last quantity of each step."""
        qd, qb = quantities(draft), quantities(base)
        if not qd and not qb:
            same, measured = words_agree(draft, base, self.overlap)
            return Agreement(same, {"overlap": measured})
        agree = bool(qd) and bool(qb) and qd[-1] == qb[-1]
        return Agreement(agree, {"draft": qd[-1:], "base": qb[-1:]})


SPEC = RuleSpec(
    name="result",
    description="the last quantity each step writes is the same (its result); steps without "
    "numbers agree when their words overlap by agree_overlap",
    build=lambda settings: ResultRule(settings["agree_overlap"]),
)
