"""An endpoint wrapper that adds a call's ``extra_body`` to each chat request."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from .base import ChatRequest, Completion, Endpoint


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
