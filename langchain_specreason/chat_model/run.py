"""The run of one chat-model call: the graph's stream as chunks, then the reply's metadata.

:func:`events` runs the graph of a :class:`Call` (plain values: the graph, the servers, the
call's settings) and turns its ``custom`` stream into chunks, the last one carrying usage and
metadata; :func:`collect` makes them one :class:`ChatResult`.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from uuid import UUID

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForLLMRun,
    BaseCallbackManager,
    CallbackManagerForLLMRun,
)
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, RemoveMessage
from langchain_core.messages.ai import UsageMetadata, add_usage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.pregel._messages import StreamMessagesHandler
from langgraph.pregel._tools import StreamToolCallHandler

from ..endpoint import Endpoint, WindowedEndpoint
from ..endpoint.routing import routing_key
from ..errors import ConfigError, DeadlineError, EndpointError
from ..events import Event
from ..graph import SpecReasonGraph
from ..graph.tracing import CallUsage
from ..state import AnswerOptions, SpecReasonInput
from ..stats import SpecReasonStats
from .messages import step_chunk
from .resume import same_turns, thread_id
from .structured import to_response_format

T = TypeVar("T")
Parent = AsyncCallbackManagerForLLMRun | CallbackManagerForLLMRun
"""The chat model's run: its handlers, tags and metadata parent the graph's child runs."""


@dataclass(frozen=True, kw_only=True)
class Call:
    """One call of the chat model, as plain values."""

    graph: SpecReasonGraph
    """The graph of the call's settings."""
    draft: Endpoint
    base: Endpoint
    draft_model: str | None
    """The ``draft_model`` field, named in the metadata when the server's name is unknown."""
    base_model: str | None
    think: bool
    """Whether the trace is reasoning (a think model, or JSON asked for) or content."""
    deadline: float | None
    checkpointed: bool
    """Whether the graph has a checkpointer (a thread to resume)."""
    v1: bool
    """``output_version="v1"``: tool-call chunks numbered after the content blocks."""
    stream_usage: bool
    """Whether the last chunk carries usage (always for ``invoke``)."""
    stop: list[str] | None
    """The model's stop sequences (a call's ``stop`` wins)."""
    start: float
    """When the call started (``time.perf_counter``)."""
    budget_cap: int | None = None
    """The budget ``max_tokens`` set, when lower than the ``budget`` setting
    (:func:`~.arguments.budget_cut`): a reasoning that reached it was cut (``length``). None:
    ``max_tokens`` left the budget as it was."""


def answer_options(kwargs: dict[str, Any], default_stop: list[str] | None) -> AnswerOptions:
    """How this call's answer is made, for the graph's answer node (:class:`AnswerOptions`)."""
    options: AnswerOptions = {}
    if kwargs.get("tools"):
        options["tools"] = kwargs["tools"]
        options["tool_choice"] = kwargs.get("tool_choice")
        if kwargs.get("parallel_tool_calls") is not None:
            options["parallel_tool_calls"] = bool(kwargs["parallel_tool_calls"])
    if kwargs.get("response_format"):
        options["response_format"] = to_response_format(kwargs["response_format"])
    stop = kwargs.get("stop") or default_stop
    if stop:
        options["stop"] = stop
    return options


OUTER_STREAMS = (StreamMessagesHandler, StreamToolCallHandler)
"""LangGraph's handlers of an outer graph's ``messages`` and ``tools`` stream modes: the chat
model's own run feeds them (its chunks, its reply); the graph inside it does not (its nodes'
messages would show the reply again, under a ``model:<id>`` namespace)."""


