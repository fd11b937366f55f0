"""Malformed replies and refused requests: typed errors, and a fallback only for outages."""

from __future__ import annotations

import json

import httpx2
import openai
import pytest
from langchain_core.exceptions import ModelTimeoutError

from langchain_specreason import SpecReasonConfig
from langchain_specreason.endpoint import ChatRequest, OpenAIEndpoint
from langchain_specreason.errors import EndpointError, EndpointTimeoutError
from langchain_specreason.graph import create_specreason_graph

from .fakes import (
    ScriptedEndpoint,
    chat_completion_body,
    chat_completion_chunk,
    is_judge,
    partial_of,
    score,
    step,
)

MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 4096}]}
REQUEST = ChatRequest([{"role": "user", "content": "hi"}], 5)
QUESTION = {"messages": [("user", "What is 2+2?")]}


def endpoint(reply: httpx2.Response, name: str = "base") -> OpenAIEndpoint:
    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/models"):
            return httpx2.Response(200, json=MODELS)
        return reply

    return OpenAIEndpoint(
        "http://t/v1", name=name, transport=httpx2.MockTransport(handler), max_retries=0
    )


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (
            httpx2.Response(200, text="<html>proxy</html>", headers={"content-type": "text/html"}),
            "not a chat completion",
        ),
        (
            httpx2.Response(
                200,
                content=b'{"id": "x", "choices": [',
                headers={"content-type": "application/json"},
            ),
            "not valid JSON",
        ),
    ],
    ids=["html-200", "truncated-json-200"],
)
async def test_a_malformed_reply_is_a_typed_error_naming_the_endpoint(reply, reason):
    with pytest.raises(
        EndpointError,
        match=rf"base endpoint at http://t/v1: malformed reply: "
        rf"{reason}",
    ):
        await endpoint(reply).complete(REQUEST)


async def test_bad_json_inside_the_event_stream_is_a_typed_error():
    body = b'data: {"id": "x", "object": "chat.completion.chunk", "choices": [\n\n'
    reply = httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})
    with pytest.raises(EndpointError, match="base endpoint at http://t/v1: stream broke off"):
        async for _ in endpoint(reply).stream(REQUEST):
            pass


def base_handler(req: ChatRequest):
    if is_judge(req):
        return score("9")
    index = partial_of(req).count("\n\n")
    return step(f"B{index}.", 5, end=index == 1)


async def test_a_refused_draft_request_is_an_error_not_a_silent_fallback():
    # a misnamed draft model: HTTP 404 from the draft server
    refused = httpx2.Response(404, json={"error": {"message": "The model `nope` does not exist."}})
    graph = create_specreason_graph(
        endpoint(refused, "draft"),
        ScriptedEndpoint("base", base_handler),
        config=SpecReasonConfig(judge="score", lookahead=False),
    )
    with pytest.raises(EndpointError, match=r"draft endpoint .*HTTP 404: The model `nope`") as err:
        await graph.ainvoke(QUESTION)
    assert err.value.refused and err.value.status == 404


async def test_a_malformed_draft_reply_falls_back_to_the_base_model_with_a_warning():
    html = httpx2.Response(200, text="<html>proxy</html>", headers={"content-type": "text/html"})
    graph = create_specreason_graph(
        endpoint(html, "draft"),
        ScriptedEndpoint("base", base_handler),
        config=SpecReasonConfig(judge="score", lookahead=False),
    )
    with pytest.warns(UserWarning, match="malformed reply.*the base model writes"):
        out = await graph.ainvoke(QUESTION)
    assert out["draft_down"].startswith("draft endpoint at http://t/v1: malformed reply")
    assert [s["author"] for s in out["steps"]] == ["base", "base"]


async def test_a_stream_that_ends_without_a_finish_reason_is_an_error_not_a_stop():
    chunk = chat_completion_chunk("The answer is 4")
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
    reply = httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})
    got = []
    with pytest.raises(EndpointError, match="stream ended without a finish reason"):
        async for item in endpoint(reply).stream(REQUEST):
            got.append(item.text)
    assert got == ["The answer is 4"]  # what came is delivered, then the error


