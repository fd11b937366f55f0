"""Typed errors. Every error a user can cause or fix derives from :class:`SpecReasonError`.

Each message is one line that says what went wrong and what to do about it; the CLI prints
``error: <message>`` and exits non-zero instead of showing a traceback.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import openai
from langchain_core.exceptions import (
    ContextOverflowError,
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelInvalidRequestError,
    ModelNotFoundError,
    ModelPermissionDeniedError,
    ModelRateLimitError,
    ModelTimeoutError,
)


def redact_url(url: str) -> str:
    """``url`` with any user and password replaced by ``***`` (for errors, logs, reprs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"***@{host}"))


class SpecReasonError(Exception):
    """Base class of every error raised on purpose by this package."""


class ConfigError(SpecReasonError, ValueError):
    """A setting is out of range or inconsistent (threshold, budget, profile, flags)."""


class InputError(SpecReasonError, ValueError):
    """The input cannot be answered (for example an empty conversation)."""


class EndpointError(SpecReasonError, ModelError):
    """A server call failed after bounded retries. Names the endpoint and its URL.

    A :class:`langchain_core.exceptions.ModelError` (``is_retryable`` says whether the same
    call may succeed later); the subclasses below are langchain-core's matching type and, when
    the failure came from the openai SDK, the SDK's own (``except openai.RateLimitError``
    works), with its ``response``, ``status_code`` and ``body``.
    """

    def __init__(
        self,
        endpoint: str,
        url: str,
        reason: str,
        status: int | None = None,
        *,
        cause: BaseException | None = None,
    ) -> None:
        url = redact_url(url)  # the message is logged, traced and checkpointed (draft_down)
        self.endpoint = endpoint
        self.url = url
        self.reason = reason
        self.status = status
        """The HTTP status the server answered with (``None``: no answer, or a malformed one)."""
        message = f"{endpoint} endpoint at {url}: {reason}"
        # not super().__init__: the openai SDK's classes in the MRO need their own arguments
        Exception.__init__(self, message)
        self.message = message
        # the openai SDK's fields (response, status_code, body, ...), from the failure itself
        adopted = {
            name: getattr(cause, name, None)
            for name in ("request", "response", "body", "code", "param", "type", "request_id")
        }
        adopted["status_code"] = getattr(cause, "status_code", status)
        for name, value in adopted.items():
            setattr(self, name, value)

    def __reduce__(self) -> Any:  # pickled with its fields (LangGraph checkpoints errors)
        return (_rebuild, (type(self), self.endpoint, self.url, self.reason, self.status))

    @property
    def refused(self) -> bool:
        """The server refused the request as configured (a mistake to fix, not an outage).

        A rejected key (401, 403) or an unknown model or route (404): retrying or falling back
        would hide it.
        """
        return self.status in (401, 403, 404)


def _rebuild(cls: type[EndpointError], *args: Any) -> EndpointError:
    return cls(*args)


class EndpointConnectionError(EndpointError, ModelConnectionError, openai.APIConnectionError):
    """The server could not be reached (refused, reset, DNS), or its stream broke off."""


class EndpointTimeoutError(EndpointError, ModelTimeoutError, openai.APITimeoutError):
    """The server did not answer in time (``timeout``, ``judge_timeout``, ``connect_timeout``)."""


class EndpointAuthenticationError(
    EndpointError, ModelAuthenticationError, openai.AuthenticationError
):
    """HTTP 401: the server rejected the key (``api_key`` / ``draft_api_key``)."""


class EndpointPermissionError(
    EndpointError, ModelPermissionDeniedError, openai.PermissionDeniedError
):
    """HTTP 403: the key may not make this request."""


class EndpointNotFoundError(EndpointError, ModelNotFoundError, openai.NotFoundError):
    """HTTP 404: no such model (``base_model`` / ``draft_model``) or route on the server."""


