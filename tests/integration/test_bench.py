"""`specreason bench` on the real cpu-test servers: every file written, and a rerun with a
larger --limit does only the new problems (checked with the servers' own request counters).

Other clients of the same servers (tests run in parallel by someone else) can only add to
the counters, so the counter checks are bounds that a redone problem would break."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from langchain_specreason.lab.bench.metrics import REQUESTS, scrape
from tests.helpers import RESULT_KEYS, budget_flags, cli_ok, pair_flags, read_jsonl

pytestmark = pytest.mark.integration

# A tiny budget keeps each problem to a few seconds on the CPU servers.
SHORT = [*budget_flags(32, 16, 16), "--no-progress"]
FLAGS = [
    *("--dataset", "gsm8k", "--modes", "base,specreason", "--judge", "score", "--threshold", "7"),
    *SHORT,
]
FILES = [
    "results.jsonl",
    "runs.jsonl",
    "meta.json",
    "summary.md",
    "summary.json",
    "accuracy_latency.png",
    "time_split.png",
]


def bench(servers, out, limit: int) -> subprocess.CompletedProcess[str]:
    return cli_ok(
        "bench", *pair_flags(servers), *FLAGS, "--limit", str(limit), "--out", str(out), timeout=600
    )


def requests_seen(servers) -> dict[str, float]:
    async def both():
        return {
            "draft": (await scrape(servers.draft_url))[REQUESTS],
            "base": (await scrape(servers.base_url))[REQUESTS],
        }

    return asyncio.run(both())


def results(out) -> list[dict]:
    return read_jsonl(out / "results.jsonl")


def base_requests(record: dict) -> int:
    """Requests a result made to the base server, from its own accounting."""
    if record["mode"] == "base":
        return 1
    answer_call = 0 if record["stop"] == "end" else 1
    return record["judge_calls"] + record["steps_rewritten"] + record["steps_base"] + answer_call


def test_bench_writes_every_file_and_resumes(servers, tmp_path):
    out = tmp_path / "bench"
    bench(servers, out, limit=1)
    for name in FILES:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    first = results(out)
    assert [(r["mode"], r["problem_id"]) for r in first] == [
        ("base", "gsm8k-0"),
        ("specreason", "gsm8k-0"),
    ]
    for record in first:
        assert RESULT_KEYS | {"server"} <= set(record)
        assert record["gold"] == "18" and record["latency_s"] > 0 and record["reply"]
        assert record["server"]["base"]["requests"] >= base_requests(record)
        assert record["prefix_cache_reset"] is True  # cpu-test runs with VLLM_SERVER_DEV_MODE
    spec = first[1]
    assert spec["threshold"] == 7.0 and spec["steps_drafted"] >= 1
    assert spec["steps_accepted"] + spec["steps_rewritten"] == spec["judge_calls"]
    # the judge's prefill floor, counted by the base server's /tokenize: at least the judge's
    # own turn (~40 tokens) per call, at most the prompt; no cache can beat it (a token of
    # slack a call for how the prefix alone tokenizes at its end)
    calls, floor = spec["judge_calls"], spec["judge_floor_tokens"]
    assert 30 * calls <= floor <= spec["judge_prompt_tokens"]
    assert spec["judge_prefill_tokens"] >= floor - calls
    assert first[0]["judge_floor_tokens"] is None  # base alone: no judge
    runs = read_jsonl(out / "runs.jsonl")
    assert [r["mode"] for r in runs] == ["base", "specreason"]
    assert 0.0 <= runs[1]["base_prefix_cache_hit_rate"] <= 1.0  # the judge queried the cache
    meta = json.loads((out / "meta.json").read_text())
    assert meta["settings"]["budget"] == 32 and meta["settings"]["seed"] == 0
    session = meta["sessions"][0]
    assert session["versions"]["langgraph"] and session["machine"]["cpu_count"] >= 1
    served = session["servers"][0]
    assert served["draft"]["models"][0]["id"] and served["base"]["models"][0]["id"]
    summary = (out / "summary.md").read_text()
    assert "| base | 1 |" in summary and "| specreason threshold=7 | 1 |" in summary
    for png in ("accuracy_latency.png", "time_split.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"

    # "interrupted" after one problem: rerun for two; only gsm8k-1 is asked
    before = requests_seen(servers)
    bench(servers, out, limit=2)
    seen = {role: n - before[role] for role, n in requests_seen(servers).items()}
    second = results(out)
    assert second[:2] == first
    new = second[2:]
    # interleaved: the second problem runs the modes in rotated order
    assert [(r["mode"], r["problem_id"]) for r in new] == [
        ("specreason", "gsm8k-1"),
        ("base", "gsm8k-1"),
    ]
    # the new problem's requests reached the servers; redoing gsm8k-0 would add its own too
    expected = sum(base_requests(r) for r in new)
    assert expected <= seen["base"] < expected + sum(base_requests(r) for r in first)
    # the draft server: one request per drafted step, plus at most one lookahead discarded
    # per rejected step (drafted while the judge read the step it then rejected)
    drafted, rejected = new[0]["steps_drafted"], new[0]["steps_rewritten"]
    assert drafted <= seen["draft"] <= drafted + rejected
    summary = (out / "summary.md").read_text()
    assert "| base | 2 |" in summary and "| specreason threshold=7 | 2 |" in summary
    assert len(json.loads((out / "meta.json").read_text())["sessions"]) == 2

    # everything done: a third run asks the servers nothing and only rewrites the report
    (out / "summary.md").unlink()
    before = requests_seen(servers)
    done = bench(servers, out, limit=2)
    seen = {role: n - before[role] for role, n in requests_seen(servers).items()}
    assert seen["base"] < sum(base_requests(r) for r in second)
    assert "4 already done" in done.stderr
    assert results(out) == second
    assert "| specreason threshold=7 | 2 |" in (out / "summary.md").read_text()


def test_bench_load_on_the_servers_answers_every_request_and_skips_a_done_count(servers, tmp_path):
    """`specreason bench load` with the library's default judge on running servers."""
    out = tmp_path / "load"
    flags = ["--replicas", "1", "--requests", "3", *SHORT]
    before = requests_seen(servers)
    cli_ok("bench", "load", *pair_flags(servers), *flags, "--out", str(out), timeout=600)
    after = requests_seen(servers)
    lines = results(out)
    assert sorted(r["request"] for r in lines) == [0, 1, 2]
    assert all(r["ok"] and r["error"] is None and r["latency_s"] > 0 for r in lines), lines
    assert after["base"] - before["base"] >= 3  # every run reached the base server
    for name in ("summary.md", "summary.json", "latency.png", "meta.json"):
        assert (out / name).stat().st_size > 0
    summary = json.loads((out / "summary.json").read_text())
    assert [(r["replicas"], r["requests"], r["failures"]) for r in summary["rows"]] == [(1, 3, 0)]
    rerun = cli_ok("bench", "load", *pair_flags(servers), *flags, "--out", str(out), timeout=600)
    assert "skip" in rerun.stderr.lower()
    assert results(out) == lines  # nothing redone


