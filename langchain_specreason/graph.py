"""The SpecReason algorithm as a LangGraph state graph. This is the only implementation.

::

    START -> start -> draft -> judge -> accept -----> draft | regenerate | answer -> END
                        |         \\-> regenerate --/
                        \\-(blank draft)-> regenerate

* ``start`` checks the conversation and resets the per-run fields;
* ``draft``: the draft model writes the next step (stops at the delimiter);
* ``judge``: the judge scores it (:mod:`~.judges`); meanwhile, with ``lookahead``, the draft
  model writes the next step as if this one is kept (used by ``draft`` if it is);
* ``accept`` keeps the draft step; ``regenerate``: the base model writes the step itself
  (also for the first ``first_n_base_steps`` steps, which are never drafted);
* after a kept step the stop rules run (:func:`apply_step`): end of message, end of thinking,
  a step repeating a recent one, or the budget spent; then ``answer`` writes the final answer
  (streamed by the base model, or by the draft with ``answer_by="draft"``).

Every node writes events to LangGraph's ``custom`` stream (``drafted``, ``scored``, ``step``,
``answer_delta``, ``done``, and ``fallback`` when the draft server fails: the base model then
writes the remaining steps) so a UI can show the trace live. Node updates are checkpointed
after each step: with a checkpointer, an interrupted thread resumes from its last completed
node with ``graph.ainvoke(None, config)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar, cast

from langchain_core.callbacks import AsyncCallbackManager
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.types import Checkpointer

from .config import SpecReasonConfig
from .endpoint import ChatRequest, Completion, Endpoint
from .errors import ContextLengthError, EndpointError
from .formats import PromptFormat, continue_messages, get_format, to_openai_messages
from .judges import Judge, StepContext, make_judge
from .state import Decision, PendingStep, SpecReasonState, StepRecord

NODES = ("start", "draft", "judge", "accept", "regenerate", "answer")
"""The graph's node names. Stable: traces, tests and UIs refer to them."""

_SPACES = re.compile(r"\s+")
T = TypeVar("T")


async def traced_call(
    config: RunnableConfig,
    name: str,
    metadata: dict[str, Any],
    inputs: dict[str, Any],
    call: Callable[[], Awaitable[T]],
    outputs: Callable[[T], dict[str, Any]],
) -> T:
    """Run one server call as a child run (LangSmith shows one per call, with ``metadata``)."""
    manager = AsyncCallbackManager.configure(
        inheritable_callbacks=config.get("callbacks"), local_metadata=metadata,
        local_tags=["specreason"])
    run = await manager.on_chain_start({"name": name}, inputs, name=name)
    try:
        result = await call()
    except BaseException as exc:
        await run.on_chain_error(exc)
        raise
    await run.on_chain_end(outputs(result))
    return result


def _completion_out(done: Completion) -> dict[str, Any]:
    return {"text": done.text, "finish_reason": done.finish_reason,
            "completion_tokens": done.completion_tokens, "prompt_tokens": done.prompt_tokens,
            "cached_tokens": done.cached_tokens, "seconds": round(done.seconds, 4)}


def step_finish(done: Completion, delimiter: str, thinking_end: str | None) -> tuple[str, str]:
    """``(text, finish)`` of a step completion; the delimiter is put back on the text."""
    if done.finish_reason == "length":
        return done.text, "length"
    if done.stop_reason == delimiter:
        return done.text + delimiter, "delimiter"
    if thinking_end is not None and done.stop_reason == thinking_end:
        return done.text, "thinking_end"
    return done.text, "end"


def apply_step(
    state: SpecReasonState, record: StepRecord, config: SpecReasonConfig
) -> dict[str, Any]:
    """State update for a step about to be kept: append it, then apply the stop rules.

    A step repeating one of the last ``repeat_window`` kept steps (whitespace-insensitive) is
    dropped and stops the trace: a loop, even a cycle of several steps, would otherwise run to
    the budget.
    """
    steps = list(state.get("steps") or [])
    norm = _SPACES.sub(" ", record["text"]).strip()
    if config.repeat_window and norm:
        recent = {_SPACES.sub(" ", s["text"]).strip() for s in steps[-config.repeat_window:]}
        if norm in recent:
            return {"pending": None, "stop": "repeat", "repeats": state.get("repeats", 0) + 1}
    used = state.get("tokens_used", 0) + record["tokens"]
    stop: str | None = None
    if record["finish"] in ("end", "thinking_end"):
        stop = record["finish"]
    elif used >= config.budget:
        stop = "budget"
    return {"steps": [*steps, record], "tokens_used": used, "pending": None, "stop": stop}


