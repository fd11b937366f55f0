"""Schemas sent with a request: tools and structured output, as the servers read them.

:func:`closed_if_no_parameters` marks a tool without parameters strict and closed (so vLLM
pins its call's arguments to ``{}``); :func:`to_response_format` builds an OpenAI
``response_format`` from a schema, as ``ChatOpenAI`` does; :func:`openai_tools` and
:func:`openai_tool_choice` are what ``bind_tools`` binds; :func:`structured_request` and
:func:`parsed` are ``with_structured_output``'s request and parser.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, Literal, cast

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.output_parsers.openai_tools import (
    JsonOutputKeyToolsParser,
    PydanticToolsParser,
)
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_core.utils.pydantic import is_basemodel_subclass
from pydantic import BaseModel

from ..errors import ConfigError

Method = Literal["function_calling", "json_mode", "json_schema"]
"""How ``with_structured_output`` asks for the schema."""


def closed_if_no_parameters(tool: dict[str, Any]) -> dict[str, Any]:
    """``tool`` closed (no extra keys) and strict, if it takes no parameters at all.

    vLLM 0.32 pins a call's arguments to the tool's schema only for tools marked ``strict``;
    unpinned, a small model fills a no-argument call with the schema itself.
    """
    function = tool.get("function", {})
    parameters = function.get("parameters")
    if (
        isinstance(parameters, dict)
        and parameters.get("type", "object") == "object"
        and not parameters.get("properties")
        and "additionalProperties" not in parameters
        and function.get("strict") is None
    ):
        closed = {**parameters, "additionalProperties": False}
        return {**tool, "function": {**function, "parameters": closed, "strict": True}}
    return tool


def to_response_format(
    schema: dict[str, Any] | type, *, strict: bool | None = None
) -> dict[str, Any]:
    """An OpenAI ``response_format`` from a schema, as ``ChatOpenAI`` builds it.

    A ready ``{"type": "json_schema" | "json_object", ...}`` is kept; ``{"name", "schema"}``
    is wrapped; a Pydantic class, TypedDict or JSON schema becomes a named JSON schema.
    """
    if (
        isinstance(schema, dict)
        and schema.get("type") in ("json_schema", "json_object")
        and (schema["type"] == "json_object" or "json_schema" in schema)
    ):
        response_format = dict(schema)
    elif isinstance(schema, dict) and "name" in schema and "schema" in schema:
        response_format = {"type": "json_schema", "json_schema": schema}
    else:
        if strict is None and isinstance(schema, dict) and isinstance(schema.get("strict"), bool):
            strict = schema["strict"]
        function = convert_to_openai_tool(schema, strict=strict)["function"]
        function["schema"] = function.pop("parameters")
        response_format = {"type": "json_schema", "json_schema": function}
    if strict is not None and response_format["type"] == "json_schema":
        response_format["json_schema"] = {**response_format["json_schema"], "strict": strict}
    return response_format


def openai_tools(
    tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool], strict: bool | None
) -> list[dict[str, Any]]:
    """``tools`` as OpenAI tool schemas (``strict`` on each); no-parameter tools closed."""
    return [closed_if_no_parameters(convert_to_openai_tool(t, strict=strict)) for t in tools]


def openai_tool_choice(tool_choice: str | dict[str, Any] | bool | None) -> Any:
    """A ``tool_choice`` as OpenAI's: ``True``/``"any"`` is ``"required"``, a name a function."""
    if tool_choice is True or tool_choice == "any":  # as ChatOpenAI: True means required
        return "required"
    if tool_choice is False:
        return None
    if isinstance(tool_choice, str) and tool_choice not in ("auto", "none", "required"):
        return {"type": "function", "function": {"name": tool_choice}}
    return tool_choice


def structured_request(
    schema: dict[str, Any] | type | None,
    method: Method,
    strict: bool | None,
    kwargs: dict[str, Any],
) -> tuple[list[Any] | None, dict[str, Any], Runnable[Any, Any]]:
    """How to ask for ``schema``: (tools to bind or ``None``, the bind arguments, the parser).

    With tools, the model binds them (``bind_tools(tools, **arguments)``), else only the
    arguments (``bind(**arguments)``); the parser reads the schema's value from the reply.

    Whitespace: vLLM's JSON grammars (xgrammar, guidance) allow any whitespace between
    tokens, and a small model can then write ``{`` and tabs or spaces up to the cap. Against
    it the base server needs ``--structured-outputs-config '{"disable_any_whitespace":
    true}'`` (with the xgrammar or guidance backend). Nothing
    per request does the same on vLLM 0.32: its chat request accepts
    ``extra_body={"structured_outputs": {"disable_any_whitespace": true}}`` (and
    ``whitespace_pattern``) without an error, but both backends read only the server's
    setting (``vllm/v1/structured_output/backend_xgrammar.py``, ``backend_guidance.py``), so
    none is sent here.
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
        tools: list[Any] | None = [schema]
        arguments = dict(
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
        tools = kwargs.pop("tools") if kwargs.get("tools") else None  # a tool call, or the JSON
        arguments = dict(
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
    return tools, arguments, parser


def parsed(
    llm: Runnable[LanguageModelInput, AIMessage], parser: Runnable[Any, Any], include_raw: bool
) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
    """``llm`` then ``parser``; with ``include_raw``, ``{"raw", "parsed", "parsing_error"}``."""
    if not include_raw:
        return llm | parser
    with_parsed = RunnablePassthrough.assign(
        parsed=itemgetter("raw") | parser, parsing_error=lambda _: None
    )
    fallback = RunnablePassthrough.assign(parsed=lambda _: None)
    return RunnableMap(raw=llm) | with_parsed.with_fallbacks(
        [fallback], exception_key="parsing_error"
    )
