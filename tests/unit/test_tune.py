"""`specreason tune`: the choice rule on scripted results, the grid, the replaying endpoint."""

from __future__ import annotations

import pytest

from langchain_specreason.endpoint import ChatRequest, Completion
from langchain_specreason.errors import ConfigError
from langchain_specreason.lab.tune.command import Grid, Measured, choose
from langchain_specreason.lab.tune.replay import ReplayEndpoint


def m(name: str, right: int, seconds: float, n: int = 10, sd: bool = False) -> Measured:
    return Measured(
        name,
        tuple([True] * right + [False] * (n - right)),
        (seconds,) * n,
        settings={"judge": name} if name.startswith("spec") else None,
        sd=sd,
    )


BASE = m("base", 6, 100.0)
SD = m("sd", 6, 70.0, sd=True)


def test_the_fastest_setting_that_keeps_the_accuracy_and_beats_sd_is_chosen():
    cands = [m("spec-a", 6, 60.0), m("spec-b", 7, 65.0), m("spec-fast-wrong", 4, 30.0)]
    choice = choose(BASE, SD, cands)
    assert choice.recommend == "specreason" and choice.setting is cands[0]
    assert "60.0 s" in choice.reason and "sd 70.0 s" in choice.reason


def test_no_setting_beats_sd_so_tune_says_use_sd():
    choice = choose(BASE, SD, [m("spec-a", 6, 75.0), m("spec-b", 3, 20.0)])
    assert choice.recommend == "sd" and choice.setting is None
    assert choice.reason.startswith("use sd alone: the fastest setting that keeps the accuracy")
    none_keep = choose(BASE, SD, [m("spec-b", 3, 20.0)])
    assert none_keep.recommend == "sd" and "no SpecReason setting keeps" in none_keep.reason


def test_the_accuracy_tolerance_and_a_missing_sd():
    cands = [m("spec-a", 5, 50.0)]
    assert choose(BASE, None, cands).recommend == "base"  # 5/10 < 6/10, no loss allowed
    tolerant = choose(BASE, None, cands, max_loss=0.1)
    assert tolerant.recommend == "specreason" and "sd not measured" in tolerant.reason
    slow_sd = m("sd", 4, 10.0, sd=True)  # fast but loses accuracy: does not qualify
    assert choose(BASE, slow_sd, [m("spec-a", 6, 90.0)]).recommend == "specreason"


def test_grid_expands_every_setting_and_checks_the_judges():
    grid = Grid(
        ("arithmetic+likelihood",),
        {"likelihood_threshold": (-3.0, -2.5), "threshold": (7.0,)},
        (0, 2),
        (False, True),
    )
    runs = grid.runs()
    assert len(runs) == 8
    assert {r.mode for r in runs} == {"specreason", "specreason+sd"}
    assert {(r.threshold, r.first_n_base_steps) for r in runs} == {
        (-3.0, 0),
        (-3.0, 2),
        (-2.5, 0),
        (-2.5, 2),
    }
    with pytest.raises(ConfigError, match="unknown judge"):
        Grid(("nope",), {"threshold": (1.0,)}, (0,), (False,)).runs()


def test_grid_searches_the_agree_mode_on_plain_and_sd_base_servers():
    grid = Grid(
        ("likelihood",), {"likelihood_threshold": (-0.5,)}, (0,), (False, True), ("result",), (2, 3)
    )
    agree = [r for r in grid.runs() if r.agree_rule is not None]
    assert sorted((r.mode, r.variant, r.steps_ahead) for r in agree) == [
        ("agree", None, 2),
        ("agree", None, 3),
        ("agree+sd", "sd", 2),
        ("agree+sd", "sd", 3),
    ]
    assert len(grid.runs()) == 6  # and the two judge settings


def _tune_grid(*flags: str):
    from langchain_specreason.cli import build_parser
    from langchain_specreason.lab.tune.command import grid_thresholds

    args = build_parser().parse_args(["tune", "--out", "x", *flags])
    return args.judge, grid_thresholds(args)


