"""What the benchmark compares, and which base server each mode needs.

========================  ==================================================  ===============
mode                      who answers                                         base server
========================  ==================================================  ===============
``base``                  the base model alone (same prompt and budget)       plain
``draft``                 the draft model alone                               (not used)
``specreason``            SpecReason (draft writes, base judges and rewrites)  plain
``sd``                    the base model alone, token-level spec. decoding    variant
``specreason+sd``         SpecReason over the speculative-decoding base        variant
``arbitrage``             draft writes, the router escalates to the base      plain + router
``oracle``                both write every step, the better-scored is kept    plain
``agree``                 draft ahead, base writes the positions in parallel,  plain
                          the agreeing prefix kept (``verify="agree"``)
``agree+sd``              ``agree`` over the speculative-decoding base         variant
========================  ==================================================  ===============

A *run* is one mode at one threshold and score method (thresholds and score methods only
apply to the SpecReason modes; ``arbitrage`` runs at each router ``tau`` (a probability),
``oracle`` at its advantage margin, scoring steps with the ``average`` method; the ``agree``
modes at each ``agree_rule`` and ``steps_ahead``), and, for the
``sd`` modes, one base-server variant (``sd``: the draft_model speculator, ``ngram``: prompt
lookup), so both speculators' runs can share one folder. Results are keyed by run and problem.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...agreement import rule_specs
from ...config import SpecReasonConfig, config_default
from ...errors import ConfigError
from ...judges.registry import judge_specs, parse_judge, threshold_field

MODES: tuple[str, ...] = (
    "base",
    "draft",
    "specreason",
    "sd",
    "specreason+sd",
    "arbitrage",
    "oracle",
    "agree",
    "agree+sd",
)
SPECREASON_MODES = frozenset({"specreason", "specreason+sd"})
AGREE_MODES = frozenset({"agree", "agree+sd"})
"""Modes of the graph's ``agree`` verification (no judge; a rule and ``steps_ahead``)."""
GRAPH_MODES = frozenset({"specreason", "specreason+sd", "arbitrage", "oracle", *AGREE_MODES})
"""Modes answered by the SpecReason graph (with one judge or another, or by agreement)."""
ROUTER_MODES = frozenset({"arbitrage"})
"""Modes that need the router server."""
SD_MODES = frozenset({"sd", "specreason+sd", "agree+sd"})
SCORE_METHODS: tuple[str, ...] = ("greedy", "average")
DEFAULT_SD_VARIANT = "sd"
"""The profile variant the ``sd`` modes use unless told otherwise (``--sd-variant``)."""


@dataclass(frozen=True)
class Run:
    """One mode at one setting: the unit of the summary table."""

    mode: str
    threshold: float | None = None
    """The judge's threshold on its own scale; :attr:`setting` names it (results files keep
    the key ``threshold`` so older folders resume)."""
    score_method: str | None = None
    variant: str | None = None
    """The base server's profile variant (``sd`` modes only; ``None``: the plain profile)."""
    judge: str | None = None
    """SpecReason modes: the judge when it is not ``score`` (``threshold`` is then on that
    judge's scale: a log-probability for ``likelihood`` and ``confidence``)."""
    first_n_base_steps: int = 0
    """SpecReason modes: the base model writes the first this many steps itself (the config's
    own name, end to end), e.g. the plan of the solution."""
    agree_rule: str | None = None
    """``agree`` modes: the config's ``agree_rule``."""
    steps_ahead: int | None = None
    """``agree`` modes: the config's ``steps_ahead``."""

    @property
    def setting(self) -> str | None:
        """Which setting :attr:`threshold` is.

        A ``SpecReasonConfig`` field for SpecReason modes (``threshold``,
        ``likelihood_threshold``, ...), the router's ``tau`` (a probability) for
        ``arbitrage``, the oracle's ``margin``.
        """
        if self.threshold is None:
            return None
        if self.mode == "arbitrage":
            return "tau"
        if self.mode == "oracle":
            return "margin"
        return threshold_field(self.judge or "score") or "threshold"

    @property
    def label(self) -> str:
        """Short name for tables and plots (``specreason threshold=7``, ``base``, ``sd[ngram]``).

        Each knob is named by its config field (``likelihood_threshold=-0.55``,
        ``score_method=average``); folders written before issue 43 say ``t=`` instead.
        """
        mode = self.mode
        if self.variant not in (None, DEFAULT_SD_VARIANT):
            mode = f"{mode}[{self.variant}]"
        if self.judge is not None:
            mode = f"{mode} {self.judge}"
        if self.first_n_base_steps:
            mode = f"{mode} first_n_base_steps={self.first_n_base_steps}"
        if self.agree_rule is not None:
            mode = f"{mode} {self.agree_rule} steps_ahead={self.steps_ahead}"
        if self.threshold is None:
            return mode
        method = (
            ""
            if self.mode not in SPECREASON_MODES or self.score_method in (None, "greedy")
            else f" score_method={self.score_method}"
        )
        return f"{mode} {self.setting}={self.threshold:g}{method}"

    def key(
        self, problem_id: str
    ) -> tuple[
        str, float | None, str | None, str | None, str | None, int, str | None, int | None, str
    ]:
        """The resume key of this run on one problem."""
        return (
            self.mode,
            self.threshold,
            self.score_method,
            self.variant,
            self.judge,
            self.first_n_base_steps,
            self.agree_rule,
            self.steps_ahead,
            str(problem_id),
        )

    def sort_key(self) -> tuple[int, str, int, str, int, float, str, str]:
        """Table order: modes in :data:`MODES` order, then threshold, score method, variant."""
        return (
            MODES.index(self.mode) if self.mode in MODES else len(MODES),
            self.judge or "",
            self.first_n_base_steps,
            self.agree_rule or "",
            self.steps_ahead or 0,
            -1.0 if self.threshold is None else self.threshold,
            self.score_method or "",
            self.variant or "",
        )

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Run:
        """The run a result (or runs.jsonl) record belongs to."""
        threshold = record.get("threshold")
        mode = str(record["mode"])
        variant = (record.get("variant") or DEFAULT_SD_VARIANT) if mode in SD_MODES else None
        judge = record.get("judge")
        return cls(
            mode,
            None if threshold is None else float(threshold),
            record.get("score_method") if judge in (None, "score") else None,
            variant,
            None if judge in (None, "score") else str(judge),
            int(record.get("first_n_base_steps") or 0),
            record.get("agree_rule"),
            None if record.get("steps_ahead") is None else int(record["steps_ahead"]),
        )


