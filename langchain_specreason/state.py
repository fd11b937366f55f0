"""The state of a SpecReason run, and the terms used everywhere in this package.

Terms
-----
One word per concept, in code, events, traces, stats and result files.

step
    A piece of the reasoning trace: the text a model writes up to the delimiter (default a
    blank line, ``"\\n\\n"``), or up to the end of its message, or up to the per-step cap.
trace
    The steps so far, in order: what the next step's prompt continues.
draft step
    A step written by the small **draft** model from the current trace.
score
    The judge's rating of a draft step, on the judge's own scale: 0-9 for the base model's
    one-token rating (``greedy``: the sampled digit; ``average``: the probability-weighted
    mean of the digits among the top logprobs), a log-probability for ``likelihood`` and
    ``confidence``, ``1 - p(escalate)`` for the Arbitrage router. The judge compares it with
    its threshold. In the ``agree`` mode no judge runs: 1.0 where the draft's step agrees
    with the base's own step at that position, 0.0 where it does not.
verify
    Deciding drafted positions (node ``verify``): a judge reads each draft step (``judge``
    mode), or the base model writes its own step at each drafted position and a rule compares
    the two (``agree`` mode). See :mod:`~.graph.verifiers`.
accepted step
    A draft step whose score reaches the threshold (decision ``accepted``, node ``accept``).
    It joins the trace as written.
rewritten step
    A step the **base** model writes itself from the same trace because the draft step was
    rejected (decision ``rewritten``, node ``rewrite``, time ``rewrite_s``). The draft is
    discarded. A step the base model writes with no draft at all (one of the first
    ``first_n_base_steps``, or after the draft server failed) has decision ``base``.
budget
    The number of tokens the trace may hold. Once spent, the reasoning stops and the answer
    is written.
lookahead
    The next draft step, written by the draft model while the judge reads the current one,
    as if the current one will be accepted. Used when it is; cancelled when it is not. The
    trace is the same as without it; the judge's time hides behind the draft's.

The state is a ``TypedDict`` of plain values (and LangChain messages), so any LangGraph
checkpointer can store it and a run can resume from its last completed step.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages

Author = Literal["draft", "base"]
Decision = Literal["accepted", "rewritten", "base"]
StopReason = Literal["end", "thinking_end", "budget", "repeat"]


class StepRecord(TypedDict):
    """One step of the trace, with who wrote it and what it cost."""

    index: int
    text: str
    """The step's text in the trace, delimiter included (what later prompts contain)."""
    author: Author
    decision: Decision
    """``accepted`` (the draft as written), ``rewritten`` (draft rejected, the base model's
    step instead), ``base`` (no draft: a first-n step, a blank draft, or the draft server down)."""
    score: float | None
    """The judge's score of the draft; ``None`` when no draft was made."""
    draft_text: str | None
    """The rejected draft of a rewritten step."""
    tokens: int
    """Tokens of ``text`` (the server's count)."""
    draft_tokens: int
    """Tokens the draft model generated for this step (0 when no draft was made)."""
    base_tokens: int
    """Tokens the base model generated for this step: its rewrite, or in the ``agree`` mode
    its own step at an agreed position (0 for a draft the judge accepted)."""
    draft_s: float
    """Seconds the run waited for the draft model (a lookahead's hidden part not counted)."""
    judge_s: float
    """Seconds the run waited on verification: the judge's reading, or in the ``agree`` mode
    the base's steps after the last draft the round waited for (on a round's first step)."""
    rewrite_s: float
    """Seconds the base model took to write this step (0 for an accepted draft)."""
    judge_prompt_tokens: int
    judge_cached_tokens: int | None
    finish: str
    """How the step ended: ``delimiter``, ``end`` (end of message), ``thinking_end``, ``length``."""
    verdict: NotRequired[dict[str, Any]]
    """The judge's detail (top logprobs, router probability, oracle scores, ...)."""
    draft_hidden_s: NotRequired[float]
    """Seconds of a lookahead draft that ran while the judge read the previous step."""


class PendingStep(TypedDict):
    """A draft step waiting for (or holding) the judge's verdict."""

    text: str
    finish: str
    tokens: int
    draft_s: float
    score: float | None
    accept: bool | None
    judge_s: float
    judge_prompt_tokens: int
    judge_cached_tokens: int | None
    verdict: NotRequired[dict[str, Any]]
    rewrite: NotRequired[dict[str, Any] | None]
    """A replacement step the judge already wrote (see :class:`~.judges.Rewrite`)."""
    index: NotRequired[int]
    """Position of a lookahead draft in the trace."""
    drafted: NotRequired[bool]
    """False for a position the draft failed to write (the base's step is in ``rewrite``)."""
    base_tokens: NotRequired[int]
    """Tokens the base model generated to verify this position (the ``agree`` mode: its own
    step there); counted in the step record's ``base_tokens`` even when the draft is kept."""
    logprobs: NotRequired[list[float]]
    """The draft model's log-probability of each token it wrote (the ``confidence`` judge)."""
    logprob_tokens: NotRequired[list[str]]
    """The text of those tokens."""
    draft_hidden_s: NotRequired[float]
    """Seconds of a lookahead draft that ran while the judge read the previous step."""


class AnswerOptions(TypedDict, total=False):
    """How the answer call is made (the steps ignore them).

    LangChain's ``bind_tools``, ``with_structured_output`` and ``stop`` arrive here.
    """

    tools: list[dict[str, Any]]
    """OpenAI-format tools the answer may call."""
    tool_choice: str | dict[str, Any] | None
    parallel_tool_calls: bool
    """Whether the answer may hold several tool calls (absent: the server's default)."""
    stop: list[str] | None
    """Stop sequences of the answer."""
    response_format: dict[str, Any]
    """OpenAI ``response_format`` of the answer (``json_schema`` or ``json_object``): the
    answer is then only the JSON, and the trace is reasoning even for the instruct family."""


class _Conversation(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    """The conversation. The answer node appends the final ``AIMessage``."""


class SpecReasonInput(_Conversation, total=False):
    """What a run starts from."""

    answer_options: AnswerOptions


class SpecReasonOutput(_Conversation, total=False):
    """What a run returns (and ``stream_mode="values"`` shows)."""

    steps: list[StepRecord]
    """The trace's steps, in order."""
    tokens_used: int
    """Budget spent: tokens of the trace's steps."""
    budget: int
    """This run's budget: ``SpecReasonConfig.budget``, lowered when the servers' context
    window could not hold the conversation, that many trace tokens and the answer."""
    repeats: int
    """Steps dropped because they repeated a recent step."""
    stop: StopReason | None
    answer: str
    """The text the user sees (for the instruct family it includes the trace)."""
    answer_tokens: int
    answer_s: float
    answer_prompt_tokens: int
    answer_finish: str
    """``stop``, ``length`` or ``tool_calls``: how the answer call ended."""
    input_tokens: int
    """Prompt tokens of the conversation (the first step's request)."""
    draft_down: str | None
    """Set when the draft server failed (after its retries): the base model writes the
    remaining steps and the run goes on."""


class SpecReasonState(SpecReasonInput, SpecReasonOutput, total=False):
    """State of the SpecReason graph: input and output, and the step in flight."""

    pending: PendingStep | None
    """The draft step being judged."""
    window: int | None
    """The smaller context window of the two servers (``None``: not reported)."""
    lookahead: PendingStep | None
    """The next draft step, written while ``pending`` was judged and used if it is accepted."""
    verified: list[PendingStep]
    """``agree`` mode: the rest of a round's checked positions, joining the trace one by one
    (agreeing draft steps, then the base's step at the first disagreement)."""
