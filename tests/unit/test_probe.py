"""`specreason probe`: the ceiling arithmetic, the verdict rule, the summary's schema, the
prompts file, what the decode measurement sends, and tune's `--probe` skip (no server)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from langchain_specreason.endpoint import ChatRequest, Completion
from langchain_specreason.errors import ConfigError
from langchain_specreason.lab.probe import report
from langchain_specreason.lab.probe.ceilings import (
    Agreement,
    Measured,
    agreement_ceiling,
    agreement_speedup,
    batch_cost,
    below_reference,
    candidate_ceiling,
    ceilings,
    load_tune_table,
    round_time,
    verdict,
)
from langchain_specreason.lab.probe.command import (
    concurrencies,
    probe_family,
    settle_flags,
    tune_command,
)
from langchain_specreason.lab.probe.judging import Judged, JudgeSample
from langchain_specreason.lab.probe.prompts import BUILTIN, load_prompts
from langchain_specreason.lab.probe.speeds import Decode, Prefill, decode, fastest
from langchain_specreason.lab.tune.command import Grid, _probed

from .fakes import ScriptedEndpoint

# A hand-computed case. Draft 0.15 s a token, base 0.45 s: c = 1/3. A step of 30 tokens takes
# the base 13.5 s; a judge call of 2.7 s is v = 0.2; 80% accepted is r = 0.2.
# The base writes a batch of 2 at 1.5 times the step of one, 4 at twice, 8 at four times. The
# sd base writes 0.25 s a token alone (sd = 1.8x), 0.75 s at 2 and 1.5 s at 4 (its speculation
# took the spare capacity); its judge call is 5 s.
HAND = Measured(
    draft_step_s={1: 0.15, 2: 0.15, 4: 0.15, 8: 0.15},
    base_step_s={1: 0.45, 2: 0.675, 4: 0.9, 8: 1.8},
    sd_step_s={1: 0.25, 2: 0.75, 4: 1.5},
    step_tokens=30.0,
    judge_s=2.7,
    acceptance=0.8,
    sd_judge_s=5.0,
)


def test_judge_ceilings_are_one_over_c_plus_v_and_plus_r():
    got = ceilings(HAND)
    assert got.c == pytest.approx(1 / 3)
    assert got.v == pytest.approx(0.2)
    assert got.r == pytest.approx(0.2)
    assert got.judge_full == pytest.approx(1 / (1 / 3 + 0.2))  # 1.875
    assert got.judge_measured == pytest.approx(1 / (1 / 3 + 0.2 + 0.2))  # 1.364


def test_on_the_sd_base_the_judge_ceiling_is_sd_over_its_own_c_v_r():
    got = ceilings(HAND)
    assert got.sd == pytest.approx(1.8)
    assert got.c_sd == pytest.approx(0.6)  # 0.15 / 0.25
    assert got.v_sd == pytest.approx(5.0 / (30 * 0.25))  # 2/3
    assert got.judge_sd_full == pytest.approx(1.8 / (0.6 + 2 / 3))  # 1.421
    assert got.judge_sd_measured == pytest.approx(1.8 / (0.6 + 2 / 3 + 0.2))  # 1.227


def test_the_agreement_ceiling_is_the_pipelined_round_of_the_reviews_example():
    # k = 1 agreeing step then a disagreement, N = 2 in flight, c = 0.27, a free batch (b = 1):
    # the draft's step (0.27) then the base's step at position 1, sent after it (1): 1.27 for
    # two steps, 1.58x; the serial round (two drafts, then a batch) said 2 / 1.54 = 1.31x
    free = {1: 1.0, 2: 1.0}
    assert round_time(1, 2, 0.27, free) == pytest.approx(1.27)
    assert agreement_speedup(1, 2, 0.27, free) == pytest.approx(2 / 1.27)
    assert agreement_speedup(1, 2, 0.27, free) == pytest.approx(1.58, abs=0.01)
    assert agreement_ceiling(1, 0.27, {1: 1.0, 2: 1.0}, 1.0) == Agreement(
        1, 2, pytest.approx(2 / 1.27)
    )


@pytest.mark.parametrize("c", [0.1, 0.27, 1 / 3, 0.9, 1.5])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_with_a_free_batch_the_round_costs_k_drafts_and_one_base_step(k, c):
    # (k + 1) / (k c + max(c, 1)): the last base position starts after k drafts; a draft slower
    # than the base makes the round wait for the draft's own step at the disagreement
    free = {1: 1.0}
    assert agreement_speedup(k, k + 1, c, free) == pytest.approx((k + 1) / (k * c + max(c, 1)))


def test_a_costly_batch_lowers_the_ceiling_between_its_bounds():
    # base requests sharing the server: slower than the free batch, faster than if the last
    # position ran the whole time at the batch's step
    c, costly = 1 / 3, {1: 1.0, 2: 1.5, 4: 2.0}
    for k in (1, 2, 3):
        got = agreement_speedup(k, k + 1, c, costly)
        assert (k + 1) / (k * c + 2.0) < got < (k + 1) / (k * c + 1.0)
    # more steps in flight than k + 1 only add base requests that share the server
    assert agreement_speedup(1, 4, c, costly) < agreement_speedup(1, 2, c, costly)
    assert agreement_speedup(1, 4, c, {1: 1.0}) == pytest.approx(
        agreement_speedup(1, 2, c, {1: 1.0})
    )
    # an unmeasured concurrency reads the one measured below it (3 -> 2)
    assert batch_cost(costly, 3) == 1.5 and batch_cost(costly, 8) == 2.0


def test_agreement_rounds_by_hand():
    got = ceilings(HAND)
    # c = 1/3; b(2) = 1.5. k = 1: position 0 alone until 1/3 (2/3 left), then both at 2/3 a
    # unit: position 0 done at 4/3, position 1 has 1/3 left, alone: 5/3 for 2 steps
    assert (got.agree[1].n, got.agree[1].speedup) == (2, pytest.approx(2 / (5 / 3)))  # 1.2
    # k = 2: three positions sent at 0, 1/3, 2/3 (b(3) is read as b(2)): the last done at 37/18
    assert (got.agree[2].n, got.agree[2].speedup) == (3, pytest.approx(54 / 37))  # 1.46
    # on the sd base t_s(1) / t_b = 5/9 and t_s(2) / t_b = 5/3: position 0 has 0.4 left at 1/3,
    # both run at 0.6 a unit until 1, then position 1 alone (0.6 left at 1.8): 4/3 for 2 steps
    assert (got.agree_sd[1].n, got.agree_sd[1].speedup) == (2, pytest.approx(1.5))
    assert got.agree_sd[2].speedup == pytest.approx(1.4211, abs=1e-4)


def test_an_agreement_ceiling_needs_only_the_single_stream():
    # no batch of 3 measured: the batch of 2's step stands for it (free here: 3 / (2/3 + 1))
    assert agreement_ceiling(2, 0.15, {1: 0.45, 2: 0.45}, 0.45) == Agreement(
        2, 3, pytest.approx(1.8)
    )
    assert agreement_ceiling(1, 0.15, {2: 0.45}, 0.45) is None  # one stream not measured
    only_two = ceilings(Measured({1: 0.1, 2: 0.1}, {1: 0.3, 2: 0.3}))
    assert set(only_two.agree) == {1, 2}
    assert only_two.v is None and only_two.judge_full is None and only_two.sd is None


def test_verdict_against_sd_names_what_beats_it_and_says_tune_is_worth_it():
    # 1.875 is 4.2% above sd's 1.8: it beats it with a 3% band (the default band is below)
    said = verdict(ceilings(HAND), noise=0.03)
    assert (said.reference, said.reference_speedup) == ("sd", pytest.approx(1.8))
    assert said.above_reference == ("judge_full",)  # 1.875 > 1.8 * 1.03; nothing else is
    assert "agree_k1" in said.above_base and "judge_sd_measured" in said.above_base
    assert "agree_sd_k2" in said.above_base  # 1.42
    assert said.tune_worth
    text = report.verdict_text(said, "specreason tune --probe x")
    assert text.startswith(
        "One request at a time: can beat sd (1.80x the base) by more than the probe's noise "
        "(\u00b13%): "
        "judge, every step accepted (1.88x)."
    )
    assert "tune is worth running" in text and "specreason tune --probe x" in text


def test_verdict_with_the_default_band_says_a_4_percent_edge_is_within_the_noise():
    said = verdict(ceilings(HAND))  # no spread measured: the 10% floor
    assert said.noise == pytest.approx(0.10) and said.spread is None
    assert said.above_reference == () and said.within_noise_of_reference == ("judge_full",)
    assert not said.tune_worth
    text = report.verdict_text(said, "specreason tune --probe x")
    assert text.startswith(
        "One request at a time: no ceiling clearly beats sd (1.80x the base): judge, every "
        "step accepted (1.88x) is "
        "within the probe's noise (\u00b110%, the floor; no spread over repeats was recorded) "
        "of sd's 1.80x."
    )
    assert "use sd alone, or run tune only to confirm:\n  specreason tune --probe x" in text


def test_verdict_says_use_sd_when_no_ceiling_beats_it():
    faster_sd = Measured({**HAND.draft_step_s}, {**HAND.base_step_s}, {1: 0.2, 2: 0.5, 4: 1.0},
                         30.0, 2.7, 0.8, 5.0)  # fmt: skip
    said = verdict(ceilings(faster_sd))
    assert said.reference == "sd" and said.reference_speedup == pytest.approx(2.25)
    assert said.above_reference == () and not said.tune_worth
    text = report.verdict_text(said, "specreason tune")
    assert "no step speculation can beat sd" in text and "use sd alone" in text


def test_without_sd_or_with_a_slow_sd_the_reference_is_the_base():
    no_sd = Measured(HAND.draft_step_s, HAND.base_step_s, None, 30.0, 2.7, 0.8)
    said = verdict(ceilings(no_sd))
    assert (said.reference, said.reference_speedup) == ("base", 1.0)
    assert said.tune_worth and "judge_full" in said.above_reference
    text = report.verdict_text(said, "specreason tune", sd_measured=False)
    assert text.startswith(
        "One request at a time: can beat the base model (sd not measured: no sd server given) "
        "by more than the probe's noise"
    )
    slow_sd = Measured(HAND.draft_step_s, HAND.base_step_s, {1: 0.5, 2: 0.5}, 30.0, 2.7, 0.8)
    assert verdict(ceilings(slow_sd)).reference == "base"
    # a draft as slow as the base: nothing beats the base, tune is not worth it
    hopeless = Measured({1: 0.45, 2: 0.45}, {1: 0.45, 2: 0.45}, None, 30.0, 2.7, 1.0)
    said = verdict(ceilings(hopeless))
    assert said.above_base == () and not said.tune_worth


def _summary(tmp_path):
    # two repeats of each measurement, the slower one 2% slower: each server spreads 2%
    decodes = {
        role: [
            fastest(
                [
                    Decode(n, steps[n], 0.1, 1.0, 16 * n),
                    Decode(n, steps[n] * 1.02, 0.1, 1.0, 16 * n),
                ]
            )
            for n in sorted(steps)
        ]
        for role, steps in (("draft", HAND.draft_step_s), ("base", HAND.base_step_s))
    }
    cold, cached = Prefill(500, 0, 2.0), Prefill(500, 384, 0.5)
    judged = [Judged(30, True, 2.7, 200, 128)] * 4 + [Judged(30, False, 2.7, 200, 128)]
    sample = JudgeSample.of("arithmetic+likelihood", judged)
    found = ceilings(replace(HAND, spread={role: ds[0].spread for role, ds in decodes.items()}))
    doc = report.summary(
        {"judge": "arithmetic+likelihood", "seconds": 1.0},
        decodes,
        {"draft": (cold, cached), "base": (cold, cached)},
        {"base": sample},
        found,
        verdict(found),
        "specreason tune --probe s.json",
    )
    return doc, report.write(doc, tmp_path)


def test_summary_json_schema(tmp_path):
    doc, path = _summary(tmp_path)
    back = json.loads(path.read_text())
    assert back == json.loads(json.dumps(doc))
    assert tuple(back) == report.TOP_KEYS and back["schema"] == report.SCHEMA == 1
    assert set(back["decode"]) == {"draft", "base"}
    assert set(back["decode"]["base"][0]) == {
        "concurrency", "step_s", "tok_s", "aggregate_tok_s", "ttft_s", "wall_s", "tokens",
        "repeats", "step_s_slowest", "spread", "stream_tokens",
    }  # fmt: skip
    assert back["decode"]["base"][0]["repeats"] == 2
    assert back["decode"]["base"][0]["spread"] == pytest.approx(0.02)
    assert back["decode"]["base"][-1]["aggregate_tok_s"] == pytest.approx(8 / 1.8)
    assert set(back["prefill"]["base"]) == {"cold", "cached"}
    assert back["prefill"]["base"]["cached"] == {
        "prompt_tokens": 500, "cached_tokens": 384, "seconds": 0.5, "tok_s": 1000.0
    }  # fmt: skip
    assert back["judge"]["base"] == {
        "judge": "arithmetic+likelihood",
        "steps": 5,
        "accepted": 4,
        "acceptance": 0.8,
        "mean_s": pytest.approx(2.7),
        "mean_step_tokens": 30.0,
        "mean_prompt_tokens": 200.0,
    }
    c = back["ceilings"]
    assert set(c) == {
        "c", "v", "r", "c_sd", "v_sd", "named", "agree", "agree_sd", "spread", "noise", "load",
        "sd_by_load",
    }  # fmt: skip
    assert c["spread"] == pytest.approx(0.04) and c["noise"] == pytest.approx(0.10)
    assert set(c["named"]) == {
        "judge_full", "judge_measured", "agree_k1", "agree_k2", "sd", "judge_sd_full",
        "judge_sd_measured", "agree_sd_k1", "agree_sd_k2",
    }  # fmt: skip
    assert c["agree"]["k2"] == {"n": 3, "speedup": pytest.approx(54 / 37)}
    assert set(back["verdict"]) == {
        "reference", "reference_speedup", "above_reference", "above_base", "tune_worth",
        "tune_command", "text", "noise", "spread", "within_noise_of_reference",
        "within_noise_of_base", "tune_kinds", "load",
    }  # fmt: skip
    # 1.875 is within 10% of sd's 1.8 (the floor: the repeats spread 4% in all)
    assert back["verdict"]["tune_worth"] is False
    assert back["verdict"]["within_noise_of_reference"] == ["judge_full"]
    assert "the floor; the repeats spread 4%" in back["verdict"]["text"]
    assert back["tune"] == {
        "reference": pytest.approx(1.8),
        "noise": pytest.approx(0.10),
        "load": 1,
        "judge": "arithmetic+likelihood",
        "plain": {"measured_judge": pytest.approx(1.875), "any_judge": pytest.approx(3.0)},
        "sd": {
            "measured_judge": pytest.approx(1.8 / (0.6 + 2 / 3)),
            "any_judge": pytest.approx(3.0),
        },
    }
    table = report.table(back)
    assert "judge, every step accepted" in table and "1.88x" in table
    assert "(N = 3 steps in flight)" in table


def test_tune_reads_the_probe_and_skips_settings_that_cannot_beat_its_reference(tmp_path, capsys):
    _, path = _summary(tmp_path)
    table = load_tune_table(path)
    # the probe's own judge (and one deciding with the same last part): its measured ceiling
    assert candidate_ceiling(table, "likelihood", False) == pytest.approx(1.875)
    assert not below_reference(table, "likelihood", False)  # 1.875 > 1.8
    assert below_reference(table, "arithmetic+likelihood", True)  # 1.42 on the sd base
    assert candidate_ceiling(table, "score", True) == pytest.approx(3.0)  # not measured: 1 / c
    runs = Grid(
        ("arithmetic+likelihood", "score"),
        {"likelihood_threshold": (-0.5,), "threshold": (7.0,)},
        (0,),
        (False, True),
    ).runs()
    kept = _probed(runs, str(path))
    assert [(r.judge, r.mode) for r in kept] == [
        ("arithmetic+likelihood", "specreason"),
        ("score", "specreason"),
        ("score", "specreason+sd"),
    ]
    assert "skipped specreason+sd" in capsys.readouterr().err


def test_a_file_that_is_not_a_probe_summary_is_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": 1}')
    with pytest.raises(ConfigError, match="not a probe summary"):
        load_tune_table(bad)
    with pytest.raises(ConfigError, match=r"missing\.json"):
        load_tune_table(tmp_path / "missing.json")


def test_prompts_from_jsonl_or_lines(tmp_path):
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"question": "A?", "answer": "1"}\n\n"B?"\n{"problem": "C?"}\n')
    assert load_prompts(jsonl) == ["A?", "B?", "C?"]
    lines = tmp_path / "p.txt"
    lines.write_text("first question\n\n{not json: a line is a prompt}\n")
    assert load_prompts(lines) == ["first question", "{not json: a line is a prompt}"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "no known field"}\n')
    with pytest.raises(ConfigError, match="line 1"):
        load_prompts(bad)
    empty = tmp_path / "e.txt"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="no prompt"):
        load_prompts(empty)
    assert len(BUILTIN) >= 3


def test_concurrency_levels_always_hold_one():
    assert concurrencies("8,2,4") == [1, 2, 4, 8]
    with pytest.raises(ConfigError):
        concurrencies("0,2")
    with pytest.raises(ConfigError):
        concurrencies("two")


async def test_with_ignore_eos_decode_still_sends_the_old_fixed_length_requests():
    def handler(request: ChatRequest) -> Completion:
        return Completion(text="a b c d", finish_reason="length", completion_tokens=4)

    server = ScriptedEndpoint("base", handler)
    prompts = [[{"role": "user", "content": q}] for q in ("one", "two")]
    got = await decode(server, prompts, 3, 4, ignore_eos=True)
    assert got.concurrency == 3 and got.tokens == 12
    assert [r.messages[0]["content"] for r in server.requests] == ["one", "two", "one"]
    for r in server.requests:
        assert r.max_tokens == 4 and r.temperature == 0.0
        assert r.extra_body == {"ignore_eos": True}


def test_probe_without_its_extra_names_the_extra():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['tqdm'] = None; "
        "from langchain_specreason.cli import main; sys.exit(main(['probe', '--quick']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith("error: `specreason probe` needs the `bench` extra")
    )


def _probe_args(*argv: str):
    from langchain_specreason.cli import build_parser

    return build_parser().parse_args(["probe", *argv])


def test_quick_sets_only_the_flags_not_given():
    quick = _probe_args("--quick", "--repeats", "3", "--concurrency", "1,4")
    settle_flags(quick)
    assert (quick.repeats, quick.concurrency) == (3, "1,4")  # given: kept
    assert (quick.max_tokens, quick.judge_prompts, quick.prefill_tokens) == (16, 1, 256)
    plain = _probe_args("--judge-steps", "5")
    settle_flags(plain)
    assert plain.judge_steps == 5
    assert (plain.max_tokens, plain.concurrency, plain.repeats) == (384, "1,2,4,8", 2)


def test_the_tune_command_searches_sd_settings_only_when_sd_was_probed(tmp_path):
    summary = tmp_path / "summary.json"
    with_sd = tune_command(_probe_args("--profile", "cpu"), summary, True)
    assert with_sd == f"specreason tune --profile cpu --probe {summary} --out runs/tune"
    no_sd = tune_command(_probe_args("--profile", "cpu", "--no-sd"), summary, False)
    assert no_sd == (
        f"specreason tune --profile cpu --no-sd-settings --probe {summary} --out runs/tune"
    )
    urls = _probe_args(
        "--draft-url", "http://d/v1", "--base-url", "http://b/v1", "--family", "think"
    )
    assert tune_command(urls, summary, False) == (
        "specreason tune --draft-url http://d/v1 --base-url http://b/v1 --family think "
        f"--no-sd-settings --probe {summary} --out runs/tune"
    )


def test_servers_given_by_url_without_a_family_say_which_family_is_assumed(capsys):
    urls = ("--draft-url", "http://d/v1", "--base-url", "http://b/v1")
    assert probe_family(_probe_args(*urls)) == "instruct"
    assert "no --family given" in capsys.readouterr().err
    assert probe_family(_probe_args(*urls, "--family", "think")) == "think"
    assert probe_family(_probe_args("--profile", "cpu")) == "instruct"
    assert capsys.readouterr().err == ""  # the profile's own family: nothing to say
