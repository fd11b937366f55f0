"""``specreason bench load --modes``: the mode x load plan, resume by cell, the servers'
counters and gauges, and the report's tables, over fakes (no network, nothing timed)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

import pytest

from langchain_specreason import ConfigError
from langchain_specreason.cli import build_parser
from langchain_specreason.config import DEFAULT_JUDGE, config_default
from langchain_specreason.errors import ServeError
from langchain_specreason.lab.bench.metrics import parse_counters
from langchain_specreason.lab.load import cells as load_cells
from langchain_specreason.lab.load import command as load
from langchain_specreason.lab.load.counters import (
    counter_change,
    gauge_sample,
    gauge_summary,
    sample_once,
)
from langchain_specreason.lab.load.flags import parse_loads
from langchain_specreason.lab.load.modes import (
    Cell,
    mode_run,
    parse_load_modes,
    plan_blocks,
)
from langchain_specreason.lab.load.modes_report import (
    render_modes_markdown,
    summarise_cells,
)
from langchain_specreason.lab.shared.datasets import Problem
from langchain_specreason.lab.shared.modes import Run
from langchain_specreason.lab.shared.results import read_records

NOT_KNOWN = {"draft": None, "base": None}
"""The cores of servers given by URL: not known to the bench."""
URLS = ["--draft-url", "http://draft.invalid/v1", "--base-url", "http://base.invalid/v1"]
VARIANT_URLS = [
    *("--sd-base-url", "http://sd.invalid/v1"),
    *("--sd-dyn-base-url", "http://sd-dyn.invalid/v1"),
]
ALL_MODES = "base,sd,sd-dyn,specreason,agree"


def plan_of(*argv: str) -> load.LoadPlan:
    return load.make_plan(build_parser().parse_args(["bench", "load", *argv]))


# -- the plan -----------------------------------------------------------------------------


def test_modes_and_loads_parse_in_order():
    assert parse_load_modes("agree, base,sd-dyn,base") == ["agree", "base", "sd-dyn"]
    assert parse_loads("1,2,4,8") == [1, 2, 4, 8]
    assert parse_loads(" 4 , 1") == [4, 1]


@pytest.mark.parametrize(
    ("text", "match"),
    [("", "at least one load"), ("1,x", "'x' is not one"), ("0", "at least 1"), ("2,2", "twice")],
)
def test_bad_loads_are_refused(text, match):
    with pytest.raises(ConfigError, match=match):
        parse_loads(text)


def test_one_block_per_base_variant_plain_first_load_by_load():
    blocks = plan_blocks(["sd", "base", "sd-dyn", "specreason", "agree"], [1, 2])
    assert [block.variant for block in blocks] == [None, "sd", "sd-dyn"]
    plain, sd, dyn = (list(block.cells) for block in blocks)
    assert plain == [
        Cell("base", 1),
        Cell("specreason", 1),
        Cell("agree", 1),
        Cell("base", 2),
        Cell("specreason", 2),
        Cell("agree", 2),
    ]
    assert sd == [Cell("sd", 1), Cell("sd", 2)]
    assert dyn == [Cell("sd-dyn", 1), Cell("sd-dyn", 2)]


def test_each_mode_is_the_bench_run_of_its_name():
    assert mode_run("base", DEFAULT_JUDGE) == Run("base")
    assert mode_run("sd", DEFAULT_JUDGE) == Run("sd", variant="sd")
    assert mode_run("sd-dyn", DEFAULT_JUDGE) == Run("sd", variant="sd-dyn")
    judge = mode_run("specreason", DEFAULT_JUDGE)
    assert judge.mode == "specreason" and judge.judge == DEFAULT_JUDGE
    assert judge.threshold == config_default("likelihood_threshold")  # the library's default
    assert mode_run("specreason", DEFAULT_JUDGE, -0.55).threshold == -0.55
    assert mode_run("specreason", "score", 7.0) == Run("specreason", 7.0, "greedy")
    agree = mode_run("agree", DEFAULT_JUDGE)
    assert (agree.agree_rule, agree.steps_ahead) == (
        config_default("agree_rule"),
        config_default("steps_ahead"),
    )


def test_a_plan_of_modes_with_urls(tmp_path):
    plan = plan_of(
        *URLS,
        *VARIANT_URLS,
        *("--modes", ALL_MODES, "--requests", "16", "--offset", "200", "--out", str(tmp_path)),
    )
    assert plan.modes == ("base", "sd", "sd-dyn", "specreason", "agree")
    assert plan.loads == (1, 2, 4, 8)  # the default loads
    assert plan.replicas == [1] and plan.offset == 200
    assert plan.variant_urls == {"sd": "http://sd.invalid/v1", "sd-dyn": "http://sd-dyn.invalid/v1"}
    assert plan.runs["sd-dyn"] == Run("sd", variant="sd-dyn")
    settings = plan.meta_settings
    assert settings["compare"] == "modes" and settings["offset"] == 200
    assert "concurrency" not in settings  # a folder may gain loads (and modes) later
    assert settings["judge"] == DEFAULT_JUDGE and settings["requests"] == 16
    assert plan.bench_settings.budget == 256 and plan.bench_settings.family == "instruct"


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        ([*URLS, "--modes", "base,sd"], "mode sd needs a base server of variant sd"),
        ([*URLS, "--modes", "base,sd-dyn", "--sd-base-url", "http://x/v1"], "--sd-dyn-base-url"),
        ([*URLS, "--replicas", "1", "--sd-base-url", "http://x/v1"], "go with --modes"),
        ([*URLS, "--modes", "base", "--requests", "4"], "--concurrency 8 with --requests 4"),
        ([*URLS, "--modes", "base", "--replicas", "2"], "--replicas goes with"),
        ([*URLS, "--modes", "base,nope"], "unknown mode 'nope'"),
        ([*URLS, "--modes", "base", "--concurrency", "1,x"], "'x' is not one"),
        ([*URLS, "--replicas", "1", "--threshold", "7"], "--threshold goes with --modes"),
        ([*URLS, "--modes", "specreason", "--judge", "score", "--threshold", "11"], "threshold"),
        ([*URLS, "--modes", "base", "--sample-interval", "0"], "--sample-interval"),
        ([*URLS, "--replicas", "1", "--concurrency", "1,2"], "without --modes it is one number"),
        ([*URLS], r"one --replicas value .*not 1,2 \(the default\)"),
        ([*URLS, "--modes", "base", "--offset", "-1"], "--offset"),
    ],
)
def test_bad_mode_flags_fail_before_any_server(argv, match):
    with pytest.raises(ConfigError, match=match):
        plan_of(*argv)


def test_a_profile_without_the_variant_is_refused_by_name(tmp_path):
    with pytest.raises(ServeError, match="has no variant 'sd'"):
        plan_of("--profile", "cpu-test", "--modes", "base,sd", "--out", str(tmp_path))


# -- the servers' counters and gauges -----------------------------------------------------

PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="q"}} {running}
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="q"}} {waiting}
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",model_name="q"}} {prompt}
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{{engine="0",model_name="q"}} 1.7e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="q"}} {generated}
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="q"}} {stopped}
vllm:request_success_total{{engine="0",finished_reason="length",model_name="q"}} 1.0
"""
SPEC = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="q"}} {drafts}
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="q"}} {draft_tokens}
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="q"}} {accepted}
"""


def page(*, spec: bool = False, **values: float) -> str:
    numbers = {"running": 0, "waiting": 0, "prompt": 0, "generated": 0, "stopped": 0, **values}
    text = PAGE.format(**numbers)
    if spec:
        text += SPEC.format(**{"drafts": 0, "draft_tokens": 0, "accepted": 0, **values})
    return text


def test_the_counters_difference_on_a_speculating_server():
    before = parse_counters(
        page(spec=True, prompt=100, generated=40, stopped=2, drafts=5, draft_tokens=20, accepted=9)
    )
    after = parse_counters(
        page(
            spec=True,
            prompt=350,
            generated=140,
            stopped=6,
            drafts=30,
            draft_tokens=120,
            accepted=69,
        )
    )
    change = counter_change(before, after)
    assert change is not None
    assert change["delta"] == {
        "requests": 4.0,  # summed over finish reasons: 3 -> 7
        "prompt_tokens": 250.0,
        "generation_tokens": 100.0,
        "spec_drafts": 25.0,
        "spec_draft_tokens": 100.0,
        "spec_accepted_tokens": 60.0,
    }
    assert change["before"]["prompt_tokens"] == 100.0 and change["after"]["prompt_tokens"] == 350
    assert change["acceptance"] == pytest.approx(0.6)


def test_a_plain_server_has_no_speculation_counters_and_an_unread_page_no_difference():
    change = counter_change(parse_counters(page(prompt=10)), parse_counters(page(prompt=30)))
    assert change is not None
    assert change["delta"]["prompt_tokens"] == 20.0
    assert "spec_draft_tokens" not in change["delta"] and change["acceptance"] is None
    assert counter_change(None, parse_counters(page())) is None
    assert counter_change(parse_counters(page()), None) is None


def test_gauges_sampled_and_summarised():
    assert gauge_sample(page(running=3, waiting=2)) == {"running": 3.0, "waiting": 2.0}
    pages = iter([page(running=1), None, page(running=4, waiting=3), "not prometheus {"])

    async def read(role):
        return next(pages)

    got: list[dict[str, float]] = []

    async def take():
        for _ in range(4):
            await sample_once(read, "base", got)

    asyncio.run(take())
    assert got == [{"running": 1.0, "waiting": 0.0}, {"running": 4.0, "waiting": 3.0}]
    assert gauge_summary(got) == {
        "samples": 2,
        "running_mean": 2.5,
        "running_max": 4.0,
        "waiting_mean": 1.5,
        "waiting_max": 3.0,
    }
    assert gauge_summary([]) is None


# -- the report (pure) --------------------------------------------------------------------


def rec(
    mode: str,
    c: int,
    i: int,
    *,
    latency: float,
    correct: bool = True,
    ok: bool = True,
    start: float = 0.0,
    tokens: int = 100,
) -> dict[str, Any]:
    return {
        "mode": mode,
        "concurrency": c,
        "request": i,
        "problem_id": f"p{i}",
        "run": mode,
        "ok": ok,
        "error": None if ok else {"type": "EndpointError", "message": "boom"},
        "correct": correct and ok,
        "completion_tokens": tokens if ok else None,
        "latency_s": latency,
        "started_s": start,
        "ended_s": start + latency,
    }


def cell_rec(mode: str, c: int, *, accepted: float | None = None) -> dict[str, Any]:
    base: dict[str, Any] = {
        "before": {},
        "after": {},
        "delta": {"prompt_tokens": 400.0, "generation_tokens": 300.0},
        "acceptance": None,
    }
    if accepted is not None:
        base["delta"].update(spec_draft_tokens=200.0, spec_accepted_tokens=accepted)
        base["acceptance"] = accepted / 200.0
    return {
        "mode": mode,
        "concurrency": c,
        "server": {"draft": None, "base": base},
        "gauges": {
            "draft": None,
            "base": {
                "samples": 4,
                "running_mean": 1.5,
                "running_max": 2,
                "waiting_mean": 0.25,
                "waiting_max": 1,
            },
        },
        "prefix_cache_reset": True,
    }


def fake_records() -> list[dict[str, Any]]:
    """Four problems at loads 1 and 2: base, sd (twice as fast), specreason (one wrong)."""
    out = []
    for c in (1, 2):
        for i in range(4):
            out.append(rec("base", c, i, latency=10.0 * c, start=10.0 * c * (i // c)))
            out.append(rec("sd", c, i, latency=5.0 * c, start=5.0 * c * (i // c)))
            out.append(
                rec(
                    "specreason",
                    c,
                    i,
                    latency=20.0 * c,
                    start=20.0 * c * (i // c),
                    correct=i != 0,
                    ok=not (c == 2 and i == 3),
                )
            )
    return out


def test_the_report_table_on_fake_records():
    cells = [cell_rec("base", c) for c in (1, 2)] + [
        cell_rec("sd", c, accepted=120) for c in (1, 2)
    ]
    summary = summarise_cells(fake_records(), cells)
    assert summary["modes"] == ["base", "sd", "specreason"] and summary["loads"] == [1, 2]
    rows = {(r["mode"], r["concurrency"]): r for r in summary["rows"]}
    assert [(r["concurrency"], r["mode"]) for r in summary["rows"]] == [
        (1, "base"),
        (1, "sd"),
        (1, "specreason"),
        (2, "base"),
        (2, "sd"),
        (2, "specreason"),
    ]
    base1, sd1, spec2 = rows[("base", 1)], rows[("sd", 1)], rows[("specreason", 2)]
    assert base1["wall_s"] == pytest.approx(40.0) and base1["correct"] == 4
    assert base1["goodput_per_min"] == pytest.approx(6.0)  # 4 right in 40 s
    assert base1["tokens_per_s"] == pytest.approx(10.0)  # 400 tokens in 40 s
    assert "vs_base" not in base1
    assert sd1["vs_base"]["speedup"] == pytest.approx(2.0)
    assert sd1["vs_base"]["wall_ratio"] == pytest.approx(2.0)
    assert sd1["vs_base"]["mcnemar_p"] == 1.0
    assert sd1["server"]["base"]["acceptance"] == pytest.approx(0.6)
    # load 2: one wrong and one failed request; the speed-up pairs the 3 both answered
    assert spec2["correct"] == 2 and spec2["failures"] == 1
    vs = spec2["vs_base"]
    assert vs["problems"] == 4 and vs["answered"] == 3
    assert (vs["right_only_here"], vs["right_only_base"]) == (0, 2)
    assert vs["speedup"] == pytest.approx(0.5)
    assert vs["speedup_95"] == [pytest.approx(0.5), pytest.approx(0.5)]
    text = render_modes_markdown(summary, {"settings": {"requests": 4}})
    assert "- requests: `4`" in text
    assert (
        "| 1 | base | 4/4 [51%, 100%] | – | 10.0 | 10.0 | 40.0 | 10.0 | 6.00 | – | – | 0 |" in text
    )
    assert (
        "| 1 | sd | 4/4 [51%, 100%] | 1 | 5.0 | 5.0 | 20.0 | 20.0 | 12.00 | "
        "2.00× [2.00, 2.00] | 2.00× | 0 |" in text
    )
    assert (
        "| 2 | specreason | 2/4 [15%, 85%] | 0.5 | 40.0 | 40.0 | 80.0 | 3.8 | 1.50 | "
        "0.50× [0.50, 0.50] | 0.50× | 1 |" in text
    )
    assert "| 1 | sd | 400 | 300 | 120 / 200 | 60% | – | 1.5 / 2 | 0.2 / 1 | – |" in text
    assert "| 2 | specreason | – | – | – | – | – | – | – | – |" in text  # no cell line
    assert "- specreason @ 2: EndpointError: boom" in text


# -- a run over fakes: resume by cell -----------------------------------------------------

PROBLEMS = [Problem(f"p{i}", f"What is {i}+{i}?", str(2 * i), "number") for i in range(4)]


@dataclass
class FakePair:
    variant: str | None
    draft: str | None = "http://draft.invalid/v1"
    base_url: str = "http://base.invalid/v1"
    api_key: str | None = None
    alone: str = "1"
    """The cores of a base started alone (its own; "0-1": it took the draft's too)."""

    @property
    def urls(self) -> dict[str, str]:
        return {**({"draft": self.draft} if self.draft else {}), "base": self.base_url}

    @property
    def cores(self) -> dict[str, str | None]:
        """The cpu profile's split, or a base alone on :attr:`alone`."""
        if self.draft is None:
            return {"base": self.alone}
        return {"draft": "0", "base": "1"}

    async def describe(self) -> dict[str, Any]:
        return {"variant": self.variant, "base": {"models": [{"id": "base-m"}]}}


class FakeSolver:
    def __init__(self, run: Run, fail: str | None = None):
        self.run, self.fail = run, fail

    async def solve(self, problem: Problem) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        if problem.id == self.fail:
            raise RuntimeError("base server fell over")
        return {
            "mode": self.run.mode,
            "correct": True,
            "prediction": problem.gold,
            "gold": problem.gold,
            "trace_tokens": 30,
            "answer_tokens": 5,
            "steps_accepted": 1 if self.run.mode == "specreason" else 0,
            "error": None,
            "reply": "long text not kept",
        }


class FakeWatch:
    def __init__(self, reads: list[str]):
        self.reads = reads
        self.prompt = 0

    async def counters(self):
        self.reads.append("counters")
        self.prompt += 100
        return {"draft": None, "base": parse_counters(page(prompt=self.prompt))}

    @contextlib.asynccontextmanager
    async def sampling(self):
        self.reads.append("sampling")
        yield {"base": [{"running": 2.0, "waiting": 1.0}], "draft": []}


def fake_world(events: list[Any], *, fail: str | None = None) -> load_cells.World:
    @contextlib.asynccontextmanager
    async def open_block(plan, block):
        events.append(("open", block.variant))
        draft = "http://draft.invalid/v1" if block.draft else None
        yield FakePair(block.variant, draft, alone="1" if block.keep_profile_cores else "0-1")
        events.append(("close", block.variant))

    def make_solver(pair, run, plan):
        events.append(("solver", run.mode, pair.variant))
        return FakeSolver(run, fail)

    async def reset(pair):
        events.append(("reset", pair.variant))
        return True

    return load_cells.World(open_block, make_solver, lambda pair, plan: FakeWatch(events), reset)


def modes_plan(tmp_path, modes: str, loads: str, requests: int = 4) -> load.LoadPlan:
    return plan_of(
        *URLS,
        *VARIANT_URLS,
        *("--modes", modes, "--concurrency", loads, "--requests", str(requests)),
        *("--judge", "score", "--out", str(tmp_path)),
    )


async def run_modes(tmp_path, modes: str, loads: str, events, **kwargs):
    return await load_cells.execute_modes(
        modes_plan(tmp_path, modes, loads),
        PROBLEMS,
        world=fake_world(events, **kwargs),
        progress=False,
    )


async def test_a_run_writes_a_line_per_request_a_line_per_cell_and_the_report(tmp_path):
    events: list[Any] = []
    paths = await run_modes(tmp_path, "base,sd,specreason", "1,2", events, fail="p3")
    opens = [e for e in events if e[0] in ("open", "close")]
    assert opens == [("open", None), ("close", None), ("open", "sd"), ("close", "sd")]
    solvers = [e[1:] for e in events if e[0] == "solver"]
    assert solvers == [
        ("base", None),
        ("specreason", None),
        ("base", None),
        ("specreason", None),
        ("sd", "sd"),
        ("sd", "sd"),
    ]
    assert events.count(("reset", None)) == 4  # the caches emptied before every cell
    records = read_records(tmp_path / "results.jsonl")
    assert len(records) == 3 * 2 * 4
    one = next(r for r in records if (r["mode"], r["concurrency"], r["request"]) == ("sd", 2, 0))
    assert one["ok"] and one["correct"] and one["completion_tokens"] == 35
    assert one["variant"] == "sd" and one["run"] == "sd" and "reply" not in one
    assert one["cores"] == {"base": "1"}  # the sd block: the base alone, on its own core
    assert all(r["cores"] == {"draft": "0", "base": "1"} for r in records if r["mode"] != "sd")
    assert one["latency_s"] == pytest.approx(one["ended_s"] - one["started_s"])
    bad = next(r for r in records if r["problem_id"] == "p3")
    assert bad["ok"] is False and bad["error"]["type"] == "RuntimeError"
    cells = read_records(tmp_path / "cells.jsonl")
    assert [(c["mode"], c["concurrency"]) for c in cells] == [
        ("base", 1),
        ("specreason", 1),
        ("base", 2),
        ("specreason", 2),
        ("sd", 1),
        ("sd", 2),
    ]
    assert cells[0]["server"]["base"]["delta"]["prompt_tokens"] == 100.0
    assert cells[0]["server"]["draft"] is None
    assert cells[0]["gauges"]["base"]["running_max"] == 2.0 and cells[0]["gauges"]["draft"] is None
    assert cells[0]["prefix_cache_reset"] is True
    assert [p.name for p in paths] == ["summary.md", "summary.json", "latency_goodput.png"]
    assert (tmp_path / "latency_goodput.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(r["mode"], r["concurrency"], r["correct"]) for r in summary["rows"]] == [
        ("base", 1, 3),
        ("sd", 1, 3),
        ("specreason", 1, 3),
        ("base", 2, 3),
        ("sd", 2, 3),
        ("specreason", 2, 3),
    ]
    text = (tmp_path / "summary.md").read_text()  # the cores differ between cells: named
    assert "| 2 | specreason | draft 0, base 1 | 3/4" in text
    assert "| 2 | sd | base 1 | 3/4" in text
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert [s["variant"] for s in meta["sessions"][0]["servers"]] == [None, "sd"]


async def test_resume_skips_done_cells_and_reruns_a_partial_one_whole(tmp_path, capsys):
    events: list[Any] = []
    await run_modes(tmp_path, "base,specreason", "1", events)
    # an interrupted cell left two lines (and a stale cell line)
    with (tmp_path / "results.jsonl").open("a") as fh:
        for i in (0, 2):
            fh.write(json.dumps({**rec("base", 2, i, latency=1.0), "stale": True}) + "\n")
    with (tmp_path / "cells.jsonl").open("a") as fh:
        fh.write(json.dumps({**cell_rec("base", 2), "stale": True}) + "\n")
    events.clear()
    await run_modes(tmp_path, "base,sd-dyn,specreason", "1,2", events)
    solvers = [e[1:] for e in events if e[0] == "solver"]
    # the done cells (load 1 of base and specreason) are not run again
    assert solvers == [
        ("base", None),
        ("specreason", None),
        ("sd", "sd-dyn"),
        ("sd", "sd-dyn"),
    ]
    err = capsys.readouterr().err
    assert "already in" in err and "skipped: base @ 1, specreason @ 1" in err
    assert "base @ 2 partly done: 2 old line(s) dropped, rerun whole" in err
    records = read_records(tmp_path / "results.jsonl")
    assert not any(r.get("stale") for r in records)
    assert sorted({(r["mode"], r["concurrency"]) for r in records}) == [
        ("base", 1),
        ("base", 2),
        ("sd-dyn", 1),
        ("sd-dyn", 2),
        ("specreason", 1),
        ("specreason", 2),
    ]
    assert len(records) == 6 * 4
    cells = read_records(tmp_path / "cells.jsonl")
    assert not any(c.get("stale") for c in cells) and len(cells) == 6
    events.clear()
    await run_modes(tmp_path, "base,sd-dyn,specreason", "1,2", events)
    assert events == []  # all done: no block opened, the report is rewritten
    assert len(json.loads((tmp_path / "summary.json").read_text())["rows"]) == 6


def test_done_and_partial_cells():
    records = [rec("base", 1, i, latency=1.0) for i in range(3)]
    records += [rec("sd", 1, 0, latency=1.0), rec("sd", 1, 2, latency=1.0)]
    records += [rec("base", 2, i, latency=1.0, ok=False) for i in range(3)]  # failures count
    assert load_cells.done_cells(records, 3) == {Cell("base", 1), Cell("base", 2)}
    assert load_cells.partial_cells(records, 3) == {Cell("sd", 1)}
    assert load_cells.done_cells(records, 4) == set()


async def test_a_cell_bounds_the_requests_in_flight(tmp_path):
    sink: list[dict[str, Any]] = []

    class ListSink:
        def write(self, record):
            sink.append(record)

    for c in (1, 2, 4):
        sink.clear()
        got = await load_cells.run_cell(
            Cell("base", c), Run("base"), FakeSolver(Run("base")), PROBLEMS, ListSink()
        )
        assert [r["request"] for r in got] == [0, 1, 2, 3] and len(sink) == 4
        events = sorted(
            [(r["started_s"], 1) for r in got] + [(r["ended_s"], -1) for r in got],
            key=lambda e: (e[0], e[1]),
        )
        now = most = 0
        for _, delta in events:
            now += delta
            most = max(most, now)
        assert most == c


async def test_given_urls_give_each_variant_its_base_server(tmp_path):
    plan = modes_plan(tmp_path, "base,sd,sd-dyn,specreason", "1")
    got = {}
    for block in plan_blocks(plan.modes, plan.loads, plan.cores):
        async with load_cells.open_block(plan, block) as pair:
            got[block.variant] = (pair.variant, pair.draft, pair.base_url, pair.cores)
    assert got == {  # the sd blocks need no draft: none given to them
        None: (None, "http://draft.invalid/v1", "http://base.invalid/v1", NOT_KNOWN),
        "sd": ("sd", None, "http://sd.invalid/v1", {"base": None}),
        "sd-dyn": ("sd-dyn", None, "http://sd-dyn.invalid/v1", {"base": None}),
    }
    solver = load_cells.make_solver(
        load_cells.ServerPair(None, "http://d.invalid/v1", "http://b.invalid/v1"),
        plan.runs["base"],
        plan,
    )
    assert isinstance(solver, load_cells.LoadSolver) and solver.config.budget == 256
    assert await solver.prefill_floor([], []) is None  # no /tokenize calls under load


def test_dev_problems_for_choosing_a_setting_are_their_own_folder_kind(tmp_path):
    """``--dataset gsm8k-train``: the plan reads GSM8K train (dev) and says so in meta.json, so a
    dev folder is never resumed as a test table (or the other way round)."""
    argv = [*URLS, *VARIANT_URLS, "--modes", "base,sd", "--out", str(tmp_path)]
    dev = plan_of(*argv, "--dataset", "gsm8k-train")
    test = plan_of(*argv)
    assert dev.dataset == "gsm8k-train" and test.dataset == "gsm8k"
    assert dev.meta_settings["split"] == "train" and test.meta_settings["split"] == "test"
    assert dev.meta_settings["dataset"] == test.meta_settings["dataset"] == "gsm8k"
