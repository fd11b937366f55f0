"""Retries and error mapping of server calls: transient failures retried, the rest typed."""

from __future__ import annotations

import email.utils
import time

import openai
from tenacity import RetryCallState, wait_exponential_jitter

_RETRY_STATUS = {408, 429}
MAX_RETRY_AFTER = 120.0
"""Longest ``Retry-After`` honoured, in seconds (the openai SDK's own cap); a longer one is not
waited for: the error is raised at once."""
_BACKOFF = wait_exponential_jitter(multiplier=0.5, max=8.0)


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds the server asked to wait (``Retry-After``/``retry-after-ms``), if it did."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            when = email.utils.parsedate_tz(value)  # an HTTP date
            if when is not None:
                return max(0.0, email.utils.mktime_tz(when) - time.time())
    return None


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIConnectionError | openai.APITimeoutError):
        return True
    if isinstance(exc, openai.APIStatusError):
        wait = retry_after(exc)
        if wait is not None and wait > MAX_RETRY_AFTER:
            return False  # the server is not coming back soon: say so now
        return exc.status_code in _RETRY_STATUS or exc.status_code >= 500
    return False


def _wait(state: RetryCallState) -> float:
    """The server's ``Retry-After`` when it sent one, else exponential back-off with jitter."""
    outcome = state.outcome
    wait = retry_after(outcome.exception() if outcome is not None else None)
    return wait if wait is not None else _BACKOFF(state)


def _is_context_error(exc: openai.APIStatusError) -> bool:
    text = f"{exc} {_message(exc)}".lower()
    return exc.status_code == 400 and any(
        key in text
        for key in (
            "maximum context length",
            "max_model_len",
            "context length",
            "too long",
            "max_tokens' is too large",
        )
    )


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        msg = body.get("message") or (body.get("error") or {}).get("message")
        if msg:
            return str(msg).splitlines()[0][:300]
    return str(exc).splitlines()[0][:300]
