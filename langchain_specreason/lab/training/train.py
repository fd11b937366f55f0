"""Fine-tune the router: a small sequence classifier learnt from a label file.

Pipeline (:func:`train_router`):

1. label each step with :func:`~.features.label_of` (1 = escalate: the base step is better by
   more than ``margin``);
2. hold out a share of the *problems* (of the steps when there is a single problem), seeded;
3. downsample the majority class of the training split, seeded, to the minority's count
   (the held-out split keeps its natural mix);
4. fine-tune ``base_model`` with a two-label head using the Hugging Face ``Trainer``
   (cross-entropy), evaluate on the held-out split each epoch (Spearman correlation between
   ``P(escalate)`` and the advantage, accuracy) and keep the epoch with the best Spearman;
5. save a Hugging Face folder that vLLM serves as a classifier
   (``--runner pooling``; ``POST /classify``), plus ``router.json``.

The text is :func:`~.features.router_text` cut from the left to ``max_tokens`` tokens. vLLM
makes the same cut only when asked: a pooling server truncates from the *right* by default, so
a ``/classify`` request must carry ``"truncate_prompt_tokens": max_tokens`` and
``"truncation_side": "left"`` (both recorded in ``router.json``). Served with
``--runner pooling --dtype float32`` (``--convert classify`` is inferred from the
``LlamaForSequenceClassification`` architecture), the probabilities match transformers' to
about 1e-6; ``probs`` are ordered as :data:`ID2LABEL`.
"""

from __future__ import annotations

import json
import math
import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...arbitrage.features import (
    ROUTER_CONFIG,
    ROUTER_MAX_TOKENS,
    LabelledStep,
    label_of,
)
from ...errors import ConfigError, InputError
from .common import (
    ID2LABEL,
    LABEL2ID,
    OUT_OF_FOLD,
    example_id,
    prediction_line,
    problem_folds,
    read_out_of_fold,
)
from .common import check_model_dir as _check_model_dir
from .common import load_tokenizer as _tokenizer
from .common import progress_bars as _progress_bars
from .common import read_router_config as _read_router_config
from .common import router_input as _text
from .common import save_router as _save
from .common import torch_threads as _torch_threads
from .settings import TrainSettings

"""What :func:`train_router` writes beside the model: how the router reads its input."""


