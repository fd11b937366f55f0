"""Tool calls: streamed as the base server sends them; written as text by a small model
(bare JSON, a fenced block) and recovered on the client (no network)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from langchain_core.tools import tool

from langchain_specreason import ChatRequest, ChatSpecReason, OpenAIEndpoint
from langchain_specreason.endpoint import Completion
from langchain_specreason.graph.toolcalls import may_be_a_call, recover_tool_calls

from .fakes import ScriptedEndpoint, step
from .test_chat_model import fake_model
from .test_request_options import FakeVLLM


@tool
def get_weather(location: str) -> str:
    """Get the weather at a location."""
    return "It's sunny."


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def _sse(chunks: list[dict]) -> bytes:
    head = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return (
        "".join(f"data: {json.dumps({**head, **c})}\n\n" for c in chunks) + "data: [DONE]\n\n"
    ).encode()


class ToolCallingVLLM(FakeVLLM):
    """Streams the answer as vLLM's hermes parser does: a call in three pieces."""

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content) if request.content else {}
        if not body.get("stream"):
            return super().__call__(request)
        self.requests.append((request.url.path, dict(request.headers), body))
        pieces = [
            {
                "index": 0,
                "id": "call-7",
                "type": "function",
                "function": {"name": "get_weather", "arguments": ""},
            },
            {"index": 0, "function": {"arguments": '{"location": '}},
            {"index": 0, "function": {"arguments": '"Paris"}'}},
        ]
        chunks = [
            {"choices": [{"index": 0, "delta": {"tool_calls": [p]}, "finish_reason": None}]}
            for p in pieces
        ]
        chunks += [
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {
                "choices": [],
                "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
            },
        ]
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=_sse(chunks)
        )


async def test_the_endpoint_streams_tool_call_pieces_as_they_come():
    endpoint = OpenAIEndpoint(
        "http://base/v1", model="m", transport=httpx2.MockTransport(ToolCallingVLLM())
    )
    items = [
        i
        async for i in endpoint.stream(
            ChatRequest(
                [{"role": "user", "content": "Weather in Paris?"}],
                32,
                tools=[{"type": "function", "function": {"name": "get_weather"}}],
            )
        )
    ]
    pieces = [p for i in items for p in i.tool_call_chunks]
    assert [(p["index"], p["id"], p["name"], p["arguments"]) for p in pieces] == [
        (0, "call-7", "get_weather", ""),
        (0, None, None, '{"location": '),
        (0, None, None, '"Paris"}'),
    ]
    assert items[-1].tool_calls == [
        {
            "id": "call-7",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
        }
    ]


def tool_calling_model(**options: Any) -> ChatSpecReason:
    """A draft that ends its message with one step; a base (:class:`ToolCallingVLLM`) that
    streams a get_weather call; the arithmetic judge; more ``ChatSpecReason`` options as given."""
    return ChatSpecReason(
        draft_endpoint=ScriptedEndpoint("draft", lambda r: step("Look it up.", 3, end=True)),
        base_endpoint=OpenAIEndpoint(
            "http://base/v1",
            model="m",
            name="base",
            transport=httpx2.MockTransport(ToolCallingVLLM()),
        ),
        judge="arithmetic",
        **options,
    )


async def test_streamed_tool_call_chunks_reach_the_caller_before_the_last_chunk():
    model = tool_calling_model()
    chunks = [c async for c in model.bind_tools([get_weather]).astream("Weather in Paris?")]
    with_calls = [i for i, c in enumerate(chunks) if c.tool_call_chunks]
    assert [chunks[i].tool_call_chunks[0]["args"] for i in with_calls] == [
        "",
        '{"location": ',
        '"Paris"}',
    ]  # one chunk per piece the server sent
    assert with_calls[-1] < len(chunks) - 1 and not chunks[-1].tool_call_chunks
    full = chunks[0]
    for c in chunks[1:]:
        full = full + c
    assert full.tool_calls == [
        {"name": "get_weather", "args": {"location": "Paris"}, "id": "call-7", "type": "tool_call"}
    ]
    assert full.response_metadata["finish_reason"] == "tool_calls"


def written_call(model: ChatSpecReason, text: str) -> ScriptedEndpoint:
    """The base server answers a call with tools with ``text`` and no parsed call."""
    base = model.base_endpoint
    handler = base.handler

    def reply(req):
        if req.tools:
            return Completion(text=text, finish_reason="stop", completion_tokens=20)
        return handler(req)

    base.handler = reply
    return base


FENCED = '```json\n{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n```'


