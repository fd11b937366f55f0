"""The events the graph writes to LangGraph's ``custom`` stream, one ``TypedDict`` each.

Read them with ``graph.astream(..., stream_mode="custom")`` (or ``["custom", "values"]``);
``event["type"]`` tells which one it is. In the order a step produces them:

* :class:`Drafted`: the draft model wrote a draft step;
* :class:`Scored`: the judge scored it and accepted or rejected it;
* :class:`Step`: a step joined the trace (accepted draft, rewritten, or written by the base);
* :class:`Fallback`: the draft server failed; the base model writes the remaining steps;
* :class:`Done`: the reasoning stopped (why: ``end``, ``thinking_end``, ``budget``, ``repeat``);
* :class:`AnswerDelta`: a piece of the streamed answer;
* :class:`AnswerToolCall`: a piece of a tool call the answer makes, as the server streams it
  (a call recovered from the answer's text, or not streamed by the endpoint, comes whole at
  the end).
"""

from __future__ import annotations

from typing import Literal, TypedDict

from .state import Author, Decision, StopReason


class Drafted(TypedDict):
    """The draft model wrote draft step ``step``."""

    type: Literal["drafted"]
    step: int
    text: str
    tokens: int
    seconds: float


class Scored(TypedDict):
    """The judge's verdict on draft step ``step`` (``score`` on the judge's own scale)."""

    type: Literal["scored"]
    step: int
    score: float
    accepted: bool
    seconds: float


class Step(TypedDict):
    """Step ``step`` joined the trace."""

    type: Literal["step"]
    step: int
    decision: Decision
    author: Author
    text: str
    score: float | None
    tokens: int


class Fallback(TypedDict):
    """The ``endpoint`` server failed at step ``step``; the base model writes the rest."""

    type: Literal["fallback"]
    step: int
    endpoint: str
    reason: str


class Done(TypedDict):
    """The reasoning stopped."""

    type: Literal["done"]
    reason: StopReason


class AnswerDelta(TypedDict):
    """A piece of the answer as the answering model streams it."""

    type: Literal["answer_delta"]
    text: str


class AnswerToolCall(TypedDict):
    """A piece of tool call ``index`` of the answer; pieces of one call share its index.

    ``id`` and ``name`` come with the call's first piece (``None`` after it); ``args`` is the
    next piece of the arguments' JSON text (LangChain's ``tool_call_chunk``).
    """

    type: Literal["answer_tool_call"]
    index: int
    id: str | None
    name: str | None
    args: str


Event = Drafted | Scored | Step | Fallback | Done | AnswerDelta | AnswerToolCall
"""Any event of the ``custom`` stream."""
