"""Label reliability: split-half agreement and the model-based ceiling, on hand-made rollouts."""

from __future__ import annotations

import json

import pytest

from langchain_specreason.errors import InputError
from langchain_specreason.lab.labels.reliability import (
    Rollouts,
    beta_prior,
    ceiling,
    label_reliability,
    read_rollouts,
    spearman_brown,
    split_half,
    write_reliability,
)

T, F = True, False


def rows_of(*pairs: tuple[str, str], same: bool = False) -> list[Rollouts]:
    """Rollouts from strings like ("1100", "1111"): draft side, base side."""
    return [
        Rollouts(tuple(c == "1" for c in d), tuple(c == "1" for c in b), same) for d, b in pairs
    ]


def test_split_half_compares_the_first_half_with_the_second():
    rows = rows_of(
        ("0000", "1111"),  # halves: advantage 1, 1 -> harmful by the second half
        ("1111", "1111"),  # 0, 0
        ("0011", "1111"),  # 1, 0
        ("1100", "1111"),  # 0, 1 -> harmful by the second half
    )
    r, half_auroc, harmful = split_half(rows, gap=0.5)
    assert harmful == 2
    assert r == pytest.approx(0.0)  # first (1,0,1,0) against second (1,0,0,1)
    # keep score -advantage: harmless (rows 2, 3) score 0 and -1, harmful (1, 4) -1 and 0
    assert half_auroc == pytest.approx(0.5)


def test_split_half_of_perfectly_repeatable_rollouts_agrees_fully():
    rows = rows_of(("0000", "1111"), ("1111", "1111"), ("0000", "0000"), ("1111", "0000"))
    r, half_auroc, harmful = split_half(rows, gap=0.5)
    assert r == pytest.approx(1.0) and half_auroc == pytest.approx(1.0) and harmful == 1


def test_spearman_brown_steps_a_half_up_to_the_whole():
    assert spearman_brown(0.5, 2) == pytest.approx(2 / 3)
    assert spearman_brown(1.0, 2) == pytest.approx(1.0)
    assert spearman_brown(None, 2) is None


def test_beta_prior_reads_overdispersion_from_the_counts():
    a, b = beta_prior([0, 4, 0, 4], 4)  # all or none: rates near 0 or 1, a U-shaped prior
    assert a / (a + b) == pytest.approx(0.5) and a + b < 0.2
    a, b = beta_prior([2, 2, 2, 2], 4)  # less spread than binomial: a tight prior at 0.5
    assert a / (a + b) == pytest.approx(0.5) and a + b > 50


def test_the_ceiling_is_near_one_for_repeatable_labels_and_lower_for_coin_flips():
    steady = rows_of(*([("0000", "1111")] * 10 + [("1111", "1111")] * 30))
    high, interval = ceiling(steady, 0.5, draws=100)
    assert high is not None and high > 0.95 and interval is not None
    flips = rows_of(*([("0101", "1100"), ("1010", "0110"), ("0110", "1011")] * 13))
    low, _ = ceiling(flips, 0.5, draws=100)
    assert low is not None and low < high - 0.1


def test_same_step_rows_are_never_harmful_in_a_fresh_draw():
    rows = rows_of(("0000", "1111"), ("1111", "1111")) + rows_of(("0000", "0000"), same=True)
    found = label_reliability(rows, 0.5, draws=20)
    assert found.steps == 3 and found.harmful == 1 and found.m == 4


def test_write_reliability_reads_the_gap_from_meta_and_writes_json(tmp_path):
    lines = [
        {"draft_correct": [F, F, F, F], "base_correct": [T, T, T, F], "same_step": False},
        {"draft_correct": [T, T, F, F], "base_correct": [T, T, T, T], "same_step": False},
        {"draft_correct": [T, T, T, T], "base_correct": [T, T, T, T], "same_step": True},
    ]
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "meta.json").write_text(json.dumps({"settings": {"harmful_gap": 0.75}}))
    found = write_reliability(tmp_path, draws=10)
    saved = json.loads((tmp_path / "reliability.json").read_text())
    assert saved["gap"] == 0.75 and found.harmful == saved["harmful"] == 1  # 0.5 < 0.75
    assert set(saved) >= {"split_half_r", "split_half_auroc", "ceiling_auroc", "ceiling_interval"}
    assert "m = 4 rollouts a side" in found.format()


@pytest.mark.parametrize(
    "line, message",
    [
        ({"draft_correct": [T, F], "same_step": False}, "line 1"),
        ({"draft_correct": [T, F], "base_correct": [T], "same_step": False}, "one length"),
        ({"draft_correct": [T], "base_correct": [T], "same_step": False}, "at least 2"),
        ({"draft_correct": ["yes", F], "base_correct": [T, T], "same_step": False}, "booleans"),
    ],
)
def test_a_malformed_line_is_a_typed_error_naming_file_and_line(tmp_path, line, message):
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(InputError, match=message) as caught:
        read_rollouts(path)
    assert str(path) in str(caught.value)


def test_lines_with_different_numbers_of_rollouts_are_refused(tmp_path):
    path = tmp_path / "labels.jsonl"
    rows = [
        {"draft_correct": [T, F], "base_correct": [T, T], "same_step": False},
        {"draft_correct": [T, F, T, T], "base_correct": [T, T, F, F], "same_step": False},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    with pytest.raises(InputError, match="different numbers of rollouts"):
        read_rollouts(path)


def test_a_folder_without_labels_is_a_typed_error(tmp_path):
    with pytest.raises(InputError, match=r"no labels\.jsonl"):
        write_reliability(tmp_path)


def test_the_split_half_interval_resamples_whole_problems():
    # two problems: one whose halves agree perfectly, one whose halves disagree
    agree = [
        Rollouts((F, F, F, F), (T, T, T, T), False, "p1"),
        Rollouts((T, T, T, T), (T, T, T, T), False, "p1"),
    ]
    disagree = [
        Rollouts((F, F, T, T), (T, T, T, T), False, "p2"),
        Rollouts((T, T, F, F), (T, T, T, T), False, "p2"),
    ]
    from langchain_specreason.lab.labels.reliability import split_half_interval

    low, high = split_half_interval(agree + disagree, 0.5, resamples=200) or (None, None)
    # a resample of p1 twice scores 1.0, of p2 twice 0.0 (the harmful step's first half is 0)
    assert low == pytest.approx(0.0) and high == pytest.approx(1.0)
    assert split_half_interval(agree, 0.5, resamples=50) == (1.0, 1.0)
