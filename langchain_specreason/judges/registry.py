"""The judges by name: every judge file's :class:`~.base.JudgeSpec`, in one table.

A new judge is one file with a ``SPEC`` and one line in :data:`_MODULES`; config validation
(``SpecReasonConfig.judge``), :func:`make_judge`, the CLI help, Studio's form and the lab read
the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import import_module
from typing import Any, Protocol

from ..endpoint import Endpoint, TokenScorer
from ..errors import ConfigError
from ..formats import PromptFormat
from .base import Judge, JudgeSpec
from .cascade import CascadeJudge

_MODULES = (
    f"{__package__}.score",
    f"{__package__}.likelihood",
    f"{__package__}.confidence",
    f"{__package__}.arithmetic",
    f"{__package__}.learned",
)
"""The modules declaring a judge (a ``SPEC``), in the order the docs list them."""


@cache
def judge_specs() -> dict[str, JudgeSpec]:
    """Every judge's spec, by name."""
    specs = [import_module(module).SPEC for module in _MODULES]
    return {spec.name: spec for spec in specs}


def parse_judge(name: str) -> list[str]:
    """The parts of a judge name (``"arithmetic+likelihood"`` -> two); ConfigError if unknown."""
    parts = [part.strip() for part in str(name).split("+")]
    for part in parts:
        if part not in judge_specs():
            raise ConfigError(
                f"unknown judge {part!r} in {name!r}; judges: "
                f"{', '.join(judge_specs())} (join with + to cascade)"
            )
    if len(set(parts)) != len(parts):
        raise ConfigError(f"judge {name!r} names a part twice")
    return parts


def threshold_field(judge: str) -> str | None:
    """The config field holding the threshold of the part of ``judge`` that decides (its last)."""
    return judge_specs()[parse_judge(judge)[-1]].threshold_field


def judges_help() -> str:
    """One line per judge, for help texts: ``name: what it reads; threshold ...``."""
    return "; ".join(f"{spec.name}: {spec.describe()}" for spec in judge_specs().values())


class HasSettings(Protocol):
    """What :func:`make_judge` reads of a config (a :class:`~..config.SpecReasonConfig`)."""

    judge: str

    def as_dict(self) -> dict[str, Any]:
        """The settings by field name."""
        ...


def build_judge(
    name: str, settings: Mapping[str, Any], draft: Endpoint, base: Endpoint, fmt: PromptFormat
) -> Judge:
    """The one judge ``name`` (no cascade), with its settings; ConfigError when a need is unmet."""
    spec = judge_specs()[parse_judge(name)[-1]]
    if "base_prompt_logprobs" in spec.needs and not isinstance(base, TokenScorer):
        raise ConfigError(
            f"the {spec.name} judge needs a base endpoint that tokenizes and returns prompt "
            "logprobs (an OpenAIEndpoint on a vLLM server)"
        )
    return spec.build(settings, draft, base, fmt)


def make_judge(config: HasSettings, draft: Endpoint, base: Endpoint, fmt: PromptFormat) -> Judge:
    """The judge ``config.judge`` names, with its settings (a cascade for ``a+b``)."""
    settings = config.as_dict()
    parts = [build_judge(name, settings, draft, base, fmt) for name in parse_judge(config.judge)]
    return parts[0] if len(parts) == 1 else CascadeJudge(parts[:-1], parts[-1])
