"""The state of a SpecReason run, and the terms used everywhere in this package.

Terms
-----
step
    A piece of the reasoning trace: the text a model writes up to the delimiter (default a
    blank line, ``"\\n\\n"``), or up to the end of its message, or up to the per-step cap.
draft step
    A step written by the small **draft** model from the current prefix (the conversation
    plus the steps kept so far).
score
    The base model's rating of a draft step, 0-9, read from one output token of a single
    forward pass (``greedy``: the sampled digit; ``average``: the probability-weighted mean of
    the digits among the top logprobs). Other judges (a reward model, the Arbitrage router)
    produce a score and a decision through the same :class:`~.judges.Judge` protocol.
accepted step
    A draft step whose score reaches the threshold. It is kept in the trace as written.
rewritten step
    A step the **base** model writes itself from the same prefix, because the draft step was
    rejected (or because it is one of the first ``first_n_base_steps``). The draft is discarded.
budget
    The number of tokens the kept steps may hold. Once spent, the reasoning stops and the
    answer is written.
lookahead
    The next draft step, written by the draft model while the judge reads the current one,
    as if the current one will be kept. Used when it is; cancelled when it is not. The trace
    is the same as without it; the judge's time hides behind the draft's.

The state is a ``TypedDict`` of plain values (and LangChain messages), so any LangGraph
checkpointer can store it and a run can resume from its last completed step.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages

Author = Literal["draft", "base"]
Decision = Literal["kept", "rewritten", "base"]
StopReason = Literal["end", "thinking_end", "budget", "repeat"]


class StepRecord(TypedDict):
    """One step of the trace as it was kept, with what it cost."""

    index: int
    text: str
    """The kept text, delimiter included (exactly what later prompts contain)."""
    author: Author
    decision: Decision
    """``kept`` (draft accepted), ``rewritten`` (draft rejected), ``base`` (first-n step)."""
    score: float | None
    """The judge's score of the draft; ``None`` when no draft was made."""
    draft_text: str | None
    """The rejected draft of a rewritten step."""
    tokens: int
    """Tokens of the kept text (the server's count)."""
    draft_tokens: int
    """Tokens the draft model generated for this step (0 when no draft was made)."""
    base_tokens: int
    """Tokens the base model generated for this step (0 for an accepted draft)."""
    draft_s: float
    """Seconds the run waited for the draft model (a lookahead's hidden part not counted)."""
    judge_s: float
    regen_s: float
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
    logprobs: NotRequired[list[float]]
    """The draft model's log-probability of each token it wrote (the ``confidence`` judge)."""
    logprob_tokens: NotRequired[list[str]]
    """The text of those tokens."""
    draft_hidden_s: NotRequired[float]
    """Seconds of a lookahead draft that ran while the judge read the previous step."""


class SpecReasonState(TypedDict, total=False):
    """State of the SpecReason graph."""

    messages: Annotated[list[AnyMessage], add_messages]
    """The conversation. The answer node appends the final ``AIMessage``."""
    steps: list[StepRecord]
    """The kept steps, in order."""
    pending: PendingStep | None
    lookahead: PendingStep | None
    """The next draft step, written while ``pending`` was judged and used if it is kept."""
    tokens_used: int
    """Budget spent: tokens of the kept steps."""
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
