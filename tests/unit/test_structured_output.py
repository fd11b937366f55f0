"""with_structured_output: json_schema / json_mode send response_format to the base server's
answer call, function_calling forces a tool; parsed as ChatOpenAI parses them (no network)."""

from __future__ import annotations

import json

import httpx2
import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.exceptions import OutputParserException
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from langchain_specreason import ChatRequest, ChatSpecReason, ConfigError, OpenAIEndpoint
from langchain_specreason.endpoint import Completion

from .fakes import chat_completion_body
from .test_chat_model import fake_model


class Joke(BaseModel):
    """Joke to tell user."""

    setup: str = Field(description="question to set up a joke")
    punchline: str = Field(description="answer to resolve the joke")


JOKE = {
    "setup": "Why did the cat sit on the computer?",
    "punchline": "To keep an eye on the mouse.",
}


def json_answers(model: ChatSpecReason, reply: str = json.dumps(JOKE)):
    """The base server answers a call with a response_format with ``reply`` (as written)."""
    base = model.base_endpoint
    handler = base.handler

    def answer(req):
        if req.response_format is not None:
            return Completion(text=reply, finish_reason="stop", completion_tokens=20)
        return handler(req)

    base.handler = answer
    return base


class _Options(BaseCallbackHandler):
    def __init__(self) -> None:
        self.options: list[dict] = []

    def on_chat_model_start(self, serialized, messages, *, options=None, **kwargs):
        self.options.append(options or {})


async def test_json_schema_sends_the_schema_to_the_answer_call_and_parses_it():
    model = fake_model()
    base = json_answers(model)
    seen = _Options()
    joke = await model.with_structured_output(Joke, strict=True).ainvoke(
        "Tell me a joke about cats.", config={"callbacks": [seen]}
    )
    assert joke == Joke(**JOKE)
    [answer] = [r for r in base.requests if r.response_format is not None]
    assert answer.response_format["type"] == "json_schema"
    spec = answer.response_format["json_schema"]
    assert (spec["name"], spec["strict"]) == ("Joke", True)
    assert spec["schema"]["required"] == ["setup", "punchline"]
    assert answer.continue_final  # written after the trace, which it reads
    # the reasoning ran as usual, and LangSmith sees the structured-output format
    assert any(r.top_logprobs for r in base.requests)
    assert seen.options[0]["ls_structured_output_format"]["kwargs"] == {
        "method": "json_schema",
        "strict": True,
    }


async def test_structured_reply_content_is_the_json_and_the_trace_is_reasoning():
    model = fake_model()  # instruct: without a schema the trace is the reply's content
    json_answers(model)
    out = await model.with_structured_output(Joke, include_raw=True).ainvoke("A cat joke?")
    assert out["parsed"] == Joke(**JOKE) and out["parsing_error"] is None
    raw = out["raw"]
    assert json.loads(raw.content) == JOKE
    assert raw.additional_kwargs["reasoning_content"] == "S0.\n\nB1.\n\nS2."


async def test_json_mode_asks_for_a_json_object_and_returns_a_dict():
    model = fake_model()
    base = json_answers(model)
    out = await model.with_structured_output(Joke.model_json_schema(), method="json_mode").ainvoke(
        "A cat joke?"
    )
    assert out == JOKE
    [answer] = [r for r in base.requests if r.response_format is not None]
    assert answer.response_format == {"type": "json_object"}


class JokeDict(TypedDict):
    """Joke to tell user."""

    setup: str
    punchline: str


async def test_streamed_structured_output_yields_partial_dicts_then_the_whole():
    model = fake_model()
    json_answers(model)  # streamed word by word by the scripted endpoint
    parts = [p async for p in model.with_structured_output(JokeDict).astream("A cat joke?")]
    assert len(parts) > 1
    assert all(set(p) <= {"setup", "punchline"} for p in parts)  # never a step's text
    assert parts[-1] == JOKE


async def test_function_calling_forces_the_schema_as_a_strict_tool():
    from .test_chat_model import with_tool_reply

    model = fake_model()
    _, base = with_tool_reply(model, json.dumps(JOKE))
    reply = base.handler

    def as_joke(req):  # the forced tool is named after the schema
        done = reply(req)
        for tc in done.tool_calls:
            tc["function"]["name"] = "Joke"
        return done

    base.handler = as_joke
    joke = await model.with_structured_output(Joke, method="function_calling", strict=True).ainvoke(
        "A cat joke?"
    )
    assert joke == Joke(**JOKE)
    [call] = [r for r in base.requests if r.tools]
    assert call.tool_choice == {"type": "function", "function": {"name": "Joke"}}
    assert call.tools[0]["function"]["strict"] is True
    assert call.response_format is None


async def test_an_unparsable_answer_is_a_parsing_error_with_include_raw():
    model = fake_model()
    json_answers(model, reply='{"setup": "cut off')
    out = await model.with_structured_output(Joke, include_raw=True).ainvoke("A cat joke?")
    assert out["parsed"] is None
    assert out["parsing_error"] is not None
    assert out["raw"].content.strip() == '{"setup": "cut off'  # as written
    with pytest.raises(OutputParserException, match="Failed to parse Joke from completion"):
        await model.with_structured_output(Joke).ainvoke("A cat joke?")


def test_bad_structured_output_arguments_are_config_errors():
    model = fake_model()
    with pytest.raises(ConfigError, match="strict goes with method='json_schema'"):
        model.with_structured_output(Joke, method="json_mode", strict=True)
    with pytest.raises(ConfigError, match="method must be 'json_schema', 'json_mode' or"):
        model.with_structured_output(Joke, method="xml")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="needs a schema"):
        model.with_structured_output(None)


def test_response_format_built_as_chatopenai_builds_it():
    from langchain_specreason.chat_model.structured import to_response_format as _response_format

    assert _response_format({"type": "json_object"}) == {"type": "json_object"}
    named = {"name": "Joke", "schema": Joke.model_json_schema()}
    assert _response_format(named) == {"type": "json_schema", "json_schema": named}
    assert _response_format(named, strict=False)["json_schema"]["strict"] is False
    typed = _response_format(JokeDict)["json_schema"]
    assert typed["name"] == "JokeDict" and set(typed["schema"]["properties"]) == set(JOKE)
    assert "strict" not in typed


async def test_the_endpoint_sends_response_format_in_the_request_body():
    bodies: list[dict] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        return httpx2.Response(200, json=chat_completion_body("{}"))

    endpoint = OpenAIEndpoint(
        "http://testserver/v1", model="m", transport=httpx2.MockTransport(handler)
    )
    fmt = {"type": "json_schema", "json_schema": {"name": "J", "schema": {"type": "object"}}}
    await endpoint.complete(
        ChatRequest([{"role": "user", "content": "hi"}], 8, response_format=fmt)
    )
    await endpoint.complete(ChatRequest([{"role": "user", "content": "hi"}], 8))
    assert bodies[0]["response_format"] == fmt
    assert "response_format" not in bodies[1]