@dataclass
class TrainReport:
    """What :func:`train_router` did and how the saved router scores on held-out problems."""

    out: Path
    """The saved Hugging Face folder."""
    class_counts: dict[str, int]
    """Labels of every step, before splitting: ``{"keep": n, "escalate": m}``."""
    train_counts_before: dict[str, int]
    """Labels of the training split before downsampling."""
    train_counts_after: dict[str, int]
    """Labels of the training split after downsampling (balanced)."""
    held_out_counts: dict[str, int]
    """Labels of the held-out split (not downsampled)."""
    train_problems: int
    """Distinct problems in the training split."""
    held_out_problems: int
    """Distinct problems in the held-out split."""
    steps: int
    """Optimizer steps taken."""
    first_loss: float | None
    """First training loss logged."""
    last_loss: float | None
    """Last training loss logged."""
    spearman: float | None
    """Held-out Spearman correlation of ``P(escalate)`` with the advantage (None: no held-out)."""
    accuracy: float | None
    """Held-out accuracy at ``P(escalate) >= 0.5`` (None: no held-out)."""
    eval_loss: float | None
    """Held-out mean cross-entropy (None: no held-out)."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """Everything written under ``metrics`` in ``router.json``."""

    @property
    def train_examples(self) -> int:
        """Steps the router was trained on (after downsampling)."""
        return sum(self.train_counts_after.values())

    @property
    def held_out_examples(self) -> int:
        """Steps of the held-out split."""
        return sum(self.held_out_counts.values())

    def format(self) -> str:
        """A few lines for the terminal."""

        def counts(c: dict[str, int]) -> str:
            return f"{c['keep']} keep / {c['escalate']} escalate"

        lines = [
            f"labels: {counts(self.class_counts)}",
            f"train: {self.train_problems} problems, {counts(self.train_counts_before)} "
            f"-> {counts(self.train_counts_after)} after downsampling",
            f"held out: {self.held_out_problems} problems, {counts(self.held_out_counts)}",
            f"steps: {self.steps}, train loss {_fmt(self.first_loss)} -> {_fmt(self.last_loss)}",
        ]
        if self.held_out_examples:
            lines.append(
                f"held out: spearman {_fmt(self.spearman)}, accuracy "
                f"{_fmt(self.accuracy)}, loss {_fmt(self.eval_loss)}"
            )
        lines.append(f"router saved to {self.out}")
        return "\n".join(lines)


def train_router(
    labels: Sequence[LabelledStep],
    out: Path,
    *,
    base_model: Path,
    settings: TrainSettings | None = None,
    tag_authors: bool = True,
    progress: bool = True,
) -> TrainReport:
    """Fine-tune ``base_model`` into the router and save it to ``out`` (see the module doc).

    ``settings`` (:class:`~.settings.TrainSettings`; None: its defaults) are the split, the
    optimizer and the router's input length, all recorded in ``router.json``.
    """
    settings = settings or TrainSettings()
    base_model = _check_model_dir(base_model)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"router output {out} is a file; pass a folder")
    if settings.method == "frozen":
        return _train_frozen(labels, out, base_model, settings, progress)
    plan = _plan(labels, settings.margin, settings.held_out, settings.seed)
    with _torch_threads(settings.threads), _progress_bars(progress):
        return _train(
            plan,
            out,
            base_model=base_model,
            settings=settings,
            tag_authors=tag_authors,
            progress=progress,
        )


def _train_frozen(
    labels: Sequence[LabelledStep],
    out: Path,
    base_model: Path,
    settings: TrainSettings,
    progress: bool,
) -> TrainReport:
    """:func:`~.frozen.train_frozen` on every step (no held-out split), as a report."""
    from .frozen import train_frozen

    ys = [label_of(step, settings.margin) for step in labels]
    counts = _counts(ys)
    _check_two_classes(counts, settings.margin)
    with _torch_threads(settings.threads), _progress_bars(progress):
        fit = train_frozen(labels, out, base_model=base_model, settings=settings, progress=progress)
    return TrainReport(
        out=out,
        class_counts=counts,
        train_counts_before=counts,
        train_counts_after=counts,
        held_out_counts={"keep": 0, "escalate": 0},
        train_problems=len({step["problem_id"] for step in labels}),
        held_out_problems=0,
        steps=0,
        first_loss=None,
        last_loss=None,
        spearman=None,
        accuracy=None,
        eval_loss=None,
        metrics=fit,
    )


@dataclass
class _Plan:
    """The labelled steps, their labels, and which ones train and which are held out."""

    labels: Sequence[LabelledStep]
    ys: list[int]
    train_idx: list[int]
    """Training steps after downsampling."""
    held_idx: list[int]
    all_counts: dict[str, int]
    before: dict[str, int]
    """Training labels before downsampling."""

    def counts(self, indices: list[int]) -> dict[str, int]:
        return _counts([self.ys[i] for i in indices])

    def problems(self, indices: list[int]) -> int:
        return len({self.labels[i]["problem_id"] for i in indices})


def _plan(labels: Sequence[LabelledStep], margin: float, held_out: float, seed: int) -> _Plan:
    ys = [label_of(step, margin) for step in labels]
    all_counts = _counts(ys)
    _check_two_classes(all_counts, margin)
    train_idx, held_idx = _split(labels, held_out, seed)
    before = _counts([ys[i] for i in train_idx])
    if min(before.values()) == 0:
        raise InputError(
            f"the training split has labels of one class only: {before['keep']} "
            f"keep, {before['escalate']} escalate; label more problems or "
            "lower --held-out"
        )
    return _Plan(labels, ys, _downsample(train_idx, ys, seed), held_idx, all_counts, before)


def _train(
    plan: _Plan,
    out: Path,
    *,
    base_model: Path,
    settings: TrainSettings,
    tag_authors: bool,
    progress: bool,
) -> TrainReport:
    """Fine-tune, evaluate and save; see :func:`train_router`."""
    import torch
    from transformers import (
        AutoModelForSequenceClassification,
        DataCollatorWithPadding,
        EvalPrediction,
        PrinterCallback,
        Trainer,
        TrainingArguments,
        set_seed,
    )

    set_seed(settings.seed)  # the new head's initial weights
    tokenizer = _tokenizer(base_model)
    model = AutoModelForSequenceClassification.from_pretrained(
        base_model, num_labels=2, id2label=ID2LABEL, label2id=LABEL2ID, dtype=torch.float32
    )
    model.config.pad_token_id = tokenizer.pad_token_id
    train_set = _encode(tokenizer, plan, plan.train_idx, settings.max_tokens, tag_authors)
    held_set = _encode(tokenizer, plan, plan.held_idx, settings.max_tokens, tag_authors)
    advantages = [float(plan.labels[i]["advantage"]) for i in plan.held_idx]

    def compute_metrics(pred: EvalPrediction) -> dict[str, float]:
        logits = pred.predictions[0] if isinstance(pred.predictions, tuple) else pred.predictions
        return _metrics(logits, pred.label_ids, advantages)

    batches = math.ceil(len(train_set) / settings.batch_size)
    total = settings.max_steps or batches * settings.epochs
    evaluate = bool(held_set)
    with tempfile.TemporaryDirectory(prefix="specreason-router-") as tmp:
        args = TrainingArguments(
            output_dir=tmp,
            use_cpu=True,
            report_to=[],
            seed=settings.seed,
            data_seed=settings.seed,
            num_train_epochs=settings.epochs,
            max_steps=settings.max_steps or -1,
            learning_rate=settings.learning_rate,
            per_device_train_batch_size=settings.batch_size,
            per_device_eval_batch_size=settings.batch_size,
            logging_strategy="steps",
            logging_steps=max(1, total // 50),
            logging_first_step=True,
            eval_strategy="epoch" if evaluate else "no",
            save_strategy="epoch" if evaluate else "no",
            save_only_model=True,
            save_total_limit=1,
            load_best_model_at_end=evaluate,
            metric_for_best_model="spearman" if evaluate else None,
            greater_is_better=True if evaluate else None,
            disable_tqdm=not progress,
            dataloader_pin_memory=False,
        )
        trainer = Trainer(
            model=model,
            args=args,
            train_dataset=train_set,
            eval_dataset=held_set if evaluate else None,
            data_collator=DataCollatorWithPadding(tokenizer),
            processing_class=tokenizer,
            compute_metrics=compute_metrics,
        )
        if not progress:
            trainer.remove_callback(PrinterCallback)
        trainer.train()
        final = trainer.evaluate() if evaluate else {}
    losses = [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]
    report = TrainReport(
        out=out,
        class_counts=plan.all_counts,
        train_counts_before=plan.before,
        train_counts_after=plan.counts(plan.train_idx),
        held_out_counts=plan.counts(plan.held_idx),
        train_problems=plan.problems(plan.train_idx),
        held_out_problems=plan.problems(plan.held_idx),
        steps=trainer.state.global_step,
        first_loss=losses[0] if losses else None,
        last_loss=losses[-1] if losses else None,
        spearman=final.get("eval_spearman"),
        accuracy=final.get("eval_accuracy"),
        eval_loss=final.get("eval_loss"),
    )
    report.metrics = {
        "spearman": report.spearman,
        "accuracy": report.accuracy,
        "eval_loss": report.eval_loss,
        "train_loss_first": report.first_loss,
        "train_loss_last": report.last_loss,
        "steps": report.steps,
        "best_step": _step_of(trainer.state.best_model_checkpoint),
    }
    _save(
        trainer.model,
        tokenizer,
        out,
        {
            "max_tokens": settings.max_tokens,
            "truncation_side": "left",
            "tag_authors": tag_authors,
            "margin": settings.margin,
            "settings": settings.model_dump(),
            "base_model": str(base_model),
            "metrics": report.metrics,
            "train_examples": report.train_examples,
            "held_out_examples": report.held_out_examples,
            "class_counts": {
                "all": plan.all_counts,
                "train_before": plan.before,
                "train": report.train_counts_after,
                "held_out": report.held_out_counts,
            },
            "id2label": {str(k): v for k, v in ID2LABEL.items()},
        },
    )
    return report


def evaluate_loss(
    model_dir: Path,
    labels: Sequence[LabelledStep],
    *,
    margin: float = 0.0,
    max_tokens: int | None = None,
    tag_authors: bool | None = None,
    batch_size: int = 8,
    seed: int = 0,
    threads: int | None = None,
) -> float:
    """Mean cross-entropy of a saved router (or a base model) on ``labels``.

    ``max_tokens`` and ``tag_authors`` default to the folder's ``router.json`` when it has
    one, else to :data:`~.features.ROUTER_MAX_TOKENS` and True. A base model gets a new head
    drawn with ``seed``: the one :func:`train_router` starts from with the same seed.
    """
    import torch
    from transformers import AutoModelForSequenceClassification, set_seed

    model_dir = _check_model_dir(model_dir)
    if not labels:
        raise InputError("no labelled steps to evaluate")
    saved = _read_router_config(model_dir)
    max_tokens = max_tokens or int(saved.get("max_tokens", ROUTER_MAX_TOKENS))
    if tag_authors is None:
        tag_authors = bool(saved.get("tag_authors", True))
    set_seed(seed)
    tokenizer = _tokenizer(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(
        model_dir, num_labels=2, id2label=ID2LABEL, label2id=LABEL2ID, dtype=torch.float32
    )
    model.config.pad_token_id = tokenizer.pad_token_id
    model.eval()
    total, count = 0.0, 0
    with _torch_threads(threads), torch.inference_mode():
        for start in range(0, len(labels), batch_size):
            chunk = labels[start : start + batch_size]
            texts = [_text(step, tag_authors) for step in chunk]
            enc = tokenizer(
                texts, truncation=True, max_length=max_tokens, padding=True, return_tensors="pt"
            )
            target = torch.tensor([label_of(step, margin) for step in chunk])
            logits = model(**enc).logits
            loss = torch.nn.functional.cross_entropy(logits, target, reduction="sum")
            total += float(loss)
            count += len(chunk)
    return total / count


def _check_two_classes(counts: dict[str, int], margin: float) -> None:
    if not sum(counts.values()):
        raise InputError("no labelled steps to train on; label some problems first")
    if min(counts.values()) == 0:
        raise InputError(
            f"labels of one class only: {counts['keep']} keep, "
            f"{counts['escalate']} escalate (margin {margin:g}); label more "
            "problems or change --margin"
        )


def _counts(ys: Sequence[int]) -> dict[str, int]:
    return {"keep": sum(1 for y in ys if y == 0), "escalate": sum(1 for y in ys if y == 1)}


def _split(
    labels: Sequence[LabelledStep], held_out: float, seed: int
) -> tuple[list[int], list[int]]:
    """Indices of the training and held-out steps: whole problems when there are several."""
    problems = sorted({str(step["problem_id"]) for step in labels})
    units: list[str] | list[int] = problems if len(problems) >= 2 else list(range(len(labels)))
    if held_out <= 0 or len(units) < 2:
        return list(range(len(labels))), []
    order = list(units)
    random.Random(seed).shuffle(order)
    n_held = min(len(order) - 1, max(1, round(held_out * len(order))))
    held = set(order[:n_held])
    if len(problems) >= 2:
        is_held = [str(step["problem_id"]) in held for step in labels]
    else:
        is_held = [i in held for i in range(len(labels))]
    return ([i for i, h in enumerate(is_held) if not h], [i for i, h in enumerate(is_held) if h])


def _downsample(indices: list[int], ys: Sequence[int], seed: int) -> list[int]:
    """``indices`` with the majority class cut, seeded, to the minority's count (order kept)."""
    by_class = {c: [i for i in indices if ys[i] == c] for c in (0, 1)}
    keep = min(len(v) for v in by_class.values())
    rng = random.Random(seed)
    chosen = {i for v in by_class.values() for i in rng.sample(v, keep)}
    return [i for i in indices if i in chosen]


