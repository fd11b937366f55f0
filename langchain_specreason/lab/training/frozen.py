"""The router as a frozen base model and a logistic head (``--method frozen``).

Fine-tuning SmolLM2-135M takes about eight minutes a fold on two CPU cores, and the `cpu`
pair's 0.5B draft model about four times that. The frozen method reads each labelled step
once: the base model's final hidden state at the last token of the router text (the position
a sequence classifier pools, in transformers and in vLLM), and fits a logistic regression on
those vectors: standardised, with the L2 strength chosen by cross-validation over whole
problems of the training steps alone (:func:`~..judges.labelreport.choose_l2`, the ``learned``
judge's rule).

The saved folder is the sequence classifier vLLM serves like a fine-tuned router: the base
model unchanged, the score head's ``escalate`` row the fitted weights over the feature scales,
its ``keep`` row zero. The head has no bias, so the fit's constant (its bias less the weights
times the means) is written to ``router.json`` as ``logit_offset``; :func:`~.train.predict`
and :class:`~langchain_specreason.arbitrage.router.RouterJudge` add it back, and the served
``P(escalate)`` is the fit's. Every probability here is the linear model without the fit's
clip of standardised values (6 standard deviations), which a linear head cannot apply, so a
cross-validated reading, a held-out reading and the served router score alike.

Hidden states are cached (:func:`hidden_states`) under ``<cache>/router-features``, one file
per base model and reading (max tokens, author tags), keyed by the router text's hash: a
cross-validation and the final training read each step once; the cache is resumable.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...arbitrage.features import LabelledStep, label_of
from .settings import TrainSettings

FEATURES_DIR = "router-features"
"""The folder under the cache root that holds the hidden-state caches."""


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def cache_file(base_model: Path, max_tokens: int, tag_authors: bool) -> Path:
    """The hidden-state cache of ``base_model`` read with these settings."""
    from ...serving.fetch import cache_root

    name = f"{Path(base_model).name}-{max_tokens}-{'tags' if tag_authors else 'plain'}.npz"
    return cache_root() / FEATURES_DIR / name


def hidden_states(
    base_model: Path,
    texts: Sequence[str],
    *,
    max_tokens: int,
    cache: Path | None,
    threads: int | None = None,
    progress: bool = False,
) -> list[list[float]]:
    """The final hidden state at the last token of each text, cut from the left.

    One text at a time (no padding). ``cache``: an ``.npz`` file read first and written as it
    grows (every 25 new texts and at the end); None: no cache.
    """
    import numpy as np
    import torch
    from transformers import AutoModel

    from .common import load_tokenizer, torch_threads

    known: dict[str, list[float]] = {}
    if cache is not None and cache.is_file():
        with np.load(cache) as data:
            known = {
                str(k): [float(v) for v in row]
                for k, row in zip(data["keys"], data["vectors"], strict=True)
            }
    keys = [_text_key(t) for t in texts]
    todo_keys = [k for k in dict.fromkeys(keys) if k not in known]
    first = {k: i for i, k in reversed(list(enumerate(keys)))}

    def save() -> None:
        if cache is None:
            return
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp.npz")
        np.savez(
            tmp,
            keys=np.array(list(known)),
            vectors=np.array(list(known.values()), dtype=np.float32),
        )
        tmp.replace(cache)

    if todo_keys:
        from tqdm.auto import tqdm

        tokenizer = load_tokenizer(base_model)
        model = AutoModel.from_pretrained(base_model, dtype=torch.float32)
        model.eval()
        with torch_threads(threads), torch.inference_mode():
            for n, key in enumerate(tqdm(todo_keys, disable=not progress, desc="hidden states")):
                enc = tokenizer(
                    texts[first[key]], truncation=True, max_length=max_tokens, return_tensors="pt"
                )
                last = model(**enc).last_hidden_state[0, -1]
                known[key] = [float(v) for v in last]
                if (n + 1) % 25 == 0:
                    save()
        save()
    return [known[k] for k in keys]


def head_p(escalate: Sequence[float], offset: float, x: Sequence[float]) -> float:
    """``P(escalate)`` of the saved head: ``sigmoid(escalate . x + offset)`` (keep row zero).

    ``escalate`` and ``offset`` from :func:`head_rows`; the fit's clip is not applied (see the
    module).
    """
    z = offset + math.fsum(w * v for w, v in zip(escalate, x, strict=True))
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def fit_head(
    xs: Sequence[Sequence[float]], escalate: Sequence[bool], ids: Sequence[str]
) -> tuple[Any, float]:
    """The logistic model (P(keep)) on ``xs`` and its L2 strength, chosen on these steps.

    ``ids``: each step's ``problem:index`` id; the L2 strength's inner folds keep problems
    whole.
    """
    from ..judges.labelreport import choose_l2
    from ..judges.learned import fit_logistic

    names = [f"h{j}" for j in range(len(xs[0]))]
    features = dict(zip(ids, xs, strict=True))
    harmful = dict(zip(ids, escalate, strict=True))
    l2 = choose_l2(list(ids), features, harmful, names)
    model = fit_logistic(list(xs), [not e for e in escalate], names=names, l2=l2)
    return model, l2


def head_rows(model: Any) -> tuple[list[float], list[float], float]:
    """The score head's ``keep`` and ``escalate`` rows and the ``logit_offset`` (module doc)."""
    escalate = [-w / s for w, s in zip(model.weights, model.scales, strict=True)]
    constant = model.bias - math.fsum(
        w * m / s for w, m, s in zip(model.weights, model.means, model.scales, strict=True)
    )
    return [0.0] * len(escalate), escalate, -constant


