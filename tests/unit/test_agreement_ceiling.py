"""`bench agreement --probe`: each decision's speed ceiling on the probed pair."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from langchain_specreason.errors import ConfigError, InputError
from langchain_specreason.lab.agreement.ceiling import PairSpeeds, ceiling_rows, read_speeds

PROBE = Path(__file__).parents[2] / "benchmarks" / "probe-cpu-sd" / "summary.json"
SPEEDS = PairSpeeds("p", 1, c=0.335, sd=1.90, c_sd=0.636, noise=0.10)


def test_a_free_decision_runs_at_most_at_the_judge_ceiling():
    assert SPEEDS.plain(0.0) == pytest.approx(1 / 0.335)
    assert SPEEDS.plain(0.25) == pytest.approx(1 / 0.585)
    assert SPEEDS.on_sd(0.25) == pytest.approx(1.90 / 0.886)
    assert SPEEDS.reference == ("sd", 1.90)
    # beaten only above the reference by more than the band: 2.09x
    assert SPEEDS.beats(2.10) and not SPEEDS.beats(2.08) and not SPEEDS.beats(None)
    share = SPEEDS.largest_base_share()  # the sd base's: 1.9 / 2.09 - 0.636
    assert share == pytest.approx(1.90 / 2.09 - 0.636)
    assert SPEEDS.beats(SPEEDS.on_sd(share - 1e-6)) and not SPEEDS.beats(SPEEDS.on_sd(share + 1e-3))


def test_without_sd_the_base_is_the_reference():
    plain = PairSpeeds("p", 4, c=0.5, sd=None, c_sd=None, noise=0.1)
    assert plain.reference == ("base", 1.0)
    assert plain.on_sd(0.1) is None
    assert plain.largest_base_share() == pytest.approx(1 / 1.1 - 0.5)


def test_rules_get_no_judge_ceiling():
    readings = [
        SimpleNamespace(row="oracle", kind="oracle", chosen="-", base_steps=0.16),
        SimpleNamespace(row="agree", kind="rule", chosen="-", base_steps=1.0),
        SimpleNamespace(row="judge", kind="judge", chosen="catches 90%", base_steps=0.5),
    ]
    rows = ceiling_rows(readings, SPEEDS)
    assert [r["decision"] for r in rows] == ["oracle", "judge"]
    assert rows[0]["beats_reference"] and not rows[1]["beats_reference"]


def test_the_committed_probe_reads_and_a_bad_file_is_named(tmp_path):
    speeds = read_speeds(PROBE)
    assert speeds.load == 1 and speeds.sd == pytest.approx(1.902, abs=1e-3)
    assert speeds.c == pytest.approx(0.3345, abs=1e-4)
    bad = tmp_path / "summary.json"
    bad.write_text(json.dumps({"decode": {}}))
    with pytest.raises(ConfigError, match="not a probe summary"):
        read_speeds(bad)
    with pytest.raises(ConfigError, match="--probe"):
        read_speeds(tmp_path / "missing.json")


def test_the_report_adds_the_ceilings(tmp_path):
    from langchain_specreason.config import SpecReasonConfig
    from langchain_specreason.lab.agreement.report import write_report

    labels = tmp_path / "labels.jsonl"
    rows = [
        {
            "problem_id": f"p{p}",
            "step_index": i,
            "step": "x = 2\n\n",
            "base_step": "x = 3\n\n",
            "harmful": i == 1,
            "advantage": 0.5 if i == 1 else 0.0,
        }
        for p in range(3)
        for i in range(3)
    ]
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = SpecReasonConfig(agree_rule="result")
    text = write_report(labels, tmp_path / "out", ["result"], config, probe=PROBE)
    assert "Speed ceilings on the probed pair" in text
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    (oracle,) = summary["ceilings"]["decisions"]  # the rule has none
    assert oracle["base_steps"] == pytest.approx(1 / 3)
    assert summary["ceilings"]["speeds"]["load"] == 1
    plain = tmp_path / "plain.jsonl"
    keys = ("step", "base_step", "harmful")
    plain.write_text("".join(json.dumps({k: r[k] for k in keys}) + "\n" for r in rows))
    with pytest.raises(InputError, match="no rollout advantage"):
        write_report(plain, tmp_path / "out2", ["result"], config, probe=PROBE)