def run_config(run_manager: Parent | None, usage: CallUsage) -> RunnableConfig:
    """The graph's config: the caller's callbacks, and ``usage`` counting every call.

    The graph's run is a child of the chat model's run (run the graph :func:`detached`, or
    an outer chain's or graph node's run config, LangChain's ambient parent, would take it);
    an outer graph's stream handlers are left out (:data:`OUTER_STREAMS`).

    ``stream()``/``astream()`` give ``_astream`` no run manager (langchain-core), so the chat
    model's run is not known there: the graph's run is then a child of the caller's
    runnable (a chain, a graph node: LangChain's ambient config), beside the chat model's.
    """
    parent: UUID | None = None
    tags: list[str] = []
    metadata: dict[str, Any] = {}
    if run_manager is not None:
        # the chat model's run parents the graph's: langchain-core's get_child (a parent run
        # manager's), for an LLM run manager, which has none
        parent, handlers = run_manager.run_id, run_manager.inheritable_handlers
        tags, metadata = run_manager.inheritable_tags, run_manager.inheritable_metadata
    else:
        ambient = var_child_runnable_config.get() or {}
        callbacks = ambient.get("callbacks")
        if isinstance(callbacks, BaseCallbackManager):
            parent, handlers = callbacks.parent_run_id, callbacks.inheritable_handlers
            tags, metadata = callbacks.inheritable_tags, callbacks.inheritable_metadata
        else:
            handlers = list(callbacks or [])
        tags = [*tags, *(ambient.get("tags") or [])]
        metadata = {**(ambient.get("metadata") or {}), **metadata}
    # ``usage`` inherited by every child
    children = AsyncCallbackManager(handlers=[], parent_run_id=parent)
    children.set_handlers([*(h for h in handlers if not isinstance(h, OUTER_STREAMS)), usage])
    children.add_tags(list(dict.fromkeys(tags)))
    children.add_metadata(metadata)
    return {"callbacks": children}


def detached() -> contextvars.Context:
    """The caller's context without LangChain's ambient run config.

    Called in a chain (``prompt | llm | parser``) or in a node of a LangGraph graph, the
    caller's context holds that runnable's child config (``var_child_runnable_config``).
    LangGraph merges it into the graph's own config: its callback manager's parent (the
    chain, the node) would parent the graph's run beside the chat model's run instead of
    beneath it, and its ``configurable`` (the outer graph's checkpoint namespace, stream and
    checkpointer) would make the graph a subgraph of the outer one. Tracing context
    (LangSmith's) and every other variable are kept.
    """
    context = contextvars.copy_context()
    context.run(var_child_runnable_config.set, None)
    return context


async def within(context: contextvars.Context, step: Callable[[], Awaitable[T]]) -> T:
    """``step()`` awaited in ``context`` (a task of its own; a cancellation reaches it)."""

    async def run() -> T:
        return await step()

    return await asyncio.create_task(run(), context=context)


async def streamed_within(
    context: contextvars.Context, stream: AsyncIterator[T]
) -> AsyncIterator[T]:
    """The items of ``stream``, each step of it run in ``context``; closed there too."""
    items = aiter(stream)
    try:
        while True:
            try:
                item = await within(context, lambda: anext(items))
            except StopAsyncIteration:
                return
            yield item
    finally:
        close = getattr(items, "aclose", None)
        if close is not None:
            await within(context, close)


