r"""The quantities a step writes, read the same way from the draft's step and the base's.

:func:`quantities` lists a step's numbers in order, normalised so that equal values compare
equal: ``1,000`` and ``1000``; ``5.0``, ``5.`` and ``5``; ``$12`` and ``12``; ``\frac{1}{2}``
and ``1/2`` (both give ``1`` and ``2``). A minus sign counts when it touches the number and
does not follow a word, a number or ``)`` (``= -80`` is -80; ``380 - 300`` is 380 and 300).
Numbers written in words count too: ``twelve`` is 12, ``twenty-four`` 24, ``three hundred``
300, ``five and six`` 5 and 6; ``half`` and a lone ``one`` are not read (words too often not
a quantity: ``one step at a time``). A comma groups thousands only between groups of three
digits (``1,2,3`` is 1, 2 and 3). List markers (``1.`` or ``2)`` opening a line) are not
quantities: both models number their plans.

:func:`content_words` is what a step says without its numbers, lower-cased, for steps that
hold no quantity (a plan, a restatement).
"""

from __future__ import annotations

import re

__all__ = ["content_words", "quantities"]

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_WORD = "|".join(sorted([*_UNITS, *_TENS, *_SCALES], key=len, reverse=True))
_WORDS = re.compile(rf"\b(?:{_WORD})(?:[\s-]+(?:and[\s-]+)?(?:{_WORD}))*\b", re.IGNORECASE)
_LIST_MARKER = re.compile(r"^(\s*)\d+[.)](?=\s)", re.MULTILINE)
_DIGITS = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)"  # a comma only between groups of three digits
_NUMBER = re.compile(rf"(?<![\w.)])-?{_DIGITS}(?:\.\d+)?|(?<![\w.])\.\d+|{_DIGITS}(?:\.\d+)?")
_TOKEN = re.compile(r"[a-z]+")


def _words_values(phrase: str) -> list[int]:
    """The numbers a run of number words writes, in order.

    One number continues while the words can: a tens word takes a unit (``twenty-four``), any
    number takes a scale (``three hundred``), and ``and`` joins only after a scale (``three
    hundred and five``). Anything else starts a new number: ``five and six`` is 5 and 6,
    ``two three`` 2 and 3. A lone ``one`` is not read: it is too often not a quantity
    (``one step at a time``, ``one of them``).
    """
    values: list[int] = []
    total = current = 0
    last = ""  # the kind of the previous word: unit, tens, scale, and
    lone_one = False

    def close() -> None:
        nonlocal total, current, last
        if last and not (lone_one and total + current == 1):
            values.append(total + current)
        total = current = 0
        last = ""

    for word in re.split(r"[\s-]+", phrase.lower()):
        if word == "and":
            if last == "scale":
                last = "and"
            else:
                close()
            continue
        if word in _SCALES:
            if last in ("", "and"):
                close()
                current = 1
            elif last == "scale" and _SCALES[word] < 1000:
                close()
                current = 1
            current = max(current, 1) * _SCALES[word]
            if _SCALES[word] >= 1000:
                total, current = total + current, 0
            last, lone_one = "scale", False
            continue
        kind = "unit" if word in _UNITS else "tens"
        value = _UNITS.get(word, _TENS.get(word, 0))
        joins = last in ("scale", "and") or (last == "tens" and kind == "unit" and value < 10)
        if not joins:
            close()
            lone_one = word == "one"
        else:
            lone_one = False
        current += value
        last = kind
    close()
    return values


def _normal(number: str) -> str:
    """``-1,000.50`` -> ``-1000.5``; ``5.0`` -> ``5``; ``.5`` -> ``0.5``."""
    text = number.replace(",", "")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text.startswith("."):
        text = "0" + text
    if text.startswith("-."):
        text = "-0" + text[1:]
    return "0" if text in ("-0", "") else text


def quantities(step: str) -> list[str]:
    """The step's numbers, in order of appearance, normalised (see the module docstring)."""
    text = _LIST_MARKER.sub(r"\1", step)
    text = text.replace("−", "-")

    def spelled(match: re.Match[str]) -> str:
        return " " + " ".join(str(v) for v in _words_values(match.group(0))) + " "

    text = _WORDS.sub(spelled, text)
    return [_normal(m.group(0)) for m in _NUMBER.finditer(text)]


def content_words(step: str) -> set[str]:
    """The step's lower-cased words (numbers and markup left out)."""
    return set(_TOKEN.findall(re.sub(r"\\[a-zA-Z]+", " ", step.lower())))
