"""A server's replies read: chat completions' choices, usage and stream deltas."""

from __future__ import annotations

from typing import Any

from .base import ChatRequest, Completion


def generated_text(message: Any) -> str:
    """All the text a reply's message (or a stream's delta) holds, as the model generated it.

    A server started with ``--reasoning-parser`` (``deepseek_r1``, ``qwen3``, ...) moves what
    it takes for thinking out of ``content`` into ``reasoning`` (``reasoning_content`` before
    vLLM 0.11). A step continues the thinking, so it would arrive empty; the two together are
    the generated text (the parser only splits it, at the end-of-thinking tag).
    """
    extra = getattr(message, "model_extra", None) or {}
    reasoning = extra.get("reasoning") or extra.get("reasoning_content") or ""
    return reasoning + (message.content or "")


def _choice(choice: Any, request: ChatRequest, seconds: float) -> Completion:
    """One choice of a chat-completions reply as a :class:`Completion` (no usage)."""
    out = Completion(
        text=generated_text(choice.message),
        finish_reason=choice.finish_reason,
        stop_reason=(choice.model_extra or {}).get("stop_reason"),
        seconds=seconds,
        tool_calls=[tc.model_dump() for tc in (choice.message.tool_calls or [])],
    )
    content = choice.logprobs.content if choice.logprobs else None
    if content:
        out.top_logprobs = [(t.token, t.logprob) for t in content[0].top_logprobs]
        if request.logprobs:
            out.token_logprobs = [t.logprob for t in content]
            out.token_texts = [t.token for t in content]
    return out


def _add_usage(out: Completion, usage: Any) -> None:
    if usage is None:
        return
    out.prompt_tokens = usage.prompt_tokens or 0
    out.completion_tokens = usage.completion_tokens or 0
    details = getattr(usage, "prompt_tokens_details", None)
    if details is not None and getattr(details, "cached_tokens", None) is not None:
        out.cached_tokens = details.cached_tokens
