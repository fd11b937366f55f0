"""An endpoint wrapper that adds a call's ``extra_body`` to each chat request."""

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
