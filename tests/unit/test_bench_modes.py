"""Modes, thresholds, server groups and the `specreason bench` flags (errors before any work)."""

from __future__ import annotations

import pytest

from langchain_specreason import SpecReasonConfig
from langchain_specreason.cli import build_parser, main
from langchain_specreason.errors import ConfigError, ServeError
from langchain_specreason.lab.bench.command import default_out, make_plan
from langchain_specreason.lab.shared.modes import (
    Run,
    expand_runs,
    group_by_variant,
    parse_field_thresholds,
    parse_judges,
    parse_modes,
    parse_score_methods,
    parse_thresholds,
)
from langchain_specreason.lab.shared.servers import ServerSource

URLS = ["--draft-url", "http://127.0.0.1:1/v1", "--base-url", "http://127.0.0.1:2/v1"]


def test_parse_lists():
    assert parse_modes("base, specreason,base") == ["base", "specreason"]
    assert parse_thresholds("5,7,9") == [5.0, 7.0, 9.0]
    assert parse_score_methods("greedy,average") == ["greedy", "average"]
    with pytest.raises(ConfigError, match="unknown mode 'fast'"):
        parse_modes("base,fast")
    with pytest.raises(ConfigError, match="empty"):
        parse_modes(" , ")
    with pytest.raises(ConfigError, match="not a number"):
        parse_thresholds("high")
    with pytest.raises(ConfigError, match="threshold: Input should be less than or equal to 10"):
        parse_thresholds("11")
    with pytest.raises(ConfigError, match="unknown score method"):
        parse_score_methods("max")


def test_thresholds_sweep_only_specreason_modes():
    runs = expand_runs(["base", "specreason", "specreason+sd"], [5.0, 9.0], ["greedy"])
    assert runs == [
        Run("base"),
        Run("specreason", 5.0, "greedy"),
        Run("specreason", 9.0, "greedy"),
        Run("specreason+sd", 5.0, "greedy", "sd"),
        Run("specreason+sd", 9.0, "greedy", "sd"),
    ]
    assert Run("specreason", 7.0, "average").label == "specreason threshold=7 score_method=average"
    assert Run("base").key("p1") == ("base", None, None, None, None, 0, None, None, "p1")


def test_sd_runs_on_different_speculators_are_different_runs():
    ngram = expand_runs(["sd", "specreason+sd"], [7.0], ["greedy"], sd_variant="ngram")
    draft_model = expand_runs(["sd"], [7.0], ["greedy"])
    assert [r.label for r in ngram] == ["sd[ngram]", "specreason+sd[ngram] threshold=7"]
    assert draft_model[0].label == "sd"
    assert ngram[0].key("p1") != draft_model[0].key("p1")
    # A result line names its variant; lines written before runs had one are the default.
    assert Run.of({"mode": "sd", "variant": "ngram"}) == ngram[0]
    assert Run.of({"mode": "sd", "variant": "sd"}) == draft_model[0]
    assert Run.of({"mode": "sd"}) == draft_model[0]
    assert Run.of({"mode": "base", "variant": None}) == Run("base")


def test_runs_are_grouped_by_the_base_server_they_need():
    runs = expand_runs(
        ["sd", "base", "specreason+sd", "draft", "specreason"],
        [7.0],
        ["greedy"],
        sd_variant="ngram",
    )
    groups = group_by_variant(runs)
    assert [variant for variant, _ in groups] == [None, "ngram"]
    assert [r.mode for r in groups[0][1]] == ["base", "draft", "specreason"]
    assert [r.mode for r in groups[1][1]] == ["sd", "specreason+sd"]


def test_explicit_urls_need_an_sd_base_url_for_sd_modes():
    source = ServerSource("cpu", "http://d/v1", "http://b/v1")
    source.check([None])
    with pytest.raises(ConfigError, match="--sd-base-url"):
        source.check([None, "sd"])
    ServerSource("cpu", "http://d/v1", "http://b/v1", "http://sd/v1").check([None, "sd"])
    with pytest.raises(ConfigError, match="both --draft-url and --base-url"):
        ServerSource("cpu", "http://d/v1")


