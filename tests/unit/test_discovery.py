"""The first call asks the servers for their model and window: never blocking an event loop."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
from langchain_core.callbacks import AsyncCallbackHandler

from langchain_specreason import ChatSpecReason
from langchain_specreason.endpoint import OpenAIEndpoint
from langchain_specreason.errors import EndpointError

MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 4096}]}


class _Starts(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.model_names: list[Any] = []

    async def on_chat_model_start(self, serialized, messages, *, metadata=None, **kwargs):
        self.model_names.append((metadata or {}).get("ls_model_name"))


def _endpoint(name: str, loops: list[asyncio.AbstractEventLoop]) -> OpenAIEndpoint:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/models"):
            loops.append(asyncio.get_running_loop())
            await asyncio.sleep(0.3)  # a slow server
            return httpx2.Response(200, json=MODELS)
        return httpx2.Response(503, json={"error": {"message": "down"}})

    return OpenAIEndpoint(
        "http://t/v1", name=name, transport=httpx2.MockTransport(handler), max_retries=0
    )


async def test_the_first_ainvoke_discovers_on_the_callers_loop_without_blocking_it():
    loops: list[asyncio.AbstractEventLoop] = []
    model = ChatSpecReason(
        draft_endpoint=_endpoint("draft", loops), base_endpoint=_endpoint("base", loops)
    )
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    starts = _Starts()
    task = asyncio.create_task(ticker())
    try:
        with pytest.raises(EndpointError):  # both servers answer 503: a typed error, no hang
            await model.ainvoke("hi", config={"callbacks": [starts]})
    finally:
        task.cancel()
    here = asyncio.get_running_loop()
    assert loops and all(loop is here for loop in loops)  # asked on this loop, awaited
    assert ticks >= 15  # the loop ran on during the 0.3 s the servers took to answer
    assert starts.model_names == ["m"]  # LangSmith sees the served name on the first call
    assert model.profile is not None and model.profile["max_input_tokens"] == 4096


def test_ls_params_never_run_the_sync_bridge_inside_a_running_loop(monkeypatch):
    from langchain_specreason.chat_model import model as module

    def forbidden(coro):  # what blocked the caller's loop
        coro.close()
        raise AssertionError("run_sync called inside a running event loop")

    monkeypatch.setattr(module, "run_sync", forbidden)
    chat = ChatSpecReason(draft_url="http://127.0.0.1:9/v1", base_url="http://127.0.0.1:9/v1")

    async def inside() -> str:
        return chat._get_ls_params()["ls_model_name"]

    assert asyncio.run(inside()) == "base"  # learned later, on the first awaited call
