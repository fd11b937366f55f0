"""The learned judge and its fitting: decision rule, weights file, features, labels reader."""

from __future__ import annotations

import json
import math

import pytest

from langchain_specreason import SpecReasonConfig, make_judge
from langchain_specreason.errors import ConfigError, InputError
from langchain_specreason.judges.learned import FEATURES, LearnedJudge, LogisticModel, readings
from langchain_specreason.lab.judges import labelreport
from langchain_specreason.lab.judges.labelreport import (
    L2_GRID,
    auroc_interval,
    choose_threshold,
    cross_validated,
    judge_name,
    summarise_labels,
)
from langchain_specreason.lab.judges.learned import fit_logistic
from langchain_specreason.lab.judges.report import auroc
from langchain_specreason.lab.labels.labelfile import load_labelled_steps

from .fakes import ScriptedEndpoint, step
from .test_judges import FMT, FakeScorerServer, ctx


def model(weight: float = 1.0) -> LogisticModel:
    # P(harmless) rises with the base model's least-math log-probability
    return LogisticModel(("likelihood (math)",), (0.0,), (1.0,), (weight,), 2.0)


def test_logistic_model_predicts_and_round_trips(tmp_path):
    m = model()
    assert m.predict([-2.0]) == pytest.approx(0.5)
    assert m.predict([0.0]) > 0.8 > 0.2 > m.predict([-5.0])
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"learned_weights": m.as_dict()}))
    assert LogisticModel.load(path) == m
    path.write_text(
        json.dumps({"names": ["nope"], "means": [0], "scales": [1], "weights": [1], "bias": 0})
    )
    with pytest.raises(ConfigError, match="names must be among"):
        LogisticModel.load(path)


def test_fit_separates_a_separable_reading():
    xs = [[-0.1], [-0.3], [-0.2], [-4.0], [-5.0], [-3.5]]
    ys = [True, True, True, False, False, False]
    fitted = fit_logistic(xs, ys, names=["likelihood (math)"])
    assert all(fitted.predict(x) > 0.5 for x, y in zip(xs, ys, strict=True) if y)
    assert all(fitted.predict(x) < 0.5 for x, y in zip(xs, ys, strict=True) if not y)
    with pytest.raises(ValueError, match="names"):
        fit_logistic(xs, ys, names=["a", "b"])


def test_readings_cover_every_feature_and_judge_words_too():
    lik = {"mean_logprob": -0.4, "min_logprob": -6.0, "math_logprob": -6.0}
    values = readings(lik, [-0.1, -0.3], ["forty", " eggs"], "forty eggs\n\n")
    assert set(values) == set(FEATURES)
    assert values["disagreement (base mean - draft mean)"] == pytest.approx(-0.4 - (-0.2))
    assert values["arithmetic"] == 0.5  # no equation: unsure
    assert values["confidence (math)"] == pytest.approx(-0.3)  # no digit: the least likely word


async def test_learned_judge_rejects_an_unlikely_step_with_one_base_call():
    server = FakeScorerServer(low="7")
    judge = LearnedJudge(server, FMT, model(), threshold=0.5)
    good = await judge.judge(ctx("48/2 = 24\n\n", logprobs=[-0.1] * 3))
    bad = await judge.judge(ctx("48/2 = 27\n\n", logprobs=[-0.1] * 3))
    assert good.accept and not bad.accept
    assert 0 <= bad.score < 0.5 <= good.score <= 1
    assert len(server.calls) == 2  # one prompt-logprobs call a step


def test_make_judge_builds_the_learned_judge_from_a_weights_file(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(model().as_dict()))
    draft = ScriptedEndpoint("draft", lambda r: step("x"))
    cfg = SpecReasonConfig(
        judge="arithmetic+learned", learned_weights=str(path), learned_threshold=0.7
    )
    cascade = make_judge(cfg, draft, FakeScorerServer(), FMT)  # type: ignore[arg-type]
    assert isinstance(cascade.judge_, LearnedJudge) and cascade.judge_.threshold == 0.7
    with pytest.raises(ConfigError, match="needs learned_weights"):
        make_judge(SpecReasonConfig(judge="learned"), draft, FakeScorerServer(), FMT)  # type: ignore[arg-type]


