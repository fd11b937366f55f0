"""Retries and error mapping of server calls: transient failures retried, the rest typed.

Transient failures (connection errors, timeouts, 408, 429, 5xx) are retried with tenacity,
with exponential back-off (or the server's ``Retry-After``, up to two minutes) and a bounded
number of attempts; then an :class:`EndpointError` naming the endpoint is raised. Other errors
are not retried: a prompt that does not fit the context window becomes
:class:`ContextLengthError`, anything else an :class:`EndpointError`.
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

import openai
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    RetryError,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from ..errors import ContextLengthError, EndpointError, endpoint_error

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


async def retried(
    name: str,
    base_url: str,
    max_retries: int,
    fn: Any,
    /,
    *args: Any,
    _retry: bool = True,
    **kwargs: Any,
) -> Any:
    """``await fn(*args, **kwargs)``, transient failures retried up to ``max_retries`` times.

    Failures become the package's typed errors, naming the endpoint (``name``, ``base_url``);
    ``_retry=False``: one attempt.
    """
    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(_is_transient),
            stop=stop_after_attempt(max_retries + 1 if _retry else 1),
            wait=_wait,
            reraise=True,
        ):
            with attempt:
                return await fn(*args, **kwargs)
    except openai.APIStatusError as exc:
        if _is_context_error(exc):
            raise ContextLengthError(name, base_url, _message(exc), 400, cause=exc) from exc
        wait = retry_after(exc)
        if wait is not None and wait > MAX_RETRY_AFTER:
            raise endpoint_error(
                name,
                base_url,
                f"HTTP {exc.status_code}, and the server asks to retry after {wait:.0f} s "
                f"(more than {MAX_RETRY_AFTER:.0f} s): {_message(exc)}",
                exc,
            ) from exc
        if _is_transient(exc):
            raise endpoint_error(
                name,
                base_url,
                f"HTTP {exc.status_code} after {max_retries + 1} attempts: {_message(exc)}",
                exc,
            ) from exc
        raise endpoint_error(
            name,
            base_url,
            f"HTTP {exc.status_code}: {_message(exc)}",
            exc,
            status=exc.status_code,
        ) from exc
    except (openai.APIConnectionError, openai.APITimeoutError) as exc:
        what = "timed out" if isinstance(exc, openai.APITimeoutError) else "unreachable"
        tries = max_retries + 1
        raise endpoint_error(
            name,
            base_url,
            f"{what} after {tries} attempt{'s' if tries > 1 else ''} "
            f"({type(exc).__name__}); "
            f"is the server running?",
            exc,
        ) from exc
    except json.JSONDecodeError as exc:  # status 200 with a body that is not JSON
        raise EndpointError(name, base_url, f"malformed reply: not valid JSON ({exc.msg})") from exc
    except RetryError as exc:  # pragma: no cover - reraise=True makes this unreachable
        raise EndpointError(name, base_url, str(exc)) from exc
    raise AssertionError("unreachable")  # pragma: no cover