def test_each_judge_is_searched_at_its_own_fields_thresholds():
    judge, thresholds = _tune_grid(
        "--judge", "likelihood,confidence,score", "--likelihood-threshold=-1,-2"
    )
    runs = Grid(tuple(judge.split(",")), thresholds, (0,), (False,)).runs()
    assert [(r.judge, r.threshold) for r in runs] == [
        ("likelihood", -1.0),
        ("likelihood", -2.0),
        ("confidence", -0.28),  # confidence_threshold's own default
        ("score", 7.0),  # threshold's
    ]


def test_the_old_tune_flags_still_parse_to_the_same_grid(capsys):
    """--judges and --thresholds (deprecated) give the grid --judge and the threshold flags
    give; each says which flag to use. --thresholds fed every judge, on its own scale."""
    new = _tune_grid("--judge", "arithmetic+likelihood", "--likelihood-threshold=-1,-2")
    assert "deprecated" not in capsys.readouterr().err
    old = _tune_grid("--judges", "arithmetic+likelihood", "--thresholds=-1,-2")
    assert old[0] == new[0] == "arithmetic+likelihood"
    assert old[1]["likelihood_threshold"] == new[1]["likelihood_threshold"] == (-1.0, -2.0)
    err = capsys.readouterr().err
    assert "--judges is deprecated; use --judge" in err
    assert "--thresholds is deprecated; use --likelihood-threshold" in err
    # a flag named after the field wins over the old list
    _, both = _tune_grid("--thresholds=-1", "--likelihood-threshold=-3")
    assert both["likelihood_threshold"] == (-3.0,)


class Counting:
    name = "base"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        return Completion(text=f"reply {self.calls}", seconds=2.5)

    async def stream(self, request: ChatRequest):
        self.calls += 1
        yield Completion(text="a")
        yield Completion(text="", finish_reason="stop", seconds=1.5)

    async def max_model_len(self) -> int:
        return 4096


async def test_replay_answers_a_seen_request_from_memory_with_its_seconds():
    inner = Counting()
    replay = ReplayEndpoint(inner)
    req = ChatRequest([{"role": "user", "content": "x"}], 5)
    first = await replay.complete(req)
    again = await replay.complete(req)
    other = await replay.complete(ChatRequest([{"role": "user", "content": "y"}], 5))
    assert first is again and first.seconds == 2.5 and other.text == "reply 2"
    streamed = [c.text async for c in replay.stream(req)]
    streamed_again = [c.text async for c in replay.stream(req)]
    assert streamed == streamed_again == ["a", ""]
    assert (inner.calls, replay.calls, replay.replayed) == (3, 3, 2)
    assert await replay.max_model_len() == 4096  # everything else passes through


def test_max_wrong_is_the_choice_rule_counted_in_wrong_answers():
    from langchain_specreason.lab.tune.command import max_wrong

    base = m("base", 15, 100.0, n=20)
    assert max_wrong(base) == 5
    assert max_wrong(base, max_loss=0.1) == 7
    for loss in (0.0, 0.05, 0.1, 0.25):
        for right in range(21):
            cand = m("spec-a", right, 1.0, n=20)
            kept = choose(base, None, [cand], max_loss=loss).recommend == "specreason"
            assert kept == (20 - right <= max_wrong(base, loss)), (loss, right)


