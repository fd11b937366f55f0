"""ChatSpecReason's own state on the real cpu-test servers: token counts LangChain's trimmers can
add up, and one draft circuit breaker across per-call settings."""

from __future__ import annotations

import warnings

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages

from langchain_specreason import ChatSpecReason
from tests.faultproxy import FaultProxy

pytestmark = pytest.mark.integration

SMALL = {"budget": 16, "answer_max_tokens": 8, "temperature": 0.0, "max_retries": 0}


@pytest.mark.parametrize("where", ["local tokenizer", "server /tokenize"])
def test_a_message_added_never_lowers_the_count_and_trimming_keeps_the_question(servers, where):
    # "local tokenizer": the folder the base server reports (this machine); else /tokenize
    tokenizer = None if where == "local tokenizer" else "/nonexistent-tokenizer-folder"
    llm = ChatSpecReason(
        draft_url=servers.draft_url, base_url=servers.base_url, tokenizer=tokenizer
    )
    system = SystemMessage("You are terse.")
    question = HumanMessage(
        "A farmer has 17 sheep and buys 5 more. How many sheep does he have now? "
        "Think step by step."
    )  # 55 tokens alone as Qwen's template renders it (with its default system prompt)
    lists = [
        [question],
        [system, question],
        [system, question, AIMessage("4.")],
        [system, question, AIMessage("4."), HumanMessage("And 3+3?")],
    ]
    counts = [llm.get_num_tokens_from_messages(m) for m in lists]
    assert counts == sorted(counts) and len(set(counts)) == len(counts), counts
    assert llm.get_num_tokens_from_messages([system]) + counts[0] >= counts[1]  # parts add up
    kept = trim_messages(
        [system, question], max_tokens=60, token_counter=llm, include_system=True, strategy="last"
    )
    assert kept == [system, question]  # counted 12 + 55 > 60 before: the system kept alone


def test_a_draft_outage_seen_under_one_setting_skips_the_draft_under_another(servers):
    with FaultProxy(servers.draft_url) as proxy:  # the real draft server, behind a 503 storm
        proxy.inject("503", times=1000)
        llm = ChatSpecReason(
            draft_url=proxy.url, base_url=servers.base_url, family=servers.family, **SMALL
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the fallback's warning
            first = llm.invoke("What is 2+2?", seed=1)
            asked = len(proxy.seen)
            second = llm.invoke("What is 2+2?", seed=2)  # another setting: another graph
    assert asked >= 1 and first.content  # the draft failed; the base model answered
    assert len(proxy.seen) == asked  # the second setting's run never asked the draft
    assert second.content and "skipped for" in second.response_metadata["specreason"]["draft_down"]
    assert len(llm._graphs) == 2
