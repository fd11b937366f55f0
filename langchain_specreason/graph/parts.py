"""What the nodes of one graph share (:class:`Parts`), and the seam of the modes.

The seam between the ``verify`` node and the modes is the :class:`Verifier` protocol and the
:class:`Round` it returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from langchain_core.runnables import RunnableConfig

from ..config import SpecReasonConfig
from ..endpoint import ChatRequest, Endpoint
from ..errors import EndpointError
from ..formats import PromptFormat, continue_messages, step_stops, to_openai_messages
from ..state import PendingStep, SpecReasonState
from .breaker import Breaker
from .steps import step_texts


@dataclass
class Round:
    """What one call of a verifier decided."""

    steps: list[PendingStep] = field(default_factory=list)
    """The decided positions, in order: accepted draft steps, and at most one rejected step
    last. A position whose draft failed but whose base step is written has ``drafted`` False."""
    failed: EndpointError | None = None
    """The draft server's error, when it failed after the positions in ``steps``."""
    lookahead: PendingStep | None = None
    """The draft of the next position, written ahead (the ``judge`` mode's ``lookahead``)."""
    input_tokens: int | None = None
    """The conversation's prompt tokens, when this round's first request reported them."""


class Verifier(Protocol):
    """Decides the next positions of the trace (see :mod:`~.verifiers`)."""

    async def round(self, parts: Parts, state: SpecReasonState, config: RunnableConfig) -> Round:
        """Draft and verify from ``state``'s trace.

        A draft outage is reported in ``Round.failed``, never raised; a base server's error is
        raised.
        """
        ...


@dataclass(frozen=True)
class Parts:
    """What the nodes of one graph share: the two endpoints, the verifier, knobs and format."""

    draft: Endpoint
    base: Endpoint
    verifier: Verifier
    """Decides the drafted positions (:mod:`~.verifiers`: the judge, or agreement)."""
    config: SpecReasonConfig
    fmt: PromptFormat
    breaker: Breaker = field(default_factory=lambda: Breaker(0.0))
    """Skips a draft server that just failed, across the runs of this graph (and of every
    graph given the same breaker)."""

    @property
    def stops(self) -> list[str]:
        """The stop strings of a step: the delimiter, and the end of thinking if any."""
        return step_stops(self.fmt, self.config.delimiter)

    def step_request(self, state: SpecReasonState, *, logprobs: bool = False) -> ChatRequest:
        """The request that writes the next step (either model; the budget caps it)."""
        cfg = self.config
        messages, cont = continue_messages(
            to_openai_messages(state["messages"]), self.fmt, step_texts(state)
        )
        room = state.get("budget", cfg.budget) - state.get("tokens_used", 0)
        return ChatRequest(
            messages=messages,
            max_tokens=max(1, min(cfg.step_max_tokens, room)),
            continue_final=cont,
            stop=self.stops,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            seed=cfg.seed,
            logprobs=logprobs,
        )
