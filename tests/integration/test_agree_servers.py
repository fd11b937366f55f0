"""The ``agree`` mode on the real cpu-test servers: ChatSpecReason and the bench."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from langchain_specreason import (
    ChatSpecReason,
    OpenAIEndpoint,
    SpecReasonConfig,
    create_specreason_graph,
)

pytestmark = pytest.mark.integration

QUESTION = (
    "A box holds 12 eggs. Tom buys 3 boxes and breaks 5 eggs. How many eggs are left? "
    "Think step by step, then give the number."
)
AGREE = dict(
    verify="agree",
    steps_ahead=3,
    budget=96,
    step_max_tokens=48,
    answer_max_tokens=48,
    temperature=0.0,
    seed=0,
)


def make(servers, **changes) -> ChatSpecReason:
    return ChatSpecReason(
        draft_url=servers.draft_url,
        base_url=servers.base_url,
        family=servers.family,
        **{**AGREE, **changes},
    )


def test_invoke_and_stream_give_the_same_trace_in_the_agree_mode(servers):
    llm = make(servers)
    reply = llm.invoke(QUESTION)
    stats = reply.response_metadata["specreason"]
    assert stats["steps_accepted"] + stats["steps_rewritten"] >= 1
    assert stats["steps_base"] == 0
    # every position was compared with the base's own step: one "judged" step each, no judge
    # request (the judge's prompt tokens stay 0)
    assert stats["judge_calls"] == stats["steps_accepted"] + stats["steps_rewritten"]
    assert stats["judge_prompt_tokens"] == 0
    assert reply.usage_metadata and reply.usage_metadata["output_tokens"] > 0
    streamed = "".join(str(chunk.content) for chunk in llm.stream(QUESTION))
    assert streamed == reply.content  # greedy: the same trace and answer both ways


async def test_the_graph_records_each_position_of_a_round(servers):
    graph = create_specreason_graph(
        OpenAIEndpoint(servers.draft_url, name="draft", max_retries=1),
        OpenAIEndpoint(servers.base_url, name="base", max_retries=1),
        config=SpecReasonConfig(**AGREE),
        family=servers.family,
    )
    out = await graph.ainvoke({"messages": [("user", QUESTION)]})
    assert out["steps"] and out["answer"].strip()
    for record in out["steps"]:
        verdict = record["verdict"]
        assert verdict["rule"] == "result" and verdict["round_s"] > 0
        assert 0 <= verdict["position"] < AGREE["steps_ahead"]
        if record["decision"] == "rewritten":  # the base's own step, written in the round
            assert record["author"] == "base" and record["draft_text"] is not None
            assert record["text"].startswith(verdict["base_text"])
            assert verdict["agree"] is False
        else:
            assert record["decision"] == "accepted" and verdict["agree"] is True
    firsts = [r for r in out["steps"] if r["verdict"]["position"] == 0]
    assert sum(r["draft_s"] + r["judge_s"] for r in firsts) > 0  # each round's time, once


def test_bench_runs_the_agree_mode(servers, tmp_path):
    out = tmp_path / "bench"
    cmd = [
        sys.executable,
        "-m",
        "langchain_specreason.cli",
        "bench",
        "--draft-url",
        servers.draft_url,
        "--base-url",
        servers.base_url,
        "--dataset",
        "gsm8k",
        "--limit",
        "1",
        "--modes",
        "agree",
        "--agree-rule",
        "result,numbers",
        "--steps-ahead",
        "2",
        "--budget",
        "32",
        "--step-max-tokens",
        "16",
        "--answer-max-tokens",
        "32",
        "--out",
        str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["mode"], r["agree_rule"], r["steps_ahead"]) for r in records] == [
        ("agree", "result", 2),
        ("agree", "numbers", 2),
    ]
    for record in records:
        assert record["config"]["verify"] == "agree"
        assert record["steps_drafted"] >= 1 and record["judge_calls"] == record["steps_drafted"]
        assert record["rounds"] and sum(r["steps"] for r in record["rounds"]) == len(
            record["steps"]
        )
    summary = (out / "summary.md").read_text()
    assert "agree result steps_ahead=2" in summary and "## Rounds of the agree runs" in summary
