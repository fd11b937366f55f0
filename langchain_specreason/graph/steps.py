"""Pure helpers of the loop: how a step ended, its record, the stop rules, the next node."""

from __future__ import annotations

import re
from typing import Any, cast

from ..config import SpecReasonConfig
from ..endpoint import Completion
from ..state import Decision, PendingStep, SpecReasonState, StepRecord

_SPACES = re.compile(r"\s+")

PROMPT_RESERVE = 128
"""Tokens kept free in every prompt beyond the conversation and the trace: the chat
template's own tokens and the judge's question."""


def fitted_budget(config: SpecReasonConfig, window: int, input_tokens: int) -> int:
    """The budget of a run whose servers have a ``window``-token context.

    No prompt may exceed the window: the trace, the answer and the reserve must fit beside
    the conversation. Never more than ``config.budget``; 0 when only the answer fits.
    """
    room = window - input_tokens - PROMPT_RESERVE - config.answer_max_tokens
    return max(0, min(config.budget, room))


def answer_room(config: SpecReasonConfig, state: SpecReasonState) -> int:
    """``max_tokens`` of the answer: ``answer_max_tokens``, less if the window is short."""
    window = state.get("window")
    if not window:
        return config.answer_max_tokens
    used = state.get("input_tokens", 0) + state.get("tokens_used", 0) + PROMPT_RESERVE
    return max(1, min(config.answer_max_tokens, window - used))


def step_finish(done: Completion, delimiter: str, thinking_end: str | None) -> tuple[str, str]:
    """``(text, finish)`` of a step completion; the delimiter is put back on the text."""
    if done.finish_reason == "length":
        return done.text, "length"
    if done.stop_reason == delimiter:
        return done.text + delimiter, "delimiter"
    if thinking_end is not None and done.stop_reason == thinking_end:
        return done.text, "thinking_end"
    return done.text, "end"


def step_texts(state: SpecReasonState) -> list[str]:
    """The texts of the trace's steps, in order."""
    return [s["text"] for s in state.get("steps") or []]


def step_record(
    state: SpecReasonState,
    pending: PendingStep | None,
    decision: Decision,
    *,
    text: str | None = None,
    finish: str | None = None,
    base_tokens: int = 0,
    rewrite_s: float = 0.0,
) -> StepRecord:
    """The record of the next step of the trace.

    ``accepted``: ``pending`` as drafted. ``rewritten``: the base model's ``text`` replaces the
    rejected draft ``pending``. ``base``: the base model's ``text``, no draft (``pending``
    ``None``, or a position the draft failed to write). ``base_tokens``: what the base model
    generated for the step (default: an accepted position's own, ``pending["base_tokens"]``,
    which the ``agree`` mode sets).
    """
    by_base = decision != "accepted"
    if pending is not None and not pending.get("drafted", True):
        pending = None  # the draft failed here: nothing of it is recorded
    if not by_base and pending is not None:
        base_tokens = pending.get("base_tokens", base_tokens)
    record: StepRecord = {
        "index": len(state.get("steps") or []),
        "text": text if by_base and text is not None else (pending["text"] if pending else ""),
        "author": "base" if by_base else "draft",
        "decision": decision,
        "score": pending["score"] if pending else None,
        "draft_text": pending["text"] if pending and by_base else None,
        "tokens": base_tokens if by_base else (pending["tokens"] if pending else 0),
        "draft_tokens": pending["tokens"] if pending else 0,
        "base_tokens": base_tokens,
        "draft_s": pending["draft_s"] if pending else 0.0,
        "judge_s": pending["judge_s"] if pending else 0.0,
        "rewrite_s": rewrite_s,
        "judge_prompt_tokens": pending["judge_prompt_tokens"] if pending else 0,
        "judge_cached_tokens": pending["judge_cached_tokens"] if pending else None,
        "finish": finish
        if by_base and finish is not None
        else (pending["finish"] if pending else "end"),
        "verdict": (pending.get("verdict") or {}) if pending else {},
    }
    if pending and not by_base and "draft_hidden_s" in pending:
        record["draft_hidden_s"] = pending["draft_hidden_s"]
    return record


def apply_step(
    state: SpecReasonState, record: StepRecord, config: SpecReasonConfig
) -> dict[str, Any]:
    """State update for a step about to join the trace: append it, then apply the stop rules.

    A step repeating one of the last ``repeat_window`` steps (whitespace-insensitive) is
    dropped and stops the trace: a loop, even a cycle of several steps, would otherwise run to
    the budget.
    """
    steps = list(state.get("steps") or [])
    norm = _SPACES.sub(" ", record["text"]).strip()
    if config.repeat_window and norm:
        recent = {_SPACES.sub(" ", s["text"]).strip() for s in steps[-config.repeat_window :]}
        if norm in recent:
            return {"pending": None, "stop": "repeat", "repeats": state.get("repeats", 0) + 1}
    used = state.get("tokens_used", 0) + record["tokens"]
    stop: str | None = None
    if record["finish"] in ("end", "thinking_end"):
        stop = record["finish"]
    elif used >= state.get("budget", config.budget):
        stop = "budget"
    return {"steps": [*steps, record], "tokens_used": used, "pending": None, "stop": stop}


def ahead_of(
    state: SpecReasonState, pending: PendingStep, config: SpecReasonConfig
) -> SpecReasonState | None:
    """The state once ``pending`` joins the trace as drafted; None when the trace stops there.

    What the next position is written after, ahead of ``pending``'s verdict.
    """
    after = cast(
        SpecReasonState,
        {**state, **apply_step(state, step_record(state, pending, "accepted"), config)},
    )
    return after if next_node(after, config) == "verify" else None


def next_node(state: SpecReasonState, config: SpecReasonConfig) -> str:
    """Where to go after a step joins the trace (or at the start)."""
    if state.get("stop"):
        return "answer"
    if state.get("verified"):  # a round's decided positions join first, even after an outage
        return "verify"
    if len(state.get("steps") or []) < config.first_n_base_steps or state.get("draft_down"):
        return "rewrite"
    return "verify"