def test_profile_must_have_the_variant():
    ServerSource("cpu").check([None, "sd", "ngram"])
    with pytest.raises(ServeError, match="no variant 'sd'"):
        ServerSource("cpu-test").check(["sd"])


def test_plan_from_flags(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "1+1?", "answer": "2"}\n{"question": "2+2?", "answer": "4"}\n')
    args = build_parser().parse_args(
        [
            "bench",
            *URLS,
            "--dataset",
            str(path),
            "--modes",
            "base,specreason",
            "--judge",
            "score",
            "--threshold",
            "5,9",
            "--budget",
            "64",
            "--seed",
            "3",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    plan = make_plan(args)
    assert [len(p) for p in (plan.problems, plan.groups)] == [2, 1]
    assert [r.label for r in plan.groups[0][1]] == [
        "base",
        "specreason threshold=5",
        "specreason threshold=9",
    ]
    config = plan.settings.config(Run("specreason", 5.0, "greedy"))
    assert (config.threshold, config.budget, config.seed, config.temperature) == (5.0, 64, 3, 0.0)
    assert plan.meta_settings["dataset"] == str(path.resolve())
    assert plan.settings.family == "instruct"


def test_default_out_folder():
    from datetime import datetime

    when = datetime(2025, 1, 2, 3, 4, 5)
    assert str(default_out("gsm8k", when)) == "runs/bench-gsm8k-20250102-030405"
    assert str(default_out("data/my.jsonl", when)) == "runs/bench-my-20250102-030405"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--modes", "base,turbo"], "unknown mode 'turbo'"),
        (["--dataset", "mmlu"], "unknown dataset 'mmlu'"),
        (["--modes", "sd"], "--sd-base-url"),
        (["--budget", "0"], "budget: Input should be greater than 0"),
        (["--report-only"], "--report-only needs --out"),
    ],
)
def test_cli_reports_typed_errors_in_one_line(flags, message, capsys):
    assert main(["bench", *URLS, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


def test_bench_report_on_a_folder_without_results(tmp_path, capsys):
    assert main(["bench", "report", str(tmp_path)]) == 2
    assert "no results" in capsys.readouterr().err


def test_judges_expand_on_their_own_threshold_scales():
    runs = expand_runs(
        ["specreason"],
        [7.0],
        ["greedy"],
        judges=["score", "likelihood", "arithmetic", "arithmetic+likelihood"],
        field_thresholds={"likelihood_threshold": [-3.5, -5.0]},
    )
    assert runs == [
        Run("specreason", 7.0, "greedy"),
        Run("specreason", -3.5, None, None, "likelihood"),
        Run("specreason", -5.0, None, None, "likelihood"),
        Run("specreason", None, None, None, "arithmetic"),
        Run("specreason", -3.5, None, None, "arithmetic+likelihood"),
        Run("specreason", -5.0, None, None, "arithmetic+likelihood"),
    ]
    assert runs[4].label == "specreason arithmetic+likelihood likelihood_threshold=-3.5"
    assert runs[3].label == "specreason arithmetic"
    # older result lines (no judge) are the score judge's; the judge is part of the key
    assert Run.of({"mode": "specreason", "threshold": 7, "score_method": "greedy"}) == runs[0]
    assert (
        Run.of({"mode": "specreason", "threshold": 7, "score_method": "greedy", "judge": "score"})
        == runs[0]
    )
    assert (
        Run.of(
            {
                "mode": "specreason",
                "threshold": -3.5,
                "score_method": "greedy",
                "judge": "likelihood",
            }
        )
        == runs[1]
    )
    assert runs[1].key("p") != Run("specreason", -3.5, None).key("p")


def test_judge_settings_reach_the_config():
    from langchain_specreason.lab.bench.runner import BenchSettings

    config = BenchSettings().config(Run("specreason", -2.0, None, None, "arithmetic+likelihood"))
    assert (config.judge, config.likelihood_threshold) == ("arithmetic+likelihood", -2.0)
    assert BenchSettings().config(Run("specreason", 5.0, "average")).threshold == 5.0
    assert BenchSettings().config(Run("specreason", 5.0, "average")).judge == "score"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0.5", "likelihood_threshold: Input should be less than or equal to 0"),
        ("-1,abc", "--likelihood-threshold 'abc' is not a number"),
        (" ", "--likelihood-threshold is empty"),
    ],
)
def test_bad_likelihood_thresholds(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_field_thresholds(text, "likelihood_threshold")


def test_bad_judge_names():
    with pytest.raises(ConfigError, match="unknown judge 'vibes'"):
        parse_judges("score,vibes")
    with pytest.raises(ConfigError, match="--judge is empty"):
        parse_judges(",")


def test_base_first_steps_are_part_of_a_runs_identity():
    runs = expand_runs(
        ["specreason"],
        [7.0],
        ["greedy"],
        judges=["arithmetic+likelihood"],
        field_thresholds={"likelihood_threshold": [-3.5]},
        first_n_base_steps=2,
    )
    assert runs == [Run("specreason", -3.5, None, None, "arithmetic+likelihood", 2)]
    assert runs[0].label == (
        "specreason arithmetic+likelihood first_n_base_steps=2 likelihood_threshold=-3.5"
    )
    assert runs[0].key("p") != Run("specreason", -3.5, None, None, "arithmetic+likelihood").key("p")
    assert (
        Run.of(
            {
                "mode": "specreason",
                "threshold": -3.5,
                "judge": "arithmetic+likelihood",
                "first_n_base_steps": 2,
            }
        )
        == runs[0]
    )
    from langchain_specreason.lab.bench.runner import BenchSettings

    assert BenchSettings().config(runs[0]).first_n_base_steps == 2


def test_a_runs_threshold_is_named_by_its_judge():
    assert Run("specreason", 7.0).setting == "threshold"
    assert Run("specreason", -3.5, judge="arithmetic+likelihood").setting == "likelihood_threshold"
    assert Run("specreason", -5.5, judge="confidence").setting == "confidence_threshold"
    assert Run("arbitrage", 0.5).setting == "tau"
    assert Run("oracle", 1.0).label == "oracle margin=1"
    assert Run("base").setting is None


def test_the_bench_judge_defaults_to_the_librarys():
    from langchain_specreason.config import DEFAULT_JUDGE

    args = build_parser().parse_args(["bench", *URLS, "--modes", "specreason"])
    assert args.judge == DEFAULT_JUDGE


def _plan_with(tmp_path, *flags: str):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "1+1?", "answer": "2"}\n')
    args = build_parser().parse_args(
        ["bench", *URLS, "--dataset", str(path), "--modes", "specreason", *flags]
    )
    return make_plan(args)


