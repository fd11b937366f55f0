"""The session statistics against hand-computed cases."""

from __future__ import annotations

import pytest

from langchain_specreason.lab.shared.stats import mcnemar, paired_ratio, wilson


def test_wilson_interval():
    low, high = wilson(12, 20)  # p = 0.6
    assert low == pytest.approx(0.3866, abs=1e-3) and high == pytest.approx(0.7812, abs=1e-3)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)
    assert wilson(0, 10)[1] == pytest.approx(0.2775, abs=1e-3)
    assert wilson(0, 0) == (0.0, 1.0)


def test_mcnemar_exact_p():
    # 5 discordant pairs, all one way: p = 2 * (1/2)^5 = 0.0625
    a = [True] * 5 + [True, False] * 3
    b = [False] * 5 + [True, False] * 3
    assert mcnemar(a, b) == (5, 0, pytest.approx(0.0625))
    # 3 vs 1: p = 2 * (C(4,0) + C(4,1)) / 16 = 0.625
    assert mcnemar([True, True, True, False], [False, False, False, True])[2] == pytest.approx(
        0.625
    )
    assert mcnemar([True, False], [True, False]) == (0, 0, 1.0)
    with pytest.raises(ValueError):
        mcnemar([True], [])


def test_paired_ratio_and_its_interval():
    a = [10.0, 20.0, 30.0, 40.0]
    same = paired_ratio(a, a)
    assert (same.ratio, same.low, same.high) == (1.0, 1.0, 1.0) and not same.faster
    twice = paired_ratio(a, [2 * x for x in a])
    assert twice.ratio == 2.0 and twice.low == twice.high == 2.0 and twice.faster
    noisy = paired_ratio([10.0, 10.0, 10.0, 10.0], [5.0, 15.0, 9.0, 11.0], seed=1)
    assert noisy.ratio == 1.0 and noisy.low < 1.0 < noisy.high and not noisy.faster
    assert paired_ratio(a, a, seed=3) == paired_ratio(a, a, seed=3)
    with pytest.raises(ValueError):
        paired_ratio([1.0], [1.0, 2.0])


def test_the_report_pairs_runs_with_base_and_sd(tmp_path):
    import json

    from langchain_specreason.lab.bench.report import paired, paired_markdown

    def rec(mode, pid, latency, correct, threshold=None):
        return {
            "mode": mode,
            "problem_id": pid,
            "latency_s": latency,
            "correct": correct,
            "threshold": threshold,
            "score_method": None,
        }

    results = []
    for i in range(6):
        results += [
            rec("base", f"p{i}", 100.0, i < 4),
            rec("sd", f"p{i}", 80.0, i < 4),
            rec("specreason", f"p{i}", 50.0, i < 3, 7.0),
        ]
    rows = {r["run"].split()[0]: r for r in paired(results)}
    spec = rows["specreason"]
    assert spec["vs_base"]["speedup"] == 2.0 and spec["vs_base"]["speedup_95"] == [2.0, 2.0]
    assert spec["vs_sd"]["speedup"] == 1.6
    assert (spec["vs_base"]["right_only_here"], spec["vs_base"]["right_only_base"]) == (0, 1)
    assert spec["vs_base"]["mcnemar_p"] == 1.0
    assert "vs_base" not in rows["base"] and rows["sd"]["vs_base"]["speedup"] == 1.25
    text = paired_markdown(list(rows.values()), {"sessions": [{}, {}]})
    assert "come from 2 sessions" in text and "2.00× [2.00, 2.00]" in text
    json.dumps(rows)  # plain values
    # which problems' modes were timed in different sessions
    meta = {
        "sessions": [
            {"started_at": "2026-12-03T06:00:00+00:00"},
            {"started_at": "2026-12-03T08:00:00+00:00"},
        ]
    }
    for r in results:
        late = r["problem_id"] == "p5" or (r["problem_id"] == "p4" and r["mode"] == "sd")
        r["finished_at"] = "2026-12-03T08:30:00+00:00" if late else "2026-12-03T07:00:00+00:00"
    text = paired_markdown(list(rows.values()), meta, results)
    assert "Problems with modes in different sessions: 1 (p4)" in text