def test_labels_file_reader_rejects_malformed_lines(tmp_path):
    good = {
        "question": "q",
        "steps": ["a\n\n"],
        "step": "b\n\n",
        "harmful": True,
        "advantage": 0.75,
        "problem_id": "p",
        "step_index": 1,
    }
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(good) + "\n")
    [example] = load_labelled_steps(path)
    assert (example.kind, example.wrong, example.advantage) == ("harmful", True, 0.75)
    for bad, message in [
        ({**good, "harmful": "yes"}, "harmful must be true or false"),
        ({**good, "steps": "a"}, "steps must be a list of strings"),
        ({k: v for k, v in good.items() if k != "step"}, "missing field 'step'"),
        ({**good, "advantage": "high"}, "advantage must be a number"),
    ]:
        path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(InputError, match=rf"labels.jsonl, line 2: .*{message}"):
            load_labelled_steps(path)
    path.write_text("{not json\n")
    with pytest.raises(InputError, match="line 1: not valid JSON"):
        load_labelled_steps(path)


def result(judge: str, example: str, harmful: bool, scores: dict[str, float]) -> dict:
    return {
        "judge": judge,
        "example": example,
        "problem_id": example,
        "kind": "harmful" if harmful else "harmless",
        "scores": scores,
        "seconds": 0.5,
        "prompt_tokens": 100,
        "cached_tokens": 80,
        "prefilled_tokens": 20,
    }


def labelled_results(shift: float = 0.0) -> list[dict]:
    rows = []
    for i in range(12):
        harmful = i % 3 == 0
        base = (-4.0 if harmful else -0.5) + shift + 0.01 * i
        rows.append(
            result("likelihood", f"e{i}", harmful, {"mean": base / 4, "min": base, "math": base})
        )
        rows.append(
            result("confidence", f"e{i}", harmful, {"mean": -0.2, "min": -1.0, "math": -1.0})
        )
        rows.append(result("arithmetic", f"e{i}", harmful, {"verdict": 0.5}))
    return rows


def test_choose_threshold_keeps_the_share_of_harmless_steps():
    harmless = [-0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8, -0.9, -1.0]
    assert choose_threshold(harmless, [-3.0], keep=0.9) == -0.9
    assert choose_threshold(harmless, [-3.0], keep=1.0) == -1.0


def test_label_summary_reports_each_reading_with_dev_chosen_thresholds():
    dev, held = labelled_results(), labelled_results(shift=-0.05)
    summary = summarise_labels(held, dev)
    judges = summary["judges"]
    assert {"likelihood", "arithmetic+likelihood", "disagreement", "learned"} <= set(judges)
    row = judges["likelihood"]
    assert row["n"] == 12 and row["harmful"] == 4 and row["auroc"] == 1.0
    assert 0 <= row["kept_harmless"] <= 1 and row["rejected_harmful"] == 1.0
    assert judges["learned"]["auroc"] == 1.0
    assert summary["fit_on_dev"] and summary["learned_weights"]["names"]
    assert summary["learned_l2"] in labelreport.L2_GRID  # the strength the dev fit chose
    assert row["auroc_95"] == (1.0, 1.0)  # every resample of problems separates them
    # without dev labels: the library's default thresholds; learned read out of fold only
    plain = summarise_labels(held)
    assert plain["judges"]["likelihood"]["threshold"] == SpecReasonConfig().likelihood_threshold
    assert plain["judges"]["learned"]["cross_validated"] == labelreport.CV_FOLDS
    assert "threshold" not in plain["judges"]["learned"]
    assert "cross_validated" not in judges["learned"]
    assert summary["learned_threshold"] == judges["learned"]["threshold"]
    # a dev read alone gives a usable learned judge: fitted on all of it, threshold out of fold
    assert plain["learned_weights"]["names"] and 0 <= plain["learned_threshold"] <= 1
    assert LogisticModel.from_dict(plain["learned_weights"]).predict([-1.0] * 8) >= 0


def test_auroc_counts_ties_half_as_the_pairwise_definition_does():
    import random

    rng = random.Random(3)
    for _ in range(200):
        right = [rng.randrange(6) / 2 for _ in range(rng.randint(1, 12))]
        wrong = [rng.randrange(6) / 2 for _ in range(rng.randint(1, 12))]
        pairs = sum((r > w) + 0.5 * (r == w) for r in right for w in wrong)
        assert auroc(right, wrong) == pytest.approx(pairs / (len(right) * len(wrong)))
    assert auroc([], [1.0]) is None


