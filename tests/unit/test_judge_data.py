"""GSM8K step corruptions for the judge benchmark: stripping, the three corruption kinds,
deterministic step choice, and the example layout. Inline GSM8K-style samples, no data wheel."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from fractions import Fraction

import pytest

from langchain_specreason import ConfigError
from langchain_specreason.lab.judges.corruption import (
    KINDS,
    Annotated,
    corrupt,
    find_annotations,
    format_number,
    strip_annotations,
    text_numbers,
)
from langchain_specreason.lab.judges.data import (
    build_examples,
    load_judge_examples,
    solution_lines,
)

from .gsm8k_samples import APPLES, JAGUARS, LOTS, NATALIA

PENCILS = (
    "pencils",
    "Betty has 5 boxes with 4 pencils each. She gives 6 pencils to a friend. "
    "How many pencils does she have left?",
    "Betty has 5 x 4 = <<5*4=20>>20 pencils.\n"
    "\n"
    "She has 20 - 6 = <<20-6=14>>14 pencils left.\n"
    "#### 14",
)
GARDEN = (
    "garden",
    "A garden has 4 rows. Each row has 3 roses and 2 tulips. How many flowers are there?",
    "Each row has 3 + 2 = <<3+2=5>>5 flowers.\n"
    "The garden has (3+2)*4 = <<(3+2)*4=20>>20 flowers.\n"
    "#### 20",
)
PAGES = (
    "pages",
    "Tom read 12 pages on Monday and twice as many on Tuesday. "
    "How many pages did he read in the two days?",
    "He read 12 x 2 = <<12*2=24>>24 pages on Tuesday and 24 + 12 = <<24+12=36>>36 pages "
    "in total.\n"
    "#### 36",
)
WAGES = (
    "wages",
    "Mia earns $18 per hour and works 8 hours. She also gets a $12.50 bonus. "
    "How much does she earn?",
    "She makes 8*18 = $<<8*18=144>>144.00 for her hours.\n"
    "With the bonus she has 144 + 12.50 = $<<144+12.5=156.5>>156.50.\n"
    "#### 156.50",
)
STICKERS = (
    "stickers",
    "Ann has 20 stickers and gives half of them to her brother. Then she buys 7 more. "
    "How many stickers does she have?",
    "She gives away half, so she keeps <<20/2=10>>10 stickers.\n"
    "Then she has 10 + 7 = <<10+7=17>>17 stickers.\n"
    "#### 17",
)
ALGEBRA = (
    "algebra",
    "Angela delivers 8 times as many packages as meals, 27 in all. How many meals?",
    "Let p be the packages and m the meals, so p = 8m and p + m = 27.\n"
    "Combining like terms, we get 9m = 27, so m = 3.\n"
    "#### 3",
)
SAMPLES = [NATALIA, LOTS, PENCILS, APPLES, GARDEN, PAGES, JAGUARS, WAGES, STICKERS]

NUM = r"\$?\d+(?:,\d{3})*(?:\.\d+)?"
UNITS = r"(?:\s+[A-Za-z][A-Za-z/]*){0,3}"
OPERAND = rf"\(*{NUM}\)*"
EQUATION = re.compile(
    rf"(?<![\d.,])(?P<expr>{OPERAND}(?:{UNITS}\s*(?:[-+*/]|\bx\b)\s*{OPERAND})+){UNITS}"
    rf"\s*=\s*\$?(?P<result>\d+(?:,\d{{3}})*(?:\.\d+)?)"
)


@dataclass(frozen=True)
class Equation:
    """A visible ``a op b ... = c`` of a stripped line."""

    start: int
    end: int
    expr: str
    result: Fraction
    result_start: int
    numbers: tuple[Fraction, ...]
    ops: tuple[str, ...]
    value: Fraction


def _number(text: str) -> Fraction:
    return Fraction(text.replace(",", "").replace("$", ""))


def equations(text: str) -> list[Equation]:
    found = []
    for m in EQUATION.finditer(text):
        expr = m.group("expr")
        # unit words go, a standalone "x" is a multiplication
        bare = re.sub(r"[A-Za-z][A-Za-z/]*", lambda w: " * " if w.group() == "x" else " ", expr)
        bare = bare.replace("$", "").replace(",", "")
        tokens = re.findall(r"\d+(?:\.\d+)?|[-+*/()]", bare)
        source = " ".join(f"F('{t}')" if t[0].isdigit() else t for t in tokens)
        value = eval(source, {"__builtins__": {}, "F": Fraction})
        found.append(
            Equation(
                m.start(),
                m.end(),
                expr,
                _number(m.group("result")),
                m.start("result"),
                tuple(Fraction(t) for t in tokens if t[0].isdigit()),
                tuple(t for t in tokens if t in "+-*/"),
                value,
            )
        )
    return found


def consistent(eq: Equation) -> bool:
    return abs(eq.value - eq.result) <= Fraction(1, 200)


def changed(old: str, new: str) -> tuple[int, int]:
    """The span of ``old`` that differs from ``new`` (common prefix and suffix removed)."""
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    q = 0
    while q < min(len(old), len(new)) - p and old[-1 - q] == new[-1 - q]:
        q += 1
    return p, len(old) - q


def the_changed_equation(old: str, new: str) -> tuple[Equation, Equation]:
    """The one visible equation that differs between the two lines; the rest is identical."""
    before, after = equations(old), equations(new)
    assert len(before) == len(after), (old, new)
    diff = [
        i
        for i, (a, b) in enumerate(zip(before, after, strict=True))
        if (a.expr, a.result) != (b.expr, b.result)
    ]
    assert len(diff) == 1, (old, new)
    a, b = before[diff[0]], after[diff[0]]
    assert old[: a.start] == new[: b.start]
    assert old[a.end :] == new[b.end :]
    return a, b


def corruptions(kind: str, seeds: range = range(6)):
    """(numbers, raw line, corrupted raw line) for every sample line the kind applies to."""
    for _, question, answer in SAMPLES:
        numbers = text_numbers(question)
        for line in solution_lines(answer):
            for seed in seeds:
                out = corrupt(line, kind, random.Random(seed), numbers)
                if out is not None:
                    yield numbers, line, out
            numbers = numbers + text_numbers(strip_annotations(line))


# --- stripping and parsing ------------------------------------------------------------------


def test_strip_annotations_removes_every_annotation_and_nothing_else():
    assert strip_annotations(NATALIA[2]) == (
        "Natalia sold 48/2 = 24 clips in May.\n"
        "Natalia sold 48+24 = 72 clips altogether in April and May.\n"
        "#### 72"
    )
    assert strip_annotations(PAGES[2].splitlines()[0]) == (
        "He read 12 x 2 = 24 pages on Tuesday and 24 + 12 = 36 pages in total."
    )
    assert strip_annotations("3 < 4 and 5 > 2, so <<(3+2)*4=20>>20 <x>") == (
        "3 < 4 and 5 > 2, so 20 <x>"
    )
    assert strip_annotations(ALGEBRA[2]) == ALGEBRA[2]


def test_solution_lines_are_raw_lines_before_the_answer_without_blanks():
    assert solution_lines(PENCILS[2]) == [
        "Betty has 5 x 4 = <<5*4=20>>20 pencils.",
        "She has 20 - 6 = <<20-6=14>>14 pencils left.",
    ]
    assert solution_lines("#### 5") == []


def test_find_annotations_gives_expression_result_and_span():
    line = PAGES[2].splitlines()[0]
    found = find_annotations(line)
    assert found == [
        Annotated("12*2", "24", line.index("<<12"), line.index("<<12") + len("<<12*2=24>>")),
        Annotated("24+12", "36", line.index("<<24"), line.index("<<24") + len("<<24+12=36>>")),
    ]
    assert [line[a.start : a.end] for a in found] == ["<<12*2=24>>", "<<24+12=36>>"]


def test_format_number_drops_integer_decimals_and_rounds_to_cents():
    assert format_number(Fraction(72)) == "72"
    assert format_number(7.0) == "7"
    assert format_number(Fraction(5, 2)) == "2.5"
    assert format_number(Fraction(2, 3)) == "0.67"
    assert format_number(Fraction(1, 8)) == "0.13"
    assert format_number(Fraction(-7, 2)) == "-3.5"


def test_text_numbers_drop_thousands_commas():
    assert text_numbers(LOTS[1]) == [3.0, 1200.0, 5000.0]
    assert text_numbers("costs $0.75, or 2.5 for 3,000,000 people") == [0.75, 2.5, 3000000.0]


# --- the three kinds ------------------------------------------------------------------------


def test_arithmetic_changes_only_the_result_and_makes_it_false():
    count = 0
    for _, line, out in corruptions("arithmetic"):
        old, new = strip_annotations(line), strip_annotations(out)
        start, end = changed(old, new)
        if not equations(old):  # a line that shows only the result
            assert re.fullmatch(r"\d+", old[start:end]), (old, new)
            continue
        a, b = the_changed_equation(old, new)
        assert a.expr == b.expr
        assert consistent(a) and not consistent(b), (old, new)
        assert old[: a.result_start] == new[: b.result_start], (old, new)
        assert b.result >= 0
        if a.result.denominator == 1:
            assert b.result.denominator == 1
        # the annotation stays self-describing: same expression, the new result
        before, after = find_annotations(line), find_annotations(out)
        assert [x.expr for x in before] == [x.expr for x in after]
        new_results = [q.result for p, q in zip(before, after, strict=True) if p != q]
        assert [Fraction(r) for r in new_results] == [b.result]
        count += 1
    assert count >= 40


def consistent_changes(kind: str) -> list[tuple[list[float], str, str, Equation, Equation]]:
    """Every corruption of ``kind`` as (numbers, old line, new line, old equation, new one),
    annotations stripped, each checked for what the operand and operation kinds share: both
    equations self-consistent, the result changed and not negative."""
    found = []
    for numbers, line, out in corruptions(kind):
        old, new = strip_annotations(line), strip_annotations(out)
        a, b = the_changed_equation(old, new)
        assert consistent(a) and consistent(b), (old, new)
        assert b.result != a.result
        assert b.result >= 0
        found.append((numbers, old, new, a, b))
    return found


def test_operand_uses_an_earlier_number_and_stays_self_consistent():
    changes = consistent_changes("operand")
    for numbers, old, new, a, b in changes:
        assert a.ops == b.ops
        diffs = [(x, y) for x, y in zip(a.numbers, b.numbers, strict=True) if x != y]
        assert len(diffs) == 1, (old, new)
        assert diffs[0][1] in {Fraction(repr(n)) for n in numbers}
    assert len(changes) >= 40


def test_operation_swaps_exactly_one_operator_and_stays_self_consistent():
    changes = consistent_changes("operation")
    for _, old, new, a, b in changes:
        assert a.numbers == b.numbers
        assert sum(x != y for x, y in zip(a.ops, b.ops, strict=True)) == 1, (old, new)
    assert len(changes) >= 40


def test_the_raw_line_stays_self_describing():
    for kind in KINDS:
        for _, _, out in corruptions(kind):
            for ann in find_annotations(out):
                shown = re.match(r" ?\$?(\d+(?:,\d{3})*(?:\.\d+)?)", out[ann.end :])
                assert shown is not None
                assert _number(shown.group(1)) == Fraction(ann.result)


def test_a_result_written_with_commas_or_cents_keeps_that_style():
    line = solution_lines(LOTS[2])[1]
    outs = {
        corrupt(line, kind, random.Random(3), [3.0, 1200.0, 5000.0, 3600.0])
        for kind in ("arithmetic", "operation")
    }
    for out in outs:
        assert out is not None
        result = re.search(r"= \$([\d,]+)\.$", strip_annotations(out))
        assert result is not None
        if _number(result.group(1)) >= 1000:
            assert re.fullmatch(r"\d{1,3}(?:,\d{3})+", result.group(1)), out
    assert {corrupt(line, "operation", random.Random(seed), []) for seed in range(20)} == {
        "His profit is $5,000 + $3,600 = $<<5000+3600=8600>>8,600.",
        "His profit is $5,000 * $3,600 = $<<5000*3600=18000000>>18,000,000.",
    }
    wages = solution_lines(WAGES[2])[0]
    for seed in range(5):
        out = corrupt(wages, "operation", random.Random(seed), [18.0, 8.0])
        assert out is not None
        assert re.search(r"= \$\d+\.\d\d for her hours\.$", strip_annotations(out)), out


def test_units_between_operands_are_kept():
    line = solution_lines(JAGUARS[2])[0]
    outs = {corrupt(line, "operation", random.Random(seed), []) for seed in range(10)}
    # 5 - 6 is negative and 5 / 6 is not in cents: + is the only preferred swap
    assert outs == {"The jaguars eat 5 snakes/jaguar + 6 jaguars = <<5+6=11>>11 snakes."}


def test_operand_needs_a_different_number_and_a_valid_result():
    line = "There are 10 - 4 = <<10-4=6>>6 left."
    assert corrupt(line, "operand", random.Random(0), []) is None
    assert corrupt("So 4 + 4 = <<4+4=8>>8 cats.", "operand", random.Random(0), [4.0, 4.0]) is None
    # 10 - 20 would be negative: only 20 - 4 is left
    for seed in range(10):
        out = corrupt(line, "operand", random.Random(seed), [20.0])
        assert out == "There are 20 - 4 = <<20-4=16>>16 left."
    # 12 / (3 - 3) divides by zero: only the 12 can change
    line = "Each gets 12 / (5 - 3) = <<12/(5-3)=6>>6 cookies."
    for seed in range(10):
        out = corrupt(line, "operand", random.Random(seed), [3.0])
        assert out == "Each gets 3 / (5 - 3) = <<3/(5-3)=1.5>>1.5 cookies."


def test_operation_needs_a_new_result_and_writes_the_lines_times_sign():
    outs = {
        corrupt("So 2 + 2 = <<2+2=4>>4 cats.", "operation", random.Random(seed), [])
        for seed in range(20)
    }
    assert outs == {"So 2 - 2 = <<2-2=0>>0 cats.", "So 2 / 2 = <<2/2=1>>1 cats."}
    # 2 - 3 is negative and 2 / 3 is not in cents: only 2 * 3 is preferred
    assert corrupt("So 2 + 3 = <<2+3=5>>5 rows.", "operation", random.Random(1), []) == (
        "So 2 * 3 = <<2*3=6>>6 rows."
    )
    assert (
        corrupt("A 4 x 5 grid has 2 + 3 = <<2+3=5>>5 red rows.", "operation", random.Random(1), [])
        == "A 4 x 5 grid has 2 x 3 = <<2*3=6>>6 red rows."
    )


def test_an_annotation_the_text_does_not_repeat_allows_only_arithmetic():
    line = solution_lines(STICKERS[2])[0]
    assert corrupt(line, "operand", random.Random(0), [20.0, 7.0, 2.0]) is None
    assert corrupt(line, "operation", random.Random(0), [20.0, 7.0]) is None
    out = corrupt(line, "arithmetic", random.Random(0), [])
    assert out is not None
    assert re.fullmatch(r"She gives away half, so she keeps <<20/2=(\d+)>>\1 stickers\.", out)
    assert out != line


def test_lines_without_annotations_cannot_be_corrupted():
    for kind in KINDS:
        line = "Combining like terms, we get 9m = 27."
        assert corrupt(line, kind, random.Random(0), [9.0]) is None


def test_unknown_kind_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown corruption kind 'typo'"):
        corrupt(solution_lines(NATALIA[2])[0], "typo", random.Random(0), [])


# --- building examples ----------------------------------------------------------------------


def test_build_examples_layout():
    examples, skipped = build_examples(SAMPLES, seed=0)
    assert skipped == 0
    assert len(examples) == 4 * len(SAMPLES)
    groups = [examples[i : i + 4] for i in range(0, len(examples), 4)]
    for (pid, question, answer), group in zip(SAMPLES, groups, strict=True):
        lines = solution_lines(answer)
        assert [e.kind for e in group] == ["correct", *KINDS]
        assert [e.id for e in group] == [f"{pid}:{kind}" for kind in ("correct", *KINDS)]
        assert [e.wrong for e in group] == [False, True, True, True]
        k = group[0].position
        for e in group:
            assert (e.problem_id, e.question, e.position) == (pid, question, k)
            assert e.steps == tuple(strip_annotations(x).strip() + "\n\n" for x in lines[:k])
            assert e.original == strip_annotations(lines[k]).strip() + "\n\n"
            assert e.step.endswith("\n\n") and "<<" not in e.step
        assert group[0].step == group[0].original
        assert len({e.step for e in group}) == 4


def test_the_step_is_one_where_all_three_kinds_exist():
    for seed in range(10):
        examples, skipped = build_examples([STICKERS], seed=seed)
        assert skipped == 0
        assert {e.position for e in examples} == {1}
        assert examples[0].steps == ("She gives away half, so she keeps 10 stickers.\n\n",)


def test_the_step_is_drawn_among_eligible_steps_with_the_seed():
    positions = {build_examples([APPLES], seed=seed)[0][0].position for seed in range(20)}
    assert positions == {0, 1, 2, 3}


def test_operand_numbers_come_from_the_question_and_earlier_steps():
    for seed in range(5):
        examples, _ = build_examples(SAMPLES, seed=seed)
        for e in examples:
            if e.kind != "operand":
                continue
            a, b = the_changed_equation(e.original.strip(), e.step.strip())
            new = next(y for x, y in zip(a.numbers, b.numbers, strict=True) if x != y)
            seen = text_numbers(e.question + " " + " ".join(e.steps))
            assert new in {Fraction(repr(n)) for n in seen}


def test_problems_without_annotations_are_skipped_and_counted():
    examples, skipped = build_examples([ALGEBRA, NATALIA, ALGEBRA], seed=0)
    assert skipped == 2
    assert [e.id for e in examples] == [f"gsm8k-train-0:{k}" for k in ("correct", *KINDS)]
    assert build_examples([], seed=0) == ([], 0)


def test_examples_are_deterministic_and_independent_of_the_other_problems():
    first, _ = build_examples(SAMPLES, seed=0)
    assert build_examples(SAMPLES, seed=0)[0] == first
    alone = [e for row in SAMPLES for e in build_examples([row], seed=0)[0]]
    assert alone == first
    reversed_ids = {e.id: e for e in build_examples(SAMPLES[::-1], seed=0)[0]}
    assert [reversed_ids[e.id] for e in first] == first


def test_another_seed_changes_the_step_or_its_corruptions():
    base = build_examples(SAMPLES, seed=0)[0]
    for seed in (1, 2, 3):
        other = build_examples(SAMPLES, seed=seed)[0]
        assert [e.id for e in other] == [e.id for e in base]
        assert [(e.position, e.step) for e in other] != [(e.position, e.step) for e in base]


@pytest.mark.parametrize("limit", [0, -3])
def test_load_needs_a_positive_limit(limit):
    with pytest.raises(ConfigError, match="limit must be a positive number of problems"):
        load_judge_examples(limit)


def test_a_server_is_reset_only_when_the_next_example_starts_another_trace():
    from langchain_specreason.lab.judges.command import warming
    from langchain_specreason.lab.judges.data import JudgeExample

    def ex(question: str, steps: tuple[str, ...], kind: str = "harmless") -> JudgeExample:
        return JudgeExample(f"{question}:{len(steps)}", "p", question, steps, "s\n\n", kind, 0, "")

    one = ex("q1", ("a\n\n",))
    assert warming(None, one) == "reset"  # a cold server
    assert warming(one, ex("q1", ("a\n\n",), kind="operand")) == "cached"  # same prefix
    assert warming(one, ex("q1", ("a\n\n", "b\n\n"))) == "extend"  # the run's next step
    assert warming(one, ex("q1", ("c\n\n", "b\n\n"))) == "reset"  # another trace
    assert warming(one, ex("q1", ())) == "reset"  # conservative: a shorter trace starts over
    assert warming(one, ex("q2", ("a\n\n",))) == "reset"  # another question
