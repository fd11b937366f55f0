"""A chat request's body: the fields ``extra_body`` may not set, the arguments of a request.

:class:`WithExtraBody` is an endpoint wrapper that adds a call's ``extra_body`` to each chat
request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..errors import ConfigError
from .base import ChatRequest, Completion, Endpoint

RESERVED_BODY_KEYS = frozenset(
    {
        "messages",
        "model",
        "stream",
        "stream_options",
        "n",
        "tools",
        "tool_choice",
        "response_format",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "seed",
        "stop",
        "logprobs",
        "top_logprobs",
        "prompt_logprobs",
        "continue_final_message",
        "add_generation_prompt",
    }
)
"""Request fields SpecReason sets on each call itself: not accepted in ``extra_body``."""


def check_extra_body(extra: Mapping[str, Any] | None, what: str = "extra_body") -> dict[str, Any]:
    """``extra`` as a dict, refusing the fields SpecReason sets per call (a typed error)."""
    extra = dict(extra or {})
    taken = sorted(RESERVED_BODY_KEYS.intersection(extra))
    if taken:
        unsupported = [k for k in taken if k in ("n", "logprobs", "top_logprobs")]
        raise ConfigError(
            f"{what} may not set {', '.join(taken)}: SpecReason sets them on each call (steps, "
            "judge, answer); use the fields / call arguments (temperature, max_tokens, seed, "
            "stop, tools, with_structured_output) instead"
            + (
                f"; {', '.join(unsupported)}: not supported (one answer per call; the judges "
                "ask for logprobs themselves)"
                if unsupported
                else ""
            )
        )
    return extra


def chat_arguments(
    request: ChatRequest, model: str, extra_body: Mapping[str, Any], timeout: Any
) -> dict[str, Any]:
    """The chat-completions arguments of ``request`` to ``model`` (the openai SDK's).

    ``extra_body`` is the endpoint's, merged under the request's own; ``timeout`` bounds the
    call.
    """
    extra: dict[str, Any] = {**extra_body, **(request.extra_body or {})}
    if request.continue_final:
        extra.update(continue_final_message=True, add_generation_prompt=False)
    kwargs: dict[str, Any] = dict(
        model=model,
        messages=request.messages,
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        extra_body=extra,
        timeout=timeout,
    )
    if request.stop:
        kwargs["stop"] = request.stop
    if request.seed is not None:
        kwargs["seed"] = request.seed
    if request.top_logprobs:
        kwargs.update(logprobs=True, top_logprobs=request.top_logprobs)
    elif request.logprobs:
        kwargs["logprobs"] = True
    if request.tools:
        kwargs["tools"] = request.tools
        if request.tool_choice is not None:
            kwargs["tool_choice"] = request.tool_choice
        if request.parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = request.parallel_tool_calls
    if request.response_format:
        kwargs["response_format"] = request.response_format
    return kwargs


class WithExtraBody:
    """An endpoint whose chat requests carry a call's ``extra_body`` too.

    Every other attribute is the wrapped endpoint's (tokenizing, prompt logprobs, its window).
    """

    def __init__(self, inner: Endpoint, extra: dict[str, Any]) -> None:
        self.inner = inner
        self.extra = extra
        self.name = inner.name

    def _with(self, request: ChatRequest) -> ChatRequest:
        return dataclasses.replace(request, extra_body={**(request.extra_body or {}), **self.extra})

    async def complete(self, request: ChatRequest) -> Completion:
        """The wrapped endpoint's completion of ``request`` with the extra fields."""
        return await self.inner.complete(self._with(request))

    def stream(self, request: ChatRequest) -> AsyncIterator[Completion]:
        """The wrapped endpoint's stream of ``request`` with the extra fields."""
        return self.inner.stream(self._with(request))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