async def events(
    call: Call,
    messages: list[BaseMessage],
    run_manager: Parent | None,
    kwargs: dict[str, Any],
    answer: list[AIMessage] | None,
    learn_window: Callable[[Sequence[int | None]], None],
) -> AsyncGenerator[ChatGenerationChunk, None]:
    """Run the graph and turn its events into chunks; the last chunk carries metadata.

    ``answer``, when given, receives the graph's final message (its tool calls parsed
    whole, as a non-streaming call reports them). ``learn_window`` receives the servers'
    windows once the run has learned them.
    """
    think = call.think
    state: dict[str, Any] = {}
    usage = CallUsage()  # every server call's tokens, by model
    config = run_config(run_manager, usage)
    # one routing key per run: behind vllm-router (consistent_hash) every call of the run
    # lands on one replica, whose prefix cache then serves the next judge call
    key = thread_id(run_manager, kwargs) if call.checkpointed else uuid.uuid4().hex
    with routing_key(key):  # the graph's context keeps the key (a copy holds its values)
        context = detached()  # the graph's runs beneath the chat model's (see detached)
    # output_version="v1" numbers content blocks by runs of one type (LangChain counts
    # them as the chunks pass): the calls' blocks follow the text's, not overlap them
    step_kind = "reasoning" if think else "text"
    runs, kind, first_call = 0, "", None
    graph = call.graph
    turns: list[BaseMessage | RemoveMessage] = list(messages)
    resume = False
    if call.checkpointed:
        config["configurable"] = {"thread_id": key}
        saved = await within(context, lambda: graph.aget_state(config))
        # unfinished: a node to run, or one whose writes were saved but whose checkpoint
        # was not (the process died between them; LangGraph applies them on resume)
        resume = bool(saved.next or saved.tasks) and same_turns(
            saved.values.get("messages") or [], messages
        )
        if resume:  # the same call, interrupted: go on from its last step
            for record in saved.values.get("steps") or []:  # what it had already
                runs, kind = (runs + 1, step_kind) if kind != step_kind else (runs, kind)
                yield ChatGenerationChunk(message=step_chunk(record["text"], think))
        else:  # this call's conversation replaces the thread's
            turns = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]
    inputs = (
        None if resume else {"messages": turns, "answer_options": answer_options(kwargs, call.stop)}
    )
    async for mode, item in until(
        call.deadline,
        streamed_within(
            context,
            graph.astream(
                cast(SpecReasonInput | None, inputs), config, stream_mode=["custom", "values"]
            ),
        ),
    ):
        if mode == "values":
            state = cast(dict[str, Any], item)
            continue
        event = cast(Event, item)
        if event["type"] == "step":
            chunk, this = step_chunk(event["text"], think), step_kind
        elif event["type"] == "answer_delta":
            chunk, this = AIMessageChunk(content=event["text"]), "text"
        elif event["type"] == "answer_tool_call":  # as the base server streams it
            if first_call is None:
                first_call = runs if call.v1 else 0
            chunk, this = (
                AIMessageChunk(
                    content="",
                    tool_call_chunks=[
                        tool_call_chunk(
                            name=event["name"],
                            args=event["args"],
                            id=event["id"],
                            index=first_call + event["index"],
                        )
                    ],
                ),
                "tool_call_chunk",
            )
        else:
            continue
        runs, kind = (runs + 1, this) if kind != this else (runs, kind)
        yield ChatGenerationChunk(message=chunk)
    wall = time.perf_counter() - call.start
    learn_window(
        [await known_window(e) for e in (call.draft, call.base) if isinstance(e, WindowedEndpoint)]
    )
    final = state["messages"][-1]
    if answer is not None:
        answer.append(final)
    # the tool calls came as chunks of their argument text (answer_tool_call events):
    # LangChain parses them back, and unparsable arguments become invalid_tool_calls, as
    # with ChatOpenAI
    calls = final.tool_calls + final.invalid_tool_calls
    yield ChatGenerationChunk(
        message=AIMessageChunk(
            content="",
            usage_metadata=(
                usage_of(state, think, usage.usage_metadata)
                if answer is not None or call.stream_usage
                else None
            ),
            response_metadata={
                **metadata(call, state, wall, bool(calls)),
                # one count of the server calls, by served model and by role (CallUsage)
                "usage_by_model": dict(usage.usage_metadata),
                "tokens_by_model": dict(usage.output_tokens),
            },
            chunk_position="last",
        )
    )


def usage_of(
    state: dict[str, Any], think: bool, by_model: dict[str, UsageMetadata]
) -> UsageMetadata:
    """The tokens of every server call of this call, totalled.

    Draft steps (those drafted ahead too), judge readings, rewrites and the answer;
    ``cache_read`` is the part of the prompts the servers' prefix caches held. The kept
    trace is the ``reasoning`` part.
    """
    usage = UsageMetadata(input_tokens=0, output_tokens=0, total_tokens=0)
    for counted in by_model.values():
        usage = add_usage(usage, counted)
    if think:
        usage["output_token_details"] = {
            **usage.get("output_token_details", {}),
            "reasoning": int(state.get("tokens_used") or 0),
        }
    return usage


