"""ChatOpenAI's request options on ChatSpecReason: model_kwargs, extra_body, default_headers,
http_client / http_async_client, stream_usage; pinned on an in-process vLLM stand-in
(httpx2.MockTransport: no network) or scripted endpoints."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest

from langchain_specreason import ChatRequest, ChatSpecReason, ConfigError, OpenAIEndpoint

from .fakes import chat_completion_body
from .test_chat_model import fake_model


class FakeVLLM:
    """Answers vLLM's routes; records every request (path, headers, JSON body)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content) if request.content else {}
        self.requests.append((request.url.path, dict(request.headers), body))
        path = request.url.path
        if path.endswith("/models"):
            return httpx2.Response(
                200,
                json={
                    "object": "list",
                    "data": [
                        {
                            "id": "m",
                            "object": "model",
                            "created": 0,
                            "owned_by": "x",
                            "max_model_len": 4096,
                        }
                    ],
                },
            )
        if path.endswith("/tokenize"):
            return httpx2.Response(200, json={"tokens": [1, 2, 3], "count": 3})
        usage = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
        if body.get("stream"):  # the answer
            chunks = [
                {"choices": [{"index": 0, "delta": {"content": "Done."}, "finish_reason": None}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {"choices": [], "usage": usage},
            ]
            sse = (
                "".join(
                    f"data: {json.dumps({'id': 'x', 'object': 'chat.completion.chunk', 'created': 0, 'model': 'm', **c})}\n\n"  # noqa: E501
                    for c in chunks
                )
                + "data: [DONE]\n\n"
            )
            return httpx2.Response(
                200, headers={"content-type": "text/event-stream"}, content=sse.encode()
            )
        return httpx2.Response(
            200,
            # a step, ended by the delimiter
            json={**chat_completion_body("A step.", stop_reason="\n\n"), "usage": usage},
        )

    def chat_bodies(self) -> list[dict]:
        return [body for path, _, body in self.requests if path.endswith("/chat/completions")]


def served_model(server: FakeVLLM, **kwargs) -> ChatSpecReason:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
    params = {
        "draft_url": "http://draft/v1",
        "base_url": "http://base/v1",
        "judge": "arithmetic",
        "budget": 10,
        "lookahead": False,
        "http_async_client": client,
        **kwargs,
    }
    return ChatSpecReason(**params)


def test_unknown_keyword_arguments_move_to_model_kwargs_with_a_warning():
    with pytest.warns(UserWarning, match="repetition_penalty was transferred to model_kwargs"):
        model = ChatSpecReason(
            draft_url="http://d/v1", base_url="http://b/v1", repetition_penalty=1.1
        )
    assert model.model_kwargs == {"repetition_penalty": 1.1}
    with pytest.raises(ConfigError, match="model_kwargs may not set n: SpecReason sets them"):
        ChatSpecReason(model_kwargs={"n": 2})
    with (
        pytest.warns(UserWarning, match="transferred to model_kwargs"),
        pytest.raises(
            ConfigError,
            match=r"may not set logprobs, n: .*logprobs, n: not supported \(one "
            r"answer per call; the judges ask for logprobs themselves\)",
        ),
    ):
        ChatSpecReason(n=2, logprobs=True)  # ChatOpenAI options with no counterpart here
    with pytest.raises(ConfigError, match="extra_body may not set max_tokens, stream"):
        ChatSpecReason(extra_body={"max_tokens": 3, "stream": False})


async def test_model_kwargs_extra_body_and_headers_reach_every_server_call():
    server = FakeVLLM()
    with pytest.warns(UserWarning, match="transferred to model_kwargs"):
        model = served_model(
            server,
            repetition_penalty=1.1,
            extra_body={"chat_template_kwargs": {"enable_thinking": False}},
            default_headers={"X-Team": "search"},
        )
    msg = await model.ainvoke("hi")
    assert msg.content.endswith("Done.")
    bodies = server.chat_bodies()
    assert len(bodies) == 3  # two steps (the budget), then the streamed answer
    assert bodies[-1]["stream"] is True
    for body in bodies:
        assert body["repetition_penalty"] == 1.1
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
    tokenize = [body for path, _, body in server.requests if path.endswith("/tokenize")]
    assert tokenize and all(
        b["chat_template_kwargs"] == {"enable_thinking": False} for b in tokenize
    )
    assert all(headers["x-team"] == "search" for _, headers, _ in server.requests)
    # per call, on top of the model's own; the next call is without it
    server.requests.clear()
    await model.ainvoke("hi", extra_body={"min_p": 0.05})
    assert all(b["min_p"] == 0.05 and b["repetition_penalty"] == 1.1 for b in server.chat_bodies())
    server.requests.clear()
    await model.ainvoke("hi")
    assert all("min_p" not in b for b in server.chat_bodies())
    with pytest.raises(ConfigError, match="extra_body may not set temperature"):
        await model.ainvoke("hi", extra_body={"temperature": 0})


async def test_per_call_extra_body_reaches_given_endpoints_too():
    model = fake_model()
    await model.ainvoke("12*7?", extra_body={"top_k": 5})
    for endpoint in (model.draft_endpoint, model.base_endpoint):
        assert endpoint.requests and all(r.extra_body == {"top_k": 5} for r in endpoint.requests)


def test_an_http_client_serves_one_event_loop_and_says_so():
    server = FakeVLLM()
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
    endpoint = OpenAIEndpoint("http://base/v1", model="m", http_async_client=client)
    request = ChatRequest([{"role": "user", "content": "hi"}], 4)
    assert asyncio.run(endpoint.complete(request)).text == "A step."
    with pytest.raises(ConfigError, match="already used on another event loop"):
        asyncio.run(endpoint.complete(request))  # a new loop: the pool belongs to the first


async def test_sync_calls_use_http_client_and_async_calls_http_async_client():
    sync_server, async_server = FakeVLLM(), FakeVLLM()
    model = served_model(
        async_server, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(sync_server))
    )
    await model.ainvoke("hi")
    await asyncio.to_thread(model.invoke, "hi")  # the sync API, on its own loop thread
    assert async_server.chat_bodies() and sync_server.chat_bodies()
    assert len(async_server.chat_bodies()) == len(sync_server.chat_bodies())
    # one client only: the second loop is refused with the reason
    lone = served_model(FakeVLLM())
    await lone.ainvoke("hi")
    with pytest.raises(ConfigError, match="pass http_client= for the sync API"):
        await asyncio.to_thread(lone.invoke, "hi")


def test_http_clients_must_be_httpx2_async_clients():
    with pytest.raises(ConfigError, match=r"http_client must be an httpx2\.AsyncClient"):
        OpenAIEndpoint("http://b/v1", http_client=httpx2.Client())  # type: ignore[arg-type]


async def test_stream_usage_on_the_last_chunk_or_not_at_all():
    chunks = [c async for c in fake_model().astream("12*7?")]
    assert [c.usage_metadata is not None for c in chunks] == [False] * (len(chunks) - 1) + [True]
    quiet = fake_model(stream_usage=False)
    assert all(c.usage_metadata is None for c in [c async for c in quiet.astream("12*7?")])
    assert all(
        c.usage_metadata is None
        for c in [c async for c in fake_model().astream("12*7?", stream_usage=False)]
    )
    assert (await quiet.ainvoke("12*7?")).usage_metadata["total_tokens"] > 0  # invoke: always


def test_profile_says_what_the_model_can_do_and_learns_the_window():
    from .fakes import WindowedScriptedEndpoint

    model = fake_model()
    profile = model.profile
    assert profile["tool_calling"] and profile["tool_choice"] and profile["structured_output"]
    assert profile["tool_call_streaming"] and not profile["image_inputs"]
    assert (
        profile["reasoning_output"] is False
        and fake_model("think").profile["reasoning_output"] is True
    )
    assert "max_input_tokens" not in profile  # not known before the servers say
    windowed = fake_model()
    for role, window in (("draft", 4096), ("base", 2048)):
        given = getattr(windowed, f"{role}_endpoint")
        setattr(
            windowed,
            f"{role}_endpoint",
            WindowedScriptedEndpoint(role, given.handler, window=window),
        )
    windowed.invoke("12*7?")
    assert windowed.profile["max_input_tokens"] == 2048  # the smaller window, as the run uses
    mine = fake_model(profile={"max_input_tokens": 10})
    mine.invoke("12*7?")
    assert mine.profile == {"max_input_tokens": 10}  # a profile given is kept as given


def test_langsmith_model_name_is_the_served_one_before_the_first_call():
    server = FakeVLLM()

    def endpoint(name: str) -> OpenAIEndpoint:
        return OpenAIEndpoint(
            f"http://{name}/v1", name=name, transport=httpx2.MockTransport(server)
        )

    model = ChatSpecReason(draft_endpoint=endpoint("draft"), base_endpoint=endpoint("base"))
    assert model._get_ls_params()["ls_model_name"] == "m"
    assert model.profile["max_input_tokens"] == 4096
    model._get_ls_params()
    assert [path for path, _, _ in server.requests] == ["/v1/models", "/v1/models"]  # once
    assert (
        ChatSpecReason(
            draft_endpoint=endpoint("d"), base_endpoint=endpoint("b"), model="mine"
        )._get_ls_params()["ls_model_name"]
        == "mine"
    )


def test_a_server_that_does_not_answer_leaves_the_name_to_the_first_call():
    import time

    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused")

    def endpoint(name: str) -> OpenAIEndpoint:
        return OpenAIEndpoint(
            f"http://{name}/v1", name=name, max_retries=5, transport=httpx2.MockTransport(refuse)
        )

    model = ChatSpecReason(draft_endpoint=endpoint("draft"), base_endpoint=endpoint("base"))
    start = time.perf_counter()
    assert model._get_ls_params()["ls_model_name"] == "base"
    assert time.perf_counter() - start < 2  # one attempt, no retries
    assert "max_input_tokens" not in model.profile


async def test_a_server_with_several_models_needs_the_model_named():
    def two_models(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200,
            json={
                "object": "list",
                "data": [
                    {"id": name, "object": "model", "created": 0, "owned_by": "x"}
                    for name in ("qwen-1.5b", "qwen-7b")
                ],
            },
        )

    endpoint = OpenAIEndpoint(
        "http://base/v1", name="base", transport=httpx2.MockTransport(two_models)
    )
    with pytest.raises(
        ConfigError,
        match=r"the base server at http://base/v1 serves 2 models "
        r"\(qwen-1.5b, qwen-7b\); name the one to use",
    ):
        await endpoint.model_name()
    named = OpenAIEndpoint(
        "http://base/v1", name="base", model="qwen-7b", transport=httpx2.MockTransport(two_models)
    )
    assert await named.model_name() == "qwen-7b"


async def test_parallel_tool_calls_reach_the_answer_call_only():
    from langchain_core.tools import tool

    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    server = FakeVLLM()
    model = served_model(server, judge="arithmetic")
    await model.bind_tools([multiply], parallel_tool_calls=False).ainvoke("What is 12*7?")
    bodies = server.chat_bodies()
    with_tools = [b for b in bodies if b.get("tools")]
    assert with_tools and all(b["parallel_tool_calls"] is False for b in with_tools)
    assert all("parallel_tool_calls" not in b for b in bodies if not b.get("tools"))


async def test_every_call_of_a_run_carries_one_routing_key_and_runs_differ():
    server = FakeVLLM()
    model = served_model(server)
    await model.ainvoke("What is 12*7?")
    # before the first run, one /v1/models to each server (the served name, the window)
    discovery = server.requests[:2]
    assert [path for path, _, _ in discovery] == ["/v1/models", "/v1/models"]
    first = [headers.get("x-session-id") for _, headers, _ in server.requests[2:]]
    await model.ainvoke("What is 13*7?")
    second = [headers.get("x-session-id") for _, headers, _ in server.requests][len(first) + 2 :]
    # the calls of a run (models, tokenize, steps, answer) share one key; a new run, a new key
    assert len(set(first)) == 1 and first[0]
    assert len(set(second)) == 1 and second[0] != first[0]
