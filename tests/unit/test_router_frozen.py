"""The frozen-feature router (`--method frozen`): a logistic head on the base model's last
hidden state, saved as the classifier vLLM serves, scoring as it was fitted."""

from __future__ import annotations

import asyncio
import json
import math
from types import SimpleNamespace

import pytest

from langchain_specreason.arbitrage.router import RouterJudge, shifted
from langchain_specreason.endpoint import ChatRequest
from langchain_specreason.judges.base import StepContext
from langchain_specreason.judges.learned import LogisticModel
from langchain_specreason.lab.training.frozen import head_p, head_rows
from langchain_specreason.lab.training.labels_file import load_labels
from langchain_specreason.lab.training.settings import TrainSettings
from langchain_specreason.lab.training.train import (
    OUT_OF_FOLD,
    cross_validate,
    predict,
    train_router,
)
from tests.unit.test_router_rollout_labels import six_problems, tiny_model, write_folder

MODEL = LogisticModel(
    names=("a", "b", "c"),
    means=(1.0, -2.0, 0.5),
    scales=(2.0, 0.5, 1.0),
    weights=(0.7, -1.3, 0.2),
    bias=0.4,
)


@pytest.mark.parametrize(
    ("x", "clipped"),
    [((0.0, 0.0, 0.0), False), ((3.0, -1.0, 2.0), False), ((-4.0, 5.0, -0.5), True)],
)
def test_the_bias_free_head_and_its_offset_score_as_the_fit(x, clipped):
    keep, escalate, offset = head_rows(MODEL)
    assert keep == [0.0, 0.0, 0.0]
    z = sum(w * v for w, v in zip(escalate, x, strict=True)) + offset
    p = head_p(escalate, offset, x)
    assert 1 / (1 + math.exp(-z)) == pytest.approx(p, rel=1e-12)
    # the fit's own linear logit (of keeping the step), standardised, unclipped: the folded
    # head must read the same
    fit = MODEL.bias + sum(
        w * (v - m) / s
        for w, v, m, s in zip(MODEL.weights, x, MODEL.means, MODEL.scales, strict=True)
    )
    assert p == pytest.approx(1 / (1 + math.exp(fit)), rel=1e-12)
    # the model's own probability is of keeping the step; within its clip (6 standard
    # deviations) the two sum to one, beyond it only the linear head's reading holds
    same = p == pytest.approx(1 - MODEL.predict(x), rel=1e-9)
    assert same is not clipped


def test_an_offset_moves_the_logit_and_zero_keeps_the_probability():
    assert shifted(0.3, 0.0) == pytest.approx(0.3)
    assert shifted(0.5, math.log(3)) == pytest.approx(0.75)
    assert shifted(shifted(0.2, 1.5), -1.5) == pytest.approx(0.2)
    assert 0.0 < shifted(0.0, -5.0) < 1e-12  # a served 0 or 1 stays a probability


class Served:
    """A router server's reply: softmax over the head's two logits (as vLLM's /classify)."""

    def __init__(self, z: float) -> None:
        self.z = z

    async def classify(self, texts, *, truncate=None):
        p = 1 / (1 + math.exp(-self.z))
        return SimpleNamespace(probs=[[1 - p, p]], seconds=0.01, prompt_tokens=5)


def test_the_judge_adds_the_folders_offset(tmp_path):
    (tmp_path / "router.json").write_text(json.dumps({"logit_offset": -2.0, "max_tokens": 64}))
    judge = RouterJudge.from_folder(Served(1.0), tmp_path, tau=0.5)
    conversation = [{"role": "user", "content": "q?"}]
    ctx = StepContext(
        conversation=conversation,
        steps=[],
        authors=[],
        step="s\n\n",
        request=ChatRequest(messages=conversation, max_tokens=8),
    )
    verdict = asyncio.run(judge.judge(ctx))
    assert verdict.detail["p_escalate"] == pytest.approx(1 / (1 + math.exp(1.0)), abs=1e-5)
    assert verdict.accept  # p(escalate) 0.27 < tau: without the offset it would be 0.73


@pytest.mark.needs_transformers
def test_frozen_cross_validation_and_the_saved_router_agree(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECREASON_CACHE_DIR", str(tmp_path / "cache"))
    rows = six_problems()
    steps = load_labels(write_folder(tmp_path / "dev", rows))
    base = tiny_model(tmp_path / "base")
    settings = TrainSettings(method="frozen", max_tokens=32, threads=1)
    lines = cross_validate(steps, tmp_path / "cv", base_model=base, settings=settings, folds=2)
    assert sorted(line["example"] for line in lines) == sorted(
        f"p{p}:{i}" for p in range(6) for i in range(3)
    )
    assert {line["fold"] for line in lines} == {0, 1}
    assert all(line["l2"] > 0 for line in lines)
    assert (tmp_path / "cv" / OUT_OF_FOLD).is_file()
    assert list((tmp_path / "cache" / "router-features").glob("*.npz"))  # read once, cached

    report = train_router(steps, tmp_path / "router", base_model=base, settings=settings)
    assert report.metrics["steps"] == 18 and report.metrics["escalate"] == 6
    saved = json.loads((tmp_path / "router" / "router.json").read_text())
    assert saved["method"] == "frozen" and math.isfinite(saved["logit_offset"])
    # the saved classifier, with its offset, gives the fit's probabilities (padding included)
    probs = predict(tmp_path / "router", steps, batch_size=4)
    mean = sum(probs) / len(probs)
    assert mean == pytest.approx(saved["fit"]["train_p_escalate_mean"], abs=1e-4)
    # and they rank the steps: the escalate class scores higher on these separable steps
    up = [p for p, r in zip(probs, rows, strict=True) if r["advantage"] > 0]
    down = [p for p, r in zip(probs, rows, strict=True) if r["advantage"] <= 0]
    assert min(up) > max(down)