class _Examples:
    """Tokenized examples for the ``Trainer`` (a map-style dataset)."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.rows[i]


def _encode(
    tokenizer: Any, plan: _Plan, indices: list[int], max_tokens: int, tag_authors: bool
) -> _Examples:
    if not indices:
        return _Examples([])
    enc = tokenizer(
        [_text(plan.labels[i], tag_authors) for i in indices],
        truncation=True,
        max_length=max_tokens,
    )
    return _Examples(
        [
            {"input_ids": ids, "attention_mask": mask, "labels": plan.ys[i]}
            for ids, mask, i in zip(enc["input_ids"], enc["attention_mask"], indices, strict=True)
        ]
    )


def _metrics(logits: Any, label_ids: Any, advantages: Sequence[float]) -> dict[str, float]:
    """Spearman of ``P(escalate)`` with the advantage (0.0 when undefined) and accuracy."""
    import numpy as np
    from scipy.stats import spearmanr

    logits = np.asarray(logits, dtype=np.float64)
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    p_escalate = shifted[:, 1] / shifted.sum(axis=1)
    rho = float(spearmanr(p_escalate, np.asarray(advantages)).statistic)
    accuracy = float(((p_escalate >= 0.5).astype(int) == np.asarray(label_ids)).mean())
    return {"spearman": 0.0 if math.isnan(rho) else rho, "accuracy": accuracy}


def _step_of(checkpoint: str | None) -> int | None:
    if not checkpoint:
        return None
    tail = Path(checkpoint).name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else None


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def predict(
    model_dir: Path,
    labels: Sequence[LabelledStep],
    *,
    batch_size: int = 8,
    threads: int | None = None,
) -> list[float]:
    """``P(escalate)`` of each step by a saved router, reading it as ``router.json`` says."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model_dir = _check_model_dir(model_dir)
    saved = _read_router_config(model_dir)
    max_tokens = int(saved.get("max_tokens", ROUTER_MAX_TOKENS))
    tag_authors = bool(saved.get("tag_authors", True))
    offset = float(saved.get("logit_offset", 0.0))
    tokenizer = _tokenizer(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32)
    model.config.pad_token_id = tokenizer.pad_token_id
    model.eval()
    out: list[float] = []
    with _torch_threads(threads), torch.inference_mode():
        for start in range(0, len(labels), batch_size):
            chunk = labels[start : start + batch_size]
            enc = tokenizer(
                [_text(step, tag_authors) for step in chunk],
                truncation=True,
                max_length=max_tokens,
                padding=True,
                return_tensors="pt",
            )
            logits = model(**enc).logits.float()
            out += [float(p) for p in torch.sigmoid(logits[:, 1] - logits[:, 0] + offset)]
    return out