def texts_of(labels: Sequence[LabelledStep], tag_authors: bool) -> list[str]:
    """The router text of each step (as :func:`~.train.predict` reads it)."""
    from .common import router_input

    return [router_input(step, tag_authors) for step in labels]


def examples(
    labels: Sequence[LabelledStep], base_model: Path, settings: TrainSettings, progress: bool
) -> tuple[list[list[float]], list[bool]]:
    """Each step's hidden state (cached) and target (escalate: advantage > the margin)."""
    xs = hidden_states(
        base_model,
        texts_of(labels, True),
        max_tokens=settings.max_tokens,
        cache=cache_file(base_model, settings.max_tokens, True),
        threads=settings.threads,
        progress=progress,
    )
    return xs, [bool(label_of(step, settings.margin)) for step in labels]


def cross_validate_frozen(
    labels: Sequence[LabelledStep],
    out: Path,
    *,
    base_model: Path,
    settings: TrainSettings,
    folds: int = 5,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Out-of-fold ``P(escalate)`` of every step by frozen-feature routers (``oof.jsonl``).

    The same folds of whole problems as :func:`~.train.cross_validate`; each fold's head is
    fitted (its L2 strength chosen) on the other folds' steps alone.
    """
    from .common import OUT_OF_FOLD, example_id, prediction_line, problem_folds

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fold_of = problem_folds(labels, folds, settings.seed)
    xs, ys = examples(labels, base_model, settings, progress)
    ids = [example_id(step) for step in labels]
    rows: list[dict[str, Any]] = []
    for fold in range(folds):
        train = [i for i, f in enumerate(fold_of) if f != fold]
        model, l2 = fit_head(
            [xs[i] for i in train], [ys[i] for i in train], [ids[i] for i in train]
        )
        _keep, escalate, offset = head_rows(model)
        rows += [
            prediction_line(labels[i], head_p(escalate, offset, xs[i]), fold=fold, l2=l2)
            for i, f in enumerate(fold_of)
            if f == fold
        ]
    (out / OUT_OF_FOLD).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


def train_frozen(
    labels: Sequence[LabelledStep],
    out: Path,
    *,
    base_model: Path,
    settings: TrainSettings,
    progress: bool = False,
) -> dict[str, Any]:
    """Fit the head on every step and save the servable folder (see the module).

    Returns what ``router.json`` records of the fit.
    """
    import torch
    from transformers import AutoModelForSequenceClassification

    from .common import ID2LABEL, LABEL2ID, example_id, load_tokenizer, save_router

    xs, ys = examples(labels, base_model, settings, progress)
    model, l2 = fit_head(xs, ys, [example_id(step) for step in labels])
    keep, escalate, offset = head_rows(model)
    tokenizer = load_tokenizer(base_model)
    classifier = AutoModelForSequenceClassification.from_pretrained(
        base_model, num_labels=2, id2label=ID2LABEL, label2id=LABEL2ID, dtype=torch.float32
    )
    classifier.config.pad_token_id = tokenizer.pad_token_id
    with torch.no_grad():
        classifier.score.weight.copy_(torch.tensor([keep, escalate], dtype=torch.float32))
    fit = {
        "l2": l2,
        "steps": len(ys),
        "escalate": sum(ys),
        "train_p_escalate_mean": sum(head_p(escalate, offset, x) for x in xs) / len(xs),
    }
    save_router(
        classifier,
        tokenizer,
        Path(out),
        {
            "method": "frozen",
            "max_tokens": settings.max_tokens,
            "truncation_side": "left",
            "tag_authors": True,
            "margin": settings.margin,
            "logit_offset": offset,
            "settings": settings.model_dump(),
            "base_model": str(base_model),
            "fit": fit,
            "id2label": {str(k): v for k, v in ID2LABEL.items()},
        },
    )
    return fit


__all__ = [
    "FEATURES_DIR",
    "cache_file",
    "cross_validate_frozen",
    "examples",
    "fit_head",
    "head_p",
    "head_rows",
    "hidden_states",
    "texts_of",
    "train_frozen",
]
