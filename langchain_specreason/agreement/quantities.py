r"""The quantities a step writes, read the same way from the draft's step and the base's.

:func:`quantities` lists a step's numbers in order, normalised so that equal values compare
equal: ``1,000`` and ``1000``; ``5.0``, ``5.`` and ``5``; ``$12`` and ``12``; ``\frac{1}{2}``
and ``1/2`` (both give ``1`` and ``2``). A minus sign counts when it touches the number and
does not follow a word, a number or ``)`` (``= -80`` is -80; ``380 - 300`` is 380 and 300).
Numbers written in words count too: ``twelve`` is 12, ``twenty-four`` 24, ``three hundred``
300, ``half`` 1/2 is not read (a word like it is too often not a quantity). List markers
(``1.`` or ``2)`` opening a line) are not quantities: both models number their plans.

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
_NUMBER = re.compile(r"(?<![\w.)])-?\d[\d,]*(?:\.\d+)?|(?<![\w.])\.\d+|\d[\d,]*(?:\.\d+)?")
_TOKEN = re.compile(r"[a-z]+")


def _words_value(phrase: str) -> int | None:
    """The value of a number written in words (``twenty-four`` -> 24); None if not one."""
    total = current = 0
    seen = False
    for word in re.split(r"[\s-]+", phrase.lower()):
        if word == "and":
            continue
        if word in _UNITS:
            current += _UNITS[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word in _SCALES:
            current = max(current, 1) * _SCALES[word]
            if _SCALES[word] >= 1000:
                total, current = total + current, 0
        else:
            return None
        seen = True
    return total + current if seen else None


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
        value = _words_value(match.group(0))
        return match.group(0) if value is None else f" {value} "

    text = _WORDS.sub(spelled, text)
    return [_normal(m.group(0)) for m in _NUMBER.finditer(text)]


def content_words(step: str) -> set[str]:
    """The step's lower-cased words (numbers and markup left out)."""
    return set(_TOKEN.findall(re.sub(r"\\[a-zA-Z]+", " ", step.lower())))