def test_the_learned_judge_takes_its_threshold_on_its_own_scale(tmp_path):
    """--learned-threshold feeds learned_threshold (0-1), checked on that field's scale, not
    as a log-probability (<= 0)."""
    plan = _plan_with(tmp_path, "--judge", "arithmetic+learned", "--learned-threshold", "0.8")
    [run] = plan.groups[0][1]
    assert plan.settings.config(run).learned_threshold == 0.8
    # without the flag: the learned judge's own default, not the likelihood's -0.55
    [run] = _plan_with(tmp_path, "--judge", "learned").groups[0][1]
    assert run.threshold == SpecReasonConfig().learned_threshold
    with pytest.raises(ConfigError, match="learned_threshold"):
        _plan_with(tmp_path, "--judge", "learned", "--learned-threshold=-0.5")
    # a log-probability judge keeps its scale and default
    [run] = _plan_with(tmp_path, "--judge", "likelihood").groups[0][1]
    assert run.threshold == SpecReasonConfig().likelihood_threshold
    with pytest.raises(ConfigError, match="likelihood_threshold"):
        _plan_with(tmp_path, "--judge", "likelihood", "--likelihood-threshold", "0.8")
    # both scales in one benchmark: each judge reads its own field's flag and default
    plan = _plan_with(
        tmp_path, "--judge", "likelihood,learned,confidence", "--likelihood-threshold=-1,-2"
    )
    got = {(r.judge, r.threshold) for r in plan.groups[0][1]}
    assert got == {
        ("likelihood", -1.0),
        ("likelihood", -2.0),
        ("learned", SpecReasonConfig().learned_threshold),
        ("confidence", SpecReasonConfig().confidence_threshold),
    }


