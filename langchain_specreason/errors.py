"""Typed errors. Every error a user can cause or fix derives from :class:`SpecReasonError`.

Each message is one line that says what went wrong and what to do about it; the CLI prints
``error: <message>`` and exits non-zero instead of showing a traceback.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


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


class EndpointError(SpecReasonError):
    """A server call failed after bounded retries. Names the endpoint and its URL."""

    def __init__(self, endpoint: str, url: str, reason: str, status: int | None = None) -> None:
        url = redact_url(url)  # the message is logged, traced and checkpointed (draft_down)
        self.endpoint = endpoint
        self.url = url
        self.reason = reason
        self.status = status
        """The HTTP status the server answered with (``None``: no answer, or a malformed one)."""
        super().__init__(f"{endpoint} endpoint at {url}: {reason}")

    @property
    def refused(self) -> bool:
        """The server refused the request as configured (a mistake to fix, not an outage).

        A rejected key (401, 403) or an unknown model or route (404): retrying or falling back
        would hide it.
        """
        return self.status in (401, 403, 404)


class DeadlineError(SpecReasonError, TimeoutError):
    """A run took longer than its ``deadline``; the run was cancelled with its server calls.

    With a checkpointer, the same call on the same thread resumes from the last saved step.
    """


class ContextLengthError(EndpointError, InputError):
    """The prompt does not fit the server's context window (``max_model_len``)."""


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


__all__ = [
    "ConfigError",
    "ContextLengthError",
    "DeadlineError",
    "EndpointError",
    "HashMismatchError",
    "InputError",
    "MissingExtraError",
    "ModelFetchError",
    "PortInUseError",
    "ServeError",
    "ServerDiedError",
    "SpecReasonError",
]
