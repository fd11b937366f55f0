"""What an endpoint is: request and reply types, and the protocols the graph talks to.

The graph and the judges see only :class:`Endpoint`, :class:`TokenScorer` and
:class:`Classifier`.

The one implementation shipped is :class:`~.server.OpenAIEndpoint` (an OpenAI-compatible
server such as vLLM); a test or a pool of replicas implements the same protocols.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completions call. ``continue_final`` continues the last assistant message."""

    messages: list[dict[str, Any]]
    max_tokens: int
    continue_final: bool = False
    stop: list[str] | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    top_logprobs: int | None = None
    """Ask for the top-k logprobs of each generated token."""
    logprobs: bool = False
    """Ask for the log-probability of each generated token (:attr:`Completion.token_logprobs`)."""
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    """Whether the reply may hold several tool calls (``None``: the server's default)."""
    response_format: dict[str, Any] | None = None
    """OpenAI ``response_format``: ``{"type": "json_schema", "json_schema": {...}}`` or
    ``{"type": "json_object"}`` (vLLM decodes the reply under that grammar)."""
    extra_body: dict[str, Any] | None = None
    """More request fields (vLLM's sampling options, ``chat_template_kwargs``), on top of the
    endpoint's own ``extra_body``."""


@dataclass
class Completion:
    """What a call produced, with the server's own accounting."""

    text: str
    finish_reason: str | None = None
    """``stop`` (a stop string or end of message) or ``length`` (``max_tokens`` reached)."""
    stop_reason: str | int | None = None
    """vLLM: the stop string that matched; ``None`` when the model ended its message."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None
    """Prompt tokens served from the server's prefix cache (``--enable-prompt-tokens-details``)."""
    top_logprobs: list[tuple[str, float]] = field(default_factory=list)
    """Top logprobs of the first generated token, as ``(token, logprob)``."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    """Wall time of the call, retries included."""
    token_logprobs: list[float] | None = None
    """Log-probability of each generated token (when the request asked for ``logprobs``)."""
    token_texts: list[str] | None = None
    """The text of each generated token (with :attr:`token_logprobs`)."""
    tool_call_chunks: list[dict[str, Any]] = field(default_factory=list)
    """A streamed item's pieces of tool calls, as the server sent them: ``{"index", "id",
    "name", "arguments"}`` (``id`` and ``name`` with a call's first piece). The final item
    still carries the whole calls in :attr:`tool_calls`."""


@dataclass(frozen=True)
class PromptLogprobs:
    """The server's log-probability of each prompt token given the tokens before it."""

    logprobs: list[float | None]
    """One per prompt token; ``None`` for the first token and for positions read from the
    prefix cache (their logprobs were not computed)."""
    tokens: list[str | None] = field(default_factory=list)
    """The text of each prompt token, as the server decoded it (``None`` where no logprob)."""
    prompt_tokens: int = 0
    cached_tokens: int | None = None
    """Prompt tokens read from the prefix cache, not prefilled."""
    seconds: float = 0.0


@dataclass(frozen=True)
class Classified:
    """Class probabilities from a classifier server, one row per input text."""

    probs: list[list[float]]
    prompt_tokens: int = 0
    seconds: float = 0.0


class Classifier(Protocol):
    """A served sequence classifier (the Arbitrage router, a reward model)."""

    name: str

    async def classify(self, texts: list[str], *, truncate: int | None = None) -> Classified:
        """Class probabilities of each text."""
        ...


@runtime_checkable
class Endpoint(Protocol):
    """A served model that can complete a chat, whole or streamed."""

    name: str
    """Short label used in errors, stats and traces (``draft``, ``base``)."""

    async def complete(self, request: ChatRequest) -> Completion:
        """Run ``request`` and return the whole completion."""
        ...

    def stream(self, request: ChatRequest) -> AsyncIterator[Completion]:
        """Run ``request`` streamed: text deltas, the last item carrying finish and usage."""
        ...


@runtime_checkable
class WindowedEndpoint(Protocol):
    """A served model that reports its context window and counts a prompt's tokens."""

    name: str

    async def max_model_len(self) -> int | None:
        """The context window in tokens (``None``: not reported)."""
        ...

    async def count_tokens(
        self,
        messages: list[dict[str, Any]],
        *,
        continue_final: bool = False,
        tools: list[dict[str, Any]] | None = None,
    ) -> int:
        """Tokens of a chat prompt (with its tools) as the server renders it."""
        ...


@runtime_checkable
class TokenScorer(Protocol):
    """A served model that tokenizes chat prompts and scores prompt tokens (vLLM)."""

    name: str

    async def tokenize(
        self, messages: list[dict[str, Any]], *, continue_final: bool = False
    ) -> list[int]:
        """Token ids of a chat prompt as the server renders it."""
        ...

    async def prompt_logprobs(
        self, token_ids: list[int], *, read_cache: bool = True
    ) -> PromptLogprobs:
        """Log-probability of each token of ``token_ids`` (one forward pass, no decoding)."""
        ...
