"""How much of a label file is signal: what any judge could reach against these labels.

A label is drawn from ``m`` rollouts a side, so it is noisy: a step whose draft and base
steps are equally good is still labelled ``harmful`` when the base side's rollouts happen to
succeed more often. Two readings of that noise, both from the rollouts the file already
holds (no model call):

* **split half**: the first ``m // 2`` rollouts a side give one advantage, the next
  ``m // 2`` another. Their correlation (and the Spearman-Brown step-up to ``m``) is the
  labels' test-retest reliability, and the AUROC of the first half's advantage against the
  second half's ``harmful`` is what a judge reaches that *is* ``m // 2`` rollouts a side:
  an empirical floor for the best possible judge.
* **ceiling**: a judge that knew each step's true success rates, read against labels drawn
  anew with ``m`` rollouts a side. The true rates are drawn from their posteriors under a
  beta-binomial model (one beta prior a side, fitted by moments to the file's counts), so
  this one is model-based; the interval spans the draws.

``specreason bench labels FOLDER`` writes both to ``FOLDER/reliability.json``.
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...errors import InputError
from ..judges.labelreport import auroc_interval
from ..judges.report import auroc
from ..shared.datasets import read_jsonl
from ..shared.stats import percentile_95
from .rollout import advantage, is_harmful, success_rate

REQUIRED = ("draft_correct", "base_correct", "same_step")

DRAWS = 200
"""Posterior draws for the model-based ceiling."""


@dataclass(frozen=True)
class Rollouts:
    """The graded rollouts of one labelled step."""

    draft: tuple[bool, ...]
    base: tuple[bool, ...]
    same_step: bool
    """The draft and base steps are the same text: one set of rollouts serves both sides."""
    problem: str = ""
    """The problem the step belongs to (steps of one problem share a trace)."""


@dataclass(frozen=True)
class Reliability:
    """What a label file's own rollouts say about its noise (see the module docstring)."""

    steps: int
    harmful: int
    m: int
    gap: float
    split_half_r: float | None
    """Pearson correlation of the two halves' advantages (``None``: a half is constant)."""
    spearman_brown: float | None
    """The split-half correlation stepped up to ``m`` rollouts a side."""
    split_half_auroc: float | None
    """AUROC of the first half's advantage against the second half's ``harmful``."""
    split_half_interval: tuple[float, float] | None
    """95% interval of :attr:`split_half_auroc`, resampling whole problems."""
    split_half_harmful: int
    ceiling_auroc: float | None
    """Mean AUROC of a judge knowing the true rates against labels drawn anew (model-based)."""
    ceiling_interval: tuple[float, float] | None
    draws: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    def format(self) -> str:
        """A few lines of Markdown."""
        return "\n".join(
            [
                f"- {self.steps} labelled steps, {self.harmful} harmful "
                f"(m = {self.m} rollouts a side, harmful at advantage >= {self.gap:g})",
                f"- split half ({self.m // 2} + {self.m // 2} rollouts a side): advantage "
                f"correlation {_num(self.split_half_r)} (Spearman-Brown to m = {self.m}: "
                f"{_num(self.spearman_brown)}); the first half's advantage as a judge of the "
                f"second half's harmful ({self.split_half_harmful} steps): AUROC "
                f"{_num(self.split_half_auroc)} {_interval(self.split_half_interval)}",
                f"- ceiling (a judge knowing each step's true rates, against labels drawn "
                f"anew with m = {self.m}; beta-binomial, {self.draws} draws): AUROC "
                f"{_num(self.ceiling_auroc)} {_interval(self.ceiling_interval)}",
            ]
        )


def read_rollouts(path: Path) -> list[Rollouts]:
    """The rollouts of each line of a label file written by ``specreason label``.

    A line without them, or with sides of other lengths, raises
    :class:`~langchain_specreason.errors.InputError` naming the file and the line.
    """
    rows: list[Rollouts] = []
    for number, row in read_jsonl(path, REQUIRED):
        draft, base = row["draft_correct"], row["base_correct"]
        if not (
            isinstance(draft, list)
            and isinstance(base, list)
            and all(isinstance(x, bool) for x in draft + base)
            and len(draft) == len(base) >= 2
        ):
            raise InputError(
                f"{path}, line {number}: draft_correct and base_correct must be lists of "
                "booleans of one length (at least 2)"
            )
        problem = str(row.get("problem_id", f"line {number}"))
        rows.append(Rollouts(tuple(draft), tuple(base), bool(row["same_step"]), problem))
    if len({len(r.draft) for r in rows}) > 1:
        raise InputError(f"{path}: the lines hold different numbers of rollouts a side")
    if not rows:
        raise InputError(f"{path}: no labelled steps")
    return rows


def _keep_auroc(advantages: Sequence[float], harmful: Sequence[bool]) -> float | None:
    """AUROC of ``-advantage`` as a keep score (the judges' orientation: harmless high)."""
    return auroc(
        [-a for a, h in zip(advantages, harmful, strict=True) if not h],
        [-a for a, h in zip(advantages, harmful, strict=True) if h],
    )