def _items(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_choices(
    text: str, choices: Iterable[str], *, noun: str, flag: str | None = None
) -> list[str]:
    """Names of a comma list, in the given order, duplicates removed; each one of ``choices``.

    ConfigError (``<flag> is empty``, the flag ``--<noun>s`` unless told / ``unknown <noun>
    'x'``) naming the choices.
    """
    known = list(choices)
    names = list(dict.fromkeys(_items(text)))
    if not names:
        raise ConfigError(f"{flag or f'--{noun}s'} is empty; {noun}s: {', '.join(known)}")
    for name in names:
        if name not in known:
            raise ConfigError(f"unknown {noun} {name!r}; {noun}s: {', '.join(known)}")
    return names


def parse_modes(text: str) -> list[str]:
    """Modes of a comma list, in the given order, duplicates removed; ConfigError if unknown."""
    return parse_choices(text, MODES, noun="mode")


def _parse_numbers(
    text: str,
    *,
    name: str,
    empty: str,
    field: str | None = None,
    high: float = 0.0,
    out_of_range: str = "",
    low: float = 0.0,
) -> list[float]:
    """Numbers of a comma list, duplicates removed; ConfigError for one out of range.

    With ``field``, the range is that :class:`SpecReasonConfig` field's own (validated once,
    where the field is declared); else ``[low, high]``.
    """
    values: list[float] = []
    for part in _items(text):
        try:
            value = float(part)
        except ValueError:
            raise ConfigError(f"{name} {part!r} is not a number") from None
        if field is not None:
            SpecReasonConfig(**{field: value})  # raises ConfigError naming the field
        elif not low <= value <= high:
            raise ConfigError(f"{out_of_range}, got {part}")
        values.append(value)
    if not values:
        raise ConfigError(empty)
    return list(dict.fromkeys(values))


def parse_thresholds(text: str) -> list[float]:
    """Thresholds of a comma list (each 0-10); ConfigError when one is not a number in range."""
    return _parse_numbers(
        text,
        name="threshold",
        field="threshold",
        empty="--threshold is empty; give a number 0-10 or a comma list",
    )


def parse_score_methods(text: str) -> list[str]:
    """Score methods of a comma list (``greedy``, ``average``)."""
    methods = list(dict.fromkeys(_items(text)))
    for method in methods:
        if method not in SCORE_METHODS:
            raise ConfigError(
                f"unknown score method {method!r}; methods: {', '.join(SCORE_METHODS)}"
            )
    if not methods:
        raise ConfigError("--score-method is empty; give greedy or average")
    return methods


def parse_taus(text: str) -> list[float]:
    """Router thresholds of a comma list (probabilities, 0-1)."""
    return _parse_numbers(
        text,
        name="tau",
        high=1,
        out_of_range="router tau is a probability between 0 and 1",
        empty="--tau is empty; give a probability or a comma list",
    )


def parse_judges(text: str) -> list[str]:
    """Judge names of a comma list (each may be a cascade ``a+b``); ConfigError if unknown."""
    names = list(dict.fromkeys(_items(text)))
    if not names:
        raise ConfigError(f"--judge is empty; judges: {', '.join(judge_specs())}")
    for name in names:
        parse_judge(name)
    return names


def parse_agree_rules(text: str) -> list[str]:
    """Agreement rules of a comma list; ConfigError if unknown."""
    return parse_choices(text, rule_specs(), noun="agree_rule")


def parse_steps_ahead(text: str) -> list[int]:
    """``steps_ahead`` values of a comma list; ConfigError naming the field when out of range."""
    values = []
    for part in _items(text):
        if not part.isdigit():
            raise ConfigError(f"steps_ahead {part!r} is not a whole number")
        SpecReasonConfig(steps_ahead=int(part))  # raises ConfigError naming the field
        values.append(int(part))
    if not values:
        raise ConfigError("--steps-ahead is empty; give a number or a comma list")
    return list(dict.fromkeys(values))


def parse_field_thresholds(text: str, field: str = "likelihood_threshold") -> list[float]:
    """Thresholds of a comma list, each checked as the config field ``field`` checks it."""
    flag = "--" + field.replace("_", "-")
    return _parse_numbers(
        text,
        name=flag,
        field=field,
        empty=f"{flag} is empty; give a number or a comma list",
    )


def expand_runs(
    modes: Iterable[str],
    thresholds: Iterable[float],
    score_methods: Iterable[str],
    taus: Iterable[float] = (0.5,),
    oracle_tau: float = 0.0,
    sd_variant: str = DEFAULT_SD_VARIANT,
    judges: Iterable[str] = ("score",),
    field_thresholds: Mapping[str, Iterable[float]] | None = None,
    first_n_base_steps: int = 0,
    agree_rules: Iterable[str] = ("result",),
    steps_ahead: Iterable[int] = (3,),
) -> list[Run]:
    """The runs of a plan, in the given mode order.

    One per baseline mode; for SpecReason modes one per judge and, for the ``score`` judge,
    per threshold and score method, for the others per value of their threshold's field in
    ``field_thresholds`` (``likelihood_threshold`` ...; the config's default when it has none;
    ``arithmetic`` alone has none); one per ``tau`` for ``arbitrage``; one for
    ``oracle``; one per agreement rule and ``steps_ahead`` for the ``agree`` modes. The ``sd``
    modes run on ``sd_variant``.
    """
    agree_rules, steps_ahead = list(agree_rules), list(steps_ahead)
    thresholds, score_methods, taus = list(thresholds), list(score_methods), list(taus)
    by_field = {k: list(v) for k, v in (field_thresholds or {}).items()}
    runs: list[Run] = []
    for mode in modes:
        variant = sd_variant if mode in SD_MODES else None
        if mode in SPECREASON_MODES:
            for judge in judges:
                last = parse_judge(judge)[-1]
                if last == "score":
                    named = None if judge == "score" else judge
                    runs += [
                        Run(mode, t, m, variant, named, first_n_base_steps)
                        for t in thresholds
                        for m in score_methods
                    ]
                elif last == "arithmetic":
                    runs.append(Run(mode, None, None, variant, judge, first_n_base_steps))
                else:
                    field = threshold_field(judge) or "likelihood_threshold"
                    runs += [
                        Run(mode, t, None, variant, judge, first_n_base_steps)
                        for t in by_field.get(field) or [config_default(field)]
                    ]
        elif mode == "arbitrage":
            runs += [Run(mode, tau) for tau in taus]
        elif mode == "oracle":
            runs.append(Run(mode, oracle_tau, "average"))
        elif mode in AGREE_MODES:
            runs += [
                Run(mode, variant=variant, agree_rule=rule, steps_ahead=n)
                for rule in agree_rules
                for n in steps_ahead
            ]
        else:
            runs.append(Run(mode, variant=variant))
    return runs


def group_by_variant(runs: Iterable[Run]) -> list[tuple[str | None, list[Run]]]:
    """Runs grouped by the base-server variant they need; the plain server first."""
    groups: dict[str | None, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.variant, []).append(run)
    return sorted(groups.items(), key=lambda item: item[0] is not None)
