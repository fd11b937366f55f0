"""The SpecReason graph against the real cpu-test servers (SmolLM2-135M draft, Qwen 0.5B base)."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from langchain_specreason import (
    ContextLengthError,
    EndpointError,
    InputError,
    OpenAIEndpoint,
    SpecReasonConfig,
    SpecReasonStats,
    create_specreason_graph,
)
from langchain_specreason.lab.bench.metrics import GENERATION_TOKENS, REQUESTS, scrape
from tests.helpers import QUESTION, greedy, pair_graph

pytestmark = pytest.mark.integration

# Short traces keep CI fast: a small budget and step cap, greedy sampling.
FAST = greedy(96, 48, 48, judge="score")  # pins the 0-9 judge's control flow (thresholds 0, 10)


def make_graph(servers, **overrides):
    return pair_graph(servers, SpecReasonConfig(**{**FAST, **overrides}))


async def test_question_runs_to_an_answer(servers):
    out = await make_graph(servers, threshold=7).ainvoke({"messages": [("user", QUESTION)]})
    assert out["answer"].strip()
    assert out["steps"], "no step was kept"
    assert out["stop"] in ("end", "budget", "repeat")
    assert out["tokens_used"] <= FAST["budget"]
    for record in out["steps"]:
        assert record["text"] and record["tokens"] > 0
        if record["decision"] != "base":
            assert 0 <= record["score"] <= 9
    stats = SpecReasonStats.from_state(out)
    assert stats.steps_accepted + stats.steps_rewritten == stats.judge_calls
    assert stats.judge_prompt_tokens > 0
    assert out["messages"][-1].content == out["answer"]


async def test_threshold_zero_base_server_only_judges_and_answers(servers):
    before = await scrape(servers.base_url)
    out = await make_graph(servers, threshold=0).ainvoke({"messages": [("user", QUESTION)]})
    seen = await scrape(servers.base_url) - before
    stats = SpecReasonStats.from_state(out)
    assert {s["decision"] for s in out["steps"]} == {"accepted"}
    assert stats.base_tokens == stats.answer_tokens  # no rewritten step
    answer_calls = 0 if out["stop"] == "end" else 1
    # what the base server itself counted: one 1-token request per judged step, plus the answer
    assert seen[REQUESTS] == stats.judge_calls + answer_calls
    assert seen[GENERATION_TOKENS] == stats.judge_calls + stats.answer_tokens


async def test_threshold_ten_rewrites_every_step(servers):
    out = await make_graph(servers, threshold=10).ainvoke({"messages": [("user", QUESTION)]})
    decisions = [s["decision"] for s in out["steps"]]
    assert decisions and set(decisions) == {"rewritten"}
    assert all(s["author"] == "base" and s["draft_text"] is not None for s in out["steps"])


async def test_interrupt_and_resume_with_sqlite_checkpointer(servers, tmp_path):
    path = str(tmp_path / "checkpoints.sqlite")
    thread = {"configurable": {"thread_id": "resume-1"}}
    seen: list[str] = []

    def checkpointed(saver):
        config = SpecReasonConfig(**{**FAST, "threshold": 5, "budget": 160})
        return pair_graph(servers, config, max_retries=2, checkpointer=saver)

    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        graph = checkpointed(saver)
        stream = graph.astream({"messages": [("user", QUESTION)]}, thread, stream_mode="custom")
        async for event in stream:
            if event["type"] == "step":
                seen.append(event["text"])
                if len(seen) == 2:
                    break  # the client goes away mid-run
        await stream.aclose()
    assert len(seen) == 2
    async with AsyncSqliteSaver.from_conn_string(path) as saver:  # a new process, same file
        graph = checkpointed(saver)
        saved = (await graph.aget_state(thread)).values["steps"]
        # every step whose node finished is saved; the step streamed last may have been cut
        # before its node wrote the checkpoint (closing the stream cancels that node)
        assert 1 <= len(saved) <= len(seen)
        assert [s["text"] for s in saved] == seen[: len(saved)]
        out = await graph.ainvoke(None, thread)
    assert [s["text"] for s in out["steps"]][:2] == seen
    # the saved records themselves, timings included: the resumed run did not redo them
    assert out["steps"][: len(saved)] == saved
    assert out["answer"].strip()


async def test_empty_conversation_is_refused_before_any_call(servers):
    with pytest.raises(InputError, match="empty"):
        await make_graph(servers).ainvoke({"messages": []})


async def test_unreachable_base_is_a_typed_error_after_bounded_retries(servers):
    dead = OpenAIEndpoint("http://127.0.0.1:9/v1", model="x", name="base", max_retries=1)
    graph = create_specreason_graph(
        OpenAIEndpoint(servers.draft_url, name="draft"), dead, config=SpecReasonConfig(**FAST)
    )
    with pytest.raises(
        EndpointError,
        match=r"base endpoint at http://127.0.0.1:9/v1: "
        r"unreachable after 2 attempts",
    ):
        await asyncio.wait_for(graph.ainvoke({"messages": [("user", "hi")]}), timeout=60)


async def test_unreachable_draft_hands_the_run_to_the_base_model(servers):
    dead = OpenAIEndpoint("http://127.0.0.1:9/v1", model="x", name="draft", max_retries=1)
    base = OpenAIEndpoint(servers.base_url, name="base")
    graph = create_specreason_graph(dead, base, config=SpecReasonConfig(**FAST))
    before = (await scrape(servers.base_url))[REQUESTS]
    out = await asyncio.wait_for(graph.ainvoke({"messages": [("user", QUESTION)]}), timeout=600)
    assert out["answer"].strip()
    assert out["draft_down"].startswith("draft endpoint at http://127.0.0.1:9/v1: unreachable")
    assert out["steps"] and all(
        s["author"] == "base" and s["decision"] == "base" for s in out["steps"]
    )
    # the base server wrote every step (and the answer if one was needed): no judge call
    calls = (await scrape(servers.base_url))[REQUESTS] - before
    assert calls == len(out["steps"]) + (1 if out["answer_tokens"] else 0)


async def test_context_longer_than_max_model_len_is_a_typed_error(servers):
    base = OpenAIEndpoint(servers.base_url, name="base")
    limit = await base.max_model_len()
    assert limit is not None
    long_text = "apple " * (limit + 100)
    urls = (servers.draft_url, servers.base_url)
    before = [(await scrape(url))[REQUESTS] for url in urls]
    with pytest.raises(
        ContextLengthError, match=f"the base server's context window is {limit}"
    ) as info:
        await make_graph(servers).ainvoke({"messages": [("user", long_text)]})
    assert info.value.endpoint == "base"  # it counted the conversation: refused up front
    assert [(await scrape(url))[REQUESTS] for url in urls] == before  # nothing generated
