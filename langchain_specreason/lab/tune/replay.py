"""Replay: an endpoint that answers a request it has seen before from memory.

``specreason tune`` runs many judge settings over the same problems. With greedy decoding
(temperature 0) two settings send the same requests until their first different decision, so
the calls they share are made once and replayed, with the seconds they took the first time.
A setting's latency is then the sum of its calls' seconds (``server_s``), the same whether a
call was made or replayed; exact for greedy runs without lookahead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ...endpoint import ChatRequest, Completion, PromptLogprobs


class ReplayEndpoint:
    """Wraps an endpoint and answers a request seen before from memory.

    ``complete``, ``stream``, ``tokenize`` and ``prompt_logprobs`` are remembered by their
    arguments; everything else passes through.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self._memo: dict[str, Any] = {}
        self.calls = 0
        """Calls that reached the server."""
        self.replayed = 0
        """Calls answered from memory."""

    def __getattr__(self, name: str) -> Any:  # max_model_len, count_tokens, base_url, ...
        return getattr(self.inner, name)

    async def _once(self, key: str, call: Any) -> Any:
        if key in self._memo:
            self.replayed += 1
            return self._memo[key]
        self.calls += 1
        value = await call()
        self._memo[key] = value
        return value

    async def complete(self, request: ChatRequest) -> Completion:
        """The completion of ``request`` (made once)."""
        return await self._once(f"complete:{request!r}", lambda: self.inner.complete(request))

    async def stream(self, request: ChatRequest) -> AsyncIterator[Completion]:
        """The items of a streamed ``request`` (streamed once, then replayed)."""

        async def collect() -> list[Completion]:
            return [item async for item in self.inner.stream(request)]

        for item in await self._once(f"stream:{request!r}", collect):
            yield item

    async def tokenize(
        self, messages: list[dict[str, Any]], *, continue_final: bool = False
    ) -> list[int]:
        """Token ids of a chat prompt (asked once)."""
        return await self._once(
            f"tokenize:{messages!r}:{continue_final}",
            lambda: self.inner.tokenize(messages, continue_final=continue_final),
        )

    async def prompt_logprobs(
        self, token_ids: list[int], *, read_cache: bool = True
    ) -> PromptLogprobs:
        """Prompt logprobs of ``token_ids`` (computed once)."""
        return await self._once(
            f"logprobs:{token_ids!r}:{read_cache}",
            lambda: self.inner.prompt_logprobs(token_ids, read_cache=read_cache),
        )