def cross_validate(
    labels: Sequence[LabelledStep],
    out: Path,
    *,
    base_model: Path,
    settings: TrainSettings,
    folds: int = 5,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Out-of-fold ``P(escalate)`` of every step: a router per fold of whole problems.

    Each fold's steps are read by a router trained (``settings``, no inner held-out split, the
    epochs decide) on the other folds' steps; one line per step is appended to
    ``out/oof.jsonl`` as each fold ends, and a fold already there is not trained again
    (resumable). Returns every line.
    """
    out = Path(out)
    if settings.method == "frozen":
        from .frozen import cross_validate_frozen

        base_model = _check_model_dir(base_model)
        with _progress_bars(progress):
            return cross_validate_frozen(
                labels,
                out,
                base_model=base_model,
                settings=settings,
                folds=folds,
                progress=progress,
            )
    out.mkdir(parents=True, exist_ok=True)
    path = out / OUT_OF_FOLD
    fold_of = problem_folds(labels, folds, settings.seed)
    rows = read_out_of_fold(path)
    done = {int(row["fold"]) for row in rows}
    fold_settings = settings.model_copy(update={"held_out": 0.0})
    for fold in range(folds):
        if fold in done:
            continue
        train = [step for step, f in zip(labels, fold_of, strict=True) if f != fold]
        test = [step for step, f in zip(labels, fold_of, strict=True) if f == fold]
        with tempfile.TemporaryDirectory(prefix="specreason-router-cv-") as tmp:
            train_router(
                train, Path(tmp), base_model=base_model, settings=fold_settings, progress=progress
            )
            probs = predict(Path(tmp), test, threads=settings.threads)
        lines = [prediction_line(step, p, fold=fold) for step, p in zip(test, probs, strict=True)]
        with path.open("a", encoding="utf-8") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
        rows += lines
    return rows


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rank correlation (mid-ranks for ties); None when either side is constant."""

    def ranks(values: Sequence[float]) -> list[float]:
        order = sorted(range(len(values)), key=lambda i: values[i])
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j < len(order) and values[order[j]] == values[order[i]]:
                j += 1
            for k in range(i, j):
                out[order[k]] = (i + j + 1) / 2
            i = j
        return out

    if len(xs) < 2:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else None


