"""Summary and plots regenerated from a synthetic results.jsonl (numbers checked by hand)."""

from __future__ import annotations

import json
import math

import pytest

from langchain_specreason.cli import main
from langchain_specreason.lab.bench.report import (
    ACCURACY_PLOT,
    SUMMARY_JSON,
    SUMMARY_MD,
    TIME_PLOT,
    label_levels,
    percentile,
    plot_label,
    summarize,
    write_report,
)
from langchain_specreason.lab.shared.modes import Run

ZERO = dict(
    steps_drafted=0,
    steps_accepted=0,
    steps_rewritten=0,
    steps_base=0,
    judge_calls=0,
    judge_prefill_tokens=0,
    draft_s=0.0,
    judge_s=0.0,
    rewrite_s=0.0,
    answer_s=0.0,
    overhead_s=0.0,
    error=None,
)


def result(mode, pid, latency, correct, threshold=None, hits=None, **extra):
    server = (
        None
        if hits is None
        else {"base": {"prefix_cache_queries": 100.0, "prefix_cache_hits": float(hits)}}
    )
    return {
        **ZERO,
        "mode": mode,
        "threshold": threshold,
        "score_method": "greedy" if threshold is not None else None,
        "problem_id": pid,
        "latency_s": latency,
        "correct": correct,
        "server": server,
        **extra,
    }


def synthetic():
    return [
        result("base", "p1", 10.0, True, answer_s=9.9, overhead_s=0.1),
        result("base", "p2", 20.0, True, answer_s=19.9, overhead_s=0.1),
        result("base", "p3", 30.0, False, answer_s=29.9, overhead_s=0.1),
        result(
            "specreason",
            "p1",
            4.0,
            True,
            7.0,
            hits=50,
            steps_drafted=4,
            steps_accepted=3,
            steps_rewritten=1,
            judge_calls=4,
            judge_prefill_tokens=200,
            draft_s=1.0,
            judge_s=1.0,
            rewrite_s=1.0,
            answer_s=0.6,
            overhead_s=0.4,
            judge_floor_tokens=120,
        ),
        result(
            "specreason",
            "p2",
            6.0,
            False,
            7.0,
            hits=70,
            steps_drafted=4,
            steps_accepted=1,
            steps_rewritten=3,
            judge_calls=4,
            judge_prefill_tokens=120,
            draft_s=1.0,
            judge_s=1.0,
            rewrite_s=3.0,
            answer_s=0.4,
            overhead_s=0.6,
        ),
        # threshold 9 only reached p1 before an interruption
        result(
            "specreason",
            "p1",
            5.0,
            True,
            9.0,
            hits=None,
            steps_drafted=2,
            steps_accepted=0,
            steps_rewritten=2,
            judge_calls=2,
            judge_prefill_tokens=100,
            overhead_s=0.5,
        ),
    ]


def test_percentile_interpolates_like_numpy():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([10.0, 20.0, 30.0], 90) == pytest.approx(28.0)
    assert percentile([5.0], 90) == 5.0
    assert math.isnan(percentile([], 50))


def test_summary_rows():
    rows = summarize(synthetic())
    assert [r.run for r in rows] == [
        Run("base"),
        Run("specreason", 7.0, "greedy"),
        Run("specreason", 9.0, "greedy"),
    ]
    base, t7, t9 = rows
    assert (base.problems, base.correct, base.mean_s, base.p50_s) == (3, 2, 20.0, 20.0)
    assert base.p90_s == pytest.approx(28.0) and base.speedup == 1.0
    assert base.draft_share is None and base.cache_hit_rate is None
    # on p1 and p2 base took 15 s on average, SpecReason 5 s: 3x
    assert t7.speedup == pytest.approx(3.0)
    assert t7.accuracy == 0.5
    assert t7.draft_share == pytest.approx(4 / 8)
    assert t7.overhead_share == pytest.approx((0.4 / 4 + 0.6 / 6) / 2)
    assert t7.cache_hit_rate == pytest.approx(120 / 200)
    assert t7.judge_prefill_per_call == pytest.approx(320 / 8)
    # the floor is known for p1 only (p2 is an older line without it): over p1's calls
    assert t7.judge_floor_per_call == pytest.approx(120 / 4)
    assert t9.judge_floor_per_call is None and base.judge_floor_per_call is None
    assert t7.time_split["rewrite_s"] == pytest.approx(2.0)
    assert t9.speedup == pytest.approx(2.0) and t9.draft_share == 0.0
    assert t9.cache_hit_rate is None