async def test_a_setting_is_dropped_once_it_has_more_wrong_answers_than_allowed(monkeypatch):
    from contextlib import contextmanager
    from types import SimpleNamespace

    from langchain_specreason.lab.shared.datasets import Problem
    from langchain_specreason.lab.shared.modes import Run
    from langchain_specreason.lab.tune import command as tune

    always_wrong = Run("specreason", -0.5, None, None, "likelihood", 0)
    always_right = Run("specreason", -0.9, None, None, "likelihood", 0)
    solved: list[tuple[Run, str]] = []

    class FakeSolver:
        def __init__(self, run, draft, base, settings):
            self.run = run

        async def solve(self, problem):
            solved.append((self.run, problem.id))
            return {
                "mode": self.run.mode,
                "threshold": self.run.threshold,
                "judge": self.run.judge,
                "first_n_base_steps": 0,
                "problem_id": problem.id,
                "correct": self.run is always_right,
                "server_s": 1.0,
            }

    events: list[str] = []

    class Source:
        @contextmanager
        def servers(self, variant):
            events.append(f"start {variant}")
            yield SimpleNamespace(draft_url="d", base_url="b", api_key=None)
            events.append(f"stop {variant}")

    class Sink:
        def write(self, record):
            pass

    monkeypatch.setattr(tune, "Solver", FakeSolver)
    monkeypatch.setattr(tune, "endpoint_pair", lambda *a, **k: (object(), object()))
    problems = [Problem(f"p{i}", "q", "1", "number") for i in range(6)]
    # one wrong answer already recorded (a resumed run)
    records: list[dict] = [
        {
            "mode": "specreason",
            "threshold": -0.5,
            "judge": "likelihood",
            "split": "dev",
            "problem_id": "p0",
            "correct": False,
        }
    ]
    started = tune.Started(Source())

    async def solve(runs, problems, split, variant=None, drop_after=None):
        await tune._solve(
            started,
            variant,
            runs,
            problems,
            records,
            Sink(),
            None,
            split=split,
            replay=False,
            progress=False,
            drop_after=drop_after,
        )

    await solve([always_wrong, always_right], problems, "dev", drop_after=2)
    # always_wrong: p0 was recorded, p1 and p2 bring it to 3 wrong (> 2): p3-p5 are skipped
    assert [p for r, p in solved if r is always_wrong] == ["p1", "p2"]
    assert [p for r, p in solved if r is always_right] == [f"p{i}" for i in range(6)]
    assert tune.wrong_counts(records, "dev") == {always_wrong: 3, always_right: 0}
    # one server start serves the next work on the same variant; nothing to do starts none,
    # and a dropped setting's remaining problems are nothing to do
    started.close()
    await solve([always_wrong], problems, "dev", drop_after=2)
    assert started.starts == 1
    await solve([always_right], problems, "dev")
    await solve([always_right], problems, "heldout")
    await solve(
        [Run("specreason+sd", -0.9, None, "sd", "likelihood", 0)],
        problems[:1],
        "heldout",
        variant="sd",
    )
    started.close()
    assert events == ["start None", "stop None", "start None", "stop None", "start sd", "stop sd"]
    assert started.starts == 3


def test_bench_config_file_runs_exactly_the_setting_tune_wrote(tmp_path):
    from langchain_specreason import SpecReasonConfig
    from langchain_specreason.cli import build_parser
    from langchain_specreason.lab.bench.command import make_plan

    problems = tmp_path / "p.jsonl"
    problems.write_text('{"question": "q", "answer": "1"}\n')
    argv = ["bench", "--draft-url", "http://127.0.0.1:1/v1", "--base-url", "http://127.0.0.1:2/v1"]
    argv += ["--dataset", str(problems), "--modes", "base,specreason", "--out", str(tmp_path)]

    def plan_of(config: SpecReasonConfig):
        path = tmp_path / "tuned.toml"
        path.write_text(config.to_toml({"recommendation": "specreason"}))
        return make_plan(build_parser().parse_args([*argv, "--config-file", str(path)]))

    tuned = SpecReasonConfig(
        judge="arithmetic+likelihood",
        likelihood_threshold=-0.45,
        first_n_base_steps=2,
        budget=900,
        lookahead=False,
        temperature=0.0,
        seed=0,
    )
    plan = plan_of(tuned)
    [(_, runs)] = plan.groups
    spec = next(r for r in runs if r.mode == "specreason")
    assert plan.settings.config(spec) == tuned
    assert plan.meta_settings["config_file"].endswith("tuned.toml")
    score = SpecReasonConfig(judge="score", threshold=6.0, score_method="average", seed=0)
    scored = plan_of(score)
    [(_, runs)] = scored.groups
    spec = next(r for r in runs if r.mode == "specreason")
    assert (spec.threshold, spec.score_method) == (6.0, "average")
    assert scored.settings.config(spec) == score
    with pytest.raises(ConfigError, match="cannot run repeat_window"):
        plan_of(tuned.replace(repeat_window=3))


