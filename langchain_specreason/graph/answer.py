"""The ``answer`` node: the final answer after the reasoning, streamed."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.tool import invalid_tool_call, tool_call
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer

from ..endpoint import ChatRequest, Completion
from ..events import AnswerDelta, AnswerToolCall
from ..formats import continue_messages, to_openai_messages
from ..state import SpecReasonState
from .parts import Parts
from .steps import answer_room, step_texts
from .toolcalls import Recovered, call_prefix, may_be_a_call, recover_tool_calls
from .tracing import Traced, completion_outputs, served_model, traced_call


async def answer(state: SpecReasonState, config: RunnableConfig, *, parts: Parts) -> dict[str, Any]:
    """Write the answer after the trace (base model, or the draft with ``answer_by="draft"``).

    An instruct reply that ended by itself is already complete, unless tools may be called
    or a ``response_format`` asks for JSON; otherwise the reply is continued (instruct) or
    the answer follows the thinking (think). The ``answer_options`` of the state (tools, tool
    choice, stop, response format) apply to this call only. With a ``response_format`` the
    answer is only what this call wrote (the JSON), and the trace is ``reasoning_content``
    for the instruct family too.

    Tools: pieces of the server's tool calls are streamed as ``answer_tool_call`` events. A
    call the model wrote as text (bare JSON, a fenced block) is read back when the server
    parsed none (:mod:`~langchain_specreason.graph.toolcalls`). An instruct tool turn with
    ``tool_choice`` auto first asks for a fresh reply with the tools (the trace is the
    reply's own text, written without them): a call there is the answer, prose ends it at
    once and the trace is continued.
    """
    cfg, fmt = parts.config, parts.fmt
    steps = step_texts(state)
    conversation = to_openai_messages(state["messages"])
    trace = fmt.render(steps)
    options = state.get("answer_options") or {}
    final = Completion(text="", finish_reason="stop")
    text = ""
    tools = options.get("tools")
    response_format = options.get("response_format")
    structured = bool(response_format)
    if fmt.thinking_end is not None or state.get("stop") != "end" or tools or structured:
        if fmt.thinking_end is None:  # continue the instruct reply (cut, or tool turn)
            messages, cont = continue_messages(conversation, fmt, steps)
        else:
            messages = [
                *conversation,
                {"role": "assistant", "content": trace + fmt.thinking_end + "\n\n"},
            ]
            cont = True
        endpoint = parts.base if cfg.answer_by == "base" or state.get("draft_down") else parts.draft
        request = ChatRequest(
            messages=messages,
            max_tokens=answer_room(cfg, state),
            continue_final=cont,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            seed=cfg.seed,
            stop=options.get("stop"),
            tools=tools,
            tool_choice=options.get("tool_choice"),
            parallel_tool_calls=options.get("parallel_tool_calls"),
            response_format=response_format,
        )
        writer = get_stream_writer()
        pieces: list[str] = []  # the answer's text as written
        said: list[str] = []  # the answer's text as streamed (held-back text not yet)
        # With tools, a small model may write its call as text (bare JSON, a fenced block)
        # instead of the tags the server's parser reads: text that may still be a call is
        # held back, then read as one if the server parsed none (graph/toolcalls.py)
        tool_choice = options.get("tool_choice")
        recover = bool(tools) and tool_choice != "none"
        names = {t.get("function", {}).get("name") for t in tools or []}
        made = _calls_made(state["messages"])
        recovered: list[dict[str, Any]] = []
        streamed_calls = False

        def say(piece: str) -> None:
            said.append(piece)
            writer(AnswerDelta(type="answer_delta", text=piece))

        def pass_on(item: Completion) -> None:
            nonlocal streamed_calls
            for piece in item.tool_call_chunks:  # as the server streams them
                streamed_calls = True
                writer(
                    AnswerToolCall(
                        type="answer_tool_call",
                        index=piece["index"],
                        id=piece.get("id"),
                        name=piece.get("name"),
                        args=piece.get("arguments") or "",
                    )
                )

        def read_calls(text: str, last: Completion) -> Recovered | None:
            """The calls written in ``text``, set on ``last``.

            Not one the conversation already made (small models repeat the last call after
            its result).
            """
            found = recover_tool_calls(text, names)
            fresh = [c for c in found.tool_calls if _key(c) not in made] if found else []
            if not found or not fresh:
                return None
            last.tool_calls = fresh
            last.finish_reason = "tool_calls"
            recovered.extend(fresh)
            return found

        async def probe() -> Completion | None:
            """An instruct tool turn: the call of a fresh reply with the tools, if it makes one.

            The instruct trace is the reply's own text, and the steps do not see the tools,
            so a reply continued after it rarely turns to a call. A fresh reply is read until
            it is prose (dropped at once: the trace is continued instead) or a whole call.
            """
            fresh = dataclasses.replace(request, messages=conversation, continue_final=False)
            last, text = Completion(text=""), ""
            stream = endpoint.stream(fresh)
            try:
                async for item in stream:
                    pass_on(item)
                    if item.text:
                        text += item.text
                        if not streamed_calls and not may_be_a_call(text):
                            return None  # prose
                        if call_prefix(text) is not None:
                            break  # a whole call is written: no need to read on
                    elif not item.tool_call_chunks:
                        last = item
            finally:
                close = getattr(stream, "aclose", None)
                if close is not None:
                    await close()
            if last.tool_calls or streamed_calls:
                return last
            return last if read_calls(call_prefix(text) or text, last) else None

        async def write() -> Completion:
            """The answer: the reply continued after the trace, or after the thinking."""
            last = Completion(text="")
            holding = recover
            async for item in endpoint.stream(request):
                pass_on(item)
                if item.text:
                    pieces.append(item.text)
                    if holding and may_be_a_call("".join(pieces)):
                        continue
                    if holding:  # it is prose: what was held goes out now
                        holding = False
                        say("".join(pieces))
                    else:
                        say(item.text)
                elif not item.tool_call_chunks:
                    last = item
            text = "".join(pieces)
            if recover and not last.tool_calls and text:
                found = read_calls(text, last)
                if holding and found is not None:  # the held text was the call
                    if found.rest:
                        say(found.rest)
                elif holding:
                    say(text)
            return last

        async def stream_answer() -> Completion:
            last = None
            if recover and fmt.thinking_end is None and tool_choice in (None, "auto"):
                last = await probe()
            if last is None:
                last = await write()
            if not streamed_calls:  # whole calls: recovered, or not streamed by the endpoint
                for i, tc in enumerate(last.tool_calls):
                    fn = tc.get("function") or {}
                    writer(
                        AnswerToolCall(
                            type="answer_tool_call",
                            index=i,
                            id=tc.get("id"),
                            name=fn.get("name"),
                            args=fn.get("arguments") or "",
                        )
                    )
            return last

        final = await traced_call(
            config,
            "write_answer",
            {
                "specreason_call": "answer",
                "specreason_stop": state.get("stop"),
                "specreason_author": cfg.answer_by,
            },
            {"messages": request.messages},
            stream_answer,
            lambda d: _answered(d, "".join(pieces), bool(recovered)),
            model=served_model(endpoint),
        )
        text = "".join(said)
    reasoning = fmt.thinking_end is not None or structured  # the trace apart from the reply
    full = text if reasoning else trace + text
    kwargs: dict[str, Any] = {}
    if reasoning and trace.strip():
        kwargs["reasoning_content"] = "".join(steps)
    calls = [_tool_call(tc) for tc in final.tool_calls]
    message = AIMessage(
        content=full,
        additional_kwargs=kwargs,
        tool_calls=[c for c in calls if c["type"] == "tool_call"],
        invalid_tool_calls=[c for c in calls if c["type"] == "invalid_tool_call"],
    )
    return {
        "answer": full,
        "answer_tokens": final.completion_tokens,
        "answer_s": final.seconds,
        "answer_prompt_tokens": final.prompt_tokens,
        "answer_finish": final.finish_reason or "stop",
        "messages": [message],
    }


def _key(tc: dict[str, Any]) -> tuple[str, str]:
    """An OpenAI tool call as ``(name, arguments in canonical JSON)``."""
    fn = tc.get("function") or {}
    try:
        args = json.dumps(json.loads(fn.get("arguments") or "{}"), sort_keys=True)
    except ValueError:
        args = fn.get("arguments") or ""
    return fn.get("name") or "", args


def _calls_made(messages: Sequence[BaseMessage]) -> set[tuple[str, str]]:
    """The tool calls the conversation already made, as :func:`_key` gives them."""
    return {
        (tc["name"], json.dumps(tc["args"], sort_keys=True))
        for m in messages
        if isinstance(m, AIMessage)
        for tc in m.tool_calls
    }


def _tool_call(tc: dict[str, Any]) -> Any:
    """An OpenAI tool call as a LangChain ``tool_call`` (or ``invalid_tool_call``).

    Arguments that are not a JSON object make an ``invalid_tool_call``, kept as written with
    the parse error, as ``ChatOpenAI`` does.
    """
    fn = tc.get("function") or {}
    raw = fn.get("arguments") or "{}"
    try:
        args = json.loads(raw)
        if not isinstance(args, dict):
            raise ValueError(f"arguments are a JSON {type(args).__name__}, not an object")
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        return invalid_tool_call(
            name=fn.get("name"), args=raw, id=tc.get("id"), error=f"unparsable arguments: {exc}"
        )
    return tool_call(name=fn.get("name", ""), args=args, id=tc.get("id"))


def _answered(done: Completion, text: str, recovered: bool) -> Traced:
    """The answer call's run: the text as streamed, its tool calls."""
    traced = completion_outputs(done)
    return dataclasses.replace(
        traced,
        text=text,
        output={
            **traced.output,
            "text": text,
            "tool_calls": done.tool_calls,
            "recovered_tool_calls": recovered,
        },
    )