def test_auroc_interval_resamples_whole_problems():
    # p1's steps are all harmless, p2's all harmful, p3 has one of each in the wrong order:
    # resamples heavy in p3 score below the point estimate, those without it score 1.0
    scores = {"p1:0": 0.9, "p1:1": 0.8, "p2:0": 0.1, "p2:1": 0.2, "p3:0": 0.3, "p3:1": 0.7}
    harmful = {"p1:0": False, "p1:1": False, "p2:0": True, "p2:1": True, "p3:0": False}
    harmful["p3:1"] = True
    low, high = auroc_interval(scores, harmful, resamples=400)
    point = auroc(
        [s for e, s in scores.items() if not harmful[e]],
        [s for e, s in scores.items() if harmful[e]],
    )
    assert low <= point <= high and low < 1.0 and high == 1.0
    # only harmless steps: no resample can be scored
    assert auroc_interval({"p1:0": 0.5}, {"p1:0": False}) is None
    # same seed, same interval
    assert auroc_interval(scores, harmful, resamples=400) == (low, high)


def test_cross_validated_never_scores_a_step_with_a_model_fitted_on_its_problem(monkeypatch):
    rows = []
    for p in range(10):
        for k in range(3):
            harmful = (p + k) % 3 == 0
            base = (-4.0 if harmful else -0.5) - 0.001 * (3 * p + k)  # unique per step
            ex = f"prob{p}:{k}"
            rows.append(result("likelihood", ex, harmful, {"mean": base, "min": base, "math": 0}))
            rows.append(result("arithmetic", ex, harmful, {"verdict": 0.5}))
    step_of = {r["scores"]["mean"]: r["example"] for r in rows if r["judge"] == "likelihood"}
    left_out: list[set[str]] = []
    real_fit = labelreport.fit_logistic

    def spy(xs, ys, *, names, l2):
        seen = {step_of[x[names.index("likelihood (mean)")]] for x in xs}
        left_out.append(set(step_of.values()) - seen)
        return real_fit(xs, ys, names=names, l2=l2, steps=200)

    monkeypatch.setattr(labelreport, "fit_logistic", spy)
    scores = cross_validated(rows, folds=5, l2=1.0)
    assert set(scores) == set(step_of.values())
    # five models, each fitted without two whole problems; every problem left out once
    assert len(left_out) == 5
    for steps in left_out:
        problems = {e.split(":")[0] for e in steps}
        assert len(problems) == 2 and steps == {f"{q}:{k}" for q in problems for k in range(3)}
    assert set().union(*left_out) == set(step_of.values())
    # two problems, one all harmless: a fold cannot be fitted, so no step is scored
    few = [r for r in rows if r["example"].startswith("prob1:")]
    for k in range(3):
        few.append(result("likelihood", f"solo:{k}", False, {"mean": -1, "min": -1, "math": 0}))
        few.append(result("arithmetic", f"solo:{k}", False, {"verdict": 0.5}))
    assert cross_validated(few, folds=5, l2=1.0) == {}
    # and the out-of-fold scores still order the steps: harmless ones score higher
    harmless = [s for e, s in scores.items() if not (int(e[4]) + int(e[-1])) % 3 == 0]
    harmful = [s for e, s in scores.items() if (int(e[4]) + int(e[-1])) % 3 == 0]
    assert min(harmless) > max(harmful)


def test_report_names_a_reading_as_judge_spells_it_relative_to_the_defaults():
    cfg = SpecReasonConfig()
    assert (cfg.logprob_aggregate, cfg.score_method) == ("mean", "greedy")
    assert judge_name("arithmetic+likelihood (mean)") == cfg.judge == "arithmetic+likelihood"
    assert judge_name("likelihood (math)") == "likelihood[math]"
    assert judge_name("arithmetic+likelihood (min)") == "arithmetic+likelihood[min]"
    assert judge_name("confidence (mean)") == "confidence"
    assert judge_name("score (greedy)") == "score"
    assert judge_name("score-reference (average)") == "score[reference,average]"
    assert judge_name("arithmetic") == "arithmetic"
    assert judge_name("learned (logistic, all readings)") == "learned"


