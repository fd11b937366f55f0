"""Fitting the ``learned`` judge (:mod:`~langchain_specreason.judges.learned`) on labels.

Features (all from one ``likelihood`` call on the base server, the draft's own logprobs that
come with the draft step, and the arithmetic check; no 0-9 score call): the base model's mean,
least and least-math token log-probability of the step, the draft model's three, their
disagreement (base mean minus draft mean), and the arithmetic verdict. Fitted on dev labels
(harmless = 1); the model's output, P(harmless), is the score (higher keeps the step).

The fit runs on numpy (the ``bench`` extra's); the library's ``learned`` judge reads the same
weights without it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ...judges.learned import FEATURES, LogisticModel


def example_features(
    scores: Mapping[str, Mapping[str, float]], names: Sequence[str] = FEATURES
) -> tuple[list[str], dict[str, list[float]]]:
    """The named readings present, and example -> their values (examples with all of them)."""
    present = [n for n in names if n in scores]
    if not present:
        return [], {}
    common = set.intersection(*(set(scores[n]) for n in present))
    return present, {e: [float(scores[n][e]) for n in present] for e in sorted(common)}


CLIP = 6.0
"""Standardised values are clipped to [-CLIP, CLIP] (here and in :meth:`LogisticModel.predict`)."""


def column_stats(col: Sequence[float]) -> tuple[float, float]:
    """(mean, scale) of a feature over its finite values; (0, 1) when it has none.

    A constant feature gets scale 1 (it standardises to 0 and its weight stays 0).
    """
    finite = [v for v in col if math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    n = len(finite)
    mean = math.fsum(v / n for v in finite)  # v / n: no overflow for huge values
    spread = math.sqrt(math.fsum((v - mean) * (v - mean) / n for v in finite))
    return mean, spread if math.isfinite(spread) and spread > 0 else 1.0


def standardised(value: float, mean: float, scale: float) -> float:
    """``(value - mean) / scale`` clipped to [-CLIP, CLIP]; +-inf at the clip, NaN at 0."""
    if math.isnan(value):
        return 0.0
    return max(-CLIP, min(CLIP, (value - mean) / scale))


def nonfinite_counts(xs: Sequence[Sequence[float]], names: Sequence[str]) -> dict[str, int]:
    """Feature name -> how many of ``xs`` hold an infinite or NaN value of it (those > 0)."""
    counts = {name: sum(not math.isfinite(x[j]) for x in xs) for j, name in enumerate(names)}
    return {name: count for name, count in counts.items() if count}


def constant_features(xs: Sequence[Sequence[float]], names: Sequence[str]) -> list[str]:
    """Features whose finite values on ``xs`` are all one value (they carry no signal)."""
    out = []
    for j, name in enumerate(names):
        finite = {x[j] for x in xs if math.isfinite(x[j])}
        if len(finite) <= 1:
            out.append(name)
    return out


TOLERANCE = 1e-12
"""The fit stops early once a gradient step moves no weight (nor the bias) by more than this."""


def fit_logistic(
    xs: Sequence[Sequence[float]],
    ys: Sequence[bool],
    *,
    names: Sequence[str] = FEATURES,
    l2: float = 1.0,
    steps: int = 3000,
    rate: float = 0.5,
) -> LogisticModel:
    """Fit by gradient descent on standardised features with an L2 penalty (deterministic).

    Means and scales come from each feature's finite values; standardised values are clipped to
    [-CLIP, CLIP] (here and in :meth:`LogisticModel.predict`), so an outlier cannot swamp the
    fit, an infinite value (a log-probability of -inf) reads as the clip and a NaN as the
    mean. With ``l2 > 0`` the weights stay finite on separable labels too; the step on the
    penalty is at most 1 (``rate * l2 / n``, shrinking by a smaller one when a strong penalty
    meets few examples), so a strong penalty on few steps cannot make the descent diverge. It
    stops after ``steps`` steps, or earlier once a step moves nothing by more than
    :data:`TOLERANCE`.
    """
    if not xs:
        raise ValueError("no example to fit")
    if l2 <= 0:
        raise ValueError(f"l2 must be > 0 (separable labels would have no finite fit), got {l2}")
    width = len(xs[0])
    if len(names) != width:
        raise ValueError(f"{len(names)} names for {width} features")
    stats = [column_stats([x[j] for x in xs]) for j in range(width)]
    z = np.array([[standardised(x[j], *stats[j]) for j in range(width)] for x in xs])
    y = np.array(ys, dtype=float)
    n = len(ys)
    weights = np.zeros(width)
    positives = sum(ys)
    bias = math.log((positives + 0.5) / (n - positives + 0.5))
    rate = min(rate, n / l2)  # rate * l2 / n <= 1: the penalty shrinks, never overshoots
    gradient_of = z.T / n  # err -> the loss's gradient in the weights
    for _ in range(steps):
        logit = z @ weights
        logit += bias
        np.clip(logit, -60.0, 60.0, out=logit)
        err = 1.0 / (1.0 + np.exp(-logit)) - y
        step = rate * (l2 / n * weights + gradient_of @ err)
        step_b = rate * float(err.sum()) / n
        weights -= step
        bias -= step_b
        if abs(step_b) < TOLERANCE and float(np.abs(step).max()) < TOLERANCE:
            break  # converged: a further step would move no weight by TOLERANCE
    w, b = [float(v) for v in weights], float(bias)
    if not all(math.isfinite(v) for v in (*w, b)):
        raise ValueError(f"the logistic fit did not converge (weights {w}, bias {b})")
    means, scales = zip(*stats, strict=True)
    return LogisticModel(tuple(names), tuple(means), tuple(scales), tuple(w), b)
