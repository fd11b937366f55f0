"""`specreason tune --concurrency N`: runs N at a time, the load named, the flag refused early.

Scripted solvers stand in for the servers (no network): each answers after a short sleep and
counts the problems in flight.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from langchain_specreason.cli import build_parser, main
from langchain_specreason.errors import ConfigError
from langchain_specreason.lab.shared.datasets import Problem
from langchain_specreason.lab.shared.modes import Run
from langchain_specreason.lab.tune import command as tune
from langchain_specreason.lab.tune import concurrency as load
from langchain_specreason.lab.tune.grid import Choice, Measured

URLS = ["--draft-url", "http://127.0.0.1:9/v1", "--base-url", "http://127.0.0.1:9/v1"]


class Flight:
    """Problems in flight now and at most, per run and in all."""

    def __init__(self) -> None:
        self.now: dict[Run, int] = {}
        self.most: dict[Run, int] = {}
        self.most_at_once = 0
        self.solved: list[tuple[Run, str]] = []
        self.endpoint_options: dict[str, Any] = {}

    def fake_solver(self, right: Any = lambda run, problem: True, fail: str | None = None):
        flight = self

        class FakeSolver:
            def __init__(self, run: Run, draft: Any, base: Any, settings: Any) -> None:
                self.run = run

            async def solve(self, problem: Problem) -> dict[str, Any]:
                run = self.run
                flight.now[run] = flight.now.get(run, 0) + 1
                flight.most[run] = max(flight.most.get(run, 0), flight.now[run])
                flight.most_at_once = max(flight.most_at_once, sum(flight.now.values()))
                await asyncio.sleep(0.01)
                flight.now[run] -= 1
                if problem.id == fail:
                    raise RuntimeError(f"{problem.id} failed")
                flight.solved.append((run, problem.id))
                return {
                    "mode": run.mode,
                    "threshold": run.threshold,
                    "judge": run.judge,
                    "first_n_base_steps": run.first_n_base_steps or None,
                    "agree_rule": run.agree_rule,
                    "steps_ahead": run.steps_ahead,
                    "problem_id": problem.id,
                    "correct": right(run, problem),
                    "server_s": 2.0 if run.mode == "base" else 1.0,
                }

        return FakeSolver


class Source:
    def __init__(self) -> None:
        self.starts = 0

    def servers(self, variant: str | None) -> Any:
        from contextlib import contextmanager
        from types import SimpleNamespace

        @contextmanager
        def block() -> Any:
            self.starts += 1
            yield SimpleNamespace(draft_url="d", base_url="b", api_key=None)

        return block()


class Named:
    name = "fake"


class Sink:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def write(self, record: dict[str, Any]) -> None:
        self.lines.append(record)


WRONG = Run("specreason", -0.5, None, None, "likelihood", 0)
RIGHT = Run("specreason", -0.9, None, None, "likelihood", 0)
PROBLEMS = [Problem(f"p{i}", "q", "1", "number") for i in range(7)]


async def solve(monkeypatch, flight: Flight, runs, concurrency: int, **kwargs: Any):
    records: list[dict[str, Any]] = []
    sink = Sink()
    solver = flight.fake_solver(**kwargs.pop("solver", {}))
    monkeypatch.setattr(tune, "Solver", solver)
    monkeypatch.setattr(tune, "LoadSolver", solver)

    def endpoints(*args: Any, **options: Any) -> tuple[Named, Named]:
        flight.endpoint_options = options
        return Named(), Named()

    monkeypatch.setattr(tune, "endpoint_pair", endpoints)
    started = tune.Started(Source())  # type: ignore[arg-type]
    await tune._solve(
        started,
        None,
        runs,
        PROBLEMS,
        records,
        sink,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        split="dev",
        replay=True,
        progress=False,
        concurrency=concurrency,
        **kwargs,
    )
    return records, sink.lines


async def test_each_run_sends_its_problems_n_at_a_time_one_run_after_another(monkeypatch):
    flight = Flight()
    records, lines = await solve(monkeypatch, flight, [WRONG, RIGHT], 3)
    # three in flight at most, all of one setting: the servers see one setting's load
    assert flight.most == {WRONG: 3, RIGHT: 3} and flight.most_at_once == 3
    assert [run for run, _ in flight.solved] == [WRONG] * 7 + [RIGHT] * 7
    assert lines == records and len(records) == 14
    assert {r["concurrency"] for r in records} == {3}
    assert all(r["split"] == "dev" and r["replayed"] is True for r in records)
    assert all(r["ended_s"] >= r["started_s"] >= 0 for r in records)
    assert len({r["batch"] for r in records if Run.of(r) == WRONG}) == 1
    # a judge call waits behind the others in flight: every call's timeout, as in bench load
    assert flight.endpoint_options == {"api_key": None, "judge_timeout": 600.0}
    # one at a time (the default) is tune as before: problem-major, no load fields
    flight = Flight()
    records, _ = await solve(monkeypatch, flight, [WRONG, RIGHT], 1)
    assert flight.most_at_once == 1
    assert [p for _, p in flight.solved][:4] == ["p0", "p0", "p1", "p1"]
    assert not any("concurrency" in r or "batch" in r for r in records)
    assert flight.endpoint_options == {"api_key": None}


async def test_under_load_a_dropped_setting_takes_no_new_problem_and_a_failure_ends_it(
    monkeypatch,
):
    flight = Flight()
    solver = {"right": lambda run, problem: run == RIGHT}
    records, _ = await solve(monkeypatch, flight, [WRONG, RIGHT], 2, drop_after=0, solver=solver)
    # p0 and p1 were in flight together; p0's wrong answer dropped WRONG: p1 finishes and
    # counts, p2.. are not sent
    assert [p for r, p in flight.solved if r == WRONG] == ["p0", "p1"]
    assert [p for r, p in flight.solved if r == RIGHT] == [p.id for p in PROBLEMS]
    assert tune.wrong_counts(records, "dev") == {WRONG: 2, RIGHT: 0}
    # a failed problem: the ones in flight finish and are kept, no new one is sent, it raises
    flight = Flight()
    with pytest.raises(RuntimeError, match="p2 failed"):
        await solve(monkeypatch, flight, [RIGHT], 2, solver={"fail": "p2"})
    assert [p for _, p in flight.solved] == ["p0", "p1", "p3"]


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("0", "must be at least 1, got 0"),
        ("-2", "must be at least 1, got -2"),
        ("1.5", "must be a whole number of requests at once, such as 4; '1.5' is not one"),
        ("four", "'four' is not one"),
        ("", "needs a number of requests at once"),
        ("2,4", "tune chooses at one load"),
    ],
)
def test_a_bad_concurrency_is_one_line_before_any_server(
    monkeypatch, tmp_path, capsys, value, match
):
    def untouched(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("touched before the flag was checked")

    monkeypatch.setattr(tune, "ServerSource", untouched)
    monkeypatch.setattr(tune, "load_problems", untouched)
    argv = ["tune", *URLS, "--out", str(tmp_path / "t"), f"--concurrency={value}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --concurrency") and match in err
    assert not (tmp_path / "t").exists()
    with pytest.raises(ConfigError, match=match):
        load.parse_concurrency(value)
    assert build_parser().parse_args(["tune", *URLS, "--out", "x"]).concurrency == "1"


def test_the_choice_and_tuned_toml_name_the_load():
    from langchain_specreason.lab.tune.report import _header

    best = Measured("likelihood -0.5", (True,), (1.0,), {"judge": "likelihood"})
    choice = Choice("specreason", best, "likelihood -0.5: accuracy 100%")
    assert load.at_load(choice, 1) is choice  # one at a time: the text as before
    assert (
        _header(choice)
        == _header(choice, 1)
        == "# specreason tune: this setting (evidence below)\n"
    )
    at4 = load.at_load(choice, 4)
    assert at4.reason == "likelihood -0.5: accuracy 100% (measured with 4 requests at once)"
    assert _header(at4, 4).startswith("# specreason tune: this setting at 4 requests at once")
    sd = load.at_load(Choice("sd", None, "use sd alone: no setting keeps it"), 8)
    assert "# Why: use sd alone: no setting keeps it (measured with 8 requests at once)." in (
        _header(sd, 8)
    )
    assert load.measured_with(1) == "measured one request at a time"


def test_a_folder_holds_one_load(tmp_path):
    one = [{"split": "dev", "mode": "base", "problem_id": "p0"}]
    load.check_one_load(one, 1, tmp_path)
    load.check_one_load([{**one[0], "concurrency": 4}], 4, tmp_path)
    with pytest.raises(ConfigError, match="holds tune results one request at a time; "):
        load.check_one_load(one, 4, tmp_path)
    with pytest.raises(ConfigError, match="with 4 requests at once; --concurrency 1 needs"):
        load.check_one_load([{**one[0], "concurrency": 4}], 1, tmp_path)


def summary(path: Path, **probe: Any) -> Path:
    table = {"reference": 1.0, "judge": "likelihood"}
    table |= {side: {"measured_judge": 2.0, "any_judge": 2.0} for side in ("plain", "sd")}
    path.write_text(json.dumps({"schema": 1, "probe": probe, "tune": table}))
    return path


def test_a_probe_read_at_another_load_is_said(tmp_path):
    old = summary(tmp_path / "old.json")  # before `probe --load`: one stream
    at4 = summary(tmp_path / "at4.json", load=4)
    odd = summary(tmp_path / "odd.json", load="lots")
    assert load.probe_note(old, 1) is None and load.probe_note(at4, 4) is None
    note = load.probe_note(old, 4)
    assert note is not None and note["load"] is None
    assert "records no load (its ceilings were read one stream at a time)" in note["note"]
    assert "but this tune is measured with 4 requests at once: the ceilings" in note["note"]
    note = load.probe_note(at4, 1)
    assert note is not None and note["load"] == 4
    assert f"--probe {at4} was measured with 4 requests at once" in note["note"]
    assert "this tune is measured one request at a time" in note["note"]
    note = load.probe_note(odd, 2)
    assert note is not None and "records a load tune cannot read ('lots')" in note["note"]


def test_walls_of_the_batches_not_replayed():
    def rec(run: str, i: int, batch: str, start: float, end: float, **kw: Any) -> dict[str, Any]:
        return {
            "split": "dev",
            "mode": run,
            "problem_id": f"p{i}",
            "correct": i != 0,
            "server_s": 3.0,
            "batch": batch,
            "started_s": start,
            "ended_s": end,
            "concurrency": 2,
            "replayed": False,
        } | kw

    records = [rec("base", 0, "a", 0.0, 20.0), rec("base", 1, "a", 0.5, 30.0)]
    records += [rec("sd", 0, "a", 0.0, 5.0), rec("sd", 1, "b", 0.0, 5.0, variant="sd")]
    records += [rec("specreason", 0, "a", 0.0, 1.0, replayed=True, judge="likelihood")]
    got = load.walls(records)
    assert got == {
        "dev: base": {"problems": 2, "right": 1, "wall_s": 30.0, "per_minute": 2.0, "mean_s": 3.0},
        # two batches (a resumed tune): no one wall time
        "dev: sd": {"problems": 2, "right": 1, "wall_s": None, "per_minute": None, "mean_s": 3.0},
    }


def write_problems(path: Path, n: int) -> Path:
    path.write_text(
        "".join(json.dumps({"question": f"q{i}", "answer": "1"}) + "\n" for i in range(n))
    )
    return path


def tune_argv(tmp_path: Path, out: str, *more: str) -> list[str]:
    return [
        "tune",
        *URLS,
        "--dataset",
        str(write_problems(tmp_path / "p.jsonl", 8)),
        "--dev-count",
        "4",
        "--heldout-count",
        "2",
        "--heldout-offset",
        "4",
        "--judge",
        "likelihood",
        "--likelihood-threshold=-0.5",
        "--first-n-base-steps",
        "0",
        "--agree-rule",
        "",
        "--no-progress",
        "--out",
        str(tmp_path / out),
        *more,
    ]


def test_tune_at_two_at_once_chooses_and_names_the_load_end_to_end(monkeypatch, tmp_path, capsys):
    flight = Flight()
    solver = flight.fake_solver()
    monkeypatch.setattr(tune, "Solver", solver)
    monkeypatch.setattr(tune, "LoadSolver", solver)
    monkeypatch.setattr(tune, "endpoint_pair", lambda *a, **k: (Named(), Named()))
    probe = summary(tmp_path / "summary.json")  # records no load: one stream
    argv = tune_argv(tmp_path, "at2", "--concurrency", "2", "--probe", str(probe))
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert flight.most_at_once == 2 and set(flight.most.values()) == {2}
    assert "4 dev and 2 held-out problems, 1 settings (sd not measured" in err
    assert ", 2 requests at once; in" in err
    assert f"tune: --probe {probe} records no load" in err
    label = "specreason likelihood likelihood_threshold=-0.5"
    assert out.startswith(f"specreason: {label}: accuracy 100% (base 100%), 1.0 s a problem")
    assert "(measured with 2 requests at once)\n" in out
    report = json.loads((tmp_path / "at2/tune.json").read_text())
    assert report["reason"].endswith("(measured with 2 requests at once)")
    assert report["load"]["concurrency"] == 2
    assert report["load"]["ranked_by"] == load.RANKED_BY
    assert report["load"]["probe"]["load"] is None
    wall = report["load"]["wall"]
    assert set(wall) == {"dev: base", "heldout: base", f"heldout: {label}"}
    assert wall["dev: base"]["problems"] == 4 and wall["dev: base"]["wall_s"] > 0
    assert report["evidence"]["concurrency"] == 2
    toml = (tmp_path / "at2/tuned.toml").read_text()
    assert toml.startswith("# specreason tune: this setting at 2 requests at once")
    records = [json.loads(line) for line in (tmp_path / "at2/results.jsonl").open()]
    assert {r["concurrency"] for r in records} == {2} and len(records) == 4 + 4 + 2 + 2
    # the folder holds one load: resuming it one at a time is refused before any server
    assert main(tune_argv(tmp_path, "at2", "--no-progress")) == 2
    assert "holds tune results with 2 requests at once" in capsys.readouterr().err
    # one at a time (the default): tune as before, no load anywhere
    assert main(tune_argv(tmp_path, "at1")) == 0
    out, _ = capsys.readouterr()
    assert "at once" not in out
    report = json.loads((tmp_path / "at1/tune.json").read_text())
    assert "load" not in report and "concurrency" not in report["evidence"]
    assert "at once" not in (tmp_path / "at1/tuned.toml").read_text()
