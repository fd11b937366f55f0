"""The runner over scripted endpoints: one line per (run, problem), and resume skips them."""

from __future__ import annotations

import json

import pytest
from tqdm import tqdm

from langchain_specreason import ConfigError
from langchain_specreason.lab.bench.command import Plan, count_done
from langchain_specreason.lab.bench.runner import BenchSettings, Sinks, run_group
from langchain_specreason.lab.shared.datasets import Problem
from langchain_specreason.lab.shared.meta import MetaFile
from langchain_specreason.lab.shared.modes import Run
from langchain_specreason.lab.shared.results import (
    RESULTS,
    RUNS,
    JsonlAppender,
    done_keys,
    read_records,
)
from langchain_specreason.lab.shared.servers import ServerPair, ServerSource
from tests.helpers import RESULT_KEYS

from .fakes import ScriptedEndpoint, loopback_server, question_sum, sum_base, sum_draft

PROBLEMS = [Problem(f"p{i}", f"What is {i}+{i}?", str(2 * i), "number") for i in (1, 2, 3)]
RUNS_ = [Run("base"), Run("specreason", 7.0, "greedy")]
PAIR = ServerPair(None, "http://draft.invalid/v1", "http://base.invalid/v1")
SETTINGS = BenchSettings(budget=64, step_max_tokens=16, answer_max_tokens=16, seed=0)


def make_endpoints():
    """Draft: one step ending its message with the right sum; base: judges 9, answers right."""
    return ScriptedEndpoint("draft", sum_draft), ScriptedEndpoint(
        "base", lambda r: sum_base(r, lead="Adding.\n\n", tokens=9)
    )


async def bench(out, problems, endpoints):
    done = done_keys(read_records(out / RESULTS))
    with JsonlAppender(out / RESULTS) as results, JsonlAppender(out / RUNS) as runs:
        sinks = Sinks(results, runs, tqdm(disable=True))
        return await run_group(
            PAIR, RUNS_, problems, done, SETTINGS, sinks, endpoints=endpoints, metrics=False
        )


async def test_one_line_per_run_and_problem(tmp_path):
    draft, base = make_endpoints()
    assert await bench(tmp_path, PROBLEMS, (draft, base)) == 6
    records = read_records(tmp_path / RESULTS)
    # problem-major, the run order rotated per problem (interleaved timing)
    assert [(r["mode"], r["problem_id"]) for r in records] == [
        ("base", "p1"),
        ("specreason", "p1"),
        ("specreason", "p2"),
        ("base", "p2"),
        ("base", "p3"),
        ("specreason", "p3"),
    ]
    for record in records:
        assert RESULT_KEYS <= set(record)
        assert record["correct"] is True and record["prediction"] == record["gold"]
        assert record["latency_s"] > 0 and record["overhead_s"] >= 0
    spec = records[1]
    assert (spec["threshold"], spec["score_method"]) == (7.0, "greedy")
    assert spec["config"]["judge"] == spec["judge"] and spec["config"]["threshold"] == 7.0
    assert (spec["steps_drafted"], spec["steps_accepted"], spec["judge_calls"]) == (1, 1, 1)
    assert spec["judge_prompt_tokens"] == 100 and spec["judge_cached_tokens"] == 64
    assert spec["steps"] == [{"decision": "accepted", "score": 9.0}]  # each step's verdict
    assert records[0]["steps"] == []  # base alone: no steps
    assert records[0]["base_tokens"] == 9 and records[0]["answer_s"] == pytest.approx(0.01)
    # the same prompt and budget for both: base alone got budget + answer cap tokens
    assert base.generation_calls()[0].max_tokens == 64 + 16
    assert base.generation_calls()[0].seed == 0
    runs = read_records(tmp_path / RUNS)
    assert [r["problems"] for r in runs] == [3, 3]
    [with_0], [with_1] = runs[0]["interleaved_with"], runs[1]["interleaved_with"]
    assert with_0.startswith("specreason") and with_1 == "base"
    assert runs[1]["config"]["judge"] == spec["config"]["judge"]