def next_node(state: SpecReasonState, config: SpecReasonConfig) -> str:
    """Where to go after a step is kept (or at the start)."""
    if state.get("stop"):
        return "answer"
    if len(state.get("steps") or []) < config.first_n_base_steps or state.get("draft_down"):
        return "regenerate"
    return "draft"


def _step_texts(state: SpecReasonState) -> list[str]:
    return [s["text"] for s in state.get("steps") or []]


def create_specreason_graph(
    draft: Endpoint,
    base: Endpoint,
    *,
    judge: Judge | None = None,
    config: SpecReasonConfig | None = None,
    family: str | PromptFormat = "instruct",
    checkpointer: Checkpointer = None,
    name: str | None = "specreason",
) -> Any:
    """Build the SpecReason graph over a draft and a base endpoint.

    Args:
        draft: the small model's endpoint (writes draft steps).
        base: the big model's endpoint (judges, rewrites, answers).
        judge: decides whether a draft step is kept; default: the judge ``config.judge``
            names, with its settings (:func:`~.judges.make_judge`).
        config: the knobs (:class:`SpecReasonConfig`).
        family: prompt family of the pair (``"instruct"``, ``"think"``, or a
            :class:`~.formats.PromptFormat`).
        checkpointer: any LangGraph checkpointer, to resume interrupted runs.
        name: the graph's name in traces.

    Returns:
        A compiled LangGraph graph. Input ``{"messages": [...]}``; output state has ``steps``,
        ``answer``, ``stop`` and the conversation with the answer appended.

    Example::

        graph = create_specreason_graph(OpenAIEndpoint(draft_url, name="draft"),
                                        OpenAIEndpoint(base_url, name="base"))
        out = await graph.ainvoke({"messages": [("user", "What is 12*7?")]})
        print(out["answer"])
    """
    cfg = config or SpecReasonConfig()
    fmt = get_format(family)
    the_judge: Judge = judge or make_judge(cfg, draft, base, fmt)
    stops = [cfg.delimiter] + ([fmt.thinking_end] if fmt.thinking_end else [])

    def step_request(state: SpecReasonState, *, logprobs: bool = False) -> ChatRequest:
        messages, cont = continue_messages(
            to_openai_messages(state["messages"]), fmt, _step_texts(state))
        room = cfg.budget - state.get("tokens_used", 0)
        return ChatRequest(
            messages=messages, max_tokens=max(1, min(cfg.step_max_tokens, room)),
            continue_final=cont, stop=stops, temperature=cfg.temperature, top_p=cfg.top_p,
            seed=cfg.seed, logprobs=logprobs,
        )

    async def start(state: SpecReasonState) -> dict[str, Any]:
        to_openai_messages(state.get("messages") or [])  # raises InputError when unusable
        return {"steps": [], "pending": None, "lookahead": None, "tokens_used": 0, "repeats": 0,
                "stop": None, "draft_down": None,
                "answer": "", "answer_tokens": 0, "answer_s": 0.0, "answer_prompt_tokens": 0,
                "answer_finish": "", "input_tokens": 0}

    async def write_draft(state: SpecReasonState, config: RunnableConfig, index: int,
                          lookahead: bool = False) -> tuple[PendingStep, Completion]:
        request = step_request(state, logprobs=True)  # the confidence judge reads them
        metadata: dict[str, Any] = {"specreason_step": index, "specreason_call": "draft"}
        if lookahead:
            metadata["specreason_lookahead"] = True
        done = await traced_call(
            config, "draft_step", metadata,
            {"messages": request.messages}, lambda: draft.complete(request), _completion_out)
        text, finish = step_finish(done, cfg.delimiter, fmt.thinking_end)
        pending: PendingStep = {
            "text": text, "finish": finish, "tokens": done.completion_tokens,
            "draft_s": done.seconds, "score": None, "accept": None, "judge_s": 0.0,
            "judge_prompt_tokens": 0, "judge_cached_tokens": None, "index": index,
        }
        if done.token_logprobs is not None:
            pending["logprobs"] = [round(lp, 4) for lp in done.token_logprobs]
            pending["logprob_tokens"] = list(done.token_texts or [])
        return pending, done

    async def draft_node(state: SpecReasonState, config: RunnableConfig) -> dict[str, Any]:
        index = len(state.get("steps") or [])
        update: dict[str, Any] = {"lookahead": None}
        ready = state.get("lookahead")
        if ready is not None and ready.get("index") == index:
            pending = ready  # drafted while the judge read the previous step
        else:
            try:
                pending, done = await write_draft(state, config, index)
            except EndpointError as exc:  # the base model alone can always finish the run
                if isinstance(exc, ContextLengthError):
                    raise  # the prompt itself is too long: the base cannot take it either
                get_stream_writer()({"type": "fallback", "step": index, "endpoint": draft.name,
                                     "reason": str(exc)})
                return {"lookahead": None, "pending": None, "draft_down": str(exc)}
            if index == 0:
                update["input_tokens"] = done.prompt_tokens
        get_stream_writer()({"type": "drafted", "step": index, "text": pending["text"],
                             "tokens": pending["tokens"], "seconds": pending["draft_s"]})
        update["pending"] = pending
        return update

    def kept_record(state: SpecReasonState, pending: PendingStep) -> StepRecord:
        """The record ``accept`` appends for ``pending``."""
        record: StepRecord = {
            "index": len(state.get("steps") or []), "text": pending["text"], "author": "draft",
            "decision": "kept", "score": pending["score"], "draft_text": None,
            "tokens": pending["tokens"], "draft_tokens": pending["tokens"], "base_tokens": 0,
            "draft_s": pending["draft_s"], "judge_s": pending["judge_s"], "regen_s": 0.0,
            "judge_prompt_tokens": pending["judge_prompt_tokens"],
            "judge_cached_tokens": pending["judge_cached_tokens"], "finish": pending["finish"],
            "verdict": pending.get("verdict") or {},
        }
        if "draft_hidden_s" in pending:
            record["draft_hidden_s"] = pending["draft_hidden_s"]
        return record

    async def draft_ahead(state: SpecReasonState, config: RunnableConfig) -> PendingStep | None:
        """The next draft step as if ``pending`` is kept (None when the trace would stop)."""
        pending = state["pending"]
        assert pending is not None
        kept = cast(SpecReasonState,
                    {**state, **apply_step(state, kept_record(state, pending), cfg)})
        if next_node(kept, cfg) != "draft":
            return None
        step, _ = await write_draft(kept, config, len(kept.get("steps") or []), lookahead=True)
        return step

    async def judge_node(state: SpecReasonState, config: RunnableConfig) -> dict[str, Any]:
        pending = state["pending"]
        assert pending is not None
        index = len(state.get("steps") or [])
        judging = asyncio.ensure_future(traced_call(
            config, "judge_step",
            {"specreason_step": index, "specreason_call": "judge",
             "specreason_judge": cfg.judge, "specreason_threshold": cfg.judge_threshold()},
            {"step": pending["text"]},
            lambda: the_judge.judge(StepContext(
                conversation=to_openai_messages(state["messages"]), steps=_step_texts(state),
                authors=[s["author"] for s in state.get("steps") or []],
                step=pending["text"], request=step_request(state),
                step_logprobs=pending.get("logprobs"),
                step_tokens=pending.get("logprob_tokens"))),
            lambda v: {"score": v.score, "decision": "kept" if v.accept else "rewritten",
                       "prompt_tokens": v.prompt_tokens, "cached_tokens": v.cached_tokens,
                       **v.detail}))
        ahead = asyncio.ensure_future(draft_ahead(state, config)) if cfg.lookahead else None
        try:
            verdict = await judging
        except BaseException:
            if ahead is not None:
                ahead.cancel()
            raise
        get_stream_writer()({"type": "scored", "step": index,
                             "score": verdict.score, "accepted": verdict.accept,
                             "seconds": verdict.seconds})
        lookahead = None
        if ahead is not None and verdict.accept:
            judged = time.perf_counter()
            try:
                lookahead = await ahead
            except Exception:  # the draft node drafts again and reports the error
                lookahead = None
            if lookahead is not None:  # only the wait past the judge is on the clock
                waited = time.perf_counter() - judged
                lookahead["draft_hidden_s"] = max(0.0, lookahead["draft_s"] - waited)
                lookahead["draft_s"] = min(waited, lookahead["draft_s"])
        elif ahead is not None:  # rejected: the base writes this step, the lookahead is moot
            ahead.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ahead
        rewrite = None
        if verdict.rewrite is not None and not verdict.accept:
            rewrite = dataclasses.asdict(verdict.rewrite)
        return {"pending": {**pending, "score": verdict.score, "accept": verdict.accept,
                            "judge_s": verdict.seconds,
                            "judge_prompt_tokens": verdict.prompt_tokens,
                            "judge_cached_tokens": verdict.cached_tokens,
                            "verdict": verdict.detail, "rewrite": rewrite},
                "lookahead": lookahead}

    async def accept(state: SpecReasonState) -> dict[str, Any]:
        pending = state["pending"]
        assert pending is not None
        return _keep(state, kept_record(state, pending))

    async def regenerate(state: SpecReasonState, config: RunnableConfig) -> dict[str, Any]:
        pending = state.get("pending")
        index = len(state.get("steps") or [])
        decision: Decision = "rewritten" if pending else "base"
        ready = pending.get("rewrite") if pending else None
        if ready:  # the judge already wrote the base step (the oracle)
            done = Completion(text=ready["text"], finish_reason=ready["finish_reason"],
                              stop_reason=ready["stop_reason"],
                              completion_tokens=ready["tokens"], seconds=0.0)
        else:
            request = step_request(state)
            done = await traced_call(
                config, "rewrite_step",
                {"specreason_step": index, "specreason_call": "regenerate",
                 "specreason_decision": decision,
                 "specreason_score": pending["score"] if pending else None},
                {"messages": request.messages}, lambda: base.complete(request),
                _completion_out)
        text, finish = step_finish(done, cfg.delimiter, fmt.thinking_end)
        record: StepRecord = {
            "index": index, "text": text, "author": "base",
            "decision": decision,
            "score": pending["score"] if pending else None,
            "draft_text": pending["text"] if pending else None,
            "tokens": done.completion_tokens,
            "draft_tokens": pending["tokens"] if pending else 0,
            "base_tokens": done.completion_tokens,
            "draft_s": pending["draft_s"] if pending else 0.0,
            "judge_s": pending["judge_s"] if pending else 0.0, "regen_s": done.seconds,
            "judge_prompt_tokens": pending["judge_prompt_tokens"] if pending else 0,
            "judge_cached_tokens": pending["judge_cached_tokens"] if pending else None,
            "finish": finish,
            "verdict": (pending.get("verdict") or {}) if pending else {},
        }
        update = _keep(state, record)
        if index == 0:
            update["input_tokens"] = done.prompt_tokens
        return update

    def _keep(state: SpecReasonState, record: StepRecord) -> dict[str, Any]:
        update = apply_step(state, record, cfg)
        writer = get_stream_writer()
        if update.get("stop") != "repeat":
            writer({"type": "step", "step": record["index"], "decision": record["decision"],
                    "author": record["author"], "text": record["text"],
                    "score": record["score"], "tokens": record["tokens"]})
        if update.get("stop"):
            writer({"type": "done", "reason": update["stop"]})
        return update

    async def answer(state: SpecReasonState, config: RunnableConfig) -> dict[str, Any]:
        steps = _step_texts(state)
        conversation = to_openai_messages(state["messages"])
        trace = fmt.render(steps)
        final = Completion(text="", finish_reason="stop")
        text = ""
        configurable = config.get("configurable") or {}
        tools = configurable.get("specreason_tools")
        # An instruct reply that ended by itself is complete, unless tools may be called.
        if fmt.thinking_end is not None or state.get("stop") != "end" or tools:
            if fmt.thinking_end is None:  # continue the instruct reply (cut, or tool turn)
                messages, cont = continue_messages(conversation, fmt, steps)
            else:
                messages = [*conversation, {"role": "assistant",
                                            "content": trace + fmt.thinking_end + "\n\n"}]
                cont = True
            endpoint = base if cfg.answer_by == "base" or state.get("draft_down") else draft
            request = ChatRequest(
                messages=messages, max_tokens=cfg.answer_max_tokens, continue_final=cont,
                temperature=cfg.temperature, top_p=cfg.top_p, seed=cfg.seed,
                stop=configurable.get("specreason_stop"),
                tools=tools,
                tool_choice=configurable.get("specreason_tool_choice"),
            )
            writer = get_stream_writer()
            parts: list[str] = []

            async def stream_answer() -> Completion:
                last = Completion(text="")
                async for item in endpoint.stream(request):
                    if item.text:
                        parts.append(item.text)
                        writer({"type": "answer_delta", "text": item.text})
                    else:
                        last = item
                return last

            final = await traced_call(
                config, "write_answer",
                {"specreason_call": "answer", "specreason_stop": state.get("stop"),
                 "specreason_author": cfg.answer_by},
                {"messages": request.messages}, stream_answer,
                lambda d: {**_completion_out(d), "text": "".join(parts),
                           "tool_calls": d.tool_calls})
            text = "".join(parts)
        full = trace + text if fmt.thinking_end is None else text
        kwargs: dict[str, Any] = {}
        if fmt.thinking_end is not None and trace.strip():
            kwargs["reasoning_content"] = "".join(steps)
        message = AIMessage(
            content=full, additional_kwargs=kwargs,
            tool_calls=[_lc_tool_call(tc) for tc in final.tool_calls],
        )
        return {"answer": full, "answer_tokens": final.completion_tokens,
                "answer_s": final.seconds, "answer_prompt_tokens": final.prompt_tokens,
                "answer_finish": final.finish_reason or "stop", "messages": [message]}

    builder = StateGraph(SpecReasonState)
    builder.add_node("start", start)
    builder.add_node("draft", draft_node)
    builder.add_node("judge", judge_node)
    builder.add_node("accept", accept)
    builder.add_node("regenerate", regenerate)
    builder.add_node("answer", answer)
    builder.add_edge(START, "start")
    # Routers are coroutines: a sync one runs in a thread, and a client leaving the stream
    # during that hop cancelled the task after its state writes but before its route was
    # written, so the checkpoint had no next node and a resumed run ended without an answer.
    async def after_step(state: SpecReasonState) -> str:
        return next_node(state, cfg)

    async def after_draft(state: SpecReasonState) -> str:
        pending = state.get("pending")
        return "judge" if pending and pending["text"].strip() else "regenerate"

    async def after_judge(state: SpecReasonState) -> str:
        pending = state.get("pending")
        return "accept" if pending and pending["accept"] else "regenerate"

    route: dict[Hashable, str] = {"draft": "draft", "regenerate": "regenerate",
                                  "answer": "answer"}
    for node in ("start", "accept", "regenerate"):
        builder.add_conditional_edges(node, after_step, route)
    builder.add_conditional_edges("draft", after_draft,
                                  {"judge": "judge", "regenerate": "regenerate"})
    builder.add_conditional_edges("judge", after_judge,
                                  {"accept": "accept", "regenerate": "regenerate"})
    builder.add_edge("answer", END)
    graph = builder.compile(checkpointer=checkpointer, name=name or "specreason")
    # Every kept step costs at most three node runs and holds at least one token.
    return graph.with_config(recursion_limit=3 * cfg.budget + 10)


def _lc_tool_call(tc: dict[str, Any]) -> dict[str, Any]:
    fn = tc.get("function") or {}
    try:
        args = json.loads(fn.get("arguments") or "{}")
    except json.JSONDecodeError:
        args = {"__raw__": fn.get("arguments")}
    return {"name": fn.get("name", ""), "args": args, "id": tc.get("id"), "type": "tool_call"}
