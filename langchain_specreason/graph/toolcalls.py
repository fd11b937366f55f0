"""Tool calls a model wrote as text, recovered on the client (pure: no I/O).

Small models often answer a tool turn with the call as bare JSON, ``{"name": "get_weather",
"arguments": {"location": "Paris"}}``, or in a fenced ```` ```json ```` block, instead of the
``<tool_call>`` tags the server's parser (vLLM's ``hermes``) reads; the server then returns
text and no call. :func:`recover_tool_calls` reads such a call when it names one of the bound
tools and carries its arguments (``arguments`` or ``parameters``, an object or its JSON text).
The answer node asks it only when tools are bound, ``tool_choice`` is not ``"none"`` and the
server returned no call.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_TAGGED = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class Recovered:
    """Calls read from a text, and the text left around them."""

    tool_calls: list[dict[str, Any]]
    """OpenAI-format calls: ``{"id", "type": "function", "function": {"name", "arguments"}}``
    (``arguments`` as JSON text, as a server sends them)."""
    rest: str
    """The text without the calls (stripped; ``""`` when the text was only calls)."""


def may_be_a_call(text: str) -> bool:
    """Whether ``text``, the start of an answer, may still turn out to be a written call.

    True while it is blank or begins like JSON (``{``, ``[``), a fence (```` ``` ````) or a
    ``<tool_call>`` tag: the answer node holds such text back until the end of the answer.
    """
    head = text.lstrip()
    if not head:
        return True
    if head[0] in "{[":
        return True
    return any(head.startswith(p) or p.startswith(head) for p in ("```", "<tool_call>"))


def call_prefix(text: str) -> str | None:
    """The whole written call ``text`` begins with, once it is complete, else ``None``.

    A JSON value, a closed fenced block or a closed ``<tool_call>`` tag at the start (after
    blank space): a reader can stop there (small models repeat a call over and over).
    """
    head = text.lstrip()
    skipped = len(text) - len(head)
    if head.startswith("```") or head.startswith("<tool_call>"):
        match = (_FENCE if head.startswith("```") else _TAGGED).match(head)
        return text[: skipped + match.end()] if match else None
    if head[:1] in ("{", "["):
        try:
            _, end = json.JSONDecoder().raw_decode(head)
        except ValueError:
            return None
        return text[: skipped + end]
    return None


def recover_tool_calls(text: str, tool_names: Collection[str]) -> Recovered | None:
    """The tool calls written in ``text``, or ``None`` when it holds none.

    Read, in order: the whole text as JSON (one call, or a list of calls); fenced blocks;
    ``<tool_call>`` tags. A call is an object naming one of ``tool_names`` (``name``, or an
    OpenAI ``{"function": {...}}``) with ``arguments`` or ``parameters``. Anything else
    (prose, JSON that is not a call, an unknown tool) is not a call.
    """
    stripped = text.strip()
    whole = _calls(_load(stripped), tool_names)
    if whole:
        return Recovered(whole, "")
    for pattern in (_FENCE, _TAGGED):
        calls: list[dict[str, Any]] = []
        rest = stripped
        for match in pattern.finditer(stripped):
            found = _calls(_load(match.group(1).strip()), tool_names)
            if found:
                calls += found
                rest = rest.replace(match.group(0), "", 1)
        if calls:
            return Recovered(calls, rest.strip())
    return None


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _calls(value: Any, tool_names: Collection[str]) -> list[dict[str, Any]]:
    """``value`` as calls (every item must be one), else ``[]``."""
    items = value if isinstance(value, list) else [value]
    calls = [_call(item, tool_names) for item in items]
    if not calls or any(c is None for c in calls):
        return []
    return [c for c in calls if c is not None]


def _call(item: Any, tool_names: Collection[str]) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):  # {"type": "function", "function": {...}}
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or name not in tool_names:
        return None
    args = item.get("arguments", item.get("parameters"))
    if isinstance(args, str):
        args = _load(args)
    if not isinstance(args, dict):
        return None
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