def _half_rates(
    rows: Sequence[Rollouts],
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Each step's (draft rate, base rate): by its first ``m // 2`` rollouts a side, by the next.

    Returns the two lists, one per half.
    """
    half = len(rows[0].draft) // 2

    def rates(lo: int, hi: int) -> list[tuple[float, float]]:
        return [(success_rate(r.draft[lo:hi]), success_rate(r.base[lo:hi])) for r in rows]

    return rates(0, half), rates(half, 2 * half)


def split_half(rows: Sequence[Rollouts], gap: float) -> tuple[float | None, float | None, int]:
    """The halves' advantage correlation, AUROC and harmful count.

    Returns (correlation, AUROC of the first half's advantage against the second half's
    ``harmful``, harmful steps by the second half).
    """
    first, second = _half_rates(rows)
    labels = [is_harmful(d, b, gap) for d, b in second]
    ahead = [advantage(d, b) for d, b in first]
    try:
        r: float | None = statistics.correlation(ahead, [advantage(d, b) for d, b in second])
    except statistics.StatisticsError:  # a constant half
        r = None
    return r, _keep_auroc(ahead, labels), sum(labels)


def split_half_interval(
    rows: Sequence[Rollouts], gap: float, *, resamples: int = 1000, seed: int = 0
) -> tuple[float, float] | None:
    """95% interval of the split-half AUROC, resampling whole problems (seeded bootstrap)."""
    first, second = _half_rates(rows)
    ids = [f"{row.problem}:{i}" for i, row in enumerate(rows)]  # problem_of() reads them back
    return auroc_interval(
        {e: -advantage(d, b) for e, (d, b) in zip(ids, first, strict=True)},  # a keep score
        {e: is_harmful(d, b, gap) for e, (d, b) in zip(ids, second, strict=True)},
        resamples=resamples,
        seed=seed,
    )


def spearman_brown(r: float | None, factor: float) -> float | None:
    """Reliability of a measure ``factor`` times as long as one of reliability ``r``."""
    if r is None or r <= -1 / factor:
        return None
    return factor * r / (1 + (factor - 1) * r)


def beta_prior(counts: Sequence[int], m: int) -> tuple[float, float]:
    """Beta(a, b) prior of the success rate, by moments of beta-binomial ``counts`` of ``m``.

    The overdispersion ``rho = 1 / (a + b + 1)`` comes from the counts' variance beyond the
    binomial's; it is clamped to [0.01, 0.99] (near-binomial or near-all-or-none counts).
    """
    rates = [k / m for k in counts]
    mu = min(max(statistics.fmean(rates), 0.01), 0.99)
    var = statistics.pvariance(rates)
    rho = (m * var / (mu * (1 - mu)) - 1) / (m - 1) if m > 1 else 0.5
    rho = min(max(rho, 0.01), 0.99)
    total = 1 / rho - 1
    return mu * total, (1 - mu) * total


def ceiling(
    rows: Sequence[Rollouts], gap: float, *, draws: int = DRAWS, seed: int = 0
) -> tuple[float | None, tuple[float, float] | None]:
    """(mean, 95% interval) AUROC of a judge knowing the true rates, on labels drawn anew."""
    m = len(rows[0].draft)
    a_d, b_d = beta_prior([sum(r.draft) for r in rows], m)
    a_b, b_b = beta_prior([sum(r.base) for r in rows if not r.same_step] or [0, m], m)
    rng = random.Random(seed)
    values: list[float] = []
    for _ in range(draws):
        advantages: list[float] = []
        labels: list[bool] = []
        for r in rows:
            k_d = sum(r.draft)
            p_d = rng.betavariate(a_d + k_d, b_d + m - k_d)
            if r.same_step:  # one set of rollouts for both sides: advantage 0, always
                advantages.append(0.0)
                labels.append(False)
                continue
            k_b = sum(r.base)
            p_b = rng.betavariate(a_b + k_b, b_b + m - k_b)
            fresh_d = sum(rng.random() < p_d for _ in range(m))
            fresh_b = sum(rng.random() < p_b for _ in range(m))
            advantages.append(p_b - p_d)
            labels.append(is_harmful(fresh_d / m, fresh_b / m, gap))
        value = _keep_auroc(advantages, labels)
        if value is not None:
            values.append(value)
    if not values:
        return None, None
    return statistics.fmean(values), percentile_95(values)


def label_reliability(
    rows: Sequence[Rollouts], gap: float, *, draws: int = DRAWS, seed: int = 0
) -> Reliability:
    """Both readings for the label rows ``rows`` with harmful gap ``gap``."""
    m = len(rows[0].draft)
    r, half_auroc, half_harmful = split_half(rows, gap)
    mean, interval = ceiling(rows, gap, draws=draws, seed=seed)
    return Reliability(
        steps=len(rows),
        harmful=sum(is_harmful(success_rate(x.draft), success_rate(x.base), gap) for x in rows),
        m=m,
        gap=gap,
        split_half_r=r,
        spearman_brown=spearman_brown(r, m / (m // 2)),
        split_half_auroc=half_auroc,
        split_half_interval=split_half_interval(rows, gap, seed=seed),
        split_half_harmful=half_harmful,
        ceiling_auroc=mean,
        ceiling_interval=interval,
        draws=draws,
    )


def write_reliability(folder: Path, *, draws: int = DRAWS, seed: int = 0) -> Reliability:
    """Read ``folder/labels.jsonl`` and write ``folder/reliability.json``.

    The harmful gap comes from the folder's ``meta.json`` (0.5 without one).
    """
    labels = folder / "labels.jsonl"
    if not labels.is_file():
        raise InputError(f"{folder}: no labels.jsonl (a folder `specreason label` wrote)")
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    gap = float(meta.get("settings", {}).get("harmful_gap", 0.5))
    found = label_reliability(read_rollouts(labels), gap, draws=draws, seed=seed)
    (folder / "reliability.json").write_text(json.dumps(found.as_dict(), indent=2) + "\n")
    return found


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _interval(value: tuple[float, float] | None) -> str:
    return "" if value is None else f"[{value[0]:.2f}, {value[1]:.2f}]"