def metadata(call: Call, state: dict[str, Any], wall: float, tool_calls: bool) -> dict[str, Any]:
    """The reply's ``response_metadata``: models, finish reason, the run's statistics.

    :func:`events` adds ``usage_by_model`` (every server call's tokens by served model) and
    ``tokens_by_model`` (the output tokens of the same calls, by role: ``draft``, ``base``;
    the kept trace's are ``specreason["draft_tokens"]`` and ``["base_tokens"]``).
    """
    stats = SpecReasonStats.from_state(state, wall_s=wall)
    finish = "tool_calls" if tool_calls else state.get("answer_finish") or "stop"
    if finish == "stop" and cut_by_max_tokens(call, state):
        finish = "length"  # max_tokens cut the reasoning short (the answer came)
    return {
        # not "openai": langchain-core's OpenAI translator drops the reasoning block
        "model_provider": "specreason",
        "model_name": getattr(call.base, "model", None) or call.base_model or "base",
        "draft_model_name": getattr(call.draft, "model", None) or call.draft_model,
        "finish_reason": finish,
        "specreason": stats.as_dict(),
    }


def cut_by_max_tokens(call: Call, state: dict[str, Any]) -> bool:
    """Whether ``max_tokens`` cut the reasoning: it stopped at the budget ``max_tokens`` set.

    Not when it stopped at its own ``budget`` setting (a large ``max_tokens`` leaves it), nor
    at a lower budget the servers' windows left (nothing was written past it).
    """
    if state.get("stop") != "budget" or call.budget_cap is None:
        return False
    return int(state.get("tokens_used") or 0) >= call.budget_cap


async def collect(
    chunks: AsyncIterator[ChatGenerationChunk], answer: list[AIMessage]
) -> ChatResult:
    """The chunks of :func:`events` as one result; ``answer`` received the final message."""
    total: ChatGenerationChunk | None = None
    async for chunk in chunks:
        total = chunk if total is None else total + chunk
    assert total is not None
    message = total.message
    return ChatResult(
        generations=[
            ChatGeneration(
                message=AIMessage(
                    content=message.content,
                    additional_kwargs=message.additional_kwargs,
                    tool_calls=answer[-1].tool_calls,  # parsed whole: a broken call is invalid
                    invalid_tool_calls=answer[-1].invalid_tool_calls,
                    usage_metadata=getattr(message, "usage_metadata", None),
                    response_metadata=message.response_metadata,
                    id=message.id,
                )
            )
        ]
    )


async def until(deadline: float | None, stream: AsyncIterator[T]) -> AsyncIterator[T]:
    """The items of ``stream`` until ``deadline`` seconds have passed; then DeadlineError.

    The timeout covers only the waits on the stream (in this task), so the cancellation lands
    inside the graph's run, which cancels its server calls.
    """
    if deadline is not None and not deadline > 0:
        raise ConfigError(f"deadline must be a positive number of seconds, got {deadline}")
    loop = asyncio.get_running_loop()
    until = None if deadline is None else loop.time() + deadline
    items = aiter(stream)
    try:
        while True:
            scope = asyncio.timeout_at(until)
            try:
                async with scope:
                    item = await anext(items)
            except StopAsyncIteration:
                return
            except TimeoutError:
                if not scope.expired():
                    raise
                raise DeadlineError(
                    f"the run took longer than its deadline of {deadline:g} s and was "
                    "cancelled; with a checkpointer, repeat the call on the same thread_id to "
                    "resume it"
                ) from None
            yield item
    finally:  # the caller stopped early, or the deadline passed: end the graph's run now
        close = getattr(items, "aclose", None)
        if close is not None:
            await close()


async def known_window(endpoint: WindowedEndpoint) -> int | None:
    """The window the run already learned; ``None`` when it was never learned.

    Read from the endpoint's cache (``cached_max_model_len``, no request): a server the run
    could not ask (a draft down since the start: the base model answered alone) is not asked
    again, with retries, after the answer. An endpoint without that cache is asked
    (``max_model_len``); ``None`` if it fails.
    """
    cached = getattr(endpoint, "cached_max_model_len", None)
    if callable(cached):
        return cast(int | None, cached())
    try:
        return await endpoint.max_model_len()
    except EndpointError:
        return None
