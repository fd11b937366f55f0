"""The knobs of ``specreason arbitrage label`` and ``arbitrage train``, declared once.

Each field is its command's flag (``--held-out`` is ``held_out``; its docstring is the help)
and the keyword of the Python call: :func:`~.label.label_problems` takes an
:class:`OracleSettings`, :func:`~.train.train_router` a :class:`TrainSettings`. A bad value is a
:class:`~langchain_specreason.errors.ConfigError` naming the field, before any server or model
is touched.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...arbitrage.features import ROUTER_MAX_TOKENS
from ...config import Settings
from ...judges.score import ScoreMethod


class OracleSettings(Settings):
    """How ``arbitrage label`` rates the draft's step against the base model's own."""

    tau: float = 0.0
    """The oracle keeps the base step when it scores this much better."""
    score_method: ScoreMethod = "average"
    """How the base model's 0-9 score is read (when ``scorer`` is ``score``)."""
    scorer: Literal["score", "likelihood"] = "score"
    """What rates both steps: the base model's 0-9 score, or its log-probability of the step."""
    concurrency: int = Field(default=1, ge=1)
    """Problems labelled at once (the servers batch them)."""


class TrainSettings(Settings):
    """How ``arbitrage train`` fine-tunes the router (recorded in ``router.json``)."""

    method: Literal["fine-tune", "frozen"] = "fine-tune"
    """fine-tune: the whole model with a new two-label head (the epochs, learning rate and
    batch apply); frozen: the base model's last hidden state read once per step, a logistic
    head fitted on it (L2 chosen by cross-validation), many times cheaper on CPU."""
    margin: float = 0.0
    """Label a step 1 (escalate) when the base step's advantage exceeds this."""
    epochs: int = Field(default=3, ge=1)
    """Passes over the training split."""
    max_steps: int | None = Field(default=None, ge=1)
    """Stop after this many optimizer steps (None: the epochs decide)."""
    learning_rate: float = Field(default=5e-5, gt=0)
    """The optimizer's learning rate."""
    batch_size: int = Field(default=8, ge=1)
    """Steps per optimizer step."""
    held_out: float = Field(default=0.2, ge=0, lt=1)
    """Share of problems held out for model selection (of the steps, with one problem)."""
    seed: int = 0
    """Seed of the split, the downsampling and the new head's weights."""
    max_tokens: int = Field(default=ROUTER_MAX_TOKENS, ge=8)
    """Tokens the router reads, cut from the left; recorded in router.json for serving."""
    threads: int | None = Field(default=None, ge=1)
    """Torch CPU threads while training; on 2 cores busy with vLLM servers, 1 trains several
    times faster than 2 (None, in Python: torch's own choice)."""
