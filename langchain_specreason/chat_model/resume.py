"""Which thread a chat model's call runs on, and whether a checkpointed run is this call's.

With a checkpointer, :func:`thread_id` names the call's thread and :func:`same_turns` tells
whether an unfinished run saved there is the same call (then it resumes from its last step).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.runnables import ensure_config


def thread_id(
    run_manager: AsyncCallbackManagerForLLMRun | CallbackManagerForLLMRun | None,
    kwargs: dict[str, Any],
) -> str:
    """The call's thread.

    The first of: a ``thread_id`` call argument; the run's metadata
    (``config={"metadata": {"thread_id": ...}}``, LangSmith's thread key); the
    ``configurable`` of an enclosing runnable (a LangGraph node); else a new thread (nothing
    to resume).
    """
    metadata = getattr(run_manager, "metadata", None) or {}
    enclosing = ensure_config().get("configurable") or {}
    found = kwargs.get("thread_id") or metadata.get("thread_id") or enclosing.get("thread_id")
    return str(found or uuid.uuid4())


def same_turns(saved: Sequence[BaseMessage], messages: Sequence[BaseMessage]) -> bool:
    """Whether a checkpointed conversation is this call's (same roles and contents)."""
    return [(m.type, m.content) for m in saved] == [(m.type, m.content) for m in messages]
