"""A chat model's arguments: ChatOpenAI's names it accepts, the ones it refuses, redaction."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError, redact_url
from ..redaction import looks_secret

ALIASES = {"openai_api_key", "model_name", "request_timeout", "max_completion_tokens"}
"""ChatOpenAI's names accepted here (they mean what they mean there)."""


def _refuse_openai_only(values: dict[str, Any], fields: set[str]) -> None:
    """Refuse ChatOpenAI's single URL, and unknown secret-looking arguments.

    An unknown argument goes to the request body as ``model_kwargs`` (as with ChatOpenAI): a
    key there would be sent to the server on every request and shown in ``repr``.
    """
    for name in ("openai_api_base", "openai_api_base_url"):
        if name in values:
            raise ConfigError(
                f"{name}: SpecReason talks to two servers; pass draft_url= (the small model's "
                "/v1 URL) and base_url= (the big model's), or set SPECREASON_DRAFT_URL and "
                "SPECREASON_BASE_URL"
            )
    for name in values:
        if name not in fields and name not in ALIASES and looks_secret(name):
            raise ConfigError(
                f"unknown argument {name!r} looks like a secret; it would be sent in every "
                "request body. Keys: api_key= (base server) and draft_api_key="
            )


def _redacted(name: str | None, value: Any) -> Any:
    """``value`` of field ``name`` without secrets: header values that carry one, URL users."""
    if name == "default_headers" and isinstance(value, dict):
        return {k: ("**********" if looks_secret(k) else v) for k, v in value.items()}
    if name in ("draft_url", "base_url") and isinstance(value, str):
        return redact_url(value)
    return value