def write_folder(path, records, meta=None):
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if meta is not None:
        (path / "meta.json").write_text(json.dumps(meta))


def test_report_writes_summary_and_plots(tmp_path):
    meta = {
        "settings": {"dataset": "gsm8k", "budget": 1024, "seed": 0},
        "sessions": [
            {
                "machine": {"cpu_count": 2, "usable_cpus": 2, "platform": "Linux"},
                "servers": [
                    {
                        "variant": None,
                        "draft": {"models": [{"id": "draft-model"}]},
                        "base": {"models": [{"id": "base-model"}]},
                    }
                ],
            }
        ],
    }
    write_folder(tmp_path, synthetic(), meta)
    paths = write_report(tmp_path)
    assert [p.name for p in paths] == [SUMMARY_MD, SUMMARY_JSON, ACCURACY_PLOT, TIME_PLOT]
    md = (tmp_path / SUMMARY_MD).read_text()
    assert md.startswith("# Benchmark: gsm8k")
    assert "- budget: `1024`" in md and "base model: base-model" in md
    assert "| base | 3 | 66.7% (2) | 20.00 | 20.00 | 28.00 | 1.00× | – |" in md
    assert (
        "| specreason threshold=7 | 2 | 50.0% (1) | 5.00 | 5.00 | 5.80 | 3.00× | 50% | 10.0% | 60% "
        "| 40 | 30 |"
    ) in md
    assert "| specreason threshold=9 | 1 |" in md
    summary = json.loads((tmp_path / SUMMARY_JSON).read_text())
    assert [row["label"] for row in summary] == [
        "base",
        "specreason threshold=7",
        "specreason threshold=9",
    ]
    for name in (ACCURACY_PLOT, TIME_PLOT):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_report_follows_results_after_a_resume(tmp_path, capsys):
    records = synthetic()
    write_folder(tmp_path, records[:4])
    write_report(tmp_path)
    assert "| specreason threshold=7 | 1 |" in (tmp_path / SUMMARY_MD).read_text()
    write_folder(tmp_path, records)  # the resumed run added lines
    assert main(["bench", "report", str(tmp_path)]) == 0
    assert str(tmp_path / SUMMARY_MD) in capsys.readouterr().out
    assert "| specreason threshold=7 | 2 |" in (tmp_path / SUMMARY_MD).read_text()
    (tmp_path / TIME_PLOT).unlink()
    assert main(["bench", "--report-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / TIME_PLOT).is_file()


def test_scatter_labels_never_share_a_line_where_they_overlap():
    # three labels at one height, the first two overlapping in x: the second goes up a line;
    # the third starts after the first two end and stays on its own line
    assert label_levels([(10, 25, 20), (15, 25, 20), (40, 25, 10)]) == [0, 1, 0]
    # a point far above pushes no one up; one 5 units above a raised label (less than a
    # line from it) and overlapping it goes above it
    assert label_levels([(10, 25, 20), (10, 75, 20), (12, 30, 5)]) == [0, 0, 1]
    assert label_levels([(10, 0, 20), (12, 0, 20), (14, 15, 20)]) == [0, 1, 1]
    # a third overlapping label takes the first free line
    assert label_levels([(0, 0, 10), (1, 0, 10), (2, 0, 10)]) == [0, 1, 2]
    assert label_levels([]) == []


def test_plot_labels_name_the_problem_count_only_when_it_differs():
    rows = {r.run.label: r for r in summarize(synthetic())}
    assert plot_label(rows["base"], 3) == "base"
    assert plot_label(rows["specreason threshold=9"], 3) == "specreason threshold=9 (n=1)"


def test_result_lines_in_old_words_read_in_todays(tmp_path):
    from langchain_specreason.lab.shared.results import read_records

    path = tmp_path / "results.jsonl"
    path.write_text(
        json.dumps(
            {
                "mode": "specreason",
                "steps_kept": 3,
                "regenerate_s": 1.5,
                "steps": [
                    {"decision": "kept", "regen_s": 0.0},
                    {"decision": "rewritten", "regen_s": 2.0},
                ],
            }
        )
        + "\n"
    )
    [record] = read_records(path)
    assert record["steps_accepted"] == 3 and record["rewrite_s"] == 1.5
    assert "steps_kept" not in record and "regenerate_s" not in record
    assert record["steps"] == [
        {"decision": "accepted", "rewrite_s": 0.0},
        {"decision": "rewritten", "rewrite_s": 2.0},
    ]