def _settings(plan):
    return sorted(
        (r.judge or "score", plan.settings.config(r).as_dict()[r.setting])
        for r in plan.groups[0][1]
    )


@pytest.mark.parametrize(
    ("judge", "old", "new"),
    [
        ("likelihood", "--logprob-threshold=-1,-2", "--likelihood-threshold=-1,-2"),
        ("arithmetic+likelihood", "--logprob-threshold=-3", "--likelihood-threshold=-3"),
        ("confidence", "--logprob-threshold=-0.4", "--confidence-threshold=-0.4"),
        ("learned", "--logprob-threshold=0.8", "--learned-threshold=0.8"),
    ],
)
def test_the_old_threshold_flag_still_parses_to_the_same_settings(
    tmp_path, capsys, judge, old, new
):
    """--logprob-threshold (deprecated) runs what the flag named after the field runs, and
    says which flag to use."""
    capsys.readouterr()
    by_new = _settings(_plan_with(tmp_path, "--judge", judge, new))
    assert "deprecated" not in capsys.readouterr().err
    by_old = _settings(_plan_with(tmp_path, "--judge", judge, old))
    wanted = sorted((judge, float(v)) for v in new.split("=")[1].split(","))
    assert by_new == wanted and by_old == wanted
    err = capsys.readouterr().err
    assert "--logprob-threshold is deprecated" in err and "--likelihood-threshold" in err


def test_the_old_threshold_flag_is_hidden_and_checked_on_every_scale_it_feeds(tmp_path):
    help_text = build_parser()._subparsers._group_actions[0].choices["bench"].format_help()
    assert "--likelihood-threshold" in help_text and "--learned-threshold" in help_text
    assert "--logprob-threshold" not in help_text
    # it fed every judge with a threshold of its own, so a value must fit all of them
    with pytest.raises(ConfigError, match="learned_threshold"):
        _plan_with(tmp_path, "--judge", "likelihood,learned", "--logprob-threshold=-0.5")


def test_agree_modes_run_each_rule_and_steps_ahead_and_configure_the_graph():
    from langchain_specreason.lab.bench.runner import BenchSettings
    from langchain_specreason.lab.shared.modes import parse_agree_rules, parse_steps_ahead

    runs = expand_runs(
        ["base", "agree", "agree+sd"],
        [7.0],
        ["greedy"],
        agree_rules=parse_agree_rules("result,numbers"),
        steps_ahead=parse_steps_ahead("2,4"),
    )
    agree = [r for r in runs if r.mode == "agree"]
    assert [(r.agree_rule, r.steps_ahead) for r in agree] == [
        ("result", 2),
        ("result", 4),
        ("numbers", 2),
        ("numbers", 4),
    ]
    assert {r.variant for r in runs if r.mode == "agree+sd"} == {"sd"}
    assert agree[0].label == "agree result steps_ahead=2"
    assert Run.of({"mode": "agree", "agree_rule": "result", "steps_ahead": 2}) == agree[0]
    config = BenchSettings().config(agree[3])
    assert (config.verify, config.agree_rule, config.steps_ahead) == ("agree", "numbers", 4)
    assert BenchSettings().config(runs[0]).verify == "judge"
    with pytest.raises(ConfigError, match="unknown agree_rule 'magic'"):
        parse_agree_rules("magic")
    with pytest.raises(ConfigError, match="steps_ahead"):
        parse_steps_ahead("0")
