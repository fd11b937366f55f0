"""The fields of :class:`~.model.ChatSpecReason`: what a user sets, with docs and env variables.

How the fields validate, serialize and redact is here too. The SpecReason knobs themselves
(judge thresholds, budget, temperature, ...) are :class:`~langchain_specreason.config.
SpecReasonConfig`'s; these are the chat model's own: servers, keys, client limits, LangChain's
names.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any, Literal, Self

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.utils import from_env, secret_from_env
from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    SkipValidation,
    field_serializer,
    field_validator,
)

from ..config import DEFAULT_JUDGE, SpecReasonConfig
from ..endpoint import Endpoint
from ..graph import Breaker, SpecReasonGraph
from ..judges import Judge
from .arguments import check_url, redacted
from .local_tokens import LocalCounter
from .wiring import ENDPOINT_FIELDS, build_endpoints, same_endpoints


def field_name(cls: type[BaseChatModel], name: str) -> str:
    """The field ``name`` sets: itself, or the field it is an alias of (``model``, ...)."""
    for field, info in cls.model_fields.items():
        choices = getattr(info.validation_alias, "choices", [info.validation_alias])
        if name == field or name == info.alias or name in choices:
            return field
    return name


class ChatSpecReasonFields(BaseChatModel, SpecReasonConfig):
    """The fields :class:`~.model.ChatSpecReason` takes (an abstract base: use that class)."""

    model_config = ConfigDict(
        populate_by_name=True,
        arbitrary_types_allowed=True,
        frozen=False,
        extra="ignore",
        use_attribute_docstrings=True,
    )

    draft_url: str | None = Field(default_factory=from_env("SPECREASON_DRAFT_URL", default=None))
    """OpenAI-compatible base URL of the draft server (env ``SPECREASON_DRAFT_URL``)."""
    base_url: str | None = Field(default_factory=from_env("SPECREASON_BASE_URL", default=None))
    """OpenAI-compatible base URL of the base server (env ``SPECREASON_BASE_URL``)."""
    draft_model: str | None = None
    """Served name of the draft model; default: the one model the draft server lists."""
    base_model: str | None = Field(
        default=None, alias="model", validation_alias=AliasChoices("model", "model_name")
    )
    """Served name of the base model; default: the one model the base server lists."""
    api_key: SecretStr | None = Field(
        default_factory=secret_from_env(["SPECREASON_BASE_API_KEY", "VLLM_API_KEY"], default=None),
        validation_alias=AliasChoices("api_key", "openai_api_key"),
    )
    """Key of the base server (env ``SPECREASON_BASE_API_KEY``, then ``VLLM_API_KEY``, the
    key ``specreason serve`` gives its servers; ChatOpenAI's ``openai_api_key`` works too)."""
    draft_api_key: SecretStr | None = Field(
        default_factory=secret_from_env("SPECREASON_DRAFT_API_KEY", default=None)
    )
    """Key of the draft server (env ``SPECREASON_DRAFT_API_KEY``; default: ``api_key``)."""
    family: str = "instruct"
    """Prompt family: ``instruct`` (the reply is the reasoning) or ``think`` (``<think>``)."""
    judge: str = Field(default_factory=from_env("SPECREASON_JUDGE", default=DEFAULT_JUDGE))
    """Which judge keeps or rejects draft steps (env ``SPECREASON_JUDGE``): ``score``,
    ``likelihood``, ``confidence``, ``arithmetic``, ``learned``, or a cascade such as
    ``arithmetic+likelihood`` (see :mod:`langchain_specreason.judges`). Every other SpecReason
    knob (``threshold``, ``budget``, ``temperature``, ...) is a field of
    :class:`~.config.SpecReasonConfig`, inherited here with its default and docs."""
    max_tokens: int | None = Field(
        default=None,
        gt=0,
        validation_alias=AliasChoices("max_tokens", "max_completion_tokens"),
    )
    """Bound on the tokens of the reply: the kept reasoning plus the answer, as OpenAI's
    ``max_completion_tokens`` for reasoning models (ChatOpenAI's name works too). The
    reasoning gets at most ``max_tokens`` less the answer's share (half of it, at most
    ``answer_max_tokens``), within ``budget``; the answer gets the rest. Reaching it gives
    ``finish_reason="length"``. Also per call."""
    stop: list[str] | None = Field(default=None, alias="stop_sequences")
    """Stop sequences of the answer."""
    timeout: float | None = Field(
        default=None, gt=0, validation_alias=AliasChoices("timeout", "request_timeout")
    )
    """Seconds a generation call (a step, the answer) may take, per attempt (default 600)."""
    judge_timeout: float = Field(default=60.0, gt=0)
    """Seconds a call generating at most one token (a judge's reading, prompt logprobs,
    tokenizing) may take, per attempt."""
    connect_timeout: float = Field(default=10.0, gt=0)
    """Seconds to open a connection: an unreachable host fails fast."""
    deadline: float | None = Field(default=None, gt=0)
    """Seconds a whole call may take (``None``: no limit); past it the run and its server
    calls are cancelled and :class:`~.errors.DeadlineError` is raised. Also per call
    (``invoke(..., deadline=30)``). With a checkpointer, repeating the call resumes it."""
    max_retries: int = Field(default=2, ge=0)
    """Retries of transient server errors (honouring the server's ``Retry-After``)."""
    max_concurrency: int | None = Field(default=None, gt=0)
    """Requests in flight at once to each server from this model (``None``: no limit); more
    wait their turn (``abatch`` of many prompts)."""
    streaming: bool = False
    """Stream by default in ``invoke`` (kept for compatibility; ``stream()`` always streams)."""
    stream_usage: bool = True
    """Whether a stream's last chunk carries ``usage_metadata`` (as ``ChatOpenAI``'s default);
    also per call (``stream(..., stream_usage=False)``). ``invoke`` always reports usage."""
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    """More request fields for every chat-completions call to both servers (steps, the
    judge's readings, the answer), as ``ChatOpenAI``'s: a keyword argument that is not a field
    lands here, with a warning. Fields SpecReason sets per call (``temperature``,
    ``max_tokens``, ``tools``, ...) are refused with a :class:`~.errors.ConfigError`."""
    extra_body: dict[str, Any] | None = None
    """Request fields for vLLM (``repetition_penalty``, ``chat_template_kwargs``, ``min_p``,
    ...), sent with every chat-completions call to both servers, after ``model_kwargs``; also
    per call (``invoke(..., extra_body={...})``, on top of these)."""
    default_headers: dict[str, str] | None = None
    """Headers sent with every request to both servers."""
    http_client: Any = Field(default=None, exclude=True)
    """An ``httpx2.AsyncClient`` for the sync API's requests (``invoke``, ``stream``: they run
    on async code, on a private event-loop thread). A client's pool serves one event loop:
    see :class:`~.endpoint.OpenAIEndpoint`."""
    http_async_client: Any = Field(default=None, exclude=True)
    """An ``httpx2.AsyncClient`` for the async API's requests (``ainvoke``, ``astream``), on
    the loop that first uses it; used from another loop it raises
    :class:`~.errors.ConfigError`."""

    draft_endpoint: SkipValidation[Endpoint | None] = Field(default=None, exclude=True)
    """The draft server as an :class:`~.endpoint.Endpoint` (a pool of replicas, a client with
    its own transport, a test double); wins over ``draft_url``."""
    base_endpoint: SkipValidation[Endpoint | None] = Field(default=None, exclude=True)
    """The base server as an :class:`~.endpoint.Endpoint`; wins over ``base_url``."""
    custom_judge: SkipValidation[Judge | None] = Field(default=None, exclude=True)
    """A :class:`~.judges.Judge` object that decides instead of the named ``judge`` (for
    example the Arbitrage router's judge, :mod:`langchain_specreason.arbitrage`)."""
    tokenizer: str | None = Field(default_factory=from_env("SPECREASON_TOKENIZER", default=None))
    """A folder holding the base model's ``tokenizer.json`` (and its chat template), to count
    tokens on this machine. Default: the model folder the base server reports (vLLM's
    ``root``) when it exists here; else counts ask the server (``/tokenize``)."""
    config_file: str | None = None
    """A TOML file whose ``[specreason]`` table sets the knobs (``specreason tune`` writes
    one); arguments given here win over the file."""
    checkpointer: Any = Field(default=None, exclude=True)
    """A LangGraph checkpointer (``InMemorySaver()``, a SQLite or Postgres saver). With it, a
    call on a thread (``thread_id="t1"`` as a call argument, or
    ``config={"metadata": {"thread_id": "t1"}}``) checkpoints every step, and the same call
    repeated after a crash resumes where it stopped instead of starting over."""

    # What the model builds from its fields, and learns (all reset by ``_forget``):
    _graphs: OrderedDict[Hashable, SpecReasonGraph] = PrivateAttr(default_factory=OrderedDict)
    _endpoints: dict[str, Endpoint] = PrivateAttr(default_factory=dict)
    _breaker: Breaker | None = PrivateAttr(default=None)
    _discovered: bool = PrivateAttr(default=False)
    _counts: dict[str, int] = PrivateAttr(default_factory=dict)
    _local: list[LocalCounter | None] = PrivateAttr(default_factory=list)
    # A fact about the fields (no ``profile`` given: the model's own, completed when learned)
    _own_profile: bool = PrivateAttr(default=False)

    def _forget(self, own_profile: bool) -> None:
        """Drop every private attribute built from the fields or learned from the servers.

        Graphs, endpoints, the draft's breaker, discovery, token-count caches, and a private
        attribute a subclass adds: each back to its default. An own profile loses the window
        it learned. The one reset :meth:`replace` and :meth:`model_copy` use.
        """
        for name, private in type(self).__private_attributes__.items():
            setattr(self, name, private.get_default(call_default_factory=True))
        self._own_profile = own_profile
        if own_profile:
            self.__dict__["profile"] = self._resolve_model_profile()

    def replace(self, **changes: Any) -> Self:
        """A validated copy with ``changes`` (knobs or fields, by name or alias).

        It builds its own graphs, breaker and caches; the endpoints (and their clients) are
        this model's unless a field they are built from changed (:data:`~.wiring.
        ENDPOINT_FIELDS`: URLs, models, keys, limits, request fields, headers, clients).
        """
        given = dict(self.__dict__)
        if self._own_profile:
            given.pop("profile", None)  # the copy's own, learned anew (its servers may differ)
        changed = {field_name(type(self), name) for name in changes}
        kept = {k: v for k, v in given.items() if k in type(self).model_fields and k not in changed}
        copy = type(self)(**kept, **changes)
        if self._endpoints and same_endpoints(self.__dict__, copy.__dict__):
            copy._endpoints = self._endpoints  # the same servers: keep their clients too
        return copy

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with ``update``, all it builds is built anew from the new fields.

        (Pydantic copies private attributes as they are: the copy would share the original's
        graphs, endpoints, token counts and tokenizer, and write into its caches.)
        """
        copy = super().model_copy(update=update, deep=deep)
        if update:
            given = update.get("profile", None) is not None
            copy._forget(own_profile=self._own_profile and not given)
        return copy

    def _get_llm_string(self, stop: list[str] | None = None, **kwargs: Any) -> str:
        """LangChain's cache key: every serialized option, and what does not serialize.

        A custom judge and given endpoints change the answer: they count by identity.
        """
        parts = [super()._get_llm_string(stop=stop, **kwargs)]
        for name in ("custom_judge", "draft_endpoint", "base_endpoint"):
            given = getattr(self, name)
            if given is not None:
                kind = type(given)
                parts.append(f"{name}={kind.__module__}.{kind.__qualname__}@{id(given):x}")
        return "---".join(parts)

    @classmethod
    def is_lc_serializable(cls) -> bool:
        """``dumpd`` / ``load`` round-trip the model (keys travel as secrets, not values)."""
        return True

    @classmethod
    def get_lc_namespace(cls) -> list[str]:
        """Where ``load`` finds the class: ``["langchain_specreason", "chat_model"]``."""
        return ["langchain_specreason", "chat_model"]

    @property
    def lc_secrets(self) -> dict[str, str]:
        """The keys' environment variables: ``dumpd`` writes these names, never the keys."""
        return {"api_key": "SPECREASON_BASE_API_KEY", "draft_api_key": "SPECREASON_DRAFT_API_KEY"}

    def __repr_args__(self) -> Any:
        """Fields as ``repr`` shows them: no header secret, no password in a URL."""
        for name, value in super().__repr_args__():
            yield name, redacted(name, value)

    @field_serializer("default_headers", "draft_url", "base_url")
    def _serialize_redacted(self, value: Any, info: Any) -> Any:
        return redacted(info.field_name, value)

    @field_validator("draft_url", "base_url")
    @classmethod
    def _check_url(cls, value: str | None, info: Any) -> str | None:
        """An http(s) URL with a host, or a ConfigError naming the field (not an outage later)."""
        return check_url(info.field_name, value)

    def endpoint(self, role: Literal["draft", "base"]) -> Endpoint:
        """The endpoint of ``role``: the one given, else built once from the URLs and keys."""
        if not self._endpoints:
            self._endpoints = build_endpoints({f: getattr(self, f) for f in ENDPOINT_FIELDS})
        return self._endpoints[role]