def test_interleaving_rotates_the_run_order_and_resumes_in_place():
    from langchain_specreason.lab.bench.runner import interleaved
    from langchain_specreason.lab.shared.modes import Run

    a, b, c = Run("base"), Run("sd"), Run("specreason", 7.0, "greedy")
    problems = PROBLEMS
    order = [(p.id, r.mode) for p, r in interleaved([a, b, c], problems, set())]
    assert order == [
        ("p1", "base"),
        ("p1", "sd"),
        ("p1", "specreason"),
        ("p2", "sd"),
        ("p2", "specreason"),
        ("p2", "base"),
        ("p3", "specreason"),
        ("p3", "base"),
        ("p3", "sd"),
    ]
    done = {a.key("p1"), b.key("p1"), c.key("p2")}
    rest = [(p.id, r.mode) for p, r in interleaved([a, b, c], problems, done)]
    assert rest == [
        o for o in order if o not in {("p1", "base"), ("p1", "sd"), ("p2", "specreason")}
    ]


async def test_resume_skips_finished_problems(tmp_path):
    first = make_endpoints()
    assert await bench(tmp_path, PROBLEMS[:2], first) == 4  # as with --limit 2
    draft, base = make_endpoints()
    assert await bench(tmp_path, PROBLEMS, (draft, base)) == 2  # then --limit 3
    records = read_records(tmp_path / RESULTS)
    assert len(records) == 6 and len(done_keys(records)) == 6
    # only p3 was asked: once by base alone, once through SpecReason
    asked = {question_sum(r) for r in draft.requests + base.requests}
    assert asked == {6}
    assert await bench(tmp_path, PROBLEMS, make_endpoints()) == 0


async def test_a_torn_last_line_is_redone(tmp_path):
    await bench(tmp_path, PROBLEMS[:1], make_endpoints())
    path = tmp_path / RESULTS
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + lines[1][: len(lines[1]) // 2])  # killed while writing line 2
    assert [r["mode"] for r in read_records(path)] == ["base"]
    draft, base = make_endpoints()
    assert await bench(tmp_path, PROBLEMS[:1], (draft, base)) == 1
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["mode"], r["problem_id"]) for r in records] == [("base", "p1"), ("specreason", "p1")]
    # only SpecReason on p1 ran again: one draft step, one judge call, no base-alone reply
    assert len(draft.requests) == 1 and len(base.judge_calls()) == 1
    assert base.generation_calls() == []


def test_count_done_over_the_plan(tmp_path):
    plan = Plan(tmp_path, PROBLEMS, [(None, RUNS_)], SETTINGS, ServerSource("cpu"), {})
    done = {RUNS_[0].key("p1"), RUNS_[1].key("p3"), Run("draft").key("p1")}
    assert count_done(plan, done) == (2, 6)


def test_meta_refuses_to_resume_with_other_settings(tmp_path):
    settings = {"dataset": "gsm8k", **SETTINGS.as_dict()}
    meta = MetaFile(tmp_path, settings)
    meta.add_servers({"variant": None, "draft": {"url": PAIR.draft_url}})
    meta.finish(3)
    again = MetaFile(tmp_path, settings)
    again.save()
    data = json.loads((tmp_path / "meta.json").read_text())
    assert len(data["sessions"]) == 2
    session = data["sessions"][0]
    assert session["problems_solved"] == 3 and session["servers"][0]["variant"] is None
    assert {"langgraph", "langchain-core", "openai", "vllm"} <= set(session["versions"])
    assert session["machine"]["cpu_count"] >= 1
    with pytest.raises(ConfigError, match="budget=64"):
        MetaFile(tmp_path, {**settings, "budget": 128})


async def test_reset_prefix_cache_posts_to_the_server_root_and_reports_refusals():
    from langchain_specreason.lab.shared.servers import reset_prefix_cache

    seen: list[str] = []

    def respond(path, body):
        seen.append(path)
        return (200 if path == "/reset_prefix_cache" else 404), None

    with loopback_server(respond) as url:  # a local stand-in for the vLLM route
        assert await reset_prefix_cache(f"{url}/v1") is True
        assert seen == ["/reset_prefix_cache"]
        assert await reset_prefix_cache(f"{url}/other/v1") is False  # 404: not offered
    assert await reset_prefix_cache("http://127.0.0.1:9/v1", timeout=2) is None  # nobody there
