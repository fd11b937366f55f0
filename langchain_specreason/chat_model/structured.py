"""Schemas sent with a request: tools and structured output, as the servers read them.

:func:`closed_if_no_parameters` marks a tool without parameters strict and closed (so vLLM
pins its call's arguments to ``{}``); :func:`to_response_format` builds an OpenAI
``response_format`` from a schema, as ``ChatOpenAI`` does.
"""

from __future__ import annotations

from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool


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
