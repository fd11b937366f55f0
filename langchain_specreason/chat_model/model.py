"""ChatSpecReason: a LangChain chat model that answers through the SpecReason graph.

The class holds the fields, their docs and thin methods; the work is in the modules next to
it, as functions of plain values: ``run.py`` (a call's run), ``batch.py``, ``wiring.py`` (the
servers and graphs), ``discovery.py``, ``arguments.py``, ``structured.py``, ``tokens.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.chat_models import BaseChatModel, LangSmithParams
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.utils import from_env, get_pydantic_field_names, secret_from_env
from langchain_core.utils.utils import _build_model_kwargs
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
from ..endpoint import Endpoint, OpenAIEndpoint
from ..endpoint.server import check_extra_body
from ..errors import ConfigError
from ..formats import check_thinking_switch, get_format
from ..graph import SpecReasonGraph
from ..judges import Judge
from ..sync_bridge import iter_sync, on_bridge_thread, run_sync
from .arguments import (
    ALIASES,
    call_config,
    check_url,
    redacted,
    refuse_openai_only,
    refuse_other_model,
)
from .batch import as_completed, in_order
from .discovery import ask, capabilities, discovery_targets, with_window
from .local_tokens import LocalCounter
from .messages import plain_reply
from .run import Call, Parent, collect, events
from .structured import Method, openai_tool_choice, openai_tools, parsed, structured_request
from .tokens import find_local_counter, messages_count, text_count
from .wiring import ENDPOINT_FIELDS, build_endpoints, build_graph


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

    _graphs: dict[tuple[SpecReasonConfig, str], SpecReasonGraph] = PrivateAttr(default_factory=dict)
    _endpoints: dict[str, Endpoint] = PrivateAttr(default_factory=dict)
    _discovered: bool = PrivateAttr(default=False)
    _own_profile: bool = PrivateAttr(default=True)
    _counts: dict[str, int] = PrivateAttr(default_factory=dict)
    _local: list[LocalCounter | None] = PrivateAttr(default_factory=list)

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
        check_thinking_switch(
            get_format(self.family), {**self.model_kwargs, **(self.extra_body or {})}
        )

    @model_validator(mode="before")
    @classmethod
    def _build_extra(cls, values: dict[str, Any]) -> Any:
        """Unknown keyword arguments go to ``model_kwargs`` with a warning, as ChatOpenAI's.

        ``config_file``: its ``[specreason]`` settings fill the knobs not given as arguments.
        """
        if isinstance(values, dict):
            refuse_openai_only(values, get_pydantic_field_names(cls))
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

    # -- wiring (wiring.py) ---------------------------------------------------------------
    def spec_config(self, **overrides: Any) -> SpecReasonConfig:
        """The :class:`SpecReasonConfig` these fields describe, with a call's ``overrides``.

        ``overrides`` are the SpecReason knobs among a call's keyword arguments (bound with
        ``.bind(temperature=0)`` or passed to ``invoke``), ``max_tokens`` included; the other
        arguments are not knobs and are left alone.
        """
        settings = {name: getattr(self, name) for name in SpecReasonConfig.model_fields}
        return call_config(settings, overrides, self.max_tokens)

    def endpoint(self, role: Literal["draft", "base"]) -> Endpoint:
        """The endpoint of ``role``: the one given, else built once from the URLs and keys."""
        if not self._endpoints:
            self._endpoints = build_endpoints({f: getattr(self, f) for f in ENDPOINT_FIELDS})
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
        check_thinking_switch(get_format(self.family), extra)
        key = (config, json.dumps(extra, sort_keys=True, default=str))
        if key not in self._graphs:
            self._graphs[key] = build_graph(
                self.endpoint("draft"),
                self.endpoint("base"),
                extra,
                config=config,
                judge=self.custom_judge,
                family=self.family,
                checkpointer=self.checkpointer,
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

    # -- discovery (discovery.py) ---------------------------------------------------------
    def _resolve_model_profile(self) -> ModelProfile | None:
        """What the model can do.

        ``max_input_tokens`` joins once the servers' window is known (:meth:`_discover`, or
        after the first call).
        """
        return capabilities(reasoning_output=get_format(self.family).thinking_end is not None)

    def _discovery_targets(self, on_caller_loop: bool) -> list[OpenAIEndpoint]:
        """The servers to ask for their models and windows, once (later calls get none)."""
        if self._discovered:
            return []
        self._discovered = True
        try:
            endpoints = [self.endpoint("draft"), self.endpoint("base")]
        except ConfigError:
            return []
        return discovery_targets(endpoints, on_caller_loop)

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
        if servers:
            self._learn_window(run_sync(ask(servers)))

    async def _adiscover(self) -> None:
        """:meth:`_discover` on the caller's event loop: awaited, the loop keeps running."""
        servers = self._discovery_targets(on_caller_loop=True)
        if servers:
            self._learn_window(await ask(servers))

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
        if self._own_profile and self.profile is not None:
            profile = with_window(self.profile, windows)
            if profile is not None:
                self.profile = profile

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

    # -- tools and structured output (structured.py) --------------------------------------
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
        formatted = openai_tools(tools, strict)
        choice = openai_tool_choice(tool_choice)
        return super().bind(tools=formatted, tool_choice=choice, **kwargs)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type | None = None,
        *,
        method: Method = "json_schema",
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
        tools, arguments, parser = structured_request(schema, method, strict, kwargs)
        llm = self.bind_tools(tools, **arguments) if tools is not None else self.bind(**arguments)
        return parsed(llm, parser, include_raw)

    # -- token counting (tokens.py) -------------------------------------------------------
    def _base_or_none(self) -> Endpoint | None:
        """The base server, or ``None`` when none is configured (counts are then estimates)."""
        try:
            return self.endpoint("base")
        except ConfigError:
            return None

    def get_num_tokens_from_messages(
        self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        """Tokens of any message list as the base server's chat template renders it.

        Exact, by the base model's own tokenizer and chat template on this machine (see
        :attr:`tokenizer`: no request); else by one ``/tokenize`` request (no retry) per
        distinct list, remembered (1,024 lists), so ``trim_messages(..., token_counter=llm)``
        asks once per candidate; with no server configured or reachable, an offline estimate
        (tiktoken). Needs no user message.
        """
        return messages_count(
            self._base_or_none, messages, tools, self._counts, self._local_counter
        )

    def get_num_tokens(self, text: str) -> int:
        """Tokens of ``text`` (exact by the local tokenizer, or through the server)."""
        return text_count(self._base_or_none(), text, self._local_counter())

    def _local_counter(self) -> LocalCounter | None:
        """The base model's tokenizer on this machine (see :attr:`tokenizer`), found once."""
        if not self._local:
            body = {**self.model_kwargs, **(self.extra_body or {})}
            counter, final = find_local_counter(
                self.tokenizer, self._base_or_none(), body.get("chat_template_kwargs")
            )
            if not final:
                return None
            self._local.append(counter)
        return self._local[0]

    # -- generation (run.py) --------------------------------------------------------------
    async def _events(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        run_manager: Parent | None,
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
        if kwargs.get("model"):
            refuse_other_model(kwargs["model"], self.model_name)
        if stop:
            kwargs = {**kwargs, "stop": stop}
        start = time.perf_counter()
        call = Call(
            graph=self._graph_for(self.spec_config(**kwargs), kwargs.get("extra_body")),
            draft=self.endpoint("draft"),
            base=self.endpoint("base"),
            draft_model=self.draft_model,
            base_model=self.base_model,
            think=think,
            bounded=(kwargs.get("max_tokens") or self.max_tokens) is not None,
            deadline=kwargs.get("deadline", self.deadline),
            checkpointed=self.checkpointer is not None,
            v1=self.output_version == "v1",
            stream_usage=answer is not None or kwargs.get("stream_usage", self.stream_usage),
            stop=self.stop,
            start=start,
        )
        run = events(call, messages, run_manager, kwargs, answer, self._learn_window)
        async with aclosing(run) as chunks:
            async for chunk in chunks:
                yield chunk

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
        parent: Parent | None,
        kwargs: dict[str, Any],
    ) -> ChatResult:
        answer: list[AIMessage] = []
        return await collect(self._events(messages, stop, parent, kwargs, answer), answer)

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

    # -- batches (batch.py) ---------------------------------------------------------------
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
        replies = self.abatch_as_completed(
            inputs, config, return_exceptions=return_exceptions, **kwargs
        )
        return await in_order(replies, len(inputs))

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

    def abatch_as_completed(  # type: ignore[override]
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
        return as_completed(self.ainvoke, inputs, config, return_exceptions, kwargs)
