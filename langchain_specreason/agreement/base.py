"""The agreement contract: a rule compares the draft's step with the base's at one position.

In the ``agree`` mode (``SpecReasonConfig.verify = "agree"``) the base model writes its own step
at every position the draft wrote ahead; a rule says whether the two agree. An agreeing draft
step is kept as written; at the first disagreement the base's step is kept instead (it is
already written) and the draft's later steps are dropped.

A rule is declared once, in its own file, by a :class:`RuleSpec`: its name, a one-line
description and a builder. :mod:`.registry` collects the specs; config validation, the CLI help
and the lab's rule report read that one table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Agreement:
    """A rule's decision on one position."""

    agree: bool
    detail: dict[str, Any] = field(default_factory=dict)
    """Rule-specific, JSON-serialisable (kept in the step record's ``verdict``)."""


class AgreementRule(Protocol):
    """Decides whether the draft's step and the base's step at one position agree."""

    def agree(self, draft: str, base: str) -> Agreement:
        """Compare the two steps' texts (pure: no I/O)."""
        ...


@dataclass(frozen=True)
class RuleSpec:
    """How a rule describes itself: one per rule file, collected by :mod:`.registry`."""

    name: str
    description: str
    """One line: what the rule compares (the CLI help and the docs show it)."""
    build: Callable[[Mapping[str, Any]], AgreementRule]
    """The rule with its settings, read from the config's fields (``config.as_dict()``): rules
    import nothing from :mod:`~..config`, which reads this table to validate names."""
