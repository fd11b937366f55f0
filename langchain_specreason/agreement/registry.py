"""The agreement rules by name: every rule file's :class:`~.base.RuleSpec`, in one table.

A new rule is one file with a ``SPEC`` and one line in :data:`_MODULES`; config validation
(``SpecReasonConfig.agree_rule``), the CLI help and the lab's rule report read the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import import_module
from typing import Any

from ..errors import ConfigError
from .base import AgreementRule, RuleSpec

_MODULES = ("result", "numbers", "text")
"""The rule files of this package, in the order the docs list them."""


@cache
def rule_specs() -> dict[str, RuleSpec]:
    """Every rule's spec, by name."""
    specs = [import_module(f"{__package__}.{module}").SPEC for module in _MODULES]
    return {spec.name: spec for spec in specs}


def check_rule(name: str) -> str:
    """``name`` if it names a rule; ConfigError listing the rules if not."""
    if name not in rule_specs():
        raise ConfigError(f"unknown agreement rule {name!r}; rules: {', '.join(rule_specs())}")
    return name


def make_rule(name: str, settings: Mapping[str, Any]) -> AgreementRule:
    """The rule ``name`` with its settings (a config's fields, ``config.as_dict()``)."""
    return rule_specs()[check_rule(name)].build(settings)