def router_reading(
    rows: Sequence[dict[str, Any]], *, resamples: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """The router's predictions read as a judge: AUROC for harmful steps and Spearman.

    ``rows``: lines of :func:`prediction_line`. AUROC: how often a harmful step gets a higher
    ``p_escalate`` than a harmless one; Spearman: ``p_escalate`` against the advantage. Both
    with a 95% interval from a seeded bootstrap over whole problems.
    """
    from ..judges.labelreport import auroc_interval, problem_of
    from ..judges.report import auroc
    from ..shared.stats import percentile_95

    keep = {row["example"]: 1.0 - float(row["p_escalate"]) for row in rows}
    harmful = {row["example"]: bool(row["harmful"]) for row in rows}
    ok = [s for e, s in keep.items() if not harmful[e]]
    bad = [s for e, s in keep.items() if harmful[e]]
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(problem_of(row["example"]), []).append(row)
    keys = sorted(groups)
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        sample = [r for _k in keys for r in groups[keys[rng.randrange(len(keys))]]]
        rho = spearman([r["p_escalate"] for r in sample], [r["advantage"] for r in sample])
        if rho is not None:
            draws.append(rho)
    return {
        "steps": len(rows),
        "problems": len(keys),
        "harmful": len(bad),
        "auroc": auroc(ok, bad),
        "auroc_95": auroc_interval(keep, harmful, resamples=resamples, seed=seed),
        "spearman": spearman([r["p_escalate"] for r in rows], [r["advantage"] for r in rows]),
        "spearman_95": percentile_95(draws) if draws else None,
    }


__all__ = [
    "OUT_OF_FOLD",
    "ROUTER_CONFIG",
    "TrainReport",
    "cross_validate",
    "evaluate_loss",
    "example_id",
    "predict",
    "prediction_line",
    "problem_folds",
    "read_out_of_fold",
    "router_reading",
    "spearman",
    "train_router",
]
