"""The nodes of the loop (``start``, ``draft``, ``judge``, ``accept``, ``rewrite``) and its routes.

Each is a module-level function of the state, the run's ``RunnableConfig`` and the graph's
:class:`Parts`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer

from ..agreement import AgreementRule
from ..config import SpecReasonConfig
from ..endpoint import ChatRequest, Completion, Endpoint, WindowedEndpoint
from ..errors import ContextLengthError, EndpointError
from ..events import Done, Drafted, Fallback, Scored, Step
from ..formats import PromptFormat, continue_messages, step_stops, to_openai_messages
from ..judges import Judge, StepContext, Verdict
from ..state import Decision, PendingStep, SpecReasonState, StepRecord
from .breaker import Breaker
from .steps import (
    PROMPT_RESERVE,
    apply_step,
    fitted_budget,
    next_node,
    step_finish,
    step_record,
    step_texts,
)
from .tracing import Traced, completion_outputs, served_model, traced_call


@dataclass(frozen=True)
class Parts:
    """What the nodes of one graph share: the two endpoints, the judge, knobs and format."""

    draft: Endpoint
    base: Endpoint
    judge: Judge | None
    """Reads a draft step (``verify="judge"``); None in the ``agree`` mode."""
    config: SpecReasonConfig
    fmt: PromptFormat
    breaker: Breaker = field(default_factory=lambda: Breaker(0.0))
    """Skips a draft server that just failed, across the runs of this graph."""
    rule: AgreementRule | None = None
    """Compares the draft's step with the base's (``verify="agree"``)."""

    @property
    def stops(self) -> list[str]:
        """The stop strings of a step: the delimiter, and the end of thinking if any."""
        return step_stops(self.fmt, self.config.delimiter)

    def step_request(self, state: SpecReasonState, *, logprobs: bool = False) -> ChatRequest:
        """The request that writes the next step (either model; the budget caps it)."""
        cfg = self.config
        messages, cont = continue_messages(
            to_openai_messages(state["messages"]), self.fmt, step_texts(state)
        )
        room = state.get("budget", cfg.budget) - state.get("tokens_used", 0)
        return ChatRequest(
            messages=messages,
            max_tokens=max(1, min(cfg.step_max_tokens, room)),
            continue_final=cont,
            stop=self.stops,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            seed=cfg.seed,
            logprobs=logprobs,
        )


async def start(state: SpecReasonState, *, parts: Parts) -> dict[str, Any]:
    """Check the conversation, fit the budget to each server's window, reset the run."""
    conversation = to_openai_messages(state.get("messages") or [])  # InputError if unusable
    tools = (state.get("answer_options") or {}).get("tools")
    fit = await _fit(parts, conversation, tools)
    if fit.draft_skipped:
        warnings.warn(fit.draft_skipped, UserWarning, stacklevel=1)
        get_stream_writer()(
            Fallback(type="fallback", step=0, endpoint=parts.draft.name, reason=fit.draft_skipped)
        )
    return {
        "steps": [],
        "pending": None,
        "lookahead": None,
        "verified": [],
        "tokens_used": 0,
        "repeats": 0,
        "stop": None if fit.budget > 0 else "budget",
        "draft_down": fit.draft_skipped,
        "budget": fit.budget,
        "window": fit.window,
        "answer": "",
        "answer_tokens": 0,
        "answer_s": 0.0,
        "answer_prompt_tokens": 0,
        "answer_finish": "",
        "input_tokens": fit.input_tokens,
    }


@dataclass(frozen=True)
class _Fit:
    """A run's budget fitted to each server's window, counted by each server's tokenizer."""

    budget: int
    window: int | None
    input_tokens: int
    draft_skipped: str | None = None