def test_bench_load_modes_writes_its_table_and_plot(servers, tmp_path):
    """`bench load --modes`: base and the judge mode at loads 1 and 2, two problems."""
    out = tmp_path / "load-modes"
    flags = ["--modes", "base,specreason", "--concurrency", "1,2", "--requests", "2"]
    flags += [*budget_flags(16, 8, 8), "--no-progress"]  # 8 requests, each a few seconds
    cli_ok("bench", "load", *pair_flags(servers), *flags, "--out", str(out), timeout=600)
    lines = results(out)
    assert sorted((r["mode"], r["concurrency"], r["request"]) for r in lines) == [
        (m, c, i) for m in ("base", "specreason") for c in (1, 2) for i in (0, 1)
    ]
    assert all(r["ok"] and r["latency_s"] > 0 for r in lines), lines
    # every line records its servers' cores: given by URL, the pair's block, cores not known
    assert all(r["cores"] == {"draft": None, "base": None} for r in lines), lines
    cells = read_jsonl(out / "cells.jsonl")
    assert [(c["mode"], c["concurrency"]) for c in cells] == [
        ("base", 1),
        ("specreason", 1),
        ("base", 2),
        ("specreason", 2),
    ]
    for cell in cells:  # the base server's own counters grew by the cell's work at least
        assert cell["server"]["base"]["delta"]["generation_tokens"] >= 1
        assert cell["gauges"]["base"]["samples"] >= 1
        assert cell["cores"] == {"draft": None, "base": None}
    summary = (out / "summary.md").read_text()
    assert "| 1 | base | " in summary and "| 2 | specreason | " in summary
    assert (out / "latency_goodput.png").read_bytes()[:4] == b"\x89PNG"
