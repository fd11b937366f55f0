"""Endpoints: where a model is served. The graph talks to the :class:`Endpoint` protocol only.

``base`` holds the types and protocols, ``server`` the OpenAI-compatible server (vLLM)
through the openai SDK, with retries, typed errors and the one place that builds the draft
and base endpoints from URLs and keys (:func:`endpoint_pair`).
"""

from .base import (
    ChatRequest,
    Classified,
    Classifier,
    Completion,
    Endpoint,
    PromptLogprobs,
    TokenScorer,
    WindowedEndpoint,
)
from .server import READ_PREFIX_CACHE_XARG, OpenAIEndpoint, endpoint_pair, server_root

__all__ = [
    "READ_PREFIX_CACHE_XARG",
    "ChatRequest",
    "Classified",
    "Classifier",
    "Completion",
    "Endpoint",
    "OpenAIEndpoint",
    "PromptLogprobs",
    "TokenScorer",
    "WindowedEndpoint",
    "endpoint_pair",
    "server_root",
]
