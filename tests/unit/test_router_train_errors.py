"""`load_labels` and `train_router` refuse bad input with one-line typed errors, before any
model is loaded; the held-out split keeps problems whole and only training is downsampled."""

from __future__ import annotations

import json

import pytest

from langchain_specreason.errors import ConfigError, InputError
from langchain_specreason.lab.training.labels_file import load_labels
from langchain_specreason.lab.training.settings import OracleSettings, TrainSettings
from langchain_specreason.lab.training.train import _plan, train_router


def step(problem: str, index: int, advantage: float) -> dict:
    return {
        "problem_id": problem,
        "step_index": index,
        "question": "What is 2 + 2?",
        "prefix": [],
        "draft_step": "2 + 2 = 5.",
        "base_step": "2 + 2 = 4.",
        "draft_score": 3.0,
        "base_score": 3.0 + advantage,
        "advantage": advantage,
        "escalated": advantage > 0,
    }


def write(path, lines: list[str]):
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.fixture
def fake_model(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_labels(tmp_path / "nope.jsonl")


def test_empty_file(tmp_path):
    with pytest.raises(InputError, match="is empty"):
        load_labels(write(tmp_path / "labels.jsonl", ["", "  "]))


def test_malformed_line_names_its_number(tmp_path):
    path = write(tmp_path / "labels.jsonl", [json.dumps(step("a", 0, 1.0)), "{not json"])
    with pytest.raises(InputError, match=r"line 2: not valid JSON") as err:
        load_labels(path)
    assert "\n" not in str(err.value)


def test_missing_keys_are_named(tmp_path):
    record = step("a", 0, 1.0)
    del record["advantage"], record["draft_step"]
    path = write(tmp_path / "labels.jsonl", [json.dumps(step("a", 0, 1.0)), json.dumps(record)])
    with pytest.raises(InputError, match=r"line 2: missing keys draft_step, advantage"):
        load_labels(path)


def test_not_an_object(tmp_path):
    with pytest.raises(InputError, match=r"line 1: expected a JSON object"):
        load_labels(write(tmp_path / "labels.jsonl", ["[1, 2]"]))


def test_round_trip(tmp_path):
    records = [step("a", 0, 1.0), step("a", 1, -2.0)]
    path = write(tmp_path / "labels.jsonl", [json.dumps(r) for r in records])
    assert load_labels(path) == records


def test_one_class_only(tmp_path, fake_model):
    labels = [step("a", i, -1.0) for i in range(3)]
    with pytest.raises(InputError, match="labels of one class only: 3 keep, 0 escalate"):
        train_router(labels, tmp_path / "out", base_model=fake_model)
    # the margin decides the labels: every advantage of 1.0 is "keep" at margin 1.0
    labels = [step("a", i, 1.0) for i in range(3)]
    with pytest.raises(InputError, match="change --margin"):
        train_router(
            labels, tmp_path / "out", base_model=fake_model, settings=TrainSettings(margin=1.0)
        )


def test_no_labels(tmp_path, fake_model):
    with pytest.raises(InputError, match="no labelled steps"):
        train_router([], tmp_path / "out", base_model=fake_model)


def test_bad_settings(tmp_path, fake_model):
    labels = [step("a", 0, 1.0), step("a", 1, -1.0)]
    for bad, named in (
        (dict(held_out=1.0), "held_out: Input should be less than 1"),
        (dict(epochs=0), "epochs: Input should be greater than or equal to 1"),
        (dict(learning_rate=0.0), "learning_rate: Input should be greater than 0"),
        (dict(max_tokens=4), "max_tokens"),
        (dict(threads=0), "threads"),
        (dict(max_steps=0), "max_steps"),
        (dict(batch_size=0), "batch_size"),
        (dict(epoch=3), "epoch: Extra inputs are not permitted"),
    ):
        with pytest.raises(ConfigError, match=named) as err:
            TrainSettings(**bad)
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="not a Hugging Face model folder"):
        train_router(labels, tmp_path / "out", base_model=tmp_path / "missing")


def test_split_keeps_problems_whole_and_downsamples_training_only():
    labels = [step(f"p{p}", i, 1.0 if i == 0 else -1.0) for p in range(10) for i in range(4)]
    plan = _plan(labels, 0.0, 0.2, seed=3)
    train_problems = {labels[i]["problem_id"] for i in plan.train_idx}
    held_problems = {labels[i]["problem_id"] for i in plan.held_idx}
    assert len(held_problems) == 2 and not train_problems & held_problems
    assert plan.before == {"keep": 24, "escalate": 8}
    assert plan.counts(plan.train_idx) == {"keep": 8, "escalate": 8}
    assert plan.counts(plan.held_idx) == {"keep": 6, "escalate": 2}
    assert _plan(labels, 0.0, 0.2, seed=3) == plan
    assert _plan(labels, 0.0, 0.2, seed=4).held_idx != plan.held_idx


def test_single_problem_splits_by_step():
    labels = [step("only", i, 1.0 if i % 2 else -1.0) for i in range(10)]
    plan = _plan(labels, 0.0, 0.2, seed=0)
    assert len(plan.held_idx) == 2 and len(plan.train_idx) + len(plan.held_idx) <= 10


def test_one_class_in_the_training_split(tmp_path, fake_model):
    labels = [step("a", 0, 1.0), step("b", 0, -1.0)]
    with pytest.raises(InputError, match="training split has labels of one class only"):
        train_router(
            labels, tmp_path / "out", base_model=fake_model, settings=TrainSettings(held_out=0.5)
        )


def test_the_train_flags_are_the_settings_fields():
    from langchain_specreason.cli import build_parser

    args = build_parser().parse_args(["arbitrage", "train", "--dataset", "x.jsonl"])
    assert TrainSettings.from_args(args) == TrainSettings(threads=1)  # the command's default
    args = build_parser().parse_args(
        ["arbitrage", "train", "--dataset", "x", "--held-out", "0.3", "--max-steps", "5"]
    )
    settings = TrainSettings.from_args(args)
    assert (settings.held_out, settings.max_steps, settings.epochs) == (0.3, 5, 3)
    bad = build_parser().parse_args(["arbitrage", "train", "--dataset", "x", "--held-out", "1"])
    with pytest.raises(ConfigError, match=r"^--held-out: Input should be less than 1"):
        TrainSettings.from_args(bad)  # the CLI's error names the flag
    label = build_parser().parse_args(["arbitrage", "label", "--scorer", "likelihood"])
    assert OracleSettings.from_args(label) == OracleSettings(scorer="likelihood")
