"""A server's replies read: chat completions' choices, usage and stream deltas."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator
from typing import Any

import httpx2 as httpx  # the HTTP library of the openai SDK (>= 3)
import openai

from ..errors import EndpointConnectionError, EndpointError, EndpointTimeoutError, endpoint_error
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


def as_chat_completion(resp: Any, name: str, base_url: str) -> Any:
    """``resp`` when it is a chat completion; an HTML page or text is a typed error."""
    if not hasattr(resp, "choices"):
        raise EndpointError(
            name,
            base_url,
            f"malformed reply: not a chat completion ({type(resp).__name__} {str(resp)[:60]!r})",
        )
    return resp


async def read_stream(
    stream: Any, *, name: str, base_url: str, timeout: float, start: float
) -> AsyncGenerator[Completion, None]:
    """The items of a chat-completions ``stream`` begun at ``start`` (``time.perf_counter``).

    Text as items with ``text``, pieces of tool calls as items with ``tool_call_chunks``; the
    final item has no text but the finish, the usage and the whole tool calls. A stream that
    takes longer than ``timeout`` seconds in all, breaks off, or ends without a finish reason
    is a typed error naming the endpoint (``name``, ``base_url``).
    """
    final = Completion(text="")
    tool_parts: dict[int, dict[str, Any]] = {}
    try:
        async for chunk in stream:
            if time.perf_counter() - start > timeout:  # a trickle, each read in time
                await stream.close()
                raise EndpointTimeoutError(
                    name,
                    base_url,
                    f"generation took longer than timeout={timeout:g} s in all "
                    "(the stream kept sending, too slowly)",
                )
            if chunk.usage is not None:
                _add_usage(final, chunk.usage)
            for choice in chunk.choices:
                if text := generated_text(choice.delta):
                    yield Completion(text=text)
                if choice.delta.tool_calls:
                    yield Completion(
                        text="",
                        tool_call_chunks=[
                            {
                                "index": tc.index,
                                "id": tc.id,
                                "name": tc.function.name if tc.function else None,
                                "arguments": (tc.function.arguments if tc.function else None) or "",
                            }
                            for tc in choice.delta.tool_calls
                        ],
                    )
                for tc in choice.delta.tool_calls or []:
                    part = tool_parts.setdefault(
                        tc.index,
                        {
                            "id": None,
                            "type": "function",
                            "function": {"name": "", "arguments": ""},
                        },
                    )
                    if tc.id:
                        part["id"] = tc.id
                    if tc.function and tc.function.name:
                        part["function"]["name"] += tc.function.name
                    if tc.function and tc.function.arguments:
                        part["function"]["arguments"] += tc.function.arguments
                if choice.finish_reason:
                    final.finish_reason = choice.finish_reason
                    final.stop_reason = (choice.model_extra or {}).get("stop_reason")
    except EndpointError:  # our own, typed already (the overall timeout above): as it is
        raise
    except (openai.APIError, httpx.HTTPError, json.JSONDecodeError) as exc:  # not wrapped
        reason = f"stream broke off ({type(exc).__name__}: {exc})"
        if isinstance(exc, openai.APIError):  # its type follows the SDK's error
            raise endpoint_error(name, base_url, reason, exc) from exc
        if isinstance(exc, httpx.TimeoutException):  # a read that took longer than timeout
            raise EndpointTimeoutError(name, base_url, reason) from exc
        raise EndpointConnectionError(name, base_url, reason) from exc
    if final.finish_reason is None:  # a cut stream would pass for a finished answer
        raise EndpointError(
            name,
            base_url,
            "stream ended without a finish reason (cut off before the server finished)",
        )
    final.tool_calls = [tool_parts[i] for i in sorted(tool_parts)]
    final.seconds = time.perf_counter() - start
    yield final
