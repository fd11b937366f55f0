"""ChatSpecReason: a LangChain chat model that answers through the SpecReason graph."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.chat_models import BaseChatModel, LangSmithParams
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, RemoveMessage
from langchain_core.messages.ai import UsageMetadata, add_usage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.output_parsers.openai_tools import (
    JsonOutputKeyToolsParser,
    PydanticToolsParser,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import (
    Runnable,
    RunnableConfig,
    RunnableMap,
    RunnablePassthrough,
)
from langchain_core.runnables.config import get_config_list
from langchain_core.tools import BaseTool
from langchain_core.utils import from_env, get_pydantic_field_names, secret_from_env
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_core.utils.pydantic import is_basemodel_subclass
from langchain_core.utils.utils import _build_model_kwargs
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    SkipValidation,
    field_serializer,
    field_validator,
    model_validator,
)

from ..config import DEFAULT_JUDGE, SpecReasonConfig, read_config_file
from ..endpoint import (
    Endpoint,
    OpenAIEndpoint,
    WindowedEndpoint,
    endpoint_pair,
)
from ..endpoint.extra_body import WithExtraBody
from ..endpoint.routing import routing_key
from ..endpoint.server import check_extra_body
from ..errors import ConfigError, EndpointError, redact_url
from ..events import Event
from ..formats import get_format
from ..graph import SpecReasonGraph, create_specreason_graph
from ..graph.tracing import CallUsage
from ..judges import Judge
from ..state import AnswerOptions, SpecReasonInput
from ..stats import SpecReasonStats
from ..sync_bridge import iter_sync, on_bridge_thread, run_sync
from .arguments import ALIASES, _redacted, _refuse_openai_only
from .messages import plain_reply, step_chunk
from .resume import same_turns, thread_id
from .run import _known_window, _until
from .structured import closed_if_no_parameters, to_response_format
from .tokens import count_text, countable, tiktoken_estimate

_Parent = AsyncCallbackManagerForLLMRun | CallbackManagerForLLMRun
"""The chat model's run: its handlers, tags and metadata parent the graph's child runs."""


class ChatSpecReason(BaseChatModel, SpecReasonConfig):
    """Chat model that reasons with SpecReason over a draft and a base vLLM server.

    A small draft model writes each reasoning step; the base model scores it in one forward
    pass and rewrites only the steps that score below ``threshold``; then the base model writes
    the answer. Drop it in wherever a chat model goes: chains, RAG, LangGraph agents.

    Setup:
        Start two OpenAI-compatible servers (e.g. ``specreason serve --profile cpu``) and
        export their URLs:

        .. code-block:: bash

            pip install langchain-specreason
            export SPECREASON_DRAFT_URL=http://127.0.0.1:8201/v1
            export SPECREASON_BASE_URL=http://127.0.0.1:8202/v1

    Key init args — SpecReason:
        judge: str
            What keeps or rejects a draft step (env ``SPECREASON_JUDGE``): ``score`` (the base
            model rates it 0-9), ``likelihood`` (the base model's log-probability of its
            tokens), ``confidence`` (the draft's own), ``arithmetic`` (its equations redone),
            or a cascade such as ``arithmetic+likelihood``. ``specreason bench judges``
            measures them; the README gives the numbers behind the default.
        threshold: float
            ``score`` judge: keep a draft step when the base model scores it at least this
            (0-9; 10 rewrites every step). ``likelihood_threshold`` and
            ``confidence_threshold`` are the log-probability judges' thresholds.
        budget: int
            Token budget of the reasoning (the trace).
        family: str
            ``"instruct"`` (the reply is the reasoning) or ``"think"`` (``<think>`` models).

    Key init args — completion:
        temperature: float
            Sampling temperature of steps and answer.
        max_tokens: Optional[int]
            Bound on the kept reasoning plus the answer (see Token usage).
        stop: Optional[list[str]]
            Stop sequences of the answer.

    Key init args — client:
        draft_url, base_url: str
            OpenAI-compatible base URLs (env ``SPECREASON_DRAFT_URL`` / ``SPECREASON_BASE_URL``).
        draft_model, base_model: Optional[str]
            Served model names (default: the one model each server lists).
        api_key, draft_api_key: Optional[SecretStr]
            Keys (env ``SPECREASON_BASE_API_KEY`` / ``SPECREASON_DRAFT_API_KEY``).
        timeout: Optional[float]
            Seconds per server call.
        max_retries: int
            Retries of transient server errors (connection, 408, 429, 5xx).
        model_kwargs, extra_body: dict
            More request fields for every chat request to both servers (vLLM's
            ``repetition_penalty``, ``chat_template_kwargs``, ...); ``extra_body`` also per call.
        default_headers: dict
            Headers of every request.
        http_client, http_async_client: httpx2.AsyncClient
            The clients the openai SDK sends through, for sync and async calls (one event
            loop each).
        stream_usage: bool
            Usage on a stream's last chunk (default ``True``).

    Instantiate:
        .. code-block:: python

            from langchain_specreason import ChatSpecReason

            llm = ChatSpecReason(budget=1024, temperature=0)   # default judge
            paper = ChatSpecReason(judge="score", threshold=7, judge_wording="reference")

    Invoke:
        .. code-block:: python

            llm = ChatSpecReason(budget=64, temperature=0)
            msg = llm.invoke([("user", "What is 12*7? Think step by step.")])
            msg.content
            # 'To solve the problem of finding 12 multiplied by 7, we can follow these
            # steps:\n\n1. Identify the numbers involved: 12 and 7.\n2. Multiply the numbers
            # together: 12 * 7 = 84.\n\nTherefore, the answer to the problem is 84.'
            llm.model_name  # 'qwen2.5-coder-0.5b': the base model's served name

    Stream:
        .. code-block:: python

            for chunk in llm.stream("What is 12*7?"):
                print(chunk.content, end="", flush=True)

        Steps arrive as soon as they join the trace (as ``content`` for the instruct family,
        as ``additional_kwargs["reasoning_content"]`` for the think family), then the answer
        tokens as the base server streams them.

    Async:
        .. code-block:: python

            msg = await llm.ainvoke("What is 12*7?")
            async for chunk in llm.astream("What is 12*7?"):
                ...
            msgs = await llm.abatch(["2+2?", "3*3?"])

    Structured output:
        .. code-block:: python

            from pydantic import BaseModel

            class Product(BaseModel):
                name: str
                price: float

            llm.with_structured_output(Product).invoke("A pen costs 3 dollars.")

        ``json_schema`` (default) and ``json_mode`` send ``response_format`` with the answer
        call; ``function_calling`` forces a tool call.

    Tools:
        .. code-block:: python

            from langchain_core.tools import tool

            @tool
            def multiply(a: int, b: int) -> int:
                \"\"\"Multiply two integers.\"\"\"
                return a * b

            msg = llm.bind_tools([multiply]).invoke("What is 123 * 456?")
            msg.tool_calls  # [{'name': 'multiply', 'args': {'a': 123, 'b': 456}, ...}]

        The answer phase is written by the base model with the tools (vLLM's tool-call parser
        on the base server; the serve profiles enable it). Streamed, the calls arrive as
        ``tool_call_chunks`` as the server sends them. A call the model wrote as text (bare
        JSON, a fenced block) is read back when the server parsed none.

    Token usage:
        .. code-block:: python

            from langchain_core.callbacks import get_usage_metadata_callback

            with get_usage_metadata_callback() as cb:
                msg = llm.invoke("What is 2+2?", max_tokens=24)
            msg.usage_metadata
            # {'input_tokens': 120, 'output_tokens': 22, 'total_tokens': 142,
            #  'input_token_details': {'cache_read': 32}}
            cb.usage_metadata
            # {'qwen2.5-coder-0.5b': {'input_tokens': 120, 'output_tokens': 22, ...}}

        Every server call's tokens, counted once (the callback reports the same total).
        ``max_tokens`` bounds the kept reasoning plus the answer: the reasoning gets at most
        ``max_tokens`` less the answer's share (half, at most ``answer_max_tokens``) within
        ``budget``, the answer the rest (``finish_reason="length"`` when it cut).
        (Outputs above: the ``cpu-test`` pair, SmolLM2-135M draft, Qwen2.5-Coder-0.5B base.)

    Reasoning:
        The steps are ``content`` for the ``instruct`` family; for the ``think`` family, and
        with JSON output, they are ``additional_kwargs["reasoning_content"]``, a leading
        ``reasoning`` block of ``content_blocks`` (``response_metadata["model_provider"]`` is
        ``"specreason"``).

    JSON mode:
        .. code-block:: python

            msg = llm.bind(response_format={"type": "json_object"}).invoke(
                'Return {"answer": 12*7} as JSON.'
            )
            msg.content  # '{"answer": 84}'
            [b["type"] for b in msg.content_blocks]  # ['reasoning', 'text']

    Response metadata:
        .. code-block:: python

            msg.response_metadata["specreason"]   # steps accepted / rewritten, tokens, seconds
            msg.response_metadata["tokens_by_model"]  # {"draft": ..., "base": ...}
            msg.usage_metadata  # input / output / total, reasoning tokens in output details
    """

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
    ``likelihood``, ``confidence``, ``arithmetic``, or a cascade such as
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
    config_file: str | None = None
    """A TOML file whose ``[specreason]`` table sets the knobs (``specreason tune`` writes
    one); arguments given here win over the file."""
    checkpointer: Any = Field(default=None, exclude=True)
    """A LangGraph checkpointer (``InMemorySaver()``, a SQLite or Postgres saver). With it, a
    call on a thread (``thread_id="t1"`` as a call argument, or
    ``config={"metadata": {"thread_id": "t1"}}``) checkpoints every step, and the same call
    repeated after a crash resumes where it stopped instead of starting over."""

    _graphs: dict[tuple[SpecReasonConfig, str], SpecReasonGraph] = PrivateAttr(default_factory=dict)
    _endpoints: dict[str, Endpoint] = PrivateAttr(default_factory=dict)
    _discovered: bool = PrivateAttr(default=False)
    _own_profile: bool = PrivateAttr(default=True)
    _counts: dict[str, int] = PrivateAttr(default_factory=dict)

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
            yield name, _redacted(name, value)

    @field_serializer("default_headers", "draft_url", "base_url")
    def _serialize_redacted(self, value: Any, info: Any) -> Any:
        return _redacted(info.field_name, value)

    @field_validator("draft_url", "base_url")
    @classmethod
    def _check_url(cls, value: str | None, info: Any) -> str | None:
        """An http(s) URL with a host, or a ConfigError naming the field (not an outage later)."""
        if value is None:
            return None
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - a bad port raises here
        except ValueError as exc:
            raise ValueError(
                f"{info.field_name}: malformed URL {redact_url(value)!r} ({exc})"
            ) from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"{info.field_name}: {redact_url(value)!r} is not an http(s) URL with a host "
                "(e.g. http://127.0.0.1:8202/v1)"
            )
        return value

    @property
    def model_name(self) -> str | None:
        """The base model's served name, as ``ChatOpenAI.model_name``.

        ``base_model``, else the one model the base server lists (asked once; ``None`` if it
        cannot be asked).
        """
        if self.base_model:
            return self.base_model
        self._discover()
        return getattr(self._endpoints.get("base"), "model", None)

    @property
    def model(self) -> str | None:
        """Same as :attr:`model_name` (``ChatOpenAI.model``)."""
        return self.model_name

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # SpecReasonConfig's: a bad knob is a ConfigError
        self._own_profile = kwargs.get("profile") is None
        self.spec_config()  # max_tokens, the one knob checked outside the fields
        get_format(self.family)
        check_extra_body(self.model_kwargs, "model_kwargs")
        check_extra_body(self.extra_body)

    @model_validator(mode="before")
    @classmethod
    def _build_extra(cls, values: dict[str, Any]) -> Any:
        """Unknown keyword arguments go to ``model_kwargs`` with a warning, as ChatOpenAI's.

        ``config_file``: its ``[specreason]`` settings fill the knobs not given as arguments.
        """
        if isinstance(values, dict):
            _refuse_openai_only(values, get_pydantic_field_names(cls))
            if values.get("config_file"):
                values = {**read_config_file(values["config_file"]), **values}
            env = SpecReasonConfig.from_env(os.environ)  # SPECREASON_<FIELD>: a bad one fails
            values = {**{k: getattr(env, k) for k in env.model_fields_set}, **values}
            values = _build_model_kwargs(values, get_pydantic_field_names(cls) | ALIASES)
        return values

    def replace(self, **changes: Any) -> ChatSpecReason:
        """A validated copy with ``changes`` (knobs or fields).

        The endpoints, checkpointer, URLs, keys and clients given to this model are kept.
        """
        kept = {
            name: getattr(self, name) for name in type(self).model_fields if name not in changes
        }
        copy = type(self)(**{**kept, **changes})
        if not any(k.endswith(("_url", "_endpoint", "api_key", "_model")) for k in changes):
            copy._endpoints = self._endpoints  # the same servers: keep their clients too
        return copy

    # -- wiring ---------------------------------------------------------------------------
    def spec_config(self, **overrides: Any) -> SpecReasonConfig:
        """The :class:`SpecReasonConfig` these fields describe, with a call's ``overrides``.

        ``overrides`` are the SpecReason knobs among a call's keyword arguments (bound with
        ``.bind(temperature=0)`` or passed to ``invoke``), ``max_tokens`` included; the other
        arguments are not knobs and are left alone.
        """
        settings = {name: getattr(self, name) for name in SpecReasonConfig.model_fields}
        settings.update({k: v for k, v in overrides.items() if k in SpecReasonConfig.model_fields})
        total = overrides.get("max_tokens") or self.max_tokens
        if total is not None:  # reasoning + answer <= max_tokens (see the field)
            if total < 2:
                raise ConfigError(
                    f"max_tokens bounds the reasoning plus the answer; at least 2, got {total}"
                )
            share = min(int(settings["answer_max_tokens"]), max(1, total // 2))
            settings["budget"] = min(int(settings["budget"]), total - share)
            settings["answer_max_tokens"] = total - settings["budget"]
        return SpecReasonConfig(**settings)

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> ChatSpecReason:
        """A copy; with ``update``, its endpoints and graphs are built anew from the new fields.

        (Pydantic copies private attributes as they are: a copy with another ``base_url`` or
        judge would otherwise keep calling the servers, and running the graph, of the model
        it was copied from once that model had been used.)
        """
        copy = super().model_copy(update=update, deep=deep)
        if update:
            copy._graphs = {}
            copy._endpoints = {}
            copy._discovered = False
        return copy

    def endpoint(self, role: Literal["draft", "base"]) -> Endpoint:
        """The endpoint of ``role``: the one given, else built once from the URLs and keys."""
        if not self._endpoints:
            for name in ("draft", "base"):
                if getattr(self, f"{name}_endpoint") is None and not getattr(self, f"{name}_url"):
                    raise ConfigError(
                        f"no {name} server: pass {name}_url= (or set "
                        f"SPECREASON_{name.upper()}_URL) or {name}_endpoint="
                    )
            draft, base = endpoint_pair(
                self.draft_url or "http://unused/v1",
                self.base_url or "http://unused/v1",
                api_key=self.api_key,
                draft_api_key=self.draft_api_key,
                draft_model=self.draft_model,
                base_model=self.base_model,
                timeout=self.timeout or 600.0,
                judge_timeout=self.judge_timeout,
                connect_timeout=self.connect_timeout,
                max_retries=self.max_retries,
                max_concurrency=self.max_concurrency,
                extra_body={**self.model_kwargs, **(self.extra_body or {})},
                default_headers=self.default_headers,
                http_client=self.http_client,
                http_async_client=self.http_async_client,
            )
            self._endpoints = {
                "draft": self.draft_endpoint or draft,
                "base": self.base_endpoint or base,
            }
        return self._endpoints[role]

    @property
    def graph(self) -> SpecReasonGraph:
        """The compiled SpecReason graph this model runs (with its own settings)."""
        return self._graph_for(self.spec_config())

    def _graph_for(
        self, config: SpecReasonConfig, extra_body: dict[str, Any] | None = None
    ) -> SpecReasonGraph:
        """The graph of ``config`` and a call's ``extra_body``, built once per distinct pair.

        With an ``extra_body`` the graph's endpoints add it to each chat request.
        """
        extra = check_extra_body(extra_body)
        key = (config, json.dumps(extra, sort_keys=True, default=str))
        if key not in self._graphs:
            draft, base = self.endpoint("draft"), self.endpoint("base")
            if extra:
                draft, base = WithExtraBody(draft, extra), WithExtraBody(base, extra)
            self._graphs[key] = create_specreason_graph(
                draft,
                base,
                config=config,
                judge=self.custom_judge,
                family=self.family,
                # None would let LangGraph lend the run a parent graph's checkpointer (this
                # model called inside a node): a chat model call is not a subgraph
                checkpointer=self.checkpointer if self.checkpointer is not None else False,
                name="specreason",
            )
        return self._graphs[key]

    @property
    def _llm_type(self) -> str:
        return "specreason"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "draft_url": self.draft_url,
            "base_url": self.base_url,
            "draft_model": self.draft_model,
            "base_model": self.base_model,
            "family": self.family,
            **self.spec_config().as_dict(),
        }

    def _resolve_model_profile(self) -> ModelProfile | None:
        """What the model can do.

        ``max_input_tokens`` joins once the servers' window is known (:meth:`_discover`, or
        after the first call).
        """
        return ModelProfile(
            text_inputs=True,
            text_outputs=True,
            image_inputs=False,
            audio_inputs=False,
            video_inputs=False,
            pdf_inputs=False,
            tool_calling=True,
            tool_choice=True,
            tool_call_streaming=True,
            structured_output=True,
            temperature=True,
            reasoning_output=get_format(self.family).thinking_end is not None,
        )

    def _discovery_targets(self, on_caller_loop: bool) -> list[OpenAIEndpoint]:
        """The servers to ask for their models and windows, once (later calls get none).

        On the sync API's loop a server with your own HTTP client is skipped (each client
        serves one event loop; asking would bind it to that loop).
        """
        if self._discovered:
            return []
        self._discovered = True
        try:
            endpoints = [self.endpoint("draft"), self.endpoint("base")]
        except ConfigError:
            return []
        return [
            e
            for e in endpoints
            if isinstance(e, OpenAIEndpoint)
            and (on_caller_loop or (e.http_client is None and e.http_async_client is None))
        ]

    def _discover(self) -> None:
        """Once, before the first sync call: ask the servers for their models and windows.

        For LangSmith's ``ls_model_name`` and ``profile["max_input_tokens"]``. One
        ``/v1/models`` request to each server built from a URL, no retry; a server that does
        not answer leaves them to be learned by the first call. Never on a thread whose event
        loop is running (that would block it): the async API asks with
        :meth:`_adiscover` instead.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            return  # an event loop runs here: the async entry points discover with await
        if self._discovered or on_bridge_thread():
            return  # done, or called on the sync API's own loop thread
        servers = self._discovery_targets(on_caller_loop=False)
        if not servers:
            return

        async def ask() -> None:
            await asyncio.gather(*(e.discover() for e in servers), return_exceptions=True)

        run_sync(ask())
        self._learn_window([e._window or None for e in servers])

    async def _adiscover(self) -> None:
        """:meth:`_discover` on the caller's event loop: awaited, the loop keeps running."""
        servers = self._discovery_targets(on_caller_loop=True)
        if servers:
            await asyncio.gather(*(e.discover() for e in servers), return_exceptions=True)
            self._learn_window([e._window or None for e in servers])

    async def agenerate(self, *args: Any, **kwargs: Any) -> Any:
        """As :meth:`BaseChatModel.agenerate`, after the first discovery (awaited)."""
        await self._adiscover()
        return await super().agenerate(*args, **kwargs)

    async def astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[AIMessageChunk]:
        """As :meth:`BaseChatModel.astream`, after the first discovery (awaited)."""
        await self._adiscover()
        async for chunk in super().astream(*args, **kwargs):
            yield chunk

    def _learn_window(self, windows: Sequence[int | None]) -> None:
        """``profile["max_input_tokens"]``: the smaller window of the servers, once known."""
        known = [w for w in windows if w]
        if known and self._own_profile and self.profile is not None:
            self.profile = ModelProfile(**{**self.profile, "max_input_tokens": min(known)})

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = LangSmithParams(
            ls_provider="specreason",
            # a per-call model= other than the base model's is refused (the run fails with a
            # ConfigError): the trace names what was asked, with that error
            ls_model_name=kwargs.get("model") or self.model_name or "base",
            ls_model_type="chat",
            ls_temperature=kwargs.get("temperature", self.temperature),
        )
        if max_tokens := kwargs.get("max_tokens", self.max_tokens):
            params["ls_max_tokens"] = max_tokens
        if stop := stop or kwargs.get("stop") or self.stop:
            params["ls_stop"] = stop
        return params

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | dict[str, Any] | bool | None = None,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools; the base model may call them in the answer phase.

        ``strict`` marks each tool's schema strict, as ``ChatOpenAI`` does (vLLM decodes a
        forced call under the schema whether strict or not). A tool without parameters is
        sent strict with ``additionalProperties: false`` (unless ``strict`` says otherwise), so
        its call's arguments are ``{}`` (small models otherwise fill them with the schema).
        """
        formatted = [
            closed_if_no_parameters(convert_to_openai_tool(t, strict=strict)) for t in tools
        ]
        if tool_choice is True or tool_choice == "any":  # as ChatOpenAI: True means required
            tool_choice = "required"
        elif tool_choice is False:
            tool_choice = None
        elif isinstance(tool_choice, str) and tool_choice not in ("auto", "none", "required"):
            tool_choice = {"type": "function", "function": {"name": tool_choice}}
        return super().bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type | None = None,
        *,
        method: Literal["function_calling", "json_mode", "json_schema"] = "json_schema",
        include_raw: bool = False,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """The answer as ``schema`` (a Pydantic class, a TypedDict, a JSON schema).

        As with ``ChatOpenAI``. The reasoning runs as usual; then the base model writes the answer:

        * ``json_schema`` (default, as ``ChatOpenAI``): under the server's JSON-schema grammar
          (``response_format={"type": "json_schema", ...}``; ``strict`` is sent with it);
        * ``json_mode``: as any JSON object (``{"type": "json_object"}``); say the keys in the
          prompt;
        * ``function_calling``: as a forced call of a tool named after the schema.

        With ``json_schema`` and ``json_mode`` the message's content is only the JSON and the
        trace is in ``additional_kwargs["reasoning_content"]`` (for both families).
        ``include_raw=True`` returns ``{"raw", "parsed", "parsing_error"}``.
        """
        if schema is None:
            raise ConfigError("with_structured_output needs a schema")
        if method == "json_mode" and strict is not None:
            raise ConfigError(
                "strict goes with method='json_schema' or 'function_calling', not 'json_mode'"
            )
        pydantic = isinstance(schema, type) and is_basemodel_subclass(schema)
        parser: Runnable[Any, Any]
        if method == "function_calling":
            name = convert_to_openai_tool(schema)["function"]["name"]
            llm = self.bind_tools(
                [schema],
                tool_choice=name,
                strict=strict,
                parallel_tool_calls=False,
                ls_structured_output_format={
                    "kwargs": {"method": method, "strict": strict},
                    "schema": schema,
                },
                **kwargs,
            )
            parser = (
                PydanticToolsParser(tools=[cast(type[BaseModel], schema)], first_tool_only=True)
                if pydantic
                else JsonOutputKeyToolsParser(key_name=name, first_tool_only=True)
            )
        elif method in ("json_schema", "json_mode"):
            if method == "json_schema":
                response_format = to_response_format(schema, strict=strict)
                ls_format = {"kwargs": {"method": method, "strict": strict}, "schema": schema}
            else:
                response_format = {"type": "json_object"}
                ls_format = {"kwargs": {"method": method}, "schema": schema}
            if kwargs.get("tools"):  # a call to a tool, or the JSON answer
                llm = self.bind_tools(
                    kwargs.pop("tools"),
                    response_format=response_format,
                    ls_structured_output_format=ls_format,
                    **kwargs,
                )
            else:
                llm = self.bind(
                    response_format=response_format, ls_structured_output_format=ls_format, **kwargs
                )
            parser = (
                PydanticOutputParser(pydantic_object=cast(type[BaseModel], schema))
                if pydantic
                else JsonOutputParser()
            )
        else:
            raise ConfigError(
                f"method must be 'json_schema', 'json_mode' or 'function_calling', got {method!r}"
            )
        if not include_raw:
            return llm | parser
        parsed = RunnablePassthrough.assign(
            parsed=itemgetter("raw") | parser, parsing_error=lambda _: None
        )
        fallback = RunnablePassthrough.assign(parsed=lambda _: None)
        return RunnableMap(raw=llm) | parsed.with_fallbacks(
            [fallback], exception_key="parsing_error"
        )

    # -- token counting -------------------------------------------------------------------
    def _server_count(
        self, count: Callable[[OpenAIEndpoint], Coroutine[Any, Any, int]]
    ) -> int | None:
        """A count by the base server (``/tokenize``); ``None`` when it cannot answer."""
        try:
            base = self.endpoint("base")
        except ConfigError:  # no server configured: an estimate
            return None
        if not isinstance(base, OpenAIEndpoint):
            return None
        try:
            return run_sync(count(base))
        except EndpointError:
            return None

    def get_num_tokens_from_messages(
        self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        """Tokens of any message list as the base server's chat template renders it.

        Exact, by one ``/tokenize`` request (no retry) per distinct list, remembered (1,024
        lists), so ``trim_messages(..., token_counter=llm)`` asks once per candidate; with no
        server configured or reachable, an offline estimate (tiktoken). Needs no user message.
        """
        conversation = countable(messages)
        if not conversation:
            return 0
        schemas = [convert_to_openai_tool(t) for t in tools] if tools else None
        key = json.dumps([conversation, schemas], sort_keys=True, default=str)
        if key not in self._counts:
            count = self._server_count(
                lambda base: base.count_tokens(conversation, tools=schemas, retry=False)
            )
            if count is None:  # no server: an estimate, not kept (the server may come back)
                return tiktoken_estimate(conversation)
            if len(self._counts) >= 1024:
                self._counts.pop(next(iter(self._counts)))
            self._counts[key] = count
        return self._counts[key]

    def get_num_tokens(self, text: str) -> int:
        """Tokens of ``text`` (exact through the server when reachable)."""
        count = self._server_count(lambda base: count_text(base, text, retry=False))
        if count is not None:
            return count
        return tiktoken_estimate([{"role": "user", "content": text}]) - 7

    # -- generation -----------------------------------------------------------------------
    def _answer_options(self, kwargs: dict[str, Any]) -> AnswerOptions:
        """How this call's answer is made, for the graph's answer node (:class:`AnswerOptions`)."""
        options: AnswerOptions = {}
        if kwargs.get("tools"):
            options["tools"] = kwargs["tools"]
            options["tool_choice"] = kwargs.get("tool_choice")
            if kwargs.get("parallel_tool_calls") is not None:
                options["parallel_tool_calls"] = bool(kwargs["parallel_tool_calls"])
        if kwargs.get("response_format"):
            options["response_format"] = to_response_format(kwargs["response_format"])
        stop = kwargs.get("stop") or self.stop
        if stop:
            options["stop"] = stop
        return options

    def _run_config(self, run_manager: _Parent | None, usage: CallUsage) -> RunnableConfig:
        """The graph's config: the caller's callbacks, and ``usage`` counting every call."""
        config: RunnableConfig = {"callbacks": [usage]}
        if run_manager is not None:
            handlers = [*run_manager.inheritable_handlers, usage]
            config["callbacks"] = AsyncCallbackManager(
                handlers=handlers,
                inheritable_handlers=handlers,
                parent_run_id=run_manager.run_id,
                tags=run_manager.inheritable_tags,
                inheritable_tags=run_manager.inheritable_tags,
                metadata=run_manager.inheritable_metadata,
                inheritable_metadata=run_manager.inheritable_metadata,
            )
        return config

    async def _events(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        run_manager: _Parent | None,
        kwargs: dict[str, Any],
        answer: list[AIMessage] | None = None,
    ) -> AsyncIterator[ChatGenerationChunk]:
        """Run the graph and turn its events into chunks; the last chunk carries metadata.

        ``answer``, when given, receives the graph's final message (its tool calls parsed
        whole, as a non-streaming call reports them); without it this is a stream, whose
        usage follows ``stream_usage``.
        """
        # the trace is reasoning for a think model, and for any model asked for JSON
        think = get_format(self.family).thinking_end is not None or bool(
            kwargs.get("response_format")
        )
        messages = [plain_reply(m) for m in messages]
        if kwargs.get("model") and kwargs["model"] != self.model_name:
            raise ConfigError(
                f"model={kwargs['model']!r} per call: this model's base model is "
                f"{self.model_name!r}; build another ChatSpecReason(model=...) (or "
                "model_copy(update={'base_model': ...})) to use another served model"
            )
        if stop:
            kwargs = {**kwargs, "stop": stop}
        start = time.perf_counter()
        state: dict[str, Any] = {}
        usage = CallUsage()  # every server call's tokens, by model
        config = self._run_config(run_manager, usage)
        # output_version="v1" numbers content blocks by runs of one type (LangChain counts
        # them as the chunks pass): the calls' blocks follow the text's, not overlap them
        step_kind = "reasoning" if think else "text"
        runs, kind, first_call = 0, "", None
        graph = self._graph_for(self.spec_config(**kwargs), kwargs.get("extra_body"))
        bounded = (kwargs.get("max_tokens") or self.max_tokens) is not None
        turns: list[BaseMessage | RemoveMessage] = list(messages)
        resume = False
        if self.checkpointer is not None:
            config["configurable"] = {"thread_id": thread_id(run_manager, kwargs)}
            saved = await graph.aget_state(config)
            # unfinished: a node to run, or one whose writes were saved but whose checkpoint
            # was not (the process died between them; LangGraph applies them on resume)
            resume = bool(saved.next or saved.tasks) and same_turns(
                saved.values.get("messages") or [], messages
            )
            if resume:  # the same call, interrupted: go on from its last step
                for record in saved.values.get("steps") or []:  # what it had already
                    runs, kind = (runs + 1, step_kind) if kind != step_kind else (runs, kind)
                    yield ChatGenerationChunk(message=step_chunk(record["text"], think))
            else:  # this call's conversation replaces the thread's
                turns = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]
        inputs = (
            None if resume else {"messages": turns, "answer_options": self._answer_options(kwargs)}
        )
        deadline = kwargs.get("deadline", self.deadline)
        # one routing key per run: behind vllm-router (consistent_hash) every call of the run
        # lands on one replica, whose prefix cache then serves the next judge call
        key = (config.get("configurable") or {}).get("thread_id") or uuid.uuid4().hex
        with routing_key(key):
            async for mode, item in _until(
                deadline,
                graph.astream(
                    cast(SpecReasonInput | None, inputs), config, stream_mode=["custom", "values"]
                ),
            ):
                if mode == "values":
                    state = cast(dict[str, Any], item)
                    continue
                event = cast(Event, item)
                if event["type"] == "step":
                    chunk, this = step_chunk(event["text"], think), step_kind
                elif event["type"] == "answer_delta":
                    chunk, this = AIMessageChunk(content=event["text"]), "text"
                elif event["type"] == "answer_tool_call":  # as the base server streams it
                    if first_call is None:
                        first_call = runs if self.output_version == "v1" else 0
                    chunk, this = (
                        AIMessageChunk(
                            content="",
                            tool_call_chunks=[
                                tool_call_chunk(
                                    name=event["name"],
                                    args=event["args"],
                                    id=event["id"],
                                    index=first_call + event["index"],
                                )
                            ],
                        ),
                        "tool_call_chunk",
                    )
                else:
                    continue
                runs, kind = (runs + 1, this) if kind != this else (runs, kind)
                yield ChatGenerationChunk(message=chunk)
        wall = time.perf_counter() - start
        self._learn_window(
            [
                await _known_window(e)
                for e in (self.endpoint("draft"), self.endpoint("base"))
                if isinstance(e, WindowedEndpoint)
            ]
        )
        final = state["messages"][-1]
        if answer is not None:
            answer.append(final)
        # the tool calls came as chunks of their argument text (answer_tool_call events):
        # LangChain parses them back, and unparsable arguments become invalid_tool_calls, as
        # with ChatOpenAI
        calls = final.tool_calls + final.invalid_tool_calls
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                usage_metadata=(
                    self._usage(state, think, usage.usage_metadata)
                    if answer is not None or kwargs.get("stream_usage", self.stream_usage)
                    else None
                ),
                response_metadata={
                    **self._metadata(state, wall, bool(calls), bounded),
                    "usage_by_model": dict(usage.usage_metadata),
                },
                chunk_position="last",
            )
        )

    def _usage(
        self, state: dict[str, Any], think: bool, by_model: dict[str, UsageMetadata]
    ) -> UsageMetadata:
        """The tokens of every server call of this call, totalled.

        Draft steps (those drafted ahead too), judge readings, rewrites and the answer;
        ``cache_read`` is the part of the prompts the servers' prefix caches held. The kept
        trace is the ``reasoning`` part.
        """
        usage = UsageMetadata(input_tokens=0, output_tokens=0, total_tokens=0)
        for counted in by_model.values():
            usage = add_usage(usage, counted)
        if think:
            usage["output_token_details"] = {
                **usage.get("output_token_details", {}),
                "reasoning": int(state.get("tokens_used") or 0),
            }
        return usage

    def _metadata(
        self, state: dict[str, Any], wall: float, tool_calls: bool, bounded: bool = False
    ) -> dict[str, Any]:
        stats = SpecReasonStats.from_state(state, wall_s=wall)
        finish = "tool_calls" if tool_calls else state.get("answer_finish") or "stop"
        if bounded and state.get("stop") == "budget" and finish == "stop":
            finish = "length"  # max_tokens cut the reasoning short (the answer came)
        return {
            # not "openai": langchain-core's OpenAI translator drops the reasoning block
            "model_provider": "specreason",
            "model_name": getattr(self.endpoint("base"), "model", None)
            or self.base_model
            or "base",
            "draft_model_name": getattr(self.endpoint("draft"), "model", None) or self.draft_model,
            "finish_reason": finish,
            "specreason": stats.as_dict(),
            "tokens_by_model": {"draft": stats.draft_tokens, "base": stats.base_tokens},
        }

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        # The base class fires on_llm_new_token for each chunk.
        async for chunk in self._events(messages, stop, run_manager, kwargs):
            yield chunk

    async def _collect(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        parent: _Parent | None,
        kwargs: dict[str, Any],
    ) -> ChatResult:
        total: ChatGenerationChunk | None = None
        answer: list[AIMessage] = []
        async for chunk in self._events(messages, stop, parent, kwargs, answer):
            total = chunk if total is None else total + chunk
        assert total is not None
        message = total.message
        return ChatResult(
            generations=[
                ChatGeneration(
                    message=AIMessage(
                        content=message.content,
                        additional_kwargs=message.additional_kwargs,
                        tool_calls=answer[-1].tool_calls,  # parsed whole: a broken call is invalid
                        invalid_tool_calls=answer[-1].invalid_tool_calls,
                        usage_metadata=getattr(message, "usage_metadata", None),
                        response_metadata=message.response_metadata,
                        id=message.id,
                    )
                )
            ]
        )

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return await self._collect(messages, stop, run_manager, kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return run_sync(self._collect(messages, stop, run_manager, kwargs))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from iter_sync(self._events(messages, stop, run_manager, kwargs))

    def batch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[AIMessage]:
        """Answer several inputs at once (``max_concurrency`` in ``config`` bounds them).

        Runs :meth:`abatch` on the sync API's event loop rather than ``invoke`` on a thread
        pool, so Ctrl-C cancels every run (and its server requests) instead of waiting for
        the threads to finish them; a run that fails cancels the others (see :meth:`abatch`).
        """
        if not inputs:
            return []
        return run_sync(self.abatch(inputs, config, return_exceptions=return_exceptions, **kwargs))

    async def abatch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[AIMessage]:
        """Answer several inputs at once (``max_concurrency`` in ``config`` bounds them).

        Unlike langchain-core's, when a run fails (and ``return_exceptions`` is off) the runs
        still going are cancelled before the error is raised, so none keeps its servers busy
        for an answer nobody will read.
        """
        if not inputs:
            return []
        replies: dict[int, AIMessage | Exception] = {}
        async for i, reply in self.abatch_as_completed(
            inputs, config, return_exceptions=return_exceptions, **kwargs
        ):
            replies[i] = reply
        return [cast(AIMessage, replies[i]) for i in range(len(inputs))]

    def batch_as_completed(  # type: ignore[override]
        self,
        inputs: Sequence[LanguageModelInput],
        config: RunnableConfig | Sequence[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> Iterator[tuple[int, AIMessage | Exception]]:
        """Yield (index, reply) of each input as its run ends.

        Runs :meth:`abatch_as_completed` on the sync API's event loop: Ctrl-C, or closing
        the iterator, cancels the runs still going.
        """
        if not inputs:
            return
        yield from iter_sync(
            self.abatch_as_completed(inputs, config, return_exceptions=return_exceptions, **kwargs)
        )

    async def abatch_as_completed(  # type: ignore[override]
        self,
        inputs: Sequence[LanguageModelInput],
        config: RunnableConfig | Sequence[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> AsyncIterator[tuple[int, AIMessage | Exception]]:
        """Yield (index, reply) of each input as its run ends (``max_concurrency`` bounds them).

        Unlike langchain-core's, the runs are cancelled when the iteration stops early
        (cancelled, closed, or an error raised), so none keeps its servers busy.
        """
        if not inputs:
            return
        configs = get_config_list(config, len(inputs))
        limit = configs[0].get("max_concurrency")
        gate = asyncio.Semaphore(limit) if limit else contextlib.nullcontext()

        async def one(i: int) -> tuple[int, AIMessage | Exception]:
            async with gate:
                try:
                    return i, cast(AIMessage, await self.ainvoke(inputs[i], configs[i], **kwargs))
                except Exception as exc:
                    if not return_exceptions:
                        raise
                    return i, exc

        tasks = [asyncio.ensure_future(one(i)) for i in range(len(inputs))]
        try:
            for finished in asyncio.as_completed(tasks):
                yield await finished
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
