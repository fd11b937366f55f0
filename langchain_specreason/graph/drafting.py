"""The draft model writes one step: the request, its child run, and the pending step."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from ..endpoint import Completion
from ..state import PendingStep, SpecReasonState
from .parts import Parts
from .steps import step_finish
from .tracing import completion_outputs, served_model, traced_call


async def write_draft(
    parts: Parts,
    state: SpecReasonState,
    config: RunnableConfig,
    index: int,
    lookahead: bool = False,
) -> tuple[PendingStep, Completion]:
    """The draft model writes step ``index`` after ``state``'s trace.

    ``lookahead``: the step is written ahead of the trace, and traced as such.
    """
    request = parts.step_request(state, logprobs=True)  # the confidence judge reads them
    metadata: dict[str, Any] = {"specreason_step": index, "specreason_call": "draft"}
    if lookahead:
        metadata["specreason_lookahead"] = True
    done = await traced_call(
        config,
        "draft_step",
        metadata,
        {"messages": request.messages},
        lambda: parts.draft.complete(request),
        completion_outputs,
        model=served_model(parts.draft),
    )
    text, finish = step_finish(done, parts.config.delimiter, parts.fmt.thinking_end)
    pending: PendingStep = {
        "text": text,
        "finish": finish,
        "tokens": done.completion_tokens,
        "draft_s": done.seconds,
        "score": None,
        "accept": None,
        "judge_s": 0.0,
        "judge_prompt_tokens": 0,
        "judge_cached_tokens": None,
        "index": index,
    }
    if done.token_logprobs is not None:
        pending["logprobs"] = [round(lp, 4) for lp in done.token_logprobs]
        pending["logprob_tokens"] = list(done.token_texts or [])
    return pending, done
