"""`specreason probe`'s noise band (issue 44): a ceiling beats a reference only by more than
the probe's own noise; the verdict on the cpu pair's numbers; the new fields' round trip and
files written before them (no server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_specreason.lab.probe import report
from langchain_specreason.lab.probe.ceilings import (
    NOISE_FLOOR,
    Ceilings,
    Measured,
    beats,
    below_reference,
    ceilings,
    clearly_above_reference,
    load_tune_table,
    measured_noise,
    noise_band,
    table_noise,
    tune_table,
    verdict,
)
from langchain_specreason.lab.probe.judging import Judged, JudgeSample
from langchain_specreason.lab.probe.speeds import Decode, Prefill, fastest

# The cpu pair's probe with sd (benchmarks/probe-cpu-sd/summary.json, session 25): one-stream
# and batch decode steps, the judge on 11 drafted steps of 35.7 tokens, 9 accepted.
CPU = Measured(
    draft_step_s={1: 0.1326784537447198, 2: 0.16339247388292433, 4: 0.11570433662235062,
                  8: 0.15149092589627858},
    base_step_s={1: 0.39659585268081887, 2: 0.5227662907766879, 4: 0.34881604605853933,
                 8: 0.48344932193614365},
    sd_step_s={1: 0.20850654219139733, 2: 0.28134545932977184, 4: 0.35118064212772565,
               8: 0.4925867233031703},
    step_tokens=35.72727272727273,
    judge_s=2.5205875680013294,
    acceptance=9 / 11,
    sd_judge_s=3.5044364718189835,
)  # fmt: skip
COMMAND = "specreason tune --profile cpu --probe benchmarks/probe-cpu-sd/summary.json"


def test_beats_only_by_more_than_the_relative_noise():
    sd = 1.90
    assert not beats(sd * 1.03, sd, 0.05)  # 3% above, 5% noise: within it
    assert beats(sd * 1.20, sd, 0.05)  # 20% above: beats it
    assert not beats(sd * 1.05, sd, 0.05)  # exactly at the band's edge: not more than it
    assert not beats(sd * 0.90, sd, 0.0)
    assert beats(sd * 1.001, sd, 0.0)  # no band: the old rule (above is enough)


def test_the_band_is_the_sum_of_the_one_stream_spreads_or_the_floor():
    assert measured_noise(None) is None and measured_noise({"draft": None}) is None
    assert measured_noise({"draft": 0.02, "base": 0.03, "sd": None}) == pytest.approx(0.05)
    assert NOISE_FLOOR == 0.10
    assert noise_band(None) == noise_band(0.04) == pytest.approx(0.10)
    assert noise_band(0.15) == pytest.approx(0.15)
    spread = {"draft": 0.06, "base": 0.05, "sd": 0.04}
    got = ceilings(Measured({1: 0.1}, {1: 0.3}, {1: 0.2}, spread=spread))
    assert got.spread == pytest.approx(0.15) and got.noise == pytest.approx(0.15)
    assert ceilings(Measured({1: 0.1}, {1: 0.3})).noise == pytest.approx(NOISE_FLOOR)


def test_fastest_keeps_the_fastest_repeat_and_records_the_spread():
    runs = [Decode(1, 0.22, 0.1, 2.0, 16), Decode(1, 0.20, 0.1, 1.8, 16)]
    best = fastest(runs)
    assert (best.step_s, best.wall_s, best.repeats) == (0.20, 1.8, 2)
    assert best.step_s_slowest == 0.22 and best.spread == pytest.approx(0.10)
    one = fastest([Decode(1, 0.2, 0.1, 1.8, 16)])
    assert one.repeats == 1 and one.spread is None  # one repeat: no spread known
    assert Decode(1, 0.2, 0.1, 1.8, 16).as_dict()["spread"] is None


def _against_sd(judge_full: float, sd: float = 1.90) -> Ceilings:
    # c = 0.5 (1 / c = 2.0 is the any-judge bound); only the judge ceiling and sd matter here
    return Ceilings(0.5, 0.1, 0.2, judge_full, judge_full * 0.75, sd=sd)


def test_a_ceiling_3_percent_above_sd_with_5_percent_noise_does_not_beat_it():
    said = verdict(_against_sd(1.90 * 1.03), noise=0.05)
    assert said.reference == "sd" and said.noise == 0.05
    assert said.above_reference == () and said.within_noise_of_reference == ("judge_full",)
    assert not said.tune_worth
    assert said.above_base == ("judge_full", "judge_measured")  # 1.96 and 1.47 beat 1.05


def test_a_ceiling_20_percent_above_sd_with_5_percent_noise_beats_it():
    said = verdict(_against_sd(1.90 * 1.20), noise=0.05)
    assert said.above_reference == ("judge_full",) and said.within_noise_of_reference == ()
    assert said.tune_worth
    text = report.verdict_text(said, "specreason tune")
    assert text.startswith(
        "One request at a time: can beat sd (1.90x the base) by more than the probe's noise "
        "(\u00b15%): "
        "judge, every step accepted (2.28x)."
    )
    # the measured-acceptance ceiling (1.71x) is named beside the one the rule read
    assert "read at every step accepted (2.28x on the plain base" in text
    assert "not at the measured acceptance (80%: 1.71x, which does not clearly beat" in text


def test_the_base_is_beaten_only_by_more_than_the_noise_too():
    said = verdict(Ceilings(0.9, 0.05, 0.0, 1.05, 1.05), noise=0.10)  # no sd: the base
    assert said.reference == "base" and said.above_base == () and not said.tune_worth
    assert said.within_noise_of_base == ("judge_full", "judge_measured")
    text = report.verdict_text(said, "specreason tune", sd_measured=False)
    assert text.startswith(
        "One request at a time: no ceiling clearly beats the base model (sd not measured"
    )
    assert "use base alone, or run tune only to confirm" in text


def test_the_verdict_on_the_cpu_pair_keeps_the_judge_within_the_noise_and_names_agreement():
    found = ceilings(CPU)
    assert found.judge_full == pytest.approx(1.9515, abs=1e-4)
    assert found.sd == pytest.approx(1.9021, abs=1e-4)
    assert found.judge_measured == pytest.approx(1.4404, abs=1e-4)
    # the pipelined agreement round on the sd base (the serial round said 1.45x and 1.35x)
    assert found.agree_sd[1].speedup == pytest.approx(2.157, abs=1e-3)
    assert found.agree_sd[2].speedup == pytest.approx(2.335, abs=1e-3)
    said = verdict(found)  # the file recorded no spread: the 10% floor
    assert said.noise == pytest.approx(0.10) and said.spread is None
    assert said.above_reference == ("agree_sd_k1", "agree_sd_k2")
    assert said.within_noise_of_reference == ("judge_full",)
    assert said.tune_worth
    assert said.tune_kinds == ("judge_full", "judge_sd_full", "agree_k2", "agree_sd_k2")
    assert report.verdict_text(said, COMMAND) == (
        "One request at a time: can beat sd (1.90x the base) by more than the probe's noise "
        "(\u00b110%, the floor; no "
        "spread over repeats was recorded): agreement on sd base, k=1 (2.16x); agreement on "
        "sd base, k=2 (2.33x).\n"
        "Within the noise of sd's 1.90x: judge, every step accepted (1.95x).\n"
        "The judge is read at every step accepted (1.95x on the plain base; the bound of any "
        "threshold tune tries), not at the measured acceptance (82%: 1.44x, which does not "
        "clearly beat sd's 1.90x).\n"
        f"tune is worth running:\n  {COMMAND}"
    )
    # with a measured spread above the floor, the text says the band came from the repeats
    spread = {"draft": 0.05, "base": 0.04, "sd": 0.03}
    wide = verdict(ceilings(Measured(**{**CPU.__dict__, "spread": spread})))
    assert wide.noise == pytest.approx(0.12)
    assert "(\u00b112%, the spread over the probe's repeats)" in report.verdict_text(wide, "x")


def test_tune_tables_band_and_the_skip_rule_that_would_use_it():
    table = tune_table(ceilings(CPU), "arithmetic+likelihood")
    assert table["noise"] == pytest.approx(0.10)
    # the plain base's 1.95x: not below sd's 1.90x (tune keeps it) but not clearly above it
    assert not below_reference(table, "arithmetic+likelihood", False)
    assert not clearly_above_reference(table, "arithmetic+likelihood", False)
    assert below_reference(table, "arithmetic+likelihood", True)  # 1.72x on the sd base
    assert clearly_above_reference(table, "score", False)  # any judge: 1 / c = 2.99x
    old = {k: v for k, v in table.items() if k != "noise"}  # a file from before the band
    assert table_noise(old) == NOISE_FLOOR
    assert not clearly_above_reference(old, "likelihood", False)


def _doc():
    decodes = {
        role: [
            fastest([Decode(n, s, 0.1, 1.0, 16 * n), Decode(n, s * 1.08, 0.1, 1.0, 16 * n)])
            for n, s in sorted(steps.items())
        ]
        for role, steps in (("draft", CPU.draft_step_s), ("base", CPU.base_step_s))
    }
    assert CPU.sd_step_s is not None
    decodes["sd"] = [
        fastest([Decode(n, s, 0.1, 1.0, 16 * n), Decode(n, s * 1.05, 0.1, 1.0, 16 * n)])
        for n, s in sorted(CPU.sd_step_s.items())
    ]
    # 8 drafted steps of 36 tokens and 3 of 35 (35.7 on average), 9 of the 11 accepted
    sizes = [36] * 8 + [35] * 3
    judges = {
        role: JudgeSample.of(
            "arithmetic+likelihood",
            [Judged(n, i < 9, seconds, 152, 128) for i, n in enumerate(sizes)],
        )
        for role, seconds in (("base", CPU.judge_s), ("sd", CPU.sd_judge_s))
    }
    measured = Measured(  # as command.py builds it
        draft_step_s={d.concurrency: d.step_s for d in decodes["draft"]},
        base_step_s={d.concurrency: d.step_s for d in decodes["base"]},
        sd_step_s={d.concurrency: d.step_s for d in decodes["sd"]},
        step_tokens=judges["base"].mean_step_tokens,
        judge_s=judges["base"].mean_s,
        acceptance=judges["base"].acceptance,
        sd_judge_s=judges["sd"].mean_s,
        spread={role: ds[0].spread for role, ds in decodes.items()},
    )
    found = ceilings(measured)
    cold, cached = Prefill(683, 0, 17.8), Prefill(683, 672, 0.67)
    return report.summary(
        {"judge": "arithmetic+likelihood", "seconds": 1.0},
        decodes,
        {role: (cold, cached) for role in decodes},
        judges,
        found,
        verdict(found),
        COMMAND,
    )


def test_the_new_fields_round_trip_through_summary_json(tmp_path):
    doc = _doc()
    path = report.write(doc, tmp_path)
    back = json.loads(path.read_text())
    assert back == json.loads(json.dumps(doc))
    assert tuple(back) == report.TOP_KEYS and back["schema"] == 1
    row = back["decode"]["sd"][0]
    assert row["repeats"] == 2 and row["spread"] == pytest.approx(0.05)
    assert row["step_s_slowest"] == pytest.approx(row["step_s"] * 1.05)
    # 8% + 8% + 5% = 21%: the band comes from the repeats, above the floor
    assert back["ceilings"]["spread"] == pytest.approx(0.21)
    assert back["ceilings"]["noise"] == pytest.approx(0.21)
    v = back["verdict"]
    assert v["noise"] == pytest.approx(0.21) and v["spread"] == pytest.approx(0.21)
    # agreement on the sd base at k = 2 (2.33x) beats sd by more than 21%; at k = 1 (2.16x) not
    assert v["within_noise_of_reference"] == ["judge_full", "agree_sd_k1"]
    assert v["above_reference"] == ["agree_sd_k2"] and v["tune_worth"] is True
    assert v["tune_kinds"] == ["judge_full", "judge_sd_full", "agree_k2", "agree_sd_k2"]
    assert "(\u00b121%, the spread over the probe's repeats)" in v["text"]
    assert back["tune"]["noise"] == pytest.approx(0.21)
    assert load_tune_table(path)["noise"] == pytest.approx(0.21)
    # rebuilding a new file from its own measurements gives it back
    assert report.load(path) == back
    assert "spread" in report.table(back) and "noise band \u00b121%" in report.table(back)


def _strip_band(doc):
    """``doc`` as a probe wrote it before the noise band (its fields removed)."""
    old = json.loads(json.dumps(doc))
    for rows in old["decode"].values():
        for row in rows:
            for key in ("repeats", "step_s_slowest", "spread"):
                del row[key]
    for key in ("spread", "noise"):
        del old["ceilings"][key]
    for key in ("noise", "spread", "within_noise_of_reference", "within_noise_of_base"):
        del old["verdict"][key]
    del old["verdict"]["tune_kinds"]
    del old["tune"]["noise"]
    old["verdict"]["tune_worth"] = True  # what the old rule said (1.95x > 1.90x)
    return old


def test_a_summary_written_before_the_band_still_reads_and_rebuilds(tmp_path):
    old = _strip_band(_doc())
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(old, indent=1))
    assert "judge, every step accepted" in report.table(old)  # the old table still prints
    table = load_tune_table(path)  # tune --probe still reads it
    assert "noise" not in table and table_noise(table) == NOISE_FLOOR
    new = report.load(path)
    assert tuple(new) == report.TOP_KEYS
    assert new["decode"] == old["decode"] and new["probe"] == old["probe"]
    assert new["ceilings"]["spread"] is None and new["ceilings"]["noise"] == NOISE_FLOOR
    assert new["verdict"]["tune_worth"] is True  # agreement on the sd base (2.33x)
    assert new["verdict"]["tune_command"] == COMMAND
    assert "no spread over repeats was recorded" in new["verdict"]["text"]
    assert new["tune"]["noise"] == NOISE_FLOOR


def test_the_committed_cpu_probe_rebuilds_with_the_pipelined_agreement_ceilings():
    path = Path(__file__).parents[2] / "benchmarks" / "probe-cpu-sd" / "summary.json"
    if not path.exists():
        pytest.skip("benchmarks/probe-cpu-sd is not in this checkout")
    doc = report.load(path)
    assert doc["verdict"]["reference"] == "sd"
    assert set(doc["verdict"]) >= {"noise", "within_noise_of_reference", "tune_kinds"}
    if doc["verdict"]["spread"] is None:  # the session-25 file: no spread recorded
        # the judge within the noise of sd; agreement on the sd base above it (2.16x, 2.33x)
        assert doc["verdict"]["tune_worth"] is True
        assert doc["verdict"]["within_noise_of_reference"] == ["judge_full"]
        assert doc["verdict"]["above_reference"] == ["agree_sd_k1", "agree_sd_k2"]