@pytest.mark.parametrize(
    "text",
    [
        FENCED,
        '{"name": "multiply", "parameters": {"a": 3, "b": 4}}',
        '  {"name": "multiply", "arguments": "{\\"a\\": 3, \\"b\\": 4}"}\n',
    ],
)
async def test_a_call_written_as_json_is_recovered_as_a_tool_call(text):
    model = fake_model()
    written_call(model, text)
    llm = model.bind_tools([multiply])
    msg = await llm.ainvoke("3*4?")
    [call] = msg.tool_calls
    assert (call["name"], call["args"]) == ("multiply", {"a": 3, "b": 4})
    assert call["id"].startswith("call_")
    assert msg.content == "S0.\n\nB1.\n\nS2."  # the trace; the call is not text
    assert msg.response_metadata["finish_reason"] == "tool_calls"
    chunks = [c async for c in llm.astream("3*4?")]
    assert "multiply" not in "".join(str(c.content) for c in chunks)  # held back, not shown
    full = chunks[0]
    for c in chunks[1:]:
        full = full + c
    assert [(c["name"], c["args"]) for c in full.tool_calls] == [("multiply", {"a": 3, "b": 4})]


async def test_prose_is_streamed_as_text_and_tool_choice_none_recovers_nothing():
    model = fake_model()
    written_call(model, "Three times four is 12.")
    msg = await model.bind_tools([multiply]).ainvoke("3*4?")
    assert msg.tool_calls == [] and msg.content.endswith("Three times four is 12. ")
    written_call(model, FENCED)
    kept = await model.bind_tools([multiply], tool_choice="none").ainvoke("3*4?")
    assert kept.tool_calls == [] and '"name": "multiply"' in kept.content
    unknown = fake_model()
    written_call(unknown, FENCED.replace("multiply", "divide"))
    assert (await unknown.bind_tools([multiply]).ainvoke("3*4?")).tool_calls == []


def test_recover_tool_calls_reads_json_fences_and_tags_naming_a_bound_tool():
    names = {"multiply", "get_weather"}

    def calls(text):
        found = recover_tool_calls(text, names)
        return (
            None
            if found is None
            else (
                [
                    (c["function"]["name"], json.loads(c["function"]["arguments"]))
                    for c in found.tool_calls
                ],
                found.rest,
            )
        )

    assert calls('{"name": "multiply", "arguments": {"a": 1, "b": 2}}') == (
        [("multiply", {"a": 1, "b": 2})],
        "",
    )
    assert calls(
        '[{"name": "multiply", "arguments": {"a": 1, "b": 2}}, '
        '{"type": "function", "function": {"name": "get_weather", '
        '"arguments": "{\\"location\\": \\"Oslo\\"}"}}]'
    ) == ([("multiply", {"a": 1, "b": 2}), ("get_weather", {"location": "Oslo"})], "")
    assert calls(
        'Sure.\n```json\n{"name": "get_weather", "parameters": {"location": "Rome"}}'
        "\n```\nAnything else?"
    ) == ([("get_weather", {"location": "Rome"})], "Sure.\n\nAnything else?")
    assert calls(
        '<tool_call>\n{"name": "multiply", "arguments": {"a": 5, "b": 6}}\n</tool_call>'
    ) == ([("multiply", {"a": 5, "b": 6})], "")
    for not_a_call in (
        '{"name": "divide", "arguments": {}}',  # not a bound tool
        '{"name": "multiply"}',  # no arguments
        '{"name": "multiply", "arguments": [1, 2]}',  # not an object
        '{"answer": 12}',
        "12",
        "The answer is 12.",
        '{"name": "multiply", ',
    ):
        assert recover_tool_calls(not_a_call, names) is None, not_a_call


def test_text_is_held_back_only_while_it_may_be_a_call():
    for start in ("", "  \n", "{", '{"name": "mul', "[", "`", "``", "```json\n{", "<tool"):
        assert may_be_a_call(start), start
    for start in ("The", "12", "Sure, ```json", "<b>"):
        assert not may_be_a_call(start), start


def fresh_and_continued(model: ChatSpecReason, fresh: str, continued: str) -> ScriptedEndpoint:
    """The base server, asked with tools: a fresh reply writes ``fresh``, a reply continued
    after the trace writes ``continued`` (no parsed call either way)."""
    base = model.base_endpoint
    handler = base.handler

    def reply(req):
        if req.tools:
            text = continued if req.continue_final else fresh
            return Completion(text=text, finish_reason="stop", completion_tokens=20)
        return handler(req)

    base.handler = reply
    return base


CALL = '{"name": "multiply", "arguments": {"a": 3, "b": 4}}'