async def _fit(
    parts: Parts, conversation: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> _Fit:
    """The budget that keeps every prompt of either model inside its own server's window.

    Each server counts the conversation with its own tokenizer (they may differ). The base
    model must fit (else :class:`ContextLengthError`); a conversation that fits the base but
    not the draft is written by the base alone, and says so. Endpoints that report no window
    leave the configured budget. A draft server that cannot be asked is left to the ``draft``
    node (the base model then writes the steps).
    """
    config = parts.config
    base = await _window_of(parts.base, conversation, tools)
    if base is None:
        return _Fit(config.budget, None, 0)
    base_window, base_tokens = base
    if base_tokens + PROMPT_RESERVE >= base_window:
        raise ContextLengthError(
            parts.base.name,
            getattr(parts.base, "base_url", ""),
            f"the conversation has {base_tokens} tokens; the base server's context window is "
            f"{base_window} (max_model_len); shorten it",
        )
    budget = fitted_budget(config, base_window, base_tokens)
    try:
        draft = await _window_of(parts.draft, conversation, tools)
    except EndpointError:
        draft = None
    if draft is None:
        return _Fit(budget, base_window, base_tokens)
    draft_window, draft_tokens = draft
    # the draft's prompts: the conversation and the trace (and the answer, when it writes it)
    answer = config.answer_max_tokens if config.answer_by == "draft" else 0
    draft_budget = min(config.budget, draft_window - draft_tokens - PROMPT_RESERVE - answer)
    if draft_budget <= 0 < budget:
        return _Fit(
            budget,
            base_window,
            base_tokens,
            draft_skipped=f"the conversation has {draft_tokens} tokens by the draft's "
            f"tokenizer and leaves no room in the draft server's context window of "
            f"{draft_window}; the base model writes every step",
        )
    answerer = min(base_window, draft_window) if answer else base_window  # answer_room reads it
    return _Fit(min(budget, draft_budget), answerer, base_tokens)


async def _window_of(
    endpoint: Endpoint, conversation: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> tuple[int, int] | None:
    """``(window, the conversation's tokens)`` by ``endpoint``'s server; None if unreported."""
    if not isinstance(endpoint, WindowedEndpoint):
        return None
    window = await endpoint.max_model_len()
    if not window:
        return None
    return window, await endpoint.count_tokens(conversation, tools=tools)


async def write_draft(
    parts: Parts,
    state: SpecReasonState,
    config: RunnableConfig,
    index: int,
    lookahead: bool = False,
) -> tuple[PendingStep, Completion]:
    """The draft model writes step ``index`` after ``state``'s trace.

    ``lookahead``: the step is written ahead of the trace, and traced as such.
    """
    request = parts.step_request(state, logprobs=True)  # the confidence judge reads them
    metadata: dict[str, Any] = {"specreason_step": index, "specreason_call": "draft"}
    if lookahead:
        metadata["specreason_lookahead"] = True
    done = await traced_call(
        config,
        "draft_step",
        metadata,
        {"messages": request.messages},
        lambda: parts.draft.complete(request),
        completion_outputs,
        model=served_model(parts.draft),
    )
    text, finish = step_finish(done, parts.config.delimiter, parts.fmt.thinking_end)
    pending: PendingStep = {
        "text": text,
        "finish": finish,
        "tokens": done.completion_tokens,
        "draft_s": done.seconds,
        "score": None,
        "accept": None,
        "judge_s": 0.0,
        "judge_prompt_tokens": 0,
        "judge_cached_tokens": None,
        "index": index,
    }
    if done.token_logprobs is not None:
        pending["logprobs"] = [round(lp, 4) for lp in done.token_logprobs]
        pending["logprob_tokens"] = list(done.token_texts or [])
    return pending, done


async def draft(state: SpecReasonState, config: RunnableConfig, *, parts: Parts) -> dict[str, Any]:
    """The draft model writes the next step (or it was written ahead, during the judge)."""
    index = len(state.get("steps") or [])
    update: dict[str, Any] = {"lookahead": None}
    ready = state.get("lookahead")
    if ready is not None and ready.get("index") == index:
        pending = ready  # drafted while the judge read the previous step
    elif (skipped := parts.breaker.blocked()) is not None:
        return fall_back(parts, index, skipped)
    else:
        try:
            pending, done = await write_draft(parts, state, config, index)
        except EndpointError as exc:
            return draft_failed(parts, index, exc)
        parts.breaker.reset()
        if index == 0:
            update["input_tokens"] = done.prompt_tokens
    get_stream_writer()(
        Drafted(
            type="drafted",
            step=index,
            text=pending["text"],
            tokens=pending["tokens"],
            seconds=pending["draft_s"],
        )
    )
    update["pending"] = pending
    return update


def _judged(verdict: Verdict) -> Traced:
    """A judge call's run: its score and decision; one output token when a server read it."""
    decision = "accepted" if verdict.accept else "rewritten"
    return Traced(
        text=f"{verdict.score:g} ({decision})",
        prompt_tokens=verdict.prompt_tokens,
        completion_tokens=1 if verdict.prompt_tokens else 0,  # max_tokens=1
        cached_tokens=verdict.cached_tokens,
        output={
            "score": verdict.score,
            "decision": decision,
            "prompt_tokens": verdict.prompt_tokens,
            "cached_tokens": verdict.cached_tokens,
            **verdict.detail,
        },
    )


def draft_failed(parts: Parts, index: int, exc: EndpointError) -> dict[str, Any]:
    """The draft server failed at step ``index``: the base model alone can finish the run.

    A ContextLengthError too (the draft's window or tokenizer is not the base's; if the base
    cannot take the prompt either, its own call says so). A refused call (a rejected key, an
    unknown model) is a mistake to fix, not an outage: it is raised.
    """
    if exc.refused:
        raise exc
    if not isinstance(exc, ContextLengthError):  # an outage: later runs skip it too
        parts.breaker.trip(str(exc))
    return fall_back(parts, index, str(exc))


def fall_back(parts: Parts, index: int, reason: str) -> dict[str, Any]:
    """The base model writes this step and the rest: warned, streamed and in ``draft_down``."""
    warnings.warn(f"{reason}; the base model writes the remaining steps", UserWarning, stacklevel=2)
    get_stream_writer()(
        Fallback(type="fallback", step=index, endpoint=parts.draft.name, reason=reason)
    )
    return {"lookahead": None, "pending": None, "draft_down": reason}


async def _draft_ahead(
    parts: Parts, state: SpecReasonState, config: RunnableConfig
) -> PendingStep | None:
    """The next draft step as if ``pending`` is accepted (None when the trace would stop)."""
    pending = state["pending"]
    assert pending is not None
    accepted = cast(
        SpecReasonState,
        {**state, **apply_step(state, step_record(state, pending, "accepted"), parts.config)},
    )
    if next_node(accepted, parts.config) != "draft":
        return None
    step, _ = await write_draft(
        parts, accepted, config, len(accepted.get("steps") or []), lookahead=True
    )
    return step


def _judge(parts: Parts) -> Judge:
    if parts.judge is None:
        raise RuntimeError("the judge node runs in the judge mode only")
    return parts.judge


def _context(parts: Parts, state: SpecReasonState, pending: PendingStep) -> StepContext:
    return StepContext(
        conversation=to_openai_messages(state["messages"]),
        steps=step_texts(state),
        authors=[s["author"] for s in state.get("steps") or []],
        step=pending["text"],
        request=parts.step_request(state),
        step_logprobs=pending.get("logprobs"),
        step_tokens=pending.get("logprob_tokens"),
        delimiter=parts.config.delimiter,
        thinking_end=parts.fmt.thinking_end,
    )


async def judge(state: SpecReasonState, config: RunnableConfig, *, parts: Parts) -> dict[str, Any]:
    """The judge scores the draft step.

    With ``lookahead`` the draft model meanwhile writes the next step as if this one is
    accepted.
    """
    cfg = parts.config
    pending = state["pending"]
    assert pending is not None
    index = len(state.get("steps") or [])
    judging = asyncio.ensure_future(
        traced_call(
            config,
            "judge_step",
            {
                "specreason_step": index,
                "specreason_call": "judge",
                "specreason_judge": cfg.judge,
                "specreason_threshold": cfg.judge_threshold(),
            },
            {"step": pending["text"]},
            lambda: _judge(parts).judge(_context(parts, state, pending)),
            _judged,
            model=served_model(parts.base),
        )
    )
    ahead = asyncio.ensure_future(_draft_ahead(parts, state, config)) if cfg.lookahead else None
    try:
        verdict = await judging
    except BaseException:
        if ahead is not None:
            ahead.cancel()
        raise
    get_stream_writer()(
        Scored(
            type="scored",
            step=index,
            score=verdict.score,
            accepted=verdict.accept,
            seconds=verdict.seconds,
        )
    )
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
    return {
        "pending": {
            **pending,
            "score": verdict.score,
            "accept": verdict.accept,
            "judge_s": verdict.seconds,
            "judge_prompt_tokens": verdict.prompt_tokens,
            "judge_cached_tokens": verdict.cached_tokens,
            "verdict": verdict.detail,
            "rewrite": rewrite,
        },
        "lookahead": lookahead,
    }


async def accept(state: SpecReasonState, *, parts: Parts) -> dict[str, Any]:
    """The accepted draft step joins the trace."""
    pending = state["pending"]
    assert pending is not None
    return _join(parts, state, step_record(state, pending, "accepted"))


async def rewrite(
    state: SpecReasonState, config: RunnableConfig, *, parts: Parts
) -> dict[str, Any]:
    """The base model writes the step.

    The draft was rejected (or blank), or the step is one of the first
    ``first_n_base_steps``, or the draft server is down.
    """
    pending = state.get("pending")
    index = len(state.get("steps") or [])
    decision: Decision = "rewritten" if pending else "base"
    ready = pending.get("rewrite") if pending else None
    if ready:  # the judge already wrote the base step (the oracle)
        done = Completion(
            text=ready["text"],
            finish_reason=ready["finish_reason"],
            stop_reason=ready["stop_reason"],
            completion_tokens=ready["tokens"],
            seconds=0.0,
        )
    else:
        request = parts.step_request(state)
        done = await traced_call(
            config,
            "rewrite_step",
            {
                "specreason_step": index,
                "specreason_call": "rewrite",
                "specreason_decision": decision,
                "specreason_score": pending["score"] if pending else None,
            },
            {"messages": request.messages},
            lambda: parts.base.complete(request),
            completion_outputs,
            model=served_model(parts.base),
        )
    text, finish = step_finish(done, parts.config.delimiter, parts.fmt.thinking_end)
    update = _join(
        parts,
        state,
        step_record(
            state,
            pending,
            decision,
            text=text,
            finish=finish,
            base_tokens=done.completion_tokens,
            rewrite_s=done.seconds,
        ),
    )
    if index == 0:
        update["input_tokens"] = done.prompt_tokens
    return update


def _join(parts: Parts, state: SpecReasonState, record: StepRecord) -> dict[str, Any]:
    update = apply_step(state, record, parts.config)
    writer = get_stream_writer()
    if update.get("stop") != "repeat":
        writer(
            Step(
                type="step",
                step=record["index"],
                decision=record["decision"],
                author=record["author"],
                text=record["text"],
                score=record["score"],
                tokens=record["tokens"],
            )
        )
    if update.get("stop"):
        writer(Done(type="done", reason=update["stop"]))
    return update


# Routes are coroutines: a sync one runs in a thread, and a client leaving the stream during
# that hop cancelled the task after its state writes but before its route was written, so
# the checkpoint had no next node and a resumed run ended without an answer.
async def after_step(state: SpecReasonState, *, parts: Parts) -> str:
    """After ``start``, ``accept`` or ``rewrite``: draft (or verify), rewrite, or answer."""
    return next_node(state, parts.config)


async def after_draft(state: SpecReasonState) -> str:
    """A blank draft is not worth judging: the base model writes the step."""
    pending = state.get("pending")
    return "judge" if pending and pending["text"].strip() else "rewrite"


async def after_judge(state: SpecReasonState) -> str:
    """Accept or rewrite, as the judge said."""
    pending = state.get("pending")
    return "accept" if pending and pending["accept"] else "rewrite"
