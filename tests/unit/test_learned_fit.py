"""The learned judge's fit stops once converged, at the weights the full descent reaches."""

import math
import random

import numpy as np
import pytest

from langchain_specreason.lab.judges import learned


class CountingNumpy:
    """numpy, counting the descent's steps (one ``exp`` a step)."""

    def __init__(self) -> None:
        self.steps = 0

    def exp(self, x: np.ndarray) -> np.ndarray:
        self.steps += 1
        return np.exp(x)

    def __getattr__(self, name: str) -> object:
        return getattr(np, name)


def noisy_steps(n: int, seed: int) -> tuple[list[list[float]], list[bool]]:
    rng = random.Random(seed)
    xs = [[rng.gauss(0, 1) for _ in learned.FEATURES] for _ in range(n)]
    xs[0][1] = -math.inf  # a log-probability of -inf reads at the clip
    return xs, [x[0] + rng.gauss(0, 1) > 0 for x in xs]


@pytest.mark.parametrize(("n", "l2"), [(60, 1.0), (200, 30.0), (200, 1000.0)])
def test_stopping_at_convergence_gives_the_weights_of_every_step(
    monkeypatch: pytest.MonkeyPatch, n: int, l2: float
) -> None:
    xs, ys = noisy_steps(n, seed=n)
    counting = CountingNumpy()
    monkeypatch.setattr(learned, "np", counting)
    early = learned.fit_logistic(xs, ys, l2=l2, steps=3000)
    assert 0 < counting.steps < 3000  # it stopped early
    monkeypatch.setattr(learned, "TOLERANCE", 0.0)  # no step moves by less than 0: all 3000
    full = learned.fit_logistic(xs, ys, l2=l2)
    assert early.weights == pytest.approx(full.weights, abs=1e-9)
    assert early.bias == pytest.approx(full.bias, abs=1e-9)
    assert early.weights != (0.0,) * len(learned.FEATURES)  # it fitted something
    assert all(early.predict(x) == pytest.approx(full.predict(x), abs=1e-9) for x in xs)
