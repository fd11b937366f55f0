"""After the answer, a run reads the servers' windows from what it already learned: a draft
server that is down is not asked again (F3; a local stand-in server, no network)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from langchain_specreason import ChatSpecReason
from langchain_specreason.endpoint import Completion

from .fakes import ScriptedEndpoint, is_judge, loopback_server, score, step


@pytest.mark.parametrize("how", ["ainvoke", "astream"])
async def test_a_dead_draft_gets_no_request_after_the_answer(how):
    seen: list[tuple[str, str, dict[str, str]]] = []
    answered_at: list[int] = []

    def base(request):
        if is_judge(request):
            return score("9")
        if request.stop is None or "\n\n" not in request.stop:  # the answer
            answered_at.append(len(seen))
            return Completion(text="42", finish_reason="stop", completion_tokens=1)
        return step("The base's step.", 4)  # a step that does not end the reasoning

    with loopback_server(lambda path, body: (503, {"error": "down"}), seen=seen) as root:
        model = ChatSpecReason(
            draft_url=f"{root}/v1",
            draft_api_key=SecretStr("k"),
            base_endpoint=ScriptedEndpoint("base", base),
            judge="score",
            budget=8,
            max_retries=0,
            lookahead=False,
        )
        if how == "ainvoke":
            reply = await model.ainvoke("What is 6*7?")
        else:
            reply = None
            async for chunk in model.astream("What is 6*7?"):
                reply = chunk if reply is None else reply + chunk
    assert reply is not None and reply.content.strip().endswith("42")
    assert seen, "the draft server was tried during the run"
    assert answered_at and seen[answered_at[-1] :] == []  # nothing after the answer
