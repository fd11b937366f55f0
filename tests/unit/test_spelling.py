"""Numbers in words for ``bench judges --numbers words``: number words, step rewriting, the
spelled-out examples, the flag's settings and its refusals. Inline GSM8K-style samples, no
data wheel, no server (the ``arithmetic`` measure only)."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from langchain_specreason import ConfigError
from langchain_specreason.lab.judges import command as judgebench
from langchain_specreason.lab.judges.corruption import KINDS
from langchain_specreason.lab.judges.data import build_examples
from langchain_specreason.lab.judges.spelling import LARGEST, number_words, spell_out

from .gsm8k_samples import APPLES, JAGUARS, LOTS, NATALIA

HUGE = (
    "huge",
    "A star is 2000000 km away and light goes 600000 km a second... how far in 3000 seconds?",
    "It goes 600000 * 3000 = <<600000*3000=1800000000>>1800000000 km.\n#### 1800000000",
)
SAMPLES = [NATALIA, LOTS, APPLES, JAGUARS]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (0, "zero"),
        (7, "seven"),
        (13, "thirteen"),
        (20, "twenty"),
        (21, "twenty-one"),
        (48, "forty-eight"),
        (100, "one hundred"),
        (105, "one hundred five"),
        (999, "nine hundred ninety-nine"),
        (1000, "one thousand"),
        (1200, "one thousand two hundred"),
        ("1,200", "one thousand two hundred"),
        ("12,345", "twelve thousand three hundred forty-five"),
        ("1,000,000", "one million"),
        (3.5, "three point five"),
        ("0.25", "zero point two five"),
        (0.25, "zero point two five"),
        (-3, "minus three"),
        (
            LARGEST,
            "nine hundred ninety-nine million nine hundred ninety-nine thousand "
            "nine hundred ninety-nine",
        ),
    ],
)
def test_number_words(value, words):
    assert number_words(value) == words


@pytest.mark.parametrize("value", [LARGEST + 1, "1e9", "12a", "1,2", ""])
def test_number_words_refuses_what_it_cannot_spell(value):
    with pytest.raises(ValueError):
        number_words(value)


@pytest.mark.parametrize(
    ("step", "spelled"),
    [
        ("3 + 4 = 7", "three plus four is seven"),
        ("9-2=7", "nine minus two is seven"),
        ("6 * 2 = 12", "six times two is twelve"),
        ("6 x 2 = 12, 6 × 2 = 12", "six times two is twelve, six times two is twelve"),
        ("48/2 = 24", "forty-eight divided by two is twenty-four"),
        ("(3+2)*4 = 20", "(three plus two) times four is twenty"),
        ("20% of 50 is 10", "twenty percent of fifty is ten"),
        ("5 - 8 = -3", "five minus eight is minus three"),
        ("on the 3rd and 21st day", "on the third and twenty-first day"),
        ("a 24-hour day, 2x = 6", "a twenty-four-hour day, two x is six"),
        ("5 snakes/jaguar * 6 jaguars", "five snakes/jaguar times six jaguars"),
    ],
)
def test_spell_out_rewrites_numbers_and_operators(step, spelled):
    assert spell_out(step) == spelled


def test_spell_out_gsm8k_lines_keep_the_text_around_the_numbers():
    assert (
        spell_out("Natalia sold 48/2 = 24 clips in May.\n\n")
        == "Natalia sold forty-eight divided by two is twenty-four clips in May.\n\n"
    )
    assert spell_out("The lots cost 3 x $1,200 = $3,600.\n\n") == (
        "The lots cost three times one thousand two hundred dollars is "
        "three thousand six hundred dollars.\n\n"
    )
    assert spell_out("It costs $1, or $ 2.5 with a tip.") == (
        "It costs one dollar, or two point five dollars with a tip."
    )


def test_spell_out_is_none_when_a_number_cannot_be_spelled():
    assert spell_out("It goes 600000 * 3000 = 1800000000 km.") is None
    assert spell_out("No numbers here.") == "No numbers here."


# --- the examples ---------------------------------------------------------------------------


def test_words_spell_the_judged_step_only_and_keep_the_ids():
    digits, skipped = build_examples(SAMPLES, seed=0)
    words, skipped_words = build_examples(SAMPLES, seed=0, numbers="words")
    assert skipped == skipped_words == 0
    assert [e.id for e in words] == [e.id for e in digits]
    for d, w in zip(digits, words, strict=True):
        assert not re.search("[0-9]", w.step + w.original)
        assert (w.question, w.steps, w.kind, w.position) == (
            d.question,
            d.steps,
            d.kind,
            d.position,
        )
        assert (w.step, w.original) == (spell_out(d.step), spell_out(d.original))
    for i in range(0, len(words), 4):
        group = words[i : i + 4]
        assert [e.kind for e in group] == ["correct", *KINDS]
        assert group[0].step == group[0].original
        assert len({e.step for e in group}) == 4


def test_digits_are_the_default_examples_unchanged():
    before = build_examples(SAMPLES, seed=0)
    assert build_examples(SAMPLES, seed=0, numbers="digits") == before
    assert [e.step for e in before[0][:4]] == [
        "Natalia sold 48+24 = 72 clips altogether in April and May.\n\n",
        "Natalia sold 48+24 = 76 clips altogether in April and May.\n\n",
        "Natalia sold 48+2 = 50 clips altogether in April and May.\n\n",
        "Natalia sold 48*24 = 1152 clips altogether in April and May.\n\n",
    ]
    words = build_examples(SAMPLES, seed=0, numbers="words")[0]
    assert words[3].step == (
        "Natalia sold forty-eight times twenty-four is one thousand one hundred fifty-two "
        "clips altogether in April and May.\n\n"
    )
    assert words[3].steps == ("Natalia sold 48/2 = 24 clips in May.\n\n",)


def test_a_problem_whose_step_cannot_be_spelled_is_skipped_with_all_its_kinds():
    digits, skipped = build_examples([HUGE, NATALIA], seed=0)
    assert skipped == 0 and len(digits) == 8
    words, skipped = build_examples([HUGE, NATALIA], seed=0, numbers="words")
    assert skipped == 1
    assert [e.id for e in words] == [f"gsm8k-train-0:{k}" for k in ("correct", *KINDS)]


def test_unknown_numbers_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown numbers 'roman'"):
        build_examples(SAMPLES, numbers="roman")


# --- bench judges --numbers -----------------------------------------------------------------


def _args(tmp_path, *flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    judgebench.add_parser(parser.add_subparsers())
    return parser.parse_args(
        [
            "judges",
            "--family",
            "instruct",
            "--judge",
            "arithmetic",
            "--limit",
            "2",
            "--no-progress",
            "--out",
            str(tmp_path / "out"),
            *flags,
        ]
    )


@pytest.fixture
def samples(monkeypatch):
    """``load_judge_examples`` on the inline samples instead of the data wheel."""

    def load(limit, *, seed=0, numbers="digits"):
        return build_examples(SAMPLES[:limit], seed=seed, numbers=numbers)

    monkeypatch.setattr(judgebench, "load_judge_examples", load)


async def test_words_are_recorded_judged_and_reported(tmp_path, samples):
    assert await judgebench.run_judges(_args(tmp_path, "--numbers", "words")) == 0
    out = tmp_path / "out"
    assert json.loads((out / "meta.json").read_text())["settings"]["numbers"] == "words"
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["example"] for r in records][:2] == [
        "gsm8k-train-0:correct",
        "gsm8k-train-0:arithmetic",
    ]
    assert {r["detail"]["verdict"] for r in records} == {"unsure"}  # no digits to check
    title = (out / "summary.md").read_text().splitlines()[0]
    assert title.startswith("# Judge benchmark, synthetic, numbers spelled out in words (2 ")


async def test_digits_record_no_numbers_key_and_report_as_before(tmp_path, samples):
    assert await judgebench.run_judges(_args(tmp_path)) == 0
    out = tmp_path / "out"
    assert "numbers" not in json.loads((out / "meta.json").read_text())["settings"]
    assert "words" not in (out / "summary.md").read_text()
    assert await judgebench.run_judges(_args(tmp_path, "--numbers", "digits")) == 0  # resumes


async def test_a_result_line_names_its_judge_and_old_lines_still_resume(tmp_path, samples, capsys):
    assert await judgebench.run_judges(_args(tmp_path)) == 0
    path = tmp_path / "out" / "results.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records and all(r["judge"] == "arithmetic" and "measure" not in r for r in records)
    # a folder written before issue 43: its lines say "measure"; they are done, not redone
    old = [{("measure" if k == "judge" else k): v for k, v in r.items()} for r in records]
    path.write_text("".join(json.dumps(r) + "\n" for r in old))
    capsys.readouterr()
    assert await judgebench.run_judges(_args(tmp_path)) == 0
    assert "0 calls to make" in capsys.readouterr().err
    assert len(path.read_text().splitlines()) == len(old)


def test_the_old_measures_flag_still_picks_the_judges(capsys):
    parser = argparse.ArgumentParser()
    judgebench.add_parser(parser.add_subparsers())
    args = parser.parse_args(["judges", "--measures", "arithmetic,likelihood"])
    assert judgebench.parse_measures(args.judge) == ["arithmetic", "likelihood"]
    assert "--measures is deprecated; use --judge" in capsys.readouterr().err
    assert "--measures" not in parser._subparsers._group_actions[0].choices["judges"].format_help()


@pytest.mark.parametrize(
    ("first", "then"), [([], ["--numbers", "words"]), (["--numbers", "words"], [])]
)
async def test_a_folder_refuses_the_other_numbers(tmp_path, samples, first, then):
    assert await judgebench.run_judges(_args(tmp_path, *first)) == 0
    with pytest.raises(ConfigError, match="holds results made with numbers="):
        await judgebench.run_judges(_args(tmp_path, *then))


async def test_numbers_with_labels_is_a_config_error(tmp_path):
    args = _args(tmp_path, "--numbers", "words", "--labels", str(tmp_path / "labels.jsonl"))
    with pytest.raises(ConfigError, match="--numbers goes with the synthetic benchmark"):
        await judgebench.run_judges(args)
    assert not (tmp_path / "out").exists()