class EndpointRequestError(EndpointError, ModelInvalidRequestError, openai.BadRequestError):
    """HTTP 400 (or another 4xx): the server refused the request as invalid."""


class EndpointRateLimitError(EndpointError, ModelRateLimitError, openai.RateLimitError):
    """HTTP 429 after the retries: the server (or a proxy) is over its rate limit."""


class EndpointServerError(EndpointError, ModelAPIError, openai.InternalServerError):
    """HTTP 5xx (or 408) after the retries: the server failed."""


def endpoint_error(
    endpoint: str,
    url: str,
    reason: str,
    cause: BaseException | None = None,
    *,
    status: int | None = None,
) -> EndpointError:
    """The :class:`EndpointError` subclass that matches ``cause`` (an openai SDK error).

    ``status`` is kept on the error (``refused`` reads it); the class follows the HTTP status
    of ``cause`` either way.
    """
    code = getattr(cause, "status_code", None)
    cls: type[EndpointError] = EndpointError
    if isinstance(cause, openai.APITimeoutError):
        cls = EndpointTimeoutError
    elif isinstance(cause, openai.APIConnectionError):
        cls = EndpointConnectionError
    elif isinstance(code, int):
        cls = _BY_STATUS.get(code) or (
            EndpointServerError if code >= 500 or code == 408 else EndpointRequestError
        )
    return cls(endpoint, url, reason, status, cause=cause)


_BY_STATUS: dict[int, type[EndpointError]] = {
    400: EndpointRequestError,
    401: EndpointAuthenticationError,
    403: EndpointPermissionError,
    404: EndpointNotFoundError,
    429: EndpointRateLimitError,
}


class DeadlineError(SpecReasonError, TimeoutError):
    """A run took longer than its ``deadline``; the run was cancelled with its server calls.

    With a checkpointer, the same call on the same thread resumes from the last saved step.
    """


class ContextLengthError(EndpointError, InputError, ContextOverflowError, openai.BadRequestError):
    """The prompt does not fit the server's context window (``max_model_len``).

    langchain-core's :class:`~langchain_core.exceptions.ContextOverflowError` (what
    ``SummarizationMiddleware`` catches to summarize and retry) and the SDK's
    ``openai.BadRequestError``, as the server's HTTP 400 is.
    """


class MissingExtraError(ConfigError, ImportError):
    """A tool needs an optional extra that is not installed; names the extra to install."""

    def __init__(self, what: str, extra: str, module: str) -> None:
        self.extra = extra
        self.module = module
        super().__init__(
            f"{what} needs the `{extra}` extra (missing module {module!r}): "
            f"pip install 'langchain-specreason[{extra}]'"
        )


class ModelFetchError(SpecReasonError):
    """Fetching or converting a model failed (network, disk, unknown name)."""


class HashMismatchError(ModelFetchError):
    """A downloaded wheel or an assembled model file does not match its pinned sha256."""


class ServeError(SpecReasonError):
    """Starting vLLM servers failed (unknown profile, port in use, a server died)."""


class PortInUseError(ServeError):
    """The port a server should listen on is already taken."""


class ServerDiedError(ServeError):
    """A server process exited before it became healthy. The message quotes its log."""


class MemoryPlanError(ServeError):
    """The servers asked for do not fit the host's memory (or a GPU's): need, available, fixes."""


__all__ = [
    "ConfigError",
    "ContextLengthError",
    "DeadlineError",
    "EndpointAuthenticationError",
    "EndpointConnectionError",
    "EndpointError",
    "EndpointNotFoundError",
    "EndpointPermissionError",
    "EndpointRateLimitError",
    "EndpointRequestError",
    "EndpointServerError",
    "EndpointTimeoutError",
    "HashMismatchError",
    "InputError",
    "MemoryPlanError",
    "MissingExtraError",
    "ModelFetchError",
    "PortInUseError",
    "ServeError",
    "ServerDiedError",
    "SpecReasonError",
]