async def test_a_trickling_stream_hits_the_overall_generation_limit():
    import asyncio

    async def trickle():
        for i in range(50):
            chunk = {
                "id": "x",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": f"{i} "}, "finish_reason": None}],
            }
            yield f"data: {json.dumps(chunk)}\n\n".encode()
            await asyncio.sleep(0.1)  # each read well within the read timeout

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/models"):
            return httpx2.Response(200, json=MODELS)
        return httpx2.Response(
            200, content=trickle(), headers={"content-type": "text/event-stream"}
        )

    slow = OpenAIEndpoint(
        "http://t/v1",
        name="base",
        timeout=0.5,
        max_retries=0,
        transport=httpx2.MockTransport(handler),
    )
    got = []
    with pytest.raises(EndpointError, match=r"took longer than timeout=0\.5 s in all") as caught:
        async for item in slow.stream(REQUEST):
            got.append(item.text)
    assert 2 <= len(got) <= 8  # cut near half a second, not after all 50 pieces
    # its own type, as a non-streamed timeout: retryable, and what the SDK's and core's
    # timeout handlers catch; one message, not wrapped in "stream broke off"
    assert type(caught.value) is EndpointTimeoutError
    assert caught.value.is_retryable is True
    assert isinstance(caught.value, openai.APITimeoutError)
    assert isinstance(caught.value, ModelTimeoutError)
    assert "stream broke off" not in str(caught.value)
    assert str(caught.value).count("base endpoint at") == 1


async def test_a_stream_whose_read_times_out_is_a_retryable_timeout():
    async def stalls():
        chunk = {
            "id": "x",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "a "}, "finish_reason": None}],
        }
        yield f"data: {json.dumps(chunk)}\n\n".encode()
        raise httpx2.ReadTimeout("read timed out")

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/models"):
            return httpx2.Response(200, json=MODELS)
        return httpx2.Response(200, content=stalls(), headers={"content-type": "text/event-stream"})

    ep = OpenAIEndpoint(
        "http://t/v1", name="base", max_retries=0, transport=httpx2.MockTransport(handler)
    )
    with pytest.raises(EndpointTimeoutError, match="stream broke off") as caught:
        async for _ in ep.stream(REQUEST):
            pass
    assert caught.value.is_retryable is True


async def test_the_concurrency_slot_is_released_while_a_call_waits_to_retry():
    import asyncio

    order: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/models"):
            return httpx2.Response(200, json=MODELS)
        body = json.loads(request.content)
        who = body["messages"][0]["content"]
        order.append(who)
        if who == "busy" and order.count("busy") == 1:
            return httpx2.Response(429, headers={"retry-after": "1"}, json={"message": "busy"})
        return httpx2.Response(200, json=chat_completion_body(who))

    one = OpenAIEndpoint(
        "http://t/v1",
        name="base",
        model="m",
        max_retries=1,
        max_concurrency=1,
        transport=httpx2.MockTransport(handler),
    )
    first = asyncio.ensure_future(
        one.complete(ChatRequest([{"role": "user", "content": "busy"}], 5))
    )
    await asyncio.sleep(0.2)  # the first call got its 429 and waits 1 s to retry
    loop = asyncio.get_running_loop()
    start = loop.time()
    second = await one.complete(ChatRequest([{"role": "user", "content": "free"}], 5))
    assert second.text == "free" and loop.time() - start < 0.5  # not queued behind the wait
    assert (await first).text == "busy"
    assert order == ["busy", "free", "busy"]


async def test_an_html_page_from_tokenize_is_a_malformed_reply():
    """A proxy's HTML page where ``/tokenize`` should answer (the ``start`` node's count of the
    conversation) says what it is, as a chat call's would."""
    html = httpx2.Response(200, text="<html>proxy</html>", headers={"content-type": "text/html"})
    with pytest.raises(EndpointError, match=r"malformed reply: /tokenize answered without tokens"):
        await endpoint(html, "draft").count_tokens([{"role": "user", "content": "hi"}])
