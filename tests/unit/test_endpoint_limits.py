"""OpenAIEndpoint's limits, on an in-process HTTP transport (no network, no server)."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest

from langchain_specreason import ChatRequest, ConfigError, EndpointError, OpenAIEndpoint

from .fakes import chat_completion_body, chat_completion_chunk

URL = "http://testserver/v1"
REQUEST = ChatRequest([{"role": "user", "content": "hi"}], 4)


def _reply(text: str) -> dict:
    return {
        **chat_completion_body(text),
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


class _BrokenStream(httpx2.AsyncByteStream):
    """One SSE chunk, then the connection drops."""

    async def __aiter__(self):
        chunk = chat_completion_chunk("4")
        yield f"data: {json.dumps(chunk)}\n\n".encode()
        raise httpx2.RemoteProtocolError(
            "peer closed connection without sending complete message body"
        )


async def test_a_stream_that_breaks_off_is_a_typed_error_naming_the_endpoint():
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_BrokenStream()
        )

    endpoint = OpenAIEndpoint(
        URL, model="m", name="base", max_retries=0, transport=httpx2.MockTransport(handler)
    )
    got = []
    with pytest.raises(
        EndpointError,
        # the openai SDK wraps the break (APIConnectionError) or, in older 3.x, lets httpx's
        # RemoteProtocolError through: either way one typed error naming the endpoint
        match=r"base endpoint at http://testserver/v1: stream "
        r"broke off \((APIConnectionError|RemoteProtocolError)",
    ):
        async for item in endpoint.stream(REQUEST):
            got.append(item.text)
    assert got == ["4"]  # what came before the break was delivered


async def test_max_concurrency_bounds_the_requests_in_flight():
    in_flight = peak = 0

    async def handler(request: httpx2.Request) -> httpx2.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1
        return httpx2.Response(200, json=_reply("ok"))

    endpoint = OpenAIEndpoint(
        URL, model="m", max_concurrency=2, transport=httpx2.MockTransport(handler)
    )
    done = await asyncio.gather(*(endpoint.complete(REQUEST) for _ in range(7)))
    assert [d.text for d in done] == ["ok"] * 7
    assert peak == 2

    unbounded = OpenAIEndpoint(URL, model="m", transport=httpx2.MockTransport(handler))
    peak = 0
    await asyncio.gather(*(unbounded.complete(REQUEST) for _ in range(7)))
    assert peak == 7


def test_bad_limits_are_config_errors():
    with pytest.raises(ConfigError, match="max_concurrency must be at least 1, got 0"):
        OpenAIEndpoint(URL, max_concurrency=0)


async def test_connecting_and_generating_have_separate_timeouts():
    endpoint = OpenAIEndpoint(URL, timeout=600.0, connect_timeout=0.5)
    timeout = endpoint.client.timeout
    assert (timeout.connect, timeout.read) == (0.5, 600.0)  # a dead host fails in 0.5 s


async def test_a_one_token_call_has_the_judge_timeout_and_a_generation_the_long_one():
    seen: list[dict] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.extensions["timeout"])
        if request.url.path.endswith("/tokenize"):
            return httpx2.Response(200, json={"tokens": [1, 2]})
        return httpx2.Response(200, json=_reply("ok"))

    endpoint = OpenAIEndpoint(
        URL,
        model="m",
        timeout=600.0,
        judge_timeout=30.0,
        connect_timeout=2.0,
        transport=httpx2.MockTransport(handler),
    )
    await endpoint.complete(ChatRequest([{"role": "user", "content": "rate"}], 1))
    await endpoint.complete(REQUEST)  # 4 tokens: a generation
    await endpoint.tokenize_text("hi")
    assert [(t["read"], t["connect"]) for t in seen] == [(30.0, 2.0), (600.0, 2.0), (30.0, 2.0)]


@pytest.mark.parametrize(
    ("header", "low", "high"),
    [
        # "retry now": the back-off alone would wait at least 0.5 s, so this fails if ignored
        ({"retry-after": "0"}, 0.0, 0.45),
        ({"retry-after-ms": "0"}, 0.0, 0.45),
        # longer than the first back-off can be (0.5 s + at most 1 s of jitter)
        ({"retry-after": "2.5"}, 2.45, 4.0),
    ],
)
async def test_retry_after_is_honoured(header, low, high):
    times: list[float] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        times.append(asyncio.get_running_loop().time())
        if len(times) == 1:
            return httpx2.Response(429, headers=header, json={"message": "busy"})
        return httpx2.Response(200, json=_reply("ok"))

    endpoint = OpenAIEndpoint(
        URL, model="m", max_retries=1, transport=httpx2.MockTransport(handler)
    )
    done = await endpoint.complete(REQUEST)
    assert done.text == "ok"
    assert low <= times[1] - times[0] < high  # waited what the server asked, not the back-off


async def test_a_retry_after_beyond_two_minutes_fails_at_once_and_says_why():
    calls = 0

    def handler(request: httpx2.Request) -> httpx2.Response:
        nonlocal calls
        calls += 1
        return httpx2.Response(
            503, headers={"retry-after": "3600"}, json={"message": "maintenance"}
        )

    endpoint = OpenAIEndpoint(
        URL, model="m", name="base", max_retries=3, transport=httpx2.MockTransport(handler)
    )
    with pytest.raises(
        EndpointError,
        match=r"HTTP 503, and the server asks to retry after "
        r"3600 s \(more than 120 s\): maintenance",
    ):
        await endpoint.complete(REQUEST)
    assert calls == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout": 0}, "timeout must be a positive number of seconds, got 0"),
        ({"judge_timeout": -1.0}, "judge_timeout must be a positive number of seconds, got -1.0"),
        ({"connect_timeout": 0.0}, "connect_timeout must be a positive number of seconds, got 0.0"),
        ({"max_retries": -1}, "max_retries must be at least 0, got -1"),
    ],
)
def test_bad_timeouts_and_retries_are_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        OpenAIEndpoint(URL, **kwargs)
