"""The nodes around ``verify``: ``start``, ``accept``, ``rewrite``; the draft outage path.

Also the route after a step. Each node is a module-level function of the state, the run's
``RunnableConfig`` and the graph's :class:`~.parts.Parts`; ``verify`` is in :mod:`.verify`,
the modes in :mod:`.verifiers`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer

from ..endpoint import Completion, Endpoint, WindowedEndpoint
from ..errors import ContextLengthError, EndpointError
from ..events import Done, Fallback, Step
from ..formats import to_openai_messages
from ..state import Decision, SpecReasonState, StepRecord
from .parts import Parts
from .steps import PROMPT_RESERVE, apply_step, fitted_budget, next_node, step_finish, step_record
from .tracing import completion_outputs, served_model, traced_call


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
    leave the configured budget. A draft server that cannot be asked trips the draft circuit
    breaker, and an open breaker is not asked at all: ``verify`` then falls back at once (the
    base model writes the steps).
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
    if parts.breaker.blocked() is not None:  # an outage seen lately: not probed again
        return _Fit(budget, base_window, base_tokens)
    try:
        draft = await _window_of(parts.draft, conversation, tools)
    except EndpointError as exc:
        if not exc.refused and not isinstance(exc, ContextLengthError):
            parts.breaker.trip(str(exc))  # the next runs go straight to the base model
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
    ``first_n_base_steps``, or the draft server is down. A step the verifier already wrote
    (``pending["rewrite"]``) is not asked for again.
    """
    pending = state.get("pending")
    index = len(state.get("steps") or [])
    decision: Decision = "rewritten" if pending and pending.get("drafted", True) else "base"
    ready = pending.get("rewrite") if pending else None
    if ready:  # the verifier already wrote the base's step (the oracle, the agree mode)
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
    """After ``start``, ``accept`` or ``rewrite``: verify, rewrite, or answer."""
    return next_node(state, parts.config)
