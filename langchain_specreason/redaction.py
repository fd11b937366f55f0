"""What counts as a secret by its name: one rule for every place that hides or refuses one.

Environment variables and flags in logs and ``meta.json``, headers in ``repr``, unknown
chat-model arguments that would be sent in request bodies.

A name is secret when one of its words (split at ``_``, ``-``, ``.`` and camelCase) is a
secret word (``key``, ``token``, ``secret``, ``password``, ``authorization``, ``cookie``...),
or it holds an unambiguous one run together (``PGPASSWORD``, ``apikey``). So ``VLLM_API_KEY``,
``--hf-token``, ``X-Api-Key`` and ``Authorization`` are secrets; ``max_completion_tokens``,
``--tokenizer`` and ``--max-num-batched-tokens`` are not.
"""

from __future__ import annotations

import re

SECRET_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "credential",
        "credentials",
        "authorization",
        "cookie",
    }
)
_RUN_TOGETHER = ("password", "passwd", "secret", "apikey", "credential")
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def looks_secret(name: str) -> bool:
    """Whether a variable, flag, header or argument named ``name`` holds a secret."""
    if any(word.lower() in SECRET_WORDS for word in _WORDS.findall(name)):
        return True
    squashed = re.sub(r"[^a-z0-9]", "", name.lower())
    return any(part in squashed for part in _RUN_TOGETHER)
