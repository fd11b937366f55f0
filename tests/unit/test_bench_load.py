"""``specreason bench load``: flags, the pure summary, resume, and a run over scripted servers."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

import pytest

from langchain_specreason import ChatSpecReason, ConfigError
from langchain_specreason.cli import build_parser
from langchain_specreason.config import DEFAULT_JUDGE
from langchain_specreason.errors import ServeError
from langchain_specreason.lab.load import command as load
from langchain_specreason.lab.shared.datasets import Problem
from langchain_specreason.lab.shared.results import read_records

from .fakes import ScriptedEndpoint, question_sum, sum_base, sum_draft

URLS = ["--draft-url", "http://draft.invalid/v1", "--base-url", "http://base.invalid/v1"]


def plan_of(*argv: str) -> load.LoadPlan:
    return load.make_plan(build_parser().parse_args(["bench", "load", *argv]))


# -- flags --------------------------------------------------------------------------------


def test_replicas_parse_in_order():
    assert load.parse_replicas("1,2") == [1, 2]
    assert load.parse_replicas(" 4 , 1 ") == [4, 1]
    assert load.parse_replicas("3") == [3]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "at least one replica count"),
        ("1,x", "'x' is not an integer"),
        ("0", "positive integers, got 0"),
        ("1,-2", "positive integers, got -2"),
        ("1,2,1", "names 1 twice"),
        ("1.5", "'1.5' is not an integer"),
    ],
)
def test_bad_replica_lists_are_refused(text, match):
    with pytest.raises(ConfigError, match=match):
        load.parse_replicas(text)


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--requests", "0"], r"--requests must be at least 1, got 0"),
        (["--requests", "4", "--concurrency", "0"], r"--concurrency must be at least 1, got 0"),
        (["--draft-url", "http://draft.invalid/v1"], "give both --draft-url and --base-url"),
        (["--base-url", "http://base.invalid/v1"], "give both --draft-url and --base-url"),
        ([*URLS, "--replicas", "1,2"], "give one --replicas value"),
        ([*URLS, "--replicas", "1", "--budget", "0"], "budget"),
        ([*URLS, "--replicas", "1", "--temperature", "5"], "temperature"),
        ([*URLS, "--replicas", "1", "--judge", "nope"], "unknown judge 'nope'"),
        ([*URLS, "--replicas", "1", "--timeout", "0"], "--timeout must be positive"),
        (["--replicas", "0,1"], "positive integers, got 0"),
    ],
)
def test_bad_flags_fail_before_any_server(argv, match):
    with pytest.raises(ConfigError, match=match):
        plan_of(*argv)


def test_an_unknown_profile_is_refused_by_name():
    with pytest.raises(ServeError, match="unknown profile 'no-such-profile'"):
        plan_of("--profile", "no-such-profile", "--replicas", "1")


def test_plan_defaults_and_url_label(tmp_path):
    plan = plan_of(*URLS, "--replicas", "2", "--requests", "5", "--out", str(tmp_path))
    assert plan.explicit and plan.replicas == [2]
    assert plan.requests == 5 and plan.concurrency == 5  # default: all at once
    assert plan.model_settings == {
        "budget": 256,
        "step_max_tokens": 64,
        "answer_max_tokens": 128,
        "temperature": 0.0,
        "seed": 0,
        "judge": DEFAULT_JUDGE,
        "timeout": 600.0,
        "family": "instruct",
    }
    assert plan.meta_settings["servers"] == "given by URL"
    assert "replicas" not in plan.meta_settings  # a folder may gain replica counts later


def test_plan_with_a_profile_keeps_the_replica_order(tmp_path):
    plan = plan_of(
        "--profile",
        "cpu-test",
        "--replicas",
        "2,1",
        "--requests",
        "3",
        "--concurrency",
        "2",
        "--out",
        str(tmp_path),
    )
    assert not plan.explicit
    assert plan.replicas == [2, 1] and plan.concurrency == 2
    assert plan.meta_settings["servers"] == "profile cpu-test"


def test_bench_load_is_dispatched_from_bench():
    args = build_parser().parse_args(["bench", "load", "--requests", "3"])
    assert args.bench_command == "load" and args.requests == 3 and args.modes is None
    assert load.make_plan(args).replicas == [1, 2]  # the replica comparison's default


# -- the summary (pure) -------------------------------------------------------------------


def rec(
    n: int,
    i: int,
    *,
    latency: float,
    start: float = 0.0,
    ok: bool = True,
    correct: bool = True,
    tokens: int | None = 10,
) -> dict[str, Any]:
    r = {
        "replicas": n,
        "request": i,
        "problem_id": f"p{i}",
        "ok": ok,
        "error": None if ok else {"type": "EndpointError", "message": "boom"},
        "latency_s": latency,
        "started_s": start,
        "ended_s": start + latency,
        "correct": correct and ok,
    }
    if ok:
        r.update(completion_tokens=tokens, steps_accepted=2, steps_rewritten=1)
    return r


def test_summary_of_hand_made_records():
    records = [rec(1, i, latency=float(10 * (i + 1))) for i in range(4)]  # 10, 20, 30, 40
    records += [
        rec(2, 0, latency=5.0, start=1.0),
        rec(2, 1, latency=15.0, start=1.0),
        rec(2, 2, latency=99.0, start=2.0, ok=False),
        rec(2, 3, latency=10.0, start=1.0, correct=False),
    ]
    summary = load.summarise(records)
    one, two = summary["rows"]
    assert one["replicas"] == 1 and two["replicas"] == 2
    assert one["requests"] == 4 and one["failures"] == 0 and one["correct"] == 4
    assert one["wall_s"] == pytest.approx(40.0)
    assert one["latency_p50_s"] == pytest.approx(25.0)
    assert one["latency_p90_s"] == pytest.approx(37.0)  # 30 + 0.7 * 10
    assert one["latency_max_s"] == pytest.approx(40.0)
    assert one["requests_per_min"] == pytest.approx(60 * 4 / 40)
    assert one["tokens_per_s"] == pytest.approx(40 / 40)
    assert one["steps_accepted"] == 8 and one["steps_rewritten"] == 4
    # N=2: one failure (its latency is not counted, its time span is), one wrong answer
    assert two["failures"] == 1 and two["ok"] == 3 and two["correct"] == 2
    assert two["wall_s"] == pytest.approx(101.0 - 1.0)  # first send 1.0, last end 2 + 99
    assert two["latency_max_s"] == pytest.approx(15.0)
    assert two["latency_p50_s"] == pytest.approx(10.0)
    assert two["requests_per_min"] == pytest.approx(60 * 3 / 100)
    assert two["accuracy"] == pytest.approx(0.5)
    assert two["errors"] == ["EndpointError: boom"]
    assert summary["speedup_over_1"] == {"2": pytest.approx((60 * 3 / 100) / (60 * 4 / 40))}


def test_summary_markdown_has_the_table_the_speedup_and_the_cpu_note():
    records = [
        rec(1, 0, latency=10.0),
        rec(1, 1, latency=20.0),
        rec(2, 0, latency=5.0),
        rec(2, 1, latency=10.0, ok=False),
    ]
    text = load.render_markdown(load.summarise(records), {"settings": {"requests": 2}})
    assert "- requests: `2`" in text
    assert "| 1 | 2 | 0 | 20.0 | 6.00 | 1.0 | 15.0 | 19.0 | 20.0 | 2/2 |" in text
    assert "| 2 | 2 | 1 | 10.0 | 6.00 | 1.0 | 5.0 | 5.0 | 5.0 | 1/2 |" in text
    assert "N=2: 1.00×" in text
    assert "2-core machine they cannot add compute" in text
    assert "- 2 replica(s): EndpointError: boom" in text


def test_summary_without_one_replica_says_there_is_no_speedup():
    summary = load.summarise([rec(2, 0, latency=3.0)])
    assert summary["speedup_over_1"] == {}
    assert "no 1-replica run" in load.render_markdown(summary)


def test_summary_without_token_counts_leaves_them_unknown():
    row = load.summarise([rec(1, 0, latency=3.0, tokens=None)])["rows"][0]
    assert row["completion_tokens"] is None and row["tokens_per_s"] is None
    row = load.summarise([rec(1, 0, latency=3.0, ok=False)])["rows"][0]
    assert row["latency_p50_s"] is None and row["requests_per_min"] == 0.0


# -- resume -------------------------------------------------------------------------------


def test_done_and_partial_replica_counts():
    records = [rec(1, i, latency=1.0) for i in range(3)]  # complete
    records += [rec(2, 0, latency=1.0), rec(2, 2, latency=1.0)]  # request 1 missing
    records += [rec(4, i, latency=1.0, ok=False) for i in range(3)]  # failures count as done
    assert load.done_replicas(records, 3) == {1, 4}
    assert load.partial_replicas(records, 3) == {2}
    assert load.done_replicas(records, 4) == set()  # more requests wanted: none complete


def test_drop_replicas_rewrites_the_file_without_them(tmp_path):
    path = tmp_path / "results.jsonl"
    records = [rec(1, 0, latency=1.0), rec(2, 0, latency=1.0), rec(1, 1, latency=1.0)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert load.drop_replicas(path, {1}) == 2
    assert [r["replicas"] for r in read_records(path)] == [2]
    assert load.drop_replicas(path, {7}) == 0


# -- end to end over scripted servers -----------------------------------------------------


PROBLEMS = [Problem(f"p{i}", f"What is {i}+{i}?", str(2 * i), "number") for i in range(1, 5)]


class SlowEndpoint(ScriptedEndpoint):
    """A scripted endpoint whose calls take a little while (so requests overlap)."""

    async def complete(self, request):
        await asyncio.sleep(0.01)
        return await super().complete(request)

    async def stream(self, request):
        await asyncio.sleep(0.01)
        async for chunk in super().stream(request):
            yield chunk


def scripted_model(*, fail: int | None = None, **kwargs) -> ChatSpecReason:
    """Draft: one step with the right sum; base: judges 9 and answers; fails for ``fail``."""

    def base(request):
        if question_sum(request) == fail:
            raise RuntimeError("base server fell over")
        return sum_base(request)

    return ChatSpecReason(
        draft_endpoint=SlowEndpoint("draft", sum_draft),
        base_endpoint=SlowEndpoint("base", base),
        judge="score",
        budget=64,
        step_max_tokens=16,
        temperature=0.0,
        seed=0,
        **kwargs,
    )


@dataclass
class FakeServers:
    draft_url: str = "http://draft.invalid/v1"
    base_url: str = "http://base.invalid/v1"
    api_key: str | None = None

    async def describe(self) -> dict[str, Any]:
        return {"draft": {"models": [{"id": "draft-m"}]}, "base": {"models": [{"id": "base-m"}]}}


def fake_world(opened: list[int], *, fail: int | None = None):
    @contextlib.asynccontextmanager
    async def open_servers(plan, n):
        opened.append(n)
        yield FakeServers(), {"replicas": n}

    def make_model(servers, plan):
        return scripted_model(fail=fail)

    return open_servers, make_model


def test_plan(tmp_path, *, replicas=(1, 2), requests=4, concurrency=None) -> load.LoadPlan:
    argv = [
        "--profile",
        "cpu-test",
        "--replicas",
        ",".join(map(str, replicas)),
        "--requests",
        str(requests),
        "--judge",
        "score",
        "--out",
        str(tmp_path),
    ]
    if concurrency is not None:
        argv += ["--concurrency", str(concurrency)]
    return plan_of(*argv)


test_plan.__test__ = False  # a helper, not a test


async def test_a_run_writes_one_line_per_request_and_the_report(tmp_path):
    opened: list[int] = []
    open_servers, make_model = fake_world(opened, fail=6)  # problem p3 (3+3) fails
    paths = await load.execute(
        test_plan(tmp_path),
        PROBLEMS,
        open_servers=open_servers,
        make_model=make_model,
        progress=False,
    )
    assert opened == [1, 2]  # in order, one set at a time
    records = read_records(tmp_path / "results.jsonl")
    assert sorted((r["replicas"], r["request"]) for r in records) == [
        (n, i) for n in (1, 2) for i in range(4)
    ]
    by_id = {(r["replicas"], r["problem_id"]): r for r in records}
    good, bad = by_id[(1, "p1")], by_id[(1, "p3")]
    assert good["ok"] is True and good["error"] is None and good["correct"] is True
    assert good["prediction"] == "2" and good["completion_tokens"] > 0
    assert good["steps_accepted"] == 1 and good["steps_rewritten"] == 0
    assert 0 <= good["started_s"] < good["ended_s"]
    assert good["latency_s"] == pytest.approx(good["ended_s"] - good["started_s"])
    assert bad["ok"] is False and bad["correct"] is False
    assert bad["error"]["type"] == "RuntimeError" and "fell over" in bad["error"]["message"]
    assert [p.name for p in paths] == ["summary.md", "summary.json", "latency.png"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [
        (r["replicas"], r["requests"], r["failures"], r["correct"]) for r in summary["rows"]
    ] == [(1, 4, 1, 3), (2, 4, 1, 3)]
    assert "2" in summary["speedup_over_1"]
    text = (tmp_path / "summary.md").read_text()
    assert "| 3/4 |" in text and "base model: base-m" in text
    assert (tmp_path / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["settings"]["requests"] == 4 and meta["settings"]["judge"] == "score"
    assert [s["replicas"] for s in meta["sessions"][0]["servers"]] == [1, 2]
    assert meta["sessions"][0]["finished_at"]


async def test_resume_skips_done_counts_and_reruns_a_partial_one_whole(tmp_path, capsys):
    opened: list[int] = []
    open_servers, make_model = fake_world(opened)

    async def run(*replicas: int) -> None:
        await load.execute(
            test_plan(tmp_path, replicas=replicas),
            PROBLEMS,
            open_servers=open_servers,
            make_model=make_model,
            progress=False,
        )

    await run(1)
    # an interrupted 2-replica batch left two lines, one a failure
    with (tmp_path / "results.jsonl").open("a") as fh:
        for r in (rec(2, 0, latency=1.0, ok=False), rec(2, 1, latency=1.0)):
            fh.write(json.dumps({**r, "stale": True}) + "\n")
    opened.clear()
    await run(1, 2)
    assert opened == [2]  # 1 replica was complete: its servers are not started again
    err = capsys.readouterr().err
    assert "1 replica(s): all 4 requests already in" in err and "skipped" in err
    assert "2 old line(s) dropped, rerun whole" in err
    records = read_records(tmp_path / "results.jsonl")
    assert not any(r.get("stale") for r in records)
    assert sorted((r["replicas"], r["request"]) for r in records) == [
        (n, i) for n in (1, 2) for i in range(4)
    ]
    assert all(r["ok"] for r in records)
    opened.clear()
    await run(1, 2)
    assert opened == []  # all done: nothing started, the report is rewritten
    assert len(json.loads((tmp_path / "summary.json").read_text())["rows"]) == 2


async def test_resume_with_other_settings_is_refused(tmp_path):
    opened: list[int] = []
    open_servers, make_model = fake_world(opened)
    await load.execute(
        test_plan(tmp_path, replicas=(1,), concurrency=2),
        PROBLEMS,
        open_servers=open_servers,
        make_model=make_model,
        progress=False,
    )
    opened.clear()
    with pytest.raises(ConfigError, match="made with requests=4, not 3"):
        await load.execute(
            test_plan(tmp_path, replicas=(1, 2), requests=3, concurrency=2),
            PROBLEMS,
            open_servers=open_servers,
            make_model=make_model,
            progress=False,
        )
    assert opened == []  # refused before any server starts


def max_overlap(records: list[dict[str, Any]]) -> int:
    events = sorted(
        [(r["started_s"], 1) for r in records] + [(r["ended_s"], -1) for r in records],
        key=lambda e: (e[0], e[1]),
    )  # an end before a start at the same instant
    now = most = 0
    for _, delta in events:
        now += delta
        most = max(most, now)
    return most


@pytest.mark.parametrize("concurrency", [1, 2, 4])
async def test_concurrency_bounds_the_requests_in_flight(concurrency):
    sink: list[dict[str, Any]] = []

    class ListSink:
        def write(self, record):
            sink.append(record)

    got = await load.run_batch(scripted_model(), PROBLEMS, 1, concurrency, ListSink())
    assert [r["request"] for r in got] == [0, 1, 2, 3]  # returned in request order
    assert sorted(r["request"] for r in sink) == [0, 1, 2, 3]  # each written once
    assert all(r["ok"] for r in got)
    assert max_overlap(got) == concurrency  # the calls sleep: all allowed run together


async def test_execute_refuses_fewer_problems_than_requests(tmp_path):
    opened: list[int] = []
    open_servers, make_model = fake_world(opened)
    with pytest.raises(ConfigError, match="only 4 problems"):
        await load.execute(
            test_plan(tmp_path, requests=5),
            PROBLEMS,
            open_servers=open_servers,
            make_model=make_model,
            progress=False,
        )
    assert opened == []


# -- the servers of one replica count -----------------------------------------------------


async def test_given_urls_are_used_as_they_are_and_the_count_is_a_label(tmp_path):
    plan = plan_of(*URLS, "--replicas", "3", "--out", str(tmp_path), "--api-key", "sk-x")
    async with load.open_servers(plan, 3) as (servers, facts):
        assert (servers.draft_url, servers.base_url) == (
            "http://draft.invalid/v1",
            "http://base.invalid/v1",
        )
        assert servers.api_key == "sk-x"
        assert facts == {"replicas": 3, "replicas_label_only": True}


async def test_a_profile_is_launched_with_n_replicas_and_stopped_after(tmp_path, monkeypatch):
    events: list[tuple[Any, ...]] = []

    class FakeLauncher:
        def __init__(self, profile, *, replicas, api_key):
            events.append(("init", profile.name, replicas, api_key))
            self.log_dir = tmp_path / "logs"
            self.api_key = api_key
            self.urls = {"draft": "http://127.0.0.1:8101/v1", "base": "http://127.0.0.1:8102/v1"}
            self.replica_urls = {"draft": ["http://127.0.0.1:8201/v1"] * replicas}

        def __enter__(self):
            events.append(("start",))
            return self

        def __exit__(self, *exc):
            events.append(("stop",))

    monkeypatch.setattr(load, "Launcher", FakeLauncher)
    plan = plan_of(
        "--profile", "cpu-test", "--replicas", "1,2", "--out", str(tmp_path), "--api-key", "sk-y"
    )
    async with load.open_servers(plan, 2) as (servers, facts):
        assert events == [("init", "cpu-test", 2, "sk-y"), ("start",)]
        assert servers.base_url == "http://127.0.0.1:8102/v1" and servers.api_key == "sk-y"
        assert facts["replicas"] == 2 and len(facts["replica_urls"]["draft"]) == 2
        model = load.make_model(servers, plan)
        assert (model.draft_url, model.base_url) == (servers.draft_url, servers.base_url)
        assert model.api_key.get_secret_value() == "sk-y"
        assert (model.budget, model.step_max_tokens, model.judge) == (256, 64, DEFAULT_JUDGE)
        assert model.judge_timeout == 600.0
    assert events[-1] == ("stop",)
