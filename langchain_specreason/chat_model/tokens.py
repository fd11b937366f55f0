"""Token counts for ``get_num_tokens``: the base server's exact count, or an offline estimate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_openai_messages

from ..endpoint import OpenAIEndpoint


def countable(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Any message list as OpenAI dicts to count (no user message needed; ``[]`` counts 0)."""
    return [dict(m) for m in convert_to_openai_messages(list(messages))] if messages else []


async def count_text(base: OpenAIEndpoint, text: str, *, retry: bool = True) -> int:
    """Tokens of ``text`` by the base server's ``/tokenize`` (one attempt unless ``retry``)."""
    return len(await base.tokenize_text(text, retry=retry))


def tiktoken_estimate(messages: list[dict[str, Any]]) -> int:
    """Offline estimate: tiktoken's cl100k_base when its file is cached, else ~4 chars a token."""
    texts = [
        m["content"] if isinstance(m.get("content"), str) else str(m.get("content") or "")
        for m in messages
    ]
    try:
        import tiktoken

        encode = tiktoken.get_encoding("cl100k_base").encode
        counts = [len(encode(t)) for t in texts]
    except Exception:  # no network to fetch the BPE file, and none cached
        counts = [(len(t) + 3) // 4 for t in texts]
    return 3 + sum(4 + n for n in counts)
