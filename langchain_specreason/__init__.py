"""langchain-specreason: speculative reasoning for LangChain and LangGraph.

A small draft model writes each reasoning step; the big base model scores it in one forward
pass and rewrites only the steps that score below the threshold. The algorithm is the
LangGraph graph built by :func:`create_specreason_graph`; terms are defined in
:mod:`langchain_specreason.state`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

# Also importable from the package root (earlier releases exported them here); their homes are
# the submodules named: errors from ``langchain_specreason.errors``, endpoint types from
# ``.endpoint``, formats from ``.formats``, judges from ``.judges``, run types from ``.state``
# and ``.stats``, the single-model yardstick from ``.baselines``.
from .baselines import SingleModelRun, single_model  # noqa: F401
from .chat_model import ChatSpecReason
from .config import SpecReasonConfig
from .endpoint import ChatRequest, Completion, Endpoint, OpenAIEndpoint  # noqa: F401
from .errors import (  # noqa: F401
    ConfigError,
    ContextLengthError,
    DeadlineError,
    EndpointError,
    InputError,
    SpecReasonError,
)
from .formats import FORMATS, PlainFormat, PromptFormat, TagFormat  # noqa: F401
from .graph import create_specreason_graph
from .judges import BaseModelJudge, Judge, Verdict, make_judge  # noqa: F401
from .state import SpecReasonState, StepRecord  # noqa: F401
from .stats import SpecReasonStats  # noqa: F401

try:
    __version__ = version("langchain-specreason")
except PackageNotFoundError:  # pragma: no cover - run from a source tree without install
    __version__ = "0+unknown"

__all__ = [
    "ChatSpecReason",
    "Judge",
    "OpenAIEndpoint",
    "SpecReasonConfig",
    "__version__",
    "create_specreason_graph",
    "make_judge",
]
