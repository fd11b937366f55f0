"""``specreason tune``'s search: the settings of the grid, their results, the choice rule.

A setting is kept if its dev accuracy is within the allowed loss of the base model's
(:func:`max_wrong` says how many wrong answers that allows); the fastest kept one is chosen
unless ``sd`` is faster (:func:`choose`). A probe's ceilings rule out settings before they run.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...judges.registry import parse_judge, threshold_field
from ..shared.datasets import Problem
from ..shared.modes import DEFAULT_SD_VARIANT, SD_MODES, Run


@dataclass(frozen=True)
class Measured:
    """One mode's or setting's results on a problem set, in problem order."""

    name: str
    correct: tuple[bool, ...]
    latency: tuple[float, ...]
    settings: dict[str, Any] | None = None
    """The SpecReason knobs of a setting (``None``: base or sd)."""
    sd: bool = False

    @property
    def accuracy(self) -> float:
        """Share answered right."""
        return sum(self.correct) / len(self.correct) if self.correct else 0.0

    @property
    def mean_s(self) -> float:
        """Mean latency (seconds of server calls) per problem."""
        return math.fsum(self.latency) / len(self.latency) if self.latency else math.inf


@dataclass(frozen=True)
class Choice:
    """What ``tune`` recommends, and why."""

    recommend: str
    """``specreason``, ``sd`` or ``base``."""
    setting: Measured | None
    reason: str


def choose(
    base: Measured, sd: Measured | None, candidates: Sequence[Measured], max_loss: float = 0.0
) -> Choice:
    """The fastest candidate within ``max_loss`` of the base model's accuracy, if it beats sd.

    ``sd`` qualifies by the same accuracy rule; when it is faster than every qualifying
    candidate (or no candidate qualifies) ``sd`` is recommended; without a qualifying ``sd``
    and candidate, the base model alone.
    """
    floor = base.accuracy - max_loss - 1e-9
    eligible = [c for c in candidates if c.accuracy >= floor]
    best = min(eligible, key=lambda c: c.mean_s) if eligible else None
    sd_ok = sd is not None and sd.accuracy >= floor
    if best is not None and (not sd_ok or (sd is not None and best.mean_s < sd.mean_s)):
        return Choice(
            "specreason",
            best,
            f"{best.name}: accuracy {best.accuracy:.0%} (base {base.accuracy:.0%}), "
            f"{best.mean_s:.1f} s a problem against base {base.mean_s:.1f} s"
            + (f" and sd {sd.mean_s:.1f} s" if sd is not None else " (sd not measured)"),
        )
    if sd_ok and sd is not None:
        why = (
            "no SpecReason setting keeps the base model's accuracy"
            if best is None
            else f"the fastest setting that keeps the accuracy ({best.name}, {best.mean_s:.1f} s)"
            f" is not faster than sd ({sd.mean_s:.1f} s)"
        )
        return Choice("sd", None, f"use sd alone: {why}")
    return Choice(
        "base",
        None,
        "use the base model alone: neither sd nor any SpecReason "
        "setting kept its accuracy on the dev problems",
    )


def max_wrong(base: Measured, max_loss: float = 0.0) -> int:
    """Most wrong answers on the dev set a setting may have and still be chosen.

    The same rule as :func:`choose`: accuracy at least the base model's minus ``max_loss``.
    """
    n = len(base.correct)
    return n - math.ceil(n * (base.accuracy - max_loss) - 1e-9)


def wrong_counts(records: Sequence[dict[str, Any]], split: str) -> dict[Run, int]:
    """Wrong answers so far per run on ``split``."""
    out: dict[Run, int] = {}
    for r in records:
        if r.get("split") == split:
            run = Run.of(r)
            out[run] = out.get(run, 0) + (not r["correct"])
    return out


@dataclass(frozen=True)
class Grid:
    """The settings searched."""

    judges: tuple[str, ...]
    thresholds: Mapping[str, tuple[float, ...]]
    """The values searched per threshold field (``likelihood_threshold`` ...): each judge
    is searched at the values of its own field."""
    first_steps: tuple[int, ...]
    with_sd: tuple[bool, ...]
    agree_rules: tuple[str, ...] = ()
    """The ``agree`` mode's settings: each rule at each ``steps_ahead`` (none: not searched)."""
    steps_ahead: tuple[int, ...] = ()

    def runs(self) -> list[Run]:
        """One bench run per setting (thresholds on the judge's own scale)."""
        out = [
            Run(
                "agree+sd" if sd else "agree",
                variant=DEFAULT_SD_VARIANT if sd else None,
                agree_rule=rule,
                steps_ahead=n,
            )
            for rule, n, sd in itertools.product(self.agree_rules, self.steps_ahead, self.with_sd)
        ]
        for judge in self.judges:
            parse_judge(judge)
            field = threshold_field(judge)
            values: tuple[float | None, ...] = self.thresholds.get(field, ()) if field else (None,)
            out += [
                Run(
                    "specreason+sd" if sd else "specreason",
                    t,
                    None,
                    DEFAULT_SD_VARIANT if sd else None,
                    judge,
                    n,
                )
                for t, n, sd in itertools.product(values, self.first_steps, self.with_sd)
            ]
        return out


def measured(
    records: Sequence[dict[str, Any]],
    run: Run,
    problems: Sequence[Problem],
    settings: dict[str, Any] | None = None,
) -> Measured | None:
    """The run's results on ``problems`` (``None`` until every problem has one)."""
    key = {r["problem_id"]: r for r in records if Run.of(r) == run}
    if any(p.id not in key for p in problems):
        return None
    rows = [key[p.id] for p in problems]
    return Measured(
        run.label,
        tuple(bool(r["correct"]) for r in rows),
        tuple(float(r["server_s"]) for r in rows),
        settings,
        sd=run.mode in SD_MODES,
    )


def _probed(runs: list[Run], probe: str) -> list[Run]:
    """``runs`` without the judge-based settings a probe's ceilings rule out (each one said)."""
    from ..probe.ceilings import below_reference, candidate_ceiling, load_tune_table

    table = load_tune_table(probe)
    kept = []
    for run in runs:
        judge, on_sd = run.judge or "score", run.variant is not None
        judged = run.mode in ("specreason", "specreason+sd")
        if judged and below_reference(table, judge, on_sd):
            print(
                f"tune: skipped {run.label}: its ceiling "
                f"{candidate_ceiling(table, judge, on_sd):.2f}x is not above "
                f"{table['reference']:.2f}x ({probe})",
                file=sys.stderr,
                flush=True,
            )
        else:
            kept.append(run)
    return kept