def test_a_dropped_setting_is_read_beside_the_base_model_on_the_same_problems():
    from langchain_specreason.lab.shared.datasets import Problem
    from langchain_specreason.lab.shared.modes import Run
    from langchain_specreason.lab.tune.command import partial

    problems = [Problem(f"p{i}", "q", "1", "number") for i in range(4)]
    base = [
        {"mode": "base", "problem_id": f"p{i}", "correct": i != 1, "server_s": 10.0 + i}
        for i in range(4)
    ]
    setting = {"mode": "specreason", "threshold": -0.5, "judge": "likelihood"}
    ran = [
        {**setting, "problem_id": "p0", "correct": False, "server_s": 4.0},
        {**setting, "problem_id": "p2", "correct": False, "server_s": 6.0},
    ]
    run = Run.of(ran[0])
    got = partial(base + ran, run, problems)
    assert got == {
        "name": run.label,
        "sd": False,
        "after": 2,
        "wrong": 2,
        "base_wrong": 0,  # p0 and p2: the base model answered both
        "mean_s": 5.0,
        "base_mean_s": 11.0,
    }


def test_the_evidence_of_use_sd_holds_sd_against_base_on_the_held_out_problems():
    from types import SimpleNamespace

    from langchain_specreason.lab.shared.datasets import Problem
    from langchain_specreason.lab.tune.command import _evidence

    problems = [Problem(f"h{i}", "q", "1", "number") for i in range(4)]
    held = [
        {"mode": "base", "problem_id": f"h{i}", "correct": True, "server_s": 100.0}
        for i in range(4)
    ] + [
        {"mode": "sd", "variant": "sd", "problem_id": f"h{i}", "correct": i != 3, "server_s": 25.0}
        for i in range(4)
    ]
    args = SimpleNamespace(
        dataset="gsm8k-train",
        seed=0,
        dev_count=20,
        heldout_count=4,
        heldout_offset=2000,
        max_accuracy_loss=0.0,
    )
    choice = choose(BASE, SD, [m("spec-a", 3, 20.0)])
    ev = _evidence(choice, BASE, SD, held, problems, None, args)
    assert ev["recommendation"] == "sd" and ev["dev_sd_s"] == 70.0
    assert (ev["heldout_base_accuracy"], ev["heldout_sd_accuracy"]) == (1.0, 0.75)
    assert ev["heldout_sd_speedup_vs_base"] == [4.0, 4.0, 4.0]  # every problem 4x
    assert ev["heldout_sd_mcnemar_p_vs_base"] == 1.0  # one discordant problem
    assert "heldout_accuracy" not in ev  # no setting was chosen


def test_spans_show_when_each_run_was_measured():
    from langchain_specreason.lab.tune.command import spans

    records = [
        {"mode": "base", "split": "dev", "problem_id": "a", "finished_at": "2026-12-03T10:00"},
        {"mode": "base", "split": "dev", "problem_id": "b", "finished_at": "2026-12-04T06:00"},
        {
            "mode": "sd",
            "variant": "sd",
            "split": "dev",
            "problem_id": "a",
            "finished_at": "2026-12-04T07:00",
        },
        {"mode": "base", "split": "heldout", "problem_id": "c"},  # older record: no time
    ]
    assert spans(records) == {
        "dev: base": ["2026-12-03T10:00", "2026-12-04T06:00"],
        "dev: sd": ["2026-12-04T07:00", "2026-12-04T07:00"],
    }


def test_tuned_toml_says_in_words_when_sd_is_the_recommendation(tmp_path):
    from langchain_specreason import SpecReasonConfig
    from langchain_specreason.lab.tune.command import _header

    choice = choose(BASE, SD, [m("spec-b", 3, 20.0)])
    path = tmp_path / "tuned.toml"
    path.write_text(_header(choice) + SpecReasonConfig().to_toml({"recommendation": "sd"}))
    text = path.read_text()
    assert text.startswith("# specreason tune recommends vLLM's speculative decoding (sd) alone")
    assert SpecReasonConfig.from_file(path) == SpecReasonConfig()  # still a valid file
