"""langchain-specreason: speculative reasoning for LangChain and LangGraph.

A small draft model writes each reasoning step; the big base model scores it in one forward
pass and rewrites only the steps that score below the threshold. The algorithm is the
LangGraph graph built by :func:`create_specreason_graph`; terms are defined in
:mod:`langchain_specreason.state`.
"""

from __future__ import annotations

from .baselines import SingleModelRun, single_model
from .chat_model import ChatSpecReason
from .config import SpecReasonConfig
from .endpoint import ChatRequest, Completion, Endpoint, OpenAIEndpoint
from .errors import (
    ConfigError,
    ContextLengthError,
    DeadlineError,
    EndpointError,
    HashMismatchError,
    InputError,
    ModelFetchError,
    PortInUseError,
    ServeError,
    ServerDiedError,
    SpecReasonError,
)
from .formats import FORMATS, PlainFormat, PromptFormat, TagFormat
from .graph import create_specreason_graph
from .judges import BaseModelJudge, Judge, Verdict
from .state import SpecReasonState, StepRecord
from .stats import SpecReasonStats

__all__ = [
    "FORMATS",
    "BaseModelJudge",
    "ChatRequest",
    "ChatSpecReason",
    "Completion",
    "ConfigError",
    "ContextLengthError",
    "DeadlineError",
    "Endpoint",
    "EndpointError",
    "HashMismatchError",
    "InputError",
    "Judge",
    "ModelFetchError",
    "OpenAIEndpoint",
    "PlainFormat",
    "PortInUseError",
    "PromptFormat",
    "ServeError",
    "ServerDiedError",
    "SingleModelRun",
    "SpecReasonConfig",
    "SpecReasonError",
    "SpecReasonState",
    "SpecReasonStats",
    "StepRecord",
    "TagFormat",
    "Verdict",
    "create_specreason_graph",
    "single_model",
]