def test_in_a_cascade_the_arithmetic_check_reads_a_step_once(monkeypatch):
    from langchain_specreason.judges import arithmetic

    calls = []
    real = arithmetic.find_equations

    def counting(text):
        calls.append(text)
        return real(text)

    monkeypatch.setattr(arithmetic, "find_equations", counting)
    arithmetic.check_step.cache_clear()
    step = "Tom has 3 * 4 = 12 eggs.\n\n"
    first = arithmetic.check_step(step)
    assert arithmetic.check_step(step) is first  # the learned judge's feature: no second parse
    assert calls == [step]


def test_the_summary_of_a_dev_read_loads_as_the_learned_judge(tmp_path):
    # the path the README shows: one dev read, then judge="arithmetic+learned" from its summary
    from langchain_specreason.lab.judges.labelreport import write_label_report

    (tmp_path / "results.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in labelled_results()), encoding="utf-8"
    )
    write_label_report(tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    cfg = SpecReasonConfig(
        judge="arithmetic+learned",
        learned_weights=str(tmp_path / "summary.json"),
        learned_threshold=summary["learned_threshold"],
    )
    draft = ScriptedEndpoint("draft", lambda r: step("x"))
    cascade = make_judge(cfg, draft, FakeScorerServer(), FMT)  # type: ignore[arg-type]
    assert isinstance(cascade.judge_, LearnedJudge)
    assert cascade.judge_.model.names == tuple(summary["learned_weights"]["names"])


def test_the_l2_strength_is_chosen_without_the_steps_it_scores(monkeypatch):
    """Nested: each outer fold's L2 strength is chosen on that fold's training steps alone."""
    rows = []
    for p in range(10):
        for k in range(3):
            harmful = (p + k) % 3 == 0
            base = (-4.0 if harmful else -0.5) - 0.01 * ((7 * p + k) % 5)
            ex = f"prob{p}:{k}"
            rows.append(result("likelihood", ex, harmful, {"mean": base, "min": base, "math": 0}))
            rows.append(result("arithmetic", ex, harmful, {"verdict": 0.5}))
    real_fit, real_choose = labelreport.fit_logistic, labelreport.choose_l2
    monkeypatch.setattr(
        labelreport, "fit_logistic", lambda xs, ys, **kw: real_fit(xs, ys, **kw, steps=100)
    )
    chosen: list[tuple[set[str], float]] = []

    def spy(examples, features, harmful, names):
        l2 = real_choose(examples, features, harmful, names)
        chosen.append((set(examples), l2))
        return l2

    monkeypatch.setattr(labelreport, "choose_l2", spy)
    scores = cross_validated(rows, folds=5)
    every = {r["example"] for r in rows}
    assert set(scores) == every
    # outer folds call it with 24 steps (8 problems); the inner folds read them only
    outer = [(steps, l2) for steps, l2 in chosen if len(steps) == 24]
    assert len(outer) == 5 and all(l2 in labelreport.L2_GRID for _, l2 in outer)
    assert set().union(*(every - steps for steps, _ in outer)) == every
    # dev read alone: the summary records the strength the fit on every step chose
    summary = labelreport.summarise_labels(rows)
    assert summary["learned_l2"] in labelreport.L2_GRID
    assert summary["learned_weights"] is not None


def test_choose_l2_prefers_the_smaller_strength_on_a_tie_and_reads_only_what_it_is_given():
    features = {f"p{p}:{k}": [float(p % 2) + 0.1 * k] for p in range(10) for k in range(2)}
    harmful = {e: v[0] < 0.5 for e, v in features.items()}
    # perfectly separable: every strength orders the steps alike, so the least wins
    assert (
        labelreport.choose_l2(list(features), features, harmful, ["likelihood (mean)"])
        == (labelreport.L2_GRID[0])
    )
    # one label only: nothing can be read, the grid's least
    only = [e for e in features if not harmful[e]]
    assert (
        labelreport.choose_l2(only, features, harmful, ["likelihood (mean)"])
        == (labelreport.L2_GRID[0])
    )


def test_the_fit_stays_finite_on_separable_steps_under_a_strong_penalty():
    # few steps and the grid's strongest L2: the plain descent overshot (rate * l2 / n = 83),
    # its weights ran to inf and the report crashed in fsum (-inf + inf)
    xs = [[-4.0 + 0.1 * i, 0.5] for i in range(3)] + [[-0.5 + 0.1 * i, 0.5] for i in range(3)]
    ys = [False] * 3 + [True] * 3  # separable by the first reading; the second is constant
    model = fit_logistic(xs, ys, names=["likelihood (min)", "arithmetic"], l2=max(L2_GRID))
    assert all(math.isfinite(v) for v in (*model.weights, model.bias))
    assert model.weights[0] > 0 and model.weights[1] == 0.0  # constant: no weight
    assert model.predict([-0.5, 0.5]) > model.predict([-4.0, 0.5])
    with pytest.raises(ValueError, match="l2 must be > 0"):
        fit_logistic(xs, ys, names=["likelihood (min)", "arithmetic"], l2=0.0)


def test_the_fit_reads_infinite_readings_at_its_clip():
    inf = float("inf")
    xs = [[-inf], [-3.0], [-2.5], [-0.5], [-0.4], [-0.3]]
    model = fit_logistic(xs, [False, False, False, True, True, True], names=["likelihood (min)"])
    assert math.isfinite(model.means[0]) and math.isfinite(model.scales[0])
    assert model.predict([-inf]) <= model.predict([-3.0]) < model.predict([-0.3])


def _odd_results() -> list[dict]:
    """12 labelled steps (few problems) with -inf and NaN readings and constant features."""
    rows = labelled_results()
    rows[0]["scores"]["min"] = float("-inf")  # likelihood of e0: a token of probability 0
    rows[9]["scores"]["min"] = float("-inf")  # e3
    rows[4]["scores"]["mean"] = float("nan")  # confidence of e1
    return rows


def test_a_labels_report_is_rebuilt_from_results_alone_on_odd_input(tmp_path):
    """The session that hit `-inf + inf in fsum` after 15 minutes of calls: the report now
    comes, says what it did, and is rebuilt without any server (`--report-only`)."""
    from langchain_specreason.cli import main

    (tmp_path / "results.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in _odd_results()), encoding="utf-8"
    )
    assert main(["bench", "judges", "--report-only", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    learned = summary["judges"]["learned"]
    assert learned["n"] == 11 and 0.5 < learned["auroc"] <= 1.0  # e1 lacks a reading
    assert all(math.isfinite(v) for v in summary["learned_weights"]["weights"])
    notes = " ".join(summary["notes"])
    assert "likelihood (min): 2" in notes and "clip" in notes
    assert "constant" in notes and "arithmetic" in notes
    assert "NaN readings left out" in notes and "confidence: 1" in notes
    assert summary["judges"]["confidence"]["n"] == 11  # e1's NaN is no reading
    assert "Notes:" in (tmp_path / "summary.md").read_text()
    # a held-out folder is rebuilt with the dev folder its meta.json names
    held = tmp_path / "held"
    held.mkdir()
    (held / "results.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in labelled_results(shift=-0.05)), encoding="utf-8"
    )
    (held / "meta.json").write_text(json.dumps({"settings": {"fit_on": str(tmp_path)}}))
    assert main(["bench", "judges", "--report-only", "--out", str(held)]) == 0
    assert json.loads((held / "summary.json").read_text())["fit_on_dev"] is True


def test_report_only_refuses_a_folder_without_results(tmp_path, capsys):
    from langchain_specreason.cli import main

    assert main(["bench", "judges", "--report-only", "--out", str(tmp_path)]) == 2
    assert "no results.jsonl" in capsys.readouterr().err


def test_a_labels_report_with_one_label_says_the_fit_was_skipped():
    harmless_only = [r for r in labelled_results() if r["kind"] == "harmless"]
    summary = summarise_labels(harmless_only)
    assert summary["learned_weights"] is None and "learned" not in summary["judges"]
    assert any("one label only" in n for n in summary["notes"])


def test_a_label_report_is_built_alike_from_result_lines_that_say_measure(tmp_path):
    """Folders written before issue 43 name a line's judge ``measure``: the report reads them
    as it reads today's ``judge``."""
    from langchain_specreason.lab.judges.labelreport import write_label_report

    rows = labelled_results()
    assert all("judge" in r and "measure" not in r for r in rows)
    old = [{("measure" if k == "judge" else k): v for k, v in r.items()} for r in rows]
    for name, lines in (("new", rows), ("old", old)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8"
        )
        write_label_report(tmp_path / name)
    new_summary = json.loads((tmp_path / "new" / "summary.json").read_text())
    old_summary = json.loads((tmp_path / "old" / "summary.json").read_text())
    assert new_summary["judges"] and old_summary["judges"] == new_summary["judges"]
