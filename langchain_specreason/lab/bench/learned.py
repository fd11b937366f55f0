"""Fitting the ``learned`` judge (:mod:`~langchain_specreason.judges.learned`) on labels.

Features (all from one ``likelihood`` call on the base server, the draft's own logprobs that
come with the draft step, and the arithmetic check; no 0-9 score call): the base model's mean,
least and least-math token log-probability of the step, the draft model's three, their
disagreement (base mean minus draft mean), and the arithmetic verdict. Fitted on dev labels
(harmless = 1); the model's output, P(harmless), is the score (higher keeps the step).

Pure Python (a few hundred examples, a handful of features): the library's ``learned`` judge
reads the same weights without numpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

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

    Standardised values are clipped to [-6, 6] (here and in :meth:`LogisticModel.predict`),
    so an outlier cannot swamp the fit.
    """
    if not xs:
        raise ValueError("no example to fit")
    width = len(xs[0])
    rows = [list(x) for x in xs]
    means, scales = [], []
    for j in range(width):
        col = [r[j] for r in rows]
        m = math.fsum(col) / len(col)
        s = math.sqrt(math.fsum((v - m) ** 2 for v in col) / len(col)) or 1.0
        means.append(m)
        scales.append(s)
    z = [[(r[j] - means[j]) / scales[j] for j in range(width)] for r in rows]
    z = [[max(-6.0, min(6.0, v)) for v in r] for r in z]
    w = [0.0] * width
    positives = sum(ys)
    b = math.log((positives + 0.5) / (len(ys) - positives + 0.5))
    n = len(ys)
    for _ in range(steps):
        gw = [l2 * wj / n for wj in w]
        gb = 0.0
        for r, y in zip(z, ys, strict=True):
            p = 1.0 / (
                1.0
                + math.exp(
                    -max(
                        -60.0, min(60.0, b + math.fsum(wj * v for wj, v in zip(w, r, strict=True)))
                    )
                )
            )
            err = p - float(y)
            gb += err / n
            for j in range(width):
                gw[j] += err * r[j] / n
        w = [wj - rate * g for wj, g in zip(w, gw, strict=True)]
        b -= rate * gb
    if len(names) != width:
        raise ValueError(f"{len(names)} names for {width} features")
    return LogisticModel(tuple(names), tuple(means), tuple(scales), tuple(w), b)
