"""What the fine-tuned and the frozen-feature router share: labels, folds, files, torch.

The head's class ids, the router text of a labelled step, the folds of whole problems, the
out-of-fold prediction lines, the saved folder vLLM serves, and torch's threads and progress
bars. :mod:`.train` (fine-tuning) and :mod:`.frozen` (a logistic head on frozen features) both
read them; neither imports the other's internals.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...arbitrage.features import ROUTER_CONFIG, LabelledStep, router_text
from ...errors import ConfigError, InputError

ID2LABEL = {0: "keep", 1: "escalate"}
"""Class ids of the head; vLLM's ``/classify`` returns ``probs`` in this order."""


LABEL2ID = {name: i for i, name in ID2LABEL.items()}


@contextmanager
def progress_bars(enabled: bool) -> Iterator[None]:
    """Hide transformers' own bars (loading and writing weights) unless ``enabled``."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if not enabled:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with torch limited to ``threads`` CPU threads (None: unchanged)."""
    import torch

    if threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def check_model_dir(path: Path) -> Path:
    """``path`` when it is a Hugging Face model folder; ConfigError saying what to do if not."""
    path = Path(path)
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"{path} is not a Hugging Face model folder (no config.json); "
            "fetch the base model first (`specreason models fetch`)"
        )
    return path


def load_tokenizer(model_dir: Path) -> Any:
    """The folder's tokenizer, cutting from the left, padding with EOS when it has no pad."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, truncation_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def router_input(step: LabelledStep, tag_authors: bool) -> str:
    """The text the router reads for a labelled step (question, steps so far, draft step)."""
    return router_text(
        step["question"], step["prefix"], step["draft_step"], tag_authors=tag_authors
    )


def save_router(model: Any, tokenizer: Any, out: Path, router: dict[str, Any]) -> None:
    """The folder vLLM serves: float32 safetensors, tokenizer, config with the head's labels."""
    out.mkdir(parents=True, exist_ok=True)
    model.config.architectures = [type(model).__name__]
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / ROUTER_CONFIG).write_text(json.dumps(router, indent=2) + "\n", encoding="utf-8")


def read_router_config(model_dir: Path) -> dict[str, Any]:
    """A router folder's ``router.json`` ({} when it has none)."""
    path = model_dir / ROUTER_CONFIG
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg})") from None
    return data if isinstance(data, dict) else {}


def problem_folds(labels: Sequence[LabelledStep], folds: int, seed: int = 0) -> list[int]:
    """The fold of each step: problems dealt into ``folds`` folds, each problem kept whole.

    The problems are sorted, shuffled with ``seed`` and dealt in turn (the same dealing as the
    judges' cross-validation, :func:`~..judges.labelreport.cross_validated`).
    """
    problems = sorted({str(step["problem_id"]) for step in labels})
    if folds < 2 or folds > len(problems):
        raise ConfigError(
            f"--folds must be between 2 and the number of problems ({len(problems)}), got {folds}"
        )
    random.Random(seed).shuffle(problems)
    fold_of = {problem: i % folds for i, problem in enumerate(problems)}
    return [fold_of[str(step["problem_id"])] for step in labels]


OUT_OF_FOLD = "oof.jsonl"
"""The file :func:`cross_validate` appends each fold's predictions to (read back to resume)."""


def example_id(step: LabelledStep) -> str:
    """``problem:step_index``, the id the judges' reports give a labelled step."""
    return f"{step['problem_id']}:{step['step_index']}"


def prediction_line(step: LabelledStep, p: float, **extra: Any) -> dict[str, Any]:
    """One prediction: the step's id, ``p_escalate``, its advantage and harmful flag."""
    return {
        "example": example_id(step),
        **extra,
        "p_escalate": p,
        "advantage": float(step["advantage"]),
        "harmful": bool(step.get("harmful", False)),
    }


def read_out_of_fold(path: Path) -> list[dict[str, Any]]:
    """The prediction lines of ``path`` (none when it does not exist)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


__all__ = [
    "ID2LABEL",
    "LABEL2ID",
    "OUT_OF_FOLD",
    "check_model_dir",
    "example_id",
    "load_tokenizer",
    "prediction_line",
    "problem_folds",
    "progress_bars",
    "read_out_of_fold",
    "read_router_config",
    "router_input",
    "save_router",
    "torch_threads",
]
