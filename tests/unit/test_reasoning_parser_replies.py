"""Servers started with vLLM's ``--reasoning-parser`` move thinking text out of ``content``
into ``reasoning`` (``reasoning_content`` before vLLM 0.11): steps and answers still arrive
whole, streamed or not (no network)."""

from __future__ import annotations

import json

import httpx2
import pytest

from langchain_specreason import ChatRequest, ChatSpecReason, OpenAIEndpoint

from .test_request_options import FakeVLLM

HEAD = {"id": "x", "created": 0, "model": "m"}
USAGE = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}


class ParsingVLLM(FakeVLLM):
    """As deepseek_r1's parser answers: generated text without ``</think>`` is all reasoning."""

    def __init__(self, field: str) -> None:
        super().__init__()
        self.field = field

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content) if request.content else {}
        if not request.url.path.endswith("/chat/completions"):
            return super().__call__(request)
        self.requests.append((request.url.path, dict(request.headers), body))
        if body.get("stream"):  # the answer, in two deltas: reasoning, then content
            chunks = [
                {"choices": [{"index": 0, "delta": {self.field: "The answer"}}]},
                {"choices": [{"index": 0, "delta": {"content": " is 4."}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {"choices": [], "usage": USAGE},
            ]
            sse = "".join(
                f"data: {json.dumps({**HEAD, 'object': 'chat.completion.chunk', **c})}\n\n"
                for c in chunks
            )
            return httpx2.Response(
                200,
                headers={"content-type": "text/event-stream"},
                content=(sse + "data: [DONE]\n\n").encode(),
            )
        message = {"role": "assistant", "content": None, self.field: "Two plus two is four."}
        return httpx2.Response(
            200,
            json={
                **HEAD,
                "object": "chat.completion",
                "choices": [
                    {"index": 0, "message": message, "finish_reason": "stop", "stop_reason": "\n\n"}
                ],
                "usage": USAGE,
            },
        )


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
async def test_a_step_and_a_streamed_answer_arrive_whole(field):
    endpoint = OpenAIEndpoint(
        "http://base/v1", model="m", transport=httpx2.MockTransport(ParsingVLLM(field))
    )
    request = ChatRequest([{"role": "user", "content": "2+2?"}], 16)
    step = await endpoint.complete(request)
    assert step.text == "Two plus two is four."
    items = [i async for i in endpoint.stream(request)]
    assert "".join(i.text for i in items) == "The answer is 4."
    assert items[-1].finish_reason == "stop"


def test_the_think_family_runs_on_a_parsing_server():
    fake = ParsingVLLM("reasoning")
    transport = httpx2.MockTransport(fake)
    llm = ChatSpecReason(
        draft_endpoint=OpenAIEndpoint("http://draft/v1", model="m", transport=transport),
        base_endpoint=OpenAIEndpoint("http://base/v1", model="m", transport=transport),
        family="think",
        judge="score",
        threshold=0,
        budget=12,
        step_max_tokens=6,
        answer_max_tokens=8,
    )
    msg = llm.invoke("2+2?")
    assert msg.content == "The answer is 4."
    assert "Two plus two is four." in msg.additional_kwargs["reasoning_content"]
