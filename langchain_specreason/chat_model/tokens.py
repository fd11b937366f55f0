"""Token counts for ``get_num_tokens``: the base server's exact count, or an offline estimate."""

from __future__ import annotations

from typing import Any

from ..endpoint import OpenAIEndpoint


async def count_text(base: OpenAIEndpoint, text: str) -> int:
    """Tokens of ``text`` by the base server's ``/tokenize``."""
    return len(await base.tokenize_text(text))


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
