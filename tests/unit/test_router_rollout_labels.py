"""The router reads rollout labels (`specreason label`): examples, target, margin, folds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_specreason.arbitrage.features import label_of, router_text
from langchain_specreason.errors import ConfigError, InputError
from langchain_specreason.lab.training import train as train_module
from langchain_specreason.lab.training.labels_file import load_labels
from langchain_specreason.lab.training.settings import TrainSettings
from langchain_specreason.lab.training.train import (
    cross_validate,
    problem_folds,
    router_reading,
    spearman,
)


def rollout(problem: str, index: int, advantage: float, harmful: bool = False) -> dict:
    """A line as `specreason label` writes it (extra keys included)."""
    steps = [f"step {i} of {problem}\n\n" for i in range(index)]
    return {
        "problem_id": problem,
        "step_index": index,
        "question": f"Question {problem}?",
        "gold": "4",
        "steps": steps,
        "step": f"draft step {index}\n\n",
        "base_step": f"base step {index}\n\n",
        "same_step": False,
        "draft_rate": 0.25,
        "base_rate": 0.25 + advantage,
        "advantage": advantage,
        "harmful": harmful,
        "rollout_tokens": 10,
        "draft_logprobs": [-0.1],
    }


def write_folder(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_a_label_folder_reads_as_router_examples(tmp_path):
    folder = write_folder(
        tmp_path / "dev", [rollout("p1", 0, 0.0), rollout("p1", 1, 0.75, harmful=True)]
    )
    steps = load_labels(folder)  # the folder itself, as `arbitrage train --dataset DIR`
    assert [s["step_index"] for s in steps] == [0, 1]
    second = steps[1]
    assert second["prefix"] == [{"author": "draft", "text": "step 0 of p1\n\n"}]
    assert second["draft_step"] == "draft step 1\n\n"
    assert (second["draft_score"], second["base_score"], second["advantage"]) == (0.25, 1.0, 0.75)
    assert second["escalated"] and second["harmful"]
    assert not steps[0]["escalated"] and not steps[0]["harmful"]
    text = router_text(second["question"], second["prefix"], second["draft_step"])
    assert text.startswith("Question: Question p1?")
    assert text.endswith("Next step (draft):\ndraft step 1")
    assert "[draft] step 0 of p1" in text


def test_a_bad_rollout_line_is_named(tmp_path):
    row = rollout("p1", 0, 0.0)
    del row["base_step"]
    with pytest.raises(InputError, match=r"line 1: missing keys base_step"):
        load_labels(write_folder(tmp_path / "dev", [row]))
    row = rollout("p1", 0, 0.0)
    row["draft_rate"] = "high"
    with pytest.raises(InputError, match=r"line 1: draft_rate must be a number"):
        load_labels(write_folder(tmp_path / "dev2", [row]))


def test_the_margin_sets_the_target(tmp_path):
    rows = [rollout("p", i, a) for i, a in enumerate([-0.25, 0.0, 0.25, 0.5, 1.0])]
    steps = load_labels(write_folder(tmp_path / "dev", rows))
    assert [label_of(s) for s in steps] == [0, 0, 1, 1, 1]
    assert [label_of(s, 0.25) for s in steps] == [0, 0, 0, 1, 1]
    assert [label_of(s, 0.5) for s in steps] == [0, 0, 0, 0, 1]


def test_folds_keep_problems_whole_and_are_seeded(tmp_path):
    rows = [rollout(f"p{p}", i, 0.0) for p in range(7) for i in range(p % 3 + 1)]
    steps = load_labels(write_folder(tmp_path / "dev", rows))
    folds = problem_folds(steps, 3, seed=0)
    by_problem: dict[str, set[int]] = {}
    for step, fold in zip(steps, folds, strict=True):
        by_problem.setdefault(step["problem_id"], set()).add(fold)
    assert all(len(f) == 1 for f in by_problem.values())
    assert set(folds) == {0, 1, 2}
    assert problem_folds(steps, 3, seed=0) == folds
    with pytest.raises(ConfigError, match="--folds"):
        problem_folds(steps, 8)


@pytest.mark.needs_transformers
def test_the_text_is_cut_from_the_left(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = [f"w{i}" for i in range(40)]
    vocab = {w: i for i, w in enumerate(["[UNK]", "[PAD]", *words])}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="[PAD]").save_pretrained(tmp_path)
    tokenizer = train_module._tokenizer(tmp_path)
    ids = tokenizer(" ".join(words), truncation=True, max_length=5)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == words[-5:]


def test_cross_validation_trains_without_each_fold_and_resumes(tmp_path, monkeypatch):
    rows = [
        rollout(f"p{p}", i, 0.5 if i == 1 else 0.0, harmful=i == 1)
        for p in range(6)
        for i in range(3)
    ]
    steps = load_labels(write_folder(tmp_path / "dev", rows))
    trained: list[set[str]] = []

    def fake_train(labels, out, **_kw):
        trained.append({s["problem_id"] for s in labels})

    def fake_predict(_folder, labels, **_kw):
        return [0.9 if s["harmful"] else 0.1 for s in labels]

    monkeypatch.setattr(train_module, "train_router", fake_train)
    monkeypatch.setattr(train_module, "predict", fake_predict)
    settings = TrainSettings(threads=1)
    out = tmp_path / "cv"
    lines = cross_validate(steps, out, base_model=tmp_path, settings=settings, folds=3)
    assert len(lines) == len(steps) and len(trained) == 3
    for fold in range(3):
        tested = {line["example"].split(":")[0] for line in lines if line["fold"] == fold}
        assert tested and not tested & trained[fold]
    again = cross_validate(steps, out, base_model=tmp_path, settings=settings, folds=3)
    assert len(trained) == 3 and len(again) == len(steps)  # every fold read back
    reading = router_reading(again, resamples=50)
    assert reading["auroc"] == 1.0 and reading["harmful"] == 6
    assert reading["spearman"] == pytest.approx(1.0)
    assert reading["auroc_95"] == (1.0, 1.0)


def test_spearman_with_ties_and_constants():
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2], [0, 0, 1]) == pytest.approx(1.0)
    assert spearman([1, 1, 1], [1, 2, 3]) is None


def tiny_model(folder: Path) -> Path:
    """A random two-layer Llama and a word-level tokenizer: the pipeline, not a router."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = "Question p0 p1 p2 p3 p4 p5 ? Reasoning so far : ( none ) [ draft ] step of Next base"
    vocab = {w: i for i, w in enumerate(["[UNK]", "[PAD]", *dict.fromkeys(words.split())])}
    vocab.update({str(i): len(vocab) + i for i in range(10)})
    raw = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="[PAD]")
    tokenizer.save_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def six_problems() -> list[dict]:
    """Six problems of three steps, the second of each harmful (advantage 0.5)."""
    return [
        rollout(f"p{p}", i, 0.5 if i == 1 else 0.0, harmful=i == 1)
        for p in range(6)
        for i in range(3)
    ]


@pytest.mark.needs_transformers
def test_cross_validation_end_to_end_on_a_tiny_model(tmp_path):
    rows = six_problems()
    steps = load_labels(write_folder(tmp_path / "dev", rows))
    base = tiny_model(tmp_path / "base")
    settings = TrainSettings(epochs=1, max_tokens=32, threads=1, batch_size=4)
    lines = cross_validate(steps, tmp_path / "cv", base_model=base, settings=settings, folds=2)
    assert sorted(line["example"] for line in lines) == sorted(
        f"p{p}:{i}" for p in range(6) for i in range(3)
    )
    assert all(0.0 <= line["p_escalate"] <= 1.0 for line in lines)
    assert router_reading(lines, resamples=20)["steps"] == 18