async def test_an_instruct_tool_turn_asks_a_fresh_reply_for_its_call_first():
    model = fake_model()  # instruct: the trace is the reply, written without the tools
    base = fresh_and_continued(model, "\n".join([CALL] * 3), "So it is 12.")
    msg = await model.bind_tools([multiply]).ainvoke("3*4?")
    assert [(c["name"], c["args"]) for c in msg.tool_calls] == [("multiply", {"a": 3, "b": 4})]
    asked = [r for r in base.requests if r.tools]
    assert [r.continue_final for r in asked] == [False]  # the fresh reply was the answer
    assert asked[0].messages == [{"role": "user", "content": "3*4?"}]
    # prose in the fresh reply: dropped at once, and the trace is continued as before
    prose = fake_model()
    base = fresh_and_continued(prose, "Three times four is twelve.", "So it is 12.")
    msg = await prose.bind_tools([multiply]).ainvoke("3*4?")
    assert msg.tool_calls == [] and msg.content.endswith("So it is 12. ")
    assert "twelve" not in msg.content
    assert [r.continue_final for r in base.requests if r.tools] == [False, True]


async def test_a_written_call_the_conversation_already_made_is_not_made_again():
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    model = fake_model()
    fresh_and_continued(model, CALL, "So it is 12.")
    history = [
        HumanMessage("3*4?"),
        AIMessage("", tool_calls=[{"name": "multiply", "args": {"a": 3, "b": 4}, "id": "call-1"}]),
        ToolMessage("12", tool_call_id="call-1"),
    ]
    msg = await model.bind_tools([multiply]).ainvoke(history)
    assert msg.tool_calls == []  # small models repeat the call after its result
    assert msg.content.endswith("So it is 12. ")


async def test_with_output_version_v1_streamed_calls_are_tool_call_blocks():
    model = tool_calling_model(output_version="v1")
    full = None
    async for chunk in model.bind_tools([get_weather]).astream("Weather in Paris?"):
        full = chunk if full is None else full + chunk
    assert [b["type"] for b in full.content_blocks] == ["text", "tool_call"]
    assert full.content_blocks[1]["args"] == {"location": "Paris"}


def test_call_prefix_is_the_whole_call_a_text_begins_with():
    from langchain_specreason.graph.toolcalls import call_prefix

    assert call_prefix(CALL + "\n" + CALL) == CALL
    assert call_prefix("  " + CALL[:-1]) is None  # not closed yet
    assert call_prefix("```json\n" + CALL + "\n```\nmore") == "```json\n" + CALL + "\n```"
    assert call_prefix("<tool_call>" + CALL + "</tool_call>x") == (
        "<tool_call>" + CALL + "</tool_call>"
    )
    assert call_prefix("The answer") is None


async def test_a_v1_reply_with_tool_call_blocks_goes_back_as_text_and_tool_calls():
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    model = fake_model()
    fresh_and_continued(model, "It is 12.", "So it is 12.")
    reply = AIMessage(
        content=[
            {"type": "reasoning", "reasoning": "Think."},
            {"type": "text", "text": "Let me multiply."},
            {"type": "tool_call", "name": "multiply", "args": {"a": 3, "b": 4}, "id": "call-1"},
        ],
        tool_calls=[{"name": "multiply", "args": {"a": 3, "b": 4}, "id": "call-1"}],
    )
    await model.bind_tools([multiply]).ainvoke(
        [HumanMessage("3*4?"), reply, ToolMessage("12", tool_call_id="call-1")]
    )
    sent = model.base_endpoint.requests[-1].messages[1]
    assert sent["content"] == "Let me multiply."  # no content part vLLM would refuse
    assert sent["tool_calls"][0]["function"]["name"] == "multiply"


@tool
def roll_dice() -> int:
    """Roll a die."""
    return 4


def test_a_tool_without_parameters_is_sent_closed_and_others_as_converted():
    bound = fake_model().bind_tools([roll_dice, multiply])
    no_args, with_args = bound.kwargs["tools"]
    assert no_args["function"]["parameters"] == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    assert no_args["function"]["strict"] is True  # vLLM pins arguments of strict tools only
    assert "additionalProperties" not in with_args["function"]["parameters"]
    assert "strict" not in with_args["function"]
    # strict=False from the caller is kept, and so is the open schema
    [loose] = fake_model().bind_tools([roll_dice], strict=False).kwargs["tools"]
    assert loose["function"]["strict"] is False
    assert "additionalProperties" not in loose["function"]["parameters"]
    assert set(with_args["function"]["parameters"]["properties"]) == {"a", "b"}
    # a schema that says what it allows is left as written
    open_tool = {
        "type": "function",
        "function": {
            "name": "f",
            "description": "d",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": True},
        },
    }
    [sent] = fake_model().bind_tools([open_tool]).kwargs["tools"]
    assert sent["function"]["parameters"]["additionalProperties"] is True
