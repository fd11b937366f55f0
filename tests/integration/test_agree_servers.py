"""The ``agree`` mode on the real cpu-test servers: ChatSpecReason and the bench."""

from __future__ import annotations

import pytest

from langchain_specreason import SpecReasonConfig
from tests.helpers import (
    ONE_PROBLEM,
    QUESTION,
    budget_flags,
    cli_ok,
    greedy,
    pair_flags,
    pair_graph,
    pair_model,
    read_jsonl,
)

pytestmark = pytest.mark.integration

AGREE = greedy(96, 48, 48, verify="agree", steps_ahead=3)


def test_invoke_and_stream_give_the_same_trace_in_the_agree_mode(servers):
    llm = pair_model(servers, **AGREE)
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
    graph = pair_graph(servers, SpecReasonConfig(**AGREE))
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
    cli_ok(
        "bench",
        *pair_flags(servers),
        *ONE_PROBLEM,
        *("--modes", "agree", "--agree-rule", "result,numbers", "--steps-ahead", "2"),
        *budget_flags(32, 16, 32),
        *("--out", str(out)),
        timeout=600,
    )
    records = read_jsonl(out / "results.jsonl")
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
