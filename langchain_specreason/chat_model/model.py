"""ChatSpecReason: a LangChain chat model that answers through the SpecReason graph.

The class joins its rooms with thin methods: ``fields.py`` (the fields and their docs),
``tokens.py`` (counts), ``batch.py`` (batches that cancel), and functions of plain values in
``run.py``, ``wiring.py``, ``discovery.py``, ``arguments.py`` and ``structured.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import aclosing
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.chat_models import LangSmithParams
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils import get_pydantic_field_names
from langchain_core.utils.utils import _build_model_kwargs
from pydantic import (
    BaseModel,
    model_validator,
)

from ..config import SpecReasonConfig, read_config_file
from ..endpoint import OpenAIEndpoint
from ..endpoint.server import check_extra_body
from ..errors import ConfigError
from ..formats import check_thinking_switch, get_format
from ..graph import Breaker, SpecReasonGraph
from ..sync_bridge import iter_sync, on_bridge_thread, run_sync
from .arguments import (
    ALIASES,
    budget_cut,
    call_config,
    refuse_openai_only,
    refuse_other_model,
)
from .batch import CancellingBatches
from .discovery import ask, capabilities, discovery_targets, lazy_profile, with_window
from .messages import plain_reply
from .run import Call, Parent, collect, events
from .structured import Method, openai_tool_choice, openai_tools, parsed, structured_request
from .tokens import TokenCounting
from .wiring import build_graph, remembered


class ChatSpecReason(CancellingBatches, TokenCounting):
    r"""Chat model that reasons with SpecReason over a draft and a base vLLM server.

    A small draft model writes each reasoning step; the judge checks it, and the base model
    rewrites only the steps the judge rejects; then the base model writes the answer. The
    default judge, `arithmetic+likelihood`, recomputes the step's arithmetic, then keeps it
    when the base model's log-probability of its tokens (one forward pass) is at least
    `likelihood_threshold`; `judge="score"` with `threshold` is the paper's 0-9 rating. With
    `verify="agree"` the base model writes its own step at each drafted position instead, each
    request sent as soon as its prefix is known (pipelined behind the draft), and a draft step
    is kept where the two agree.
    Drop it in wherever a chat model goes: chains, RAG, LangGraph agents.

    ???+ info "Setup"

        Start two OpenAI-compatible servers (for example `specreason serve --profile cpu`)
        and export their URLs:

        ```bash
        pip install -U langchain-specreason
        export SPECREASON_DRAFT_URL=http://127.0.0.1:8201/v1
        export SPECREASON_BASE_URL=http://127.0.0.1:8202/v1
        ```

    ??? info "Key init args — SpecReason params"

        | Param | Type | Description |
        | ----- | ---- | ----------- |
        | `judge` | `str` | What keeps or rejects a draft step (env `SPECREASON_JUDGE`): `score`, `likelihood`, `confidence`, `arithmetic`, `learned`, or a cascade such as `arithmetic+likelihood`. |
        | `threshold` | `float` | `score` judge: keep a step the base model scores at least this (0-9; 10 rewrites every step). `likelihood_threshold` and `confidence_threshold` are the other judges'. |
        | `verify` | `str` | `"judge"` (SpecReason) or `"agree"` (the base writes each drafted position; `agree_rule`, `steps_ahead`). |
        | `budget` | `int` | Token budget of the reasoning (the trace). |
        | `family` | `str` | `"instruct"` (the reply is the reasoning) or `"think"` (`<think>` models). |

        Every knob is a field of `SpecReasonConfig`, inherited with its default and docs.

    ??? info "Key init args — completion params"

        | Param | Type | Description |
        | ----- | ---- | ----------- |
        | `temperature` | `float` | Sampling temperature of steps and answer. |
        | `max_tokens` | `int \| None` | Bound on the kept reasoning plus the answer (see "Token usage"). |
        | `stop` | `list[str] \| None` | Stop sequences of the answer. |
        | `model_kwargs`, `extra_body` | `dict` | More request fields for every chat request to both servers (vLLM's `repetition_penalty`, `chat_template_kwargs`, ...); `extra_body` also per call. |

    ??? info "Key init args — client params"

        | Param | Type | Description |
        | ----- | ---- | ----------- |
        | `draft_url`, `base_url` | `str` | OpenAI-compatible base URLs (env `SPECREASON_DRAFT_URL`, `SPECREASON_BASE_URL`). |
        | `draft_model`, `base_model` | `str \| None` | Served model names (default: the one model each server lists); `model=` as ChatOpenAI's. |
        | `api_key`, `draft_api_key` | `SecretStr \| None` | Keys (env `SPECREASON_BASE_API_KEY`, `SPECREASON_DRAFT_API_KEY`). |
        | `timeout` | `float \| None` | Seconds per server call. |
        | `max_retries` | `int` | Retries of transient server errors (connection, 408, 429, 5xx). |
        | `default_headers` | `dict \| None` | Headers of every request. |
        | `http_client`, `http_async_client` | `httpx2.AsyncClient` | The clients the openai SDK sends through, for sync and async calls (one event loop each). |
        | `stream_usage` | `bool` | Usage on a stream's last chunk (default `True`). |

        See the full list of init args and their docs below.

    ??? info "Instantiate"

        ```python
        from langchain_specreason import ChatSpecReason

        llm = ChatSpecReason(budget=64, temperature=0)  # the default judge
        paper = ChatSpecReason(judge="score", threshold=7, judge_wording="reference")
        ```

    ??? info "Invoke"

        ```python
        msg = llm.invoke([("user", "What is 12*7? Think step by step.")])
        msg.content
        ```

        ```python
        "To solve the problem of finding 12 multiplied by 7, we can follow these steps:\n\n"
        "1. Identify the numbers involved: 12 and 7.\n2. Multiply the numbers together: "
        "12 * 7 = 84.\n\nTherefore, the answer to the problem is 84."
        ```

        ```python
        llm.model_name  # the base model's served name
        ```

        ```python
        "qwen2.5-coder-0.5b"
        ```

    ??? info "Stream"

        ```python
        for chunk in llm.stream("What is 12*7?"):
            print(chunk.content, end="", flush=True)
        ```

        Steps arrive as soon as they join the trace (as `content` for the instruct family, as
        `additional_kwargs["reasoning_content"]` for the think family), then the answer tokens
        as the base server streams them. Chunks add up to the message `invoke` returns.

    ??? info "Async"

        ```python
        msg = await llm.ainvoke("What is 12*7?")
        async for chunk in llm.astream("What is 12*7?"):
            ...
        msgs = await llm.abatch(["2+2?", "3*3?"])
        ```

    ??? info "Tool calling"

        ```python
        from langchain_core.tools import tool


        @tool
        def multiply(a: int, b: int) -> int:
            '''Multiply two integers.'''
            return a * b


        msg = llm.bind_tools([multiply]).invoke("What is 123 * 456?")
        msg.tool_calls
        ```

        ```python
        [{"name": "multiply", "args": {"a": 123, "b": 456}, "id": "...", "type": "tool_call"}]
        ```

        The base model writes the answer phase with the tools (vLLM's tool-call parser on the
        base server; the serve profiles enable it). Streamed, the calls arrive as
        `tool_call_chunks` as the server sends them. A call the model wrote as text (bare
        JSON, a fenced block) is read back when the server parsed none.

    ??? info "Structured output"

        ```python
        from pydantic import BaseModel


        class Product(BaseModel):
            name: str
            price: float


        llm.with_structured_output(Product).invoke("A pen costs 3 dollars.")  # a Product
        ```

        `json_schema` (default) and `json_mode` send `response_format` with the answer call;
        `function_calling` forces a tool call.

    ??? info "JSON mode"

        ```python
        msg = llm.bind(response_format={"type": "json_object"}).invoke(
            'Return {"answer": 12*7} as JSON.'
        )
        msg.content, [b["type"] for b in msg.content_blocks]
        ```

        ```python
        ('{"answer": 84}', ["reasoning", "text"])
        ```

    ??? info "Reasoning output"

        The steps are `content` for the `instruct` family. For the `think` family, and with
        JSON output, they are `additional_kwargs["reasoning_content"]` and a leading
        `reasoning` block of `content_blocks` (`response_metadata["model_provider"]` is
        `"specreason"`). Servers started with vLLM's `--reasoning-parser` work as they are.

    ??? info "Token usage"

        ```python
        from langchain_core.callbacks import get_usage_metadata_callback

        with get_usage_metadata_callback() as cb:
            msg = llm.invoke("What is 2+2?", max_tokens=24)
        msg.usage_metadata, cb.usage_metadata
        ```

        ```python
        (
            {"input_tokens": 120, "output_tokens": 22, "total_tokens": 142,
             "input_token_details": {"cache_read": 32}},
            {"qwen2.5-coder-0.5b": {"input_tokens": 120, "output_tokens": 22, ...}},
        )
        ```

        Every server call's tokens, counted once (the callback reports the same total).
        `max_tokens` bounds the kept reasoning plus the answer: the reasoning gets at most
        `max_tokens` less the answer's share (half, at most `answer_max_tokens`) within
        `budget`, the answer the rest (`finish_reason="length"` when it cut).
        `get_num_tokens_from_messages` counts with the base model's own tokenizer on this
        machine when it can (`tokenizer=`), else asks the server; a count never drops when a
        message is added (the template's default system prompt is left out), as
        `trim_messages` assumes.

    ??? info "Response metadata"

        ```python
        msg.response_metadata["specreason"]  # steps accepted / rewritten, tokens, seconds
        msg.response_metadata["tokens_by_model"]  # {"draft": ..., "base": ...}
        ```

    ??? info "Profile, copies, cached graphs"

        `profile["max_input_tokens"]` is the servers' smaller window, asked once when first read
        (so `SummarizationMiddleware(llm, trigger=("fraction", 0.8))` works on a fresh model).
        `replace(...)` and `model_copy(update=...)` build their own endpoints, graphs and
        caches from their fields. One graph per per-call setting, the 32 last used kept; all
        share one draft circuit breaker (the model's `draft_cooldown`).

    Outputs above: the `cpu-test` pair (SmolLM2-135M draft, Qwen2.5-Coder-0.5B base), greedy.
    """

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

    model = model_name  # ChatOpenAI.model

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

    # -- wiring (wiring.py) ---------------------------------------------------------------
    def spec_config(self, **overrides: Any) -> SpecReasonConfig:
        """The :class:`SpecReasonConfig` these fields describe, with a call's ``overrides``.

        ``overrides`` are the SpecReason knobs among a call's keyword arguments (bound with
        ``.bind(temperature=0)`` or passed to ``invoke``), ``max_tokens`` included; the other
        arguments are not knobs and are left alone.
        """
        return call_config(self._settings(), overrides, self.max_tokens)

    def _settings(self) -> dict[str, Any]:
        """The SpecReason knobs these fields set."""
        return {name: getattr(self, name) for name in SpecReasonConfig.model_fields}

    @property
    def graph(self) -> SpecReasonGraph:
        """The compiled SpecReason graph this model runs (with its own settings)."""
        return self._graph_for(self.spec_config())

    def _graph_for(
        self, config: SpecReasonConfig, extra_body: dict[str, Any] | None = None
    ) -> SpecReasonGraph:
        """The graph of ``config`` and a call's ``extra_body`` (added to each chat request).

        Built once per distinct pair; the :data:`~.wiring.GRAPHS_KEPT` most recently used are
        kept. Every graph shares the model's one draft circuit breaker, open for the model's
        ``draft_cooldown`` (a per-call ``draft_cooldown`` does not change it): an outage one
        setting saw is known to all.
        """
        extra = check_extra_body(extra_body)
        check_thinking_switch(get_format(self.family), extra)
        if self._breaker is None:
            self._breaker = Breaker(self.draft_cooldown)
        breaker = self._breaker
        return remembered(
            self._graphs,
            (config, json.dumps(extra, sort_keys=True, default=str)),
            lambda: build_graph(
                self.endpoint("draft"),
                self.endpoint("base"),
                extra,
                config=config,
                judge=self.custom_judge,
                family=self.family,
                checkpointer=self.checkpointer,
                breaker=breaker,
            ),
        )

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
        """What the model can do; ``max_input_tokens`` joins when read (:func:`lazy_profile`)."""
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
        own = self.__dict__.get("profile")  # as stored: reading it may discover
        if self._own_profile and own is not None:
            profile = with_window(own, windows)
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
            budget_cap=budget_cut(self._settings(), kwargs, self.max_tokens),
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


# pydantic makes a property in the class body the field's default; set afterwards, a property
# (a data descriptor) is what reading or assigning ``llm.profile`` goes through
ChatSpecReason.profile = lazy_profile()  # type: ignore[assignment]
