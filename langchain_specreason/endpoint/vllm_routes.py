"""vLLM's own routes beside the OpenAI API: at the server's root, not under ``/v1``."""

from __future__ import annotations

READ_PREFIX_CACHE_XARG = "specreason_read_prefix_cache"
"""The ``vllm_xargs`` key that lets a ``prompt_logprobs`` request read the prefix cache (the
server-side half is :mod:`langchain_specreason.serving.vllm_plugin`)."""


def server_root(base_url: str) -> str:
    """The server's root URL from its OpenAI base URL (vLLM's own routes live there)."""
    return base_url.rstrip("/").removesuffix("/v1")
