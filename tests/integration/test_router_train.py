"""`train_router` on the real SmolLM2-135M: a few steps on a tiny synthetic label set.

The set is trivially learnable (escalated drafts say "WRONG"), so a handful of optimizer steps
must lower the cross-entropy on it; the saved folder is what vLLM serves as a classifier.
Training uses one torch thread: on cores shared with vLLM servers that is several times
faster than two.
"""

from __future__ import annotations

import json

import pytest

from langchain_specreason.arbitrage.features import LabelledStep
from langchain_specreason.lab.training.labels_file import load_labels
from langchain_specreason.lab.training.settings import TrainSettings
from langchain_specreason.lab.training.train import evaluate_loss, train_router
from langchain_specreason.serving.fetch import fetch

pytestmark = pytest.mark.integration


def synthetic_steps(problems: int = 4, per_problem: int = 3) -> list[LabelledStep]:
    steps: list[LabelledStep] = []
    for p in range(problems):
        for s in range(per_problem):
            escalate = (p + s) % 2 == 0
            advantage = 2.0 + s if escalate else -1.0 - s
            steps.append(
                {
                    "problem_id": f"p{p}",
                    "step_index": s,
                    "question": f"What is {p} + {s}?",
                    "prefix": [
                        {"author": "draft" if k % 2 else "base", "text": f"Step {k}."}
                        for k in range(s)
                    ],
                    "draft_step": "This is WRONG nonsense." if escalate else "Add the two numbers.",
                    "base_step": f"{p} + {s} = {p + s}.",
                    "draft_score": 3.0,
                    "base_score": 3.0 + advantage,
                    "advantage": advantage,
                    "escalated": escalate,
                }
            )
    return steps


def test_training_lowers_the_loss_and_saves_a_classifier_folder(tmp_path):
    base = fetch("smollm2-135m", quiet=True)
    label_file = tmp_path / "labels.jsonl"
    label_file.write_text("".join(json.dumps(s) + "\n" for s in synthetic_steps()))
    steps = load_labels(label_file)
    before = evaluate_loss(base, steps, threads=1)

    out = tmp_path / "router"
    report = train_router(
        steps,
        out,
        base_model=base,
        settings=TrainSettings(max_steps=6, batch_size=4, held_out=0.25, threads=1),
        progress=False,
    )
    after = evaluate_loss(out, steps, threads=1)

    assert after < 0.5 * before, (before, after)  # measured: 1.10 -> 0.12
    assert report.steps == 6
    assert report.held_out_problems == 1 and report.train_problems == 3
    assert report.train_counts_after["keep"] == report.train_counts_after["escalate"]
    assert report.spearman is not None and report.accuracy is not None
    assert "router saved to" in report.format()

    router = json.loads((out / "router.json").read_text())
    assert {
        "max_tokens",
        "tag_authors",
        "margin",
        "base_model",
        "metrics",
        "train_examples",
        "held_out_examples",
        "class_counts",
    } <= router.keys()
    assert router["train_examples"] == report.train_examples
    assert router["truncation_side"] == "left"  # vLLM pooling servers cut from the right
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForSequenceClassification"]
    assert config["id2label"] == {"0": "keep", "1": "escalate"}
    assert config["pad_token_id"] is not None
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
