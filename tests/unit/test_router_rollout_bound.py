"""The oracle's bound, the judges' and the router's operating points, read from rollout labels."""

from __future__ import annotations

import json
import math

import pytest

from langchain_specreason.config import SpecReasonConfig
from langchain_specreason.lab.agreement.report import (
    catch_threshold,
    decision_readings,
    oracle_reading,
    read_labelled,
    write_report,
)


def line(problem: str, index: int, advantage: float, step: str, base: str) -> dict:
    return {
        "problem_id": problem,
        "step_index": index,
        "steps": [],
        "step": step,
        "base_step": base,
        "advantage": advantage,
        "harmful": advantage >= 0.5,
    }


ROWS = [
    line("p1", 0, 0.0, "x = 5", "so 5"),  # kept by the oracle; agrees (result)
    line("p1", 1, 0.25, "y = 6", "so 7!"),  # escalated (advantage > 0), not harmful
    line("p2", 0, 0.75, "z = 7", "so 8"),  # escalated, harmful
    line("p2", 1, -0.5, "w = 9", "so 9"),  # kept; agrees
    line("p3", 0, 1.0, "v = 1", "so 2 - 1 = 1"),  # harmful, yet the result agrees
]


@pytest.fixture
def labels(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def test_the_oracle_escalates_positive_advantage_and_counts_the_base_work(labels):
    pairs = read_labelled(labels)
    oracle = oracle_reading(pairs)
    assert (oracle.kept, oracle.harmful, oracle.harmful_kept) == (2, 2, 0)
    assert oracle.base_steps == pytest.approx(3 / 5)
    chars = sum(len(r["base_step"]) for r in ROWS)
    assert oracle.base_chars == pytest.approx((5 + 4 + 12) / chars)
    assert oracle_reading(pairs, 0.5).kept == 3  # the margin: 0.75 and 1.0 only


def test_a_threshold_catches_its_share_of_harmful_steps():
    keep = {"a": 0.9, "b": 0.2, "c": 0.5, "d": 0.1}
    harmful = {"a": False, "b": True, "c": False, "d": True}
    assert catch_threshold(keep, harmful, 1.0) == 0.5  # rejects b and d, keeps c
    assert catch_threshold(keep, harmful, 0.5) == 0.2  # rejects d only
    assert catch_threshold({"b": 0.2}, {"b": True}, 1.0) == math.inf


def test_oracle_router_and_rules_in_one_table(labels, tmp_path):
    scores = tmp_path / "oof.jsonl"
    p = {"p1:0": 0.1, "p1:1": 0.3, "p2:0": 0.8, "p2:1": 0.2, "p3:0": 0.6}
    scores.write_text(
        "".join(
            json.dumps({"example": e, "p_escalate": v, "harmful": e in ("p2:0", "p3:0")}) + "\n"
            for e, v in p.items()
        )
    )
    settings = SpecReasonConfig().as_dict()
    rows = decision_readings(labels, ["result"], settings, router=scores, catch=(1.0,))
    kinds = [r.kind for r in rows]
    assert kinds == ["oracle", "router", "rule"]
    router = rows[1]
    assert router.threshold == pytest.approx(0.7)  # keep 1 - p >= 0.7: p1:0, p1:1, p2:1
    assert (router.kept, router.harmful_kept) == (3, 0)
    rule = rows[2]
    assert (rule.kept, rule.harmful_kept, rule.base_steps) == (3, 1, 1.0)
    text = write_report(labels, tmp_path / "out", ["result"], SpecReasonConfig())
    assert "| oracle: escalate when advantage > 0 | - | 2/5 = 40.0%" in text
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [d["kind"] for d in summary["decisions"]] == ["oracle", "rule"]
