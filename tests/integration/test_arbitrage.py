"""Arbitrage end to end on real servers: the oracle labels steps on the cpu-test pair; a router
trained on rollout labels (a few committed dev steps, as `specreason label` writes them) is
served by vLLM CPU as a classifier, and the graph routes through it. Checked against the
servers' own request counters."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from langchain_specreason import SpecReasonConfig
from langchain_specreason.arbitrage.features import router_text
from langchain_specreason.arbitrage.local import LocalClassifier
from langchain_specreason.arbitrage.router import RouterJudge
from langchain_specreason.endpoint import OpenAIEndpoint
from langchain_specreason.errors import EndpointError
from langchain_specreason.graph import create_specreason_graph
from langchain_specreason.lab.bench.metrics import REQUESTS, scrape
from tests.conftest import LOG_DIR, start_serve
from tests.helpers import ONE_PROBLEM, budget_flags, cli, cli_ok, pair_flags, read_jsonl

pytestmark = pytest.mark.integration

ROLLOUT_LABELS = Path(__file__).parents[2] / "benchmarks" / "labels-cpu" / "dev" / "labels.jsonl"

SMALL = [*budget_flags(48, 16, 8), "--no-progress"]
LABEL_KEYS = {
    "problem_id",
    "step_index",
    "question",
    "prefix",
    "draft_step",
    "base_step",
    "draft_score",
    "base_score",
    "advantage",
    "escalated",
}


def requests(url: str) -> float:
    return asyncio.run(scrape(url))[REQUESTS]


def label(servers, out) -> subprocess.CompletedProcess[str]:
    """`specreason arbitrage label` on 2 GSM8K train problems, into ``out``."""
    return cli_ok(
        "arbitrage",
        "label",
        *pair_flags(servers),
        "--dataset",
        "gsm8k-train",
        "--limit",
        "2",
        "--out",
        str(out),
        *SMALL,
    )


def bench(servers, out, *flags: str) -> list[dict]:
    """`specreason bench` on 1 GSM8K problem with ``flags``; its result lines."""
    cli_ok(
        "bench",
        *pair_flags(servers),
        *ONE_PROBLEM,
        *flags,
        "--out",
        str(out),
        *SMALL,
    )
    return read_jsonl(out / "results.jsonl")


@pytest.fixture(scope="module")
def labels(servers, tmp_path_factory):
    """`specreason arbitrage label` on 2 GSM8K train problems against the real servers."""
    out = tmp_path_factory.mktemp("labels")
    label(servers, out)
    return out


def test_label_writes_oracle_steps_and_resumes(servers, labels):
    rows = read_jsonl(labels / "labels.jsonl")
    problems = (labels / "problems.jsonl").read_text().splitlines()
    assert len(problems) == 2
    assert rows, "the oracle judged no step"
    for row in rows:
        assert set(row) == LABEL_KEYS
        assert row["advantage"] == pytest.approx(row["base_score"] - row["draft_score"])
        assert row["escalated"] == (row["advantage"] > 0)
        assert 0 <= row["draft_score"] <= 9 and 0 <= row["base_score"] <= 9
        assert row["base_step"].strip()
    assert {r["problem_id"] for r in rows} <= {json.loads(p)["problem_id"] for p in problems}
    # a rerun on the same folder does nothing: no new line, no server request
    before = requests(servers.base_url)
    again = label(servers, labels)
    assert "0 problems (2 already done)" in again.stdout
    assert (labels / "problems.jsonl").read_text().splitlines() == problems
    assert requests(servers.base_url) == before


@pytest.fixture(scope="module")
def router_dir(tmp_path_factory):
    """A router trained a few steps on rollout labels as `specreason label` writes them: the
    first four problems of the committed dev labels of the `cpu` pair (26 steps, 3 with a
    positive advantage), read as a label folder."""
    rows = read_jsonl(ROLLOUT_LABELS)
    problems = list(dict.fromkeys(r["problem_id"] for r in rows))[:4]
    folder = tmp_path_factory.mktemp("rollout-labels")
    data = folder / "labels.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows if r["problem_id"] in problems))
    out = tmp_path_factory.mktemp("router")
    cli_ok(
        "arbitrage",
        "train",
        "--dataset",
        str(folder),
        "--out",
        str(out),
        "--max-steps",
        "3",
        "--batch-size",
        "4",
        "--held-out",
        "0",
        "--no-progress",
    )
    assert (out / "router.json").is_file()
    return out


@pytest.fixture(scope="module")
def router_url(router_dir):
    """The trained router served by vLLM CPU (`specreason serve --only router`)."""
    serve = start_serve(
        "cpu-test",
        "--only",
        "router",
        "--router-model",
        str(router_dir),
        "--router-port",
        "8113",
        roles=("router",),
        name="serve-router",
        log_dir=LOG_DIR / "router",
    )
    try:
        yield serve.urls["router"]
    finally:
        if serve.proc.poll() is None:
            assert serve.interrupt() == 130


async def test_graph_routes_through_the_served_router(servers, router_dir, router_url):
    router = OpenAIEndpoint(router_url, name="router")
    draft = OpenAIEndpoint(servers.draft_url, name="draft")
    base = OpenAIEndpoint(servers.base_url, name="base")
    judge = RouterJudge.from_folder(router, router_dir, tau=0.5)
    graph = create_specreason_graph(
        draft,
        base,
        judge=judge,
        family=servers.family,
        config=SpecReasonConfig(budget=48, step_max_tokens=16, answer_max_tokens=8),
    )
    before = {
        name: (await scrape(url))[REQUESTS]
        for name, url in (("router", router_url), ("base", servers.base_url))
    }
    out = await graph.ainvoke({"messages": [("user", "What is 12*7? Think step by step.")]})
    after = {
        name: (await scrape(url))[REQUESTS]
        for name, url in (("router", router_url), ("base", servers.base_url))
    }
    judged = [s for s in out["steps"] if s["decision"] in ("accepted", "rewritten")]
    assert judged
    for s in judged:
        p = s["verdict"]["p_escalate"]
        assert 0.0 <= p <= 1.0
        assert (s["decision"] == "rewritten") == (p >= 0.5)
    # the router answered once per judged step; the base only rewrote and answered
    assert after["router"] - before["router"] == len(judged)
    rewritten = sum(s["decision"] == "rewritten" for s in out["steps"])
    answer_call = 0 if out["stop"] == "end" else 1
    assert after["base"] - before["base"] == rewritten + answer_call
    # vLLM serves the model we trained: same probability as transformers on the same text,
    # also when the text is longer than the router's window (both cut from the left)
    first = judged[0]
    step_text = first["draft_text"] or first["text"]
    for prefix in ([], [{"author": "draft", "text": "Some earlier step. " * 200}]):
        text = router_text("What is 12*7? Think step by step.", prefix, step_text)
        served = (await router.classify([text], truncate=judge.max_tokens)).probs[0][1]
        local = await LocalClassifier(router_dir).classify([text], truncate=judge.max_tokens)
        assert served == pytest.approx(local.probs[0][1], abs=2e-3)


async def test_router_down_is_a_typed_error():
    judge = RouterJudge(
        OpenAIEndpoint(
            "http://127.0.0.1:9/v1", name="router", model="router", max_retries=1, timeout=5
        )
    )
    from langchain_specreason.endpoint import ChatRequest
    from langchain_specreason.judges import StepContext

    ctx = StepContext(
        conversation=[{"role": "user", "content": "Q?"}],
        steps=[],
        authors=[],
        step="S.",
        request=ChatRequest(messages=[], max_tokens=1),
    )
    with pytest.raises(EndpointError, match="router"):
        await judge.judge(ctx)


def test_bench_arbitrage_and_oracle_modes(servers, router_url, tmp_path):
    rows = bench(
        servers, tmp_path, "--router-url", router_url, "--modes", "arbitrage,oracle", "--tau", "0.5"
    )
    assert [(r["mode"], r["threshold"]) for r in rows] == [("arbitrage", 0.5), ("oracle", 0.0)]
    summary = (tmp_path / "summary.md").read_text()
    assert "arbitrage tau=0.5" in summary and "oracle margin=0" in summary
    # the oracle asks the base server for a step and two scores at every judged position;
    # arbitrage asks it only for rewrites (and the answer)
    oracle, arbitrage = rows[1], rows[0]
    assert oracle["judge_calls"] >= 1
    assert oracle["server"]["base"]["requests"] >= 3 * oracle["judge_calls"]
    answer_call = 0 if arbitrage["stop"] == "end" else 1
    assert arbitrage["server"]["base"]["requests"] == arbitrage["steps_rewritten"] + answer_call


def test_bench_arbitrage_with_an_in_process_router(servers, router_dir, tmp_path):
    rows = bench(
        servers, tmp_path, "--router-model", str(router_dir), "--modes", "arbitrage", "--tau", "0,1"
    )
    by_tau = {r["threshold"]: r for r in rows}
    # tau 0 escalates every drafted step, tau 1 none (p < 1 for a softmax)
    assert by_tau[0.0]["steps_accepted"] == 0 and by_tau[0.0]["steps_rewritten"] >= 1
    assert by_tau[1.0]["steps_rewritten"] == 0 and by_tau[1.0]["steps_accepted"] >= 1


def test_bench_arbitrage_without_router_is_refused(servers, tmp_path):
    done = cli(
        "bench",
        *pair_flags(servers),
        *ONE_PROBLEM,
        "--modes",
        "arbitrage",
        "--out",
        str(tmp_path),
    )
    assert done.returncode == 2
    assert "router" in done.stderr and "Traceback" not in done.stderr
