"""A chat model's arguments: ChatOpenAI's names it accepts, the ones it refuses, redaction.

Also a call's SpecReason settings (:func:`call_config`: the fields with the call's knobs, and
``max_tokens`` shared between the reasoning and the answer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ..config import SpecReasonConfig
from ..endpoint.extra_body import check_extra_body
from ..errors import ConfigError, redact_url
from ..redaction import looks_secret

ALIASES = {"openai_api_key", "model_name", "request_timeout", "max_completion_tokens"}
"""ChatOpenAI's names accepted here (they mean what they mean there)."""


def refuse_openai_only(values: dict[str, Any], fields: set[str]) -> None:
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


def refuse_other_model(asked: str, model_name: str | None) -> None:
    """A per-call ``model=`` other than the base model's served name: a ConfigError."""
    if asked != model_name:
        raise ConfigError(
            f"model={asked!r} per call: this model's base model is "
            f"{model_name!r}; build another ChatSpecReason(model=...) (or "
            "model_copy(update={'base_model': ...})) to use another served model"
        )


def redacted(name: str | None, value: Any) -> Any:
    """``value`` of field ``name`` without secrets: header values that carry one, URL users."""
    if name == "default_headers" and isinstance(value, dict):
        return {k: ("**********" if looks_secret(k) else v) for k, v in value.items()}
    if name in ("draft_url", "base_url") and isinstance(value, str):
        return redact_url(value)
    return value


def check_url(name: str, value: str | None) -> str | None:
    """An http(s) URL with a host, or a ValueError naming the field (not an outage later)."""
    if value is None:
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError as exc:
        raise ValueError(f"{name}: malformed URL {redact_url(value)!r} ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{name}: {redact_url(value)!r} is not an http(s) URL with a host "
            "(e.g. http://127.0.0.1:8202/v1)"
        )
    return value


UNSUPPORTED_PER_CALL = ("n", "logprobs", "top_logprobs")
"""ChatOpenAI's per-call options with no counterpart here (refused, as in ``model_kwargs``)."""


def refuse_unsupported(overrides: Mapping[str, Any]) -> None:
    """A call's ``n`` (other than 1), ``logprobs`` or ``top_logprobs``: a ConfigError.

    The constructor refuses them in ``model_kwargs`` (:func:`~..endpoint.server.check_extra_body`);
    a call's are refused with the same error and message, not dropped without a word (one
    answer per call; the judges ask for logprobs themselves). Unset values (``None``,
    ``n=1``, ``logprobs=False``) ask for nothing and pass.
    """
    asked = {
        name: value
        for name in UNSUPPORTED_PER_CALL
        if (value := overrides.get(name)) is not None
        and not (name == "n" and value == 1)
        and not (name == "logprobs" and value is False)
    }
    if asked:
        check_extra_body(asked, "a call")


def reasoning_cap(
    budget: int, answer_max_tokens: int, max_tokens: int | None
) -> tuple[int, int] | None:
    """The reasoning's budget and the answer's cap within ``max_tokens``; None without it.

    The answer's share is half of ``max_tokens``, at most ``answer_max_tokens``; the
    reasoning gets the rest, within ``budget``; the answer then gets what the reasoning
    leaves, still at most ``answer_max_tokens``. A large ``max_tokens`` (16k-32k, usual for
    reasoning models) thus leaves both settings as they are: it bounds, it never inflates.
    """
    if max_tokens is None:
        return None
    if max_tokens < 2:
        raise ConfigError(
            f"max_tokens bounds the reasoning plus the answer; at least 2, got {max_tokens}"
        )
    share = min(answer_max_tokens, max(1, max_tokens // 2))
    capped = min(budget, max_tokens - share)
    return capped, min(answer_max_tokens, max_tokens - capped)


def budget_cut(
    settings: Mapping[str, Any], overrides: Mapping[str, Any], max_tokens: int | None
) -> int | None:
    """The budget ``max_tokens`` sets when it is lower than the ``budget`` setting, else None.

    Same arguments as :func:`call_config`. A reasoning stopped at this budget was cut by
    ``max_tokens`` (``finish_reason="length"``); one stopped at its own ``budget`` setting
    (or at a budget the servers' windows lowered) was not.
    """
    knobs = {
        **settings,
        **{k: v for k, v in overrides.items() if k in ("budget", "answer_max_tokens")},
    }
    bounds = reasoning_cap(
        int(knobs["budget"]),
        int(knobs["answer_max_tokens"]),
        overrides.get("max_tokens") or max_tokens,
    )
    if bounds is None or bounds[0] >= int(knobs["budget"]):
        return None
    return bounds[0]


def call_config(
    settings: dict[str, Any], overrides: Mapping[str, Any], max_tokens: int | None
) -> SpecReasonConfig:
    """The :class:`SpecReasonConfig` of ``settings`` (the model's knobs) with a call's overrides.

    ``overrides`` are a call's keyword arguments: its SpecReason knobs are taken, options
    with no counterpart refused (:func:`refuse_unsupported`), the rest left alone.
    ``max_tokens`` (the call's, else the model's) bounds the reasoning plus the answer
    (:func:`reasoning_cap`): the answer's share is half, at most ``answer_max_tokens``; the
    reasoning the rest, within ``budget``.
    """
    refuse_unsupported(overrides)
    settings.update({k: v for k, v in overrides.items() if k in SpecReasonConfig.model_fields})
    bounds = reasoning_cap(
        int(settings["budget"]),
        int(settings["answer_max_tokens"]),
        overrides.get("max_tokens") or max_tokens,
    )
    if bounds is not None:  # reasoning + answer <= max_tokens (see the field)
        settings["budget"], settings["answer_max_tokens"] = bounds
    return SpecReasonConfig(**settings)
