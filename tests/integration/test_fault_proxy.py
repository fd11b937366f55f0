"""Faults a proxy or a load balancer puts between the client and real vLLM servers: a fault-
injecting proxy (tests/faultproxy.py) in front of the session's servers, one fault at a time.

What a user gets: a 429 is waited out as Retry-After asks; a 503 storm on the draft hands the
run to the base model; on the base, short storms are retried and long ones are a typed error;
an HTML page or cut JSON with status 200 is a typed error from the base and a fallback from
the draft; a cut event stream is an error, not a silently shortened answer.
"""

from __future__ import annotations

import pytest

from langchain_specreason import ChatSpecReason, EndpointError, OpenAIEndpoint
from langchain_specreason.endpoint import ChatRequest
from tests.faultproxy import FaultProxy
from tests.helpers import greedy

pytestmark = pytest.mark.integration

QUESTION = "A box holds 12 eggs. Tom buys 3 boxes. How many eggs? Think step by step."
# judge_timeout: the servers may be busy (the test session's other work): no false timeouts
FAST = greedy(48, 24, 16, judge="score", threshold=0, judge_timeout=300)
HELLO = ChatRequest([{"role": "user", "content": "Say hello."}], 4)


@pytest.fixture
def base_proxy(servers):
    with FaultProxy(servers.base_url) as proxy:
        yield proxy


@pytest.fixture
def draft_proxy(servers):
    with FaultProxy(servers.draft_url) as proxy:
        yield proxy


def posts(proxy: FaultProxy) -> list:
    return [s for s in proxy.seen if s.path.endswith("/completions")]


async def test_a_429_is_waited_out_as_retry_after_asks(base_proxy):
    base_proxy.inject("429", retry_after=2.5)
    endpoint = OpenAIEndpoint(base_proxy.url, name="base", max_retries=2)
    done = await endpoint.complete(HELLO)
    assert done.completion_tokens > 0
    first, second = posts(base_proxy)
    assert (first.fault, second.fault) == ("429", None)
    # the back-off alone waits 0.5-1.5 s: this gap is the server's Retry-After
    assert 2.45 <= second.at - first.at < 4.0


async def test_a_short_503_storm_on_the_base_is_retried(base_proxy):
    base_proxy.inject("503", times=2)
    endpoint = OpenAIEndpoint(base_proxy.url, name="base", max_retries=3)
    done = await endpoint.complete(HELLO)
    assert done.completion_tokens > 0
    assert [s.fault for s in posts(base_proxy)] == ["503", "503", None]


async def test_a_long_503_storm_on_the_base_is_a_typed_error_naming_it(servers, base_proxy):
    base_proxy.inject("503", times=1000)
    llm = ChatSpecReason(
        draft_url=servers.draft_url, base_url=base_proxy.url, max_retries=1, **FAST
    )
    with pytest.raises(EndpointError, match=r"base endpoint at .*503") as info:
        await llm.ainvoke(QUESTION)
    assert info.value.endpoint == "base" and not info.value.refused
    assert all(s.fault == "503" for s in posts(base_proxy))


async def test_a_503_storm_on_the_draft_hands_the_run_to_the_base(servers, draft_proxy):
    draft_proxy.inject("503", times=1000)
    llm = ChatSpecReason(
        draft_url=draft_proxy.url,
        base_url=servers.base_url,
        max_retries=1,
        draft_cooldown=3600,  # longer than any run here: the second call is inside it
        **FAST,
    )
    with pytest.warns(UserWarning, match="503"):
        reply = await llm.ainvoke(QUESTION)
    stats = reply.response_metadata["specreason"]
    assert "503" in stats["draft_down"]
    assert stats["steps_base"] >= 1 and stats["steps_accepted"] == 0
    assert reply.content.strip()
    # the start node's window probe met the storm first and tripped the breaker: no step was
    # asked of the draft (and the probe gave up after its retries)
    assert posts(draft_proxy) == []
    probes = [s.path for s in draft_proxy.seen]
    assert probes == ["/tokenize", "/tokenize"]  # the count: one attempt, one retry
    assert all(s.fault == "503" for s in draft_proxy.seen)
    await llm.ainvoke(QUESTION)  # within draft_cooldown: no probe and no step at all
    assert [s.path for s in draft_proxy.seen] == probes


@pytest.mark.parametrize(
    ("fault", "reason"),
    [("html", "not a chat completion"), ("truncated-json", "not valid JSON")],
)
async def test_a_malformed_200_from_the_base_is_a_typed_error(base_proxy, fault, reason):
    base_proxy.inject(fault)
    endpoint = OpenAIEndpoint(base_proxy.url, name="base", max_retries=2)
    with pytest.raises(EndpointError, match=rf"base endpoint at .*malformed reply: {reason}"):
        await endpoint.complete(HELLO)


async def test_a_malformed_200_from_the_draft_falls_back_to_the_base(servers, draft_proxy):
    draft_proxy.inject("html", times=1000)
    llm = ChatSpecReason(draft_url=draft_proxy.url, base_url=servers.base_url, **FAST)
    with pytest.warns(UserWarning, match="malformed reply"):
        reply = await llm.ainvoke(QUESTION)
    stats = reply.response_metadata["specreason"]
    assert "malformed reply" in stats["draft_down"] and reply.content.strip()


async def test_a_cut_answer_stream_is_an_error_not_a_short_answer(servers, base_proxy):
    # the answer is the only streamed call: cut it after two events
    base_proxy.inject("truncated-stream", stream_only=True, events=2)
    llm = ChatSpecReason(
        draft_url=servers.draft_url, base_url=base_proxy.url, max_retries=0, **FAST
    )
    with pytest.raises(EndpointError, match=r"base endpoint at .*stream"):
        await llm.ainvoke(QUESTION)
    assert [s.fault for s in posts(base_proxy) if s.stream] == ["truncated-stream"]
