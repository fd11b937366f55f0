"""Numbers and arithmetic written in English words (``bench judges --numbers words``).

:func:`spell_out` rewrites a reasoning step so that it states every quantity in words:
``Natalia sold 48/2 = 24 clips in May.`` reads ``Natalia sold forty-eight divided by two is
twenty-four clips in May.`` The rules, the same everywhere in the step:

* ``=`` is ``is``;
* an operator between two numbers is a word (``)`` or ``%`` may end the left number, up to
  three unit words may follow it, ``(`` or ``$`` may start the right one): ``+`` plus,
  ``-`` ``−`` ``–`` minus, ``*`` ``x`` ``X`` ``×`` times, ``/`` ``÷`` divided by. A ``-``
  before a number and after no operand is ``minus`` too; a range reads as a subtraction
  (``5-6 hours``: ``five minus six hours``);
* ``$5`` is ``five dollars`` (``$1``: ``one dollar``, ``$0.75``: ``zero point seven five
  dollars``), ``20%`` is ``twenty percent``, ``3rd`` is ``third``;
* every other number is spelled by :func:`number_words`, with a space between it and a letter
  it touched (``2x``: ``two x``).

A step with a number above :data:`LARGEST` or any other ASCII digit left is not spelled.
"""

from __future__ import annotations

import re

LARGEST = 999_999_999
"""The largest whole part :func:`number_words` spells."""

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "- - twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((1_000_000, "million"), (1_000, "thousand"), (1, ""))
_ORDINALS = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
_OPERATOR_WORDS = dict.fromkeys("-−–", "minus") | dict.fromkeys("*xX×", "times")
_OPERATOR_WORDS |= {"+": "plus", "/": "divided by", "÷": "divided by"}

# Thousands commas only in groups of three: "1,200" is one number, "3,4" two.
_NUMBER = r"(?:[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+"
_PLAIN_NUMBER = re.compile(rf"(-?)({_NUMBER})")
_EQUALS = re.compile(r"[ \t]*=[ \t]*")
# Up to three unit words between a number and its operator: "5 snakes/jaguar * 6 jaguars".
_UNITS = r"(?:[ \t]+[A-Za-z][A-Za-z'’/-]*\b){0,3}"
_OPERATOR = re.compile(rf"(?<=[0-9%)])({_UNITS})[ \t]*([-−–+*xX×/÷])[ \t]*(?=[($ \t]*\.?[0-9])")
_NEGATIVE = re.compile(r"(?<![\w)])[-−](?=\$?\.?[0-9])")
_QUANTITY = re.compile(
    rf"(?P<dollar>\$ ?)?(?P<number>{_NUMBER})(?:(?P<percent> ?%)|(?P<ordinal>st|nd|rd|th)\b)?"
)


def number_words(value: str | int | float) -> str:
    """``value`` in English words: ``1,200`` is ``one thousand two hundred``.

    US style without "and" (``105``: ``one hundred five``); the digits after a decimal point
    are read one by one (``0.25``: ``zero point two five``); a sign reads ``minus``. Raises
    :class:`ValueError` for text that is not a plain number (``1e9``, ``12a``) or a whole part
    above :data:`LARGEST`.
    """
    match = _PLAIN_NUMBER.fullmatch(str(value).strip())
    if match is None:
        raise ValueError(f"not a plain number: {value!r}")
    sign, number = match.groups()
    whole, _, decimals = number.replace(",", "").partition(".")
    words = _whole_words(int(whole or "0"))
    if decimals:
        words += " point " + " ".join(_ONES[int(digit)] for digit in decimals)
    return f"minus {words}" if sign else words


def spell_out(step: str) -> str | None:
    """``step`` with its numbers and arithmetic in words (see the module), or None.

    None when the step cannot be fully spelled: a number above :data:`LARGEST`, or a digit
    left that no rule reads.
    """
    text = _EQUALS.sub(" is ", step)
    text = _OPERATOR.sub(lambda m: f"{m[1]} {_OPERATOR_WORDS[m[2]]} ", text)
    text = _NEGATIVE.sub("minus ", text)
    try:
        text = _QUANTITY.sub(_quantity_words, text)
    except ValueError:
        return None
    return None if re.search("[0-9]", text) else text


def _quantity_words(match: re.Match[str]) -> str:
    words = number_words(match["number"])
    if match["ordinal"]:
        last = re.search("[a-z]+$", words)
        assert last is not None  # number words end with a word
        word = last.group()
        ordinal = _ORDINALS.get(word) or (word[:-1] + "ieth" if word.endswith("y") else word + "th")
        words = words[: last.start()] + ordinal
    if match["dollar"]:
        words += " dollar" if words == "one" else " dollars"
    if match["percent"]:
        words += " percent"
    text, start, end = match.string, match.start(), match.end()
    before = " " if start > 0 and text[start - 1].isalnum() else ""
    after = " " if end < len(text) and text[end].isalnum() else ""
    return before + words + after


def _whole_words(n: int) -> str:
    if n > LARGEST:
        raise ValueError(f"{n:,} is above {LARGEST:,}, the largest number spelled")
    if n == 0:
        return "zero"
    parts = []
    for scale, name in _SCALES:
        chunk, n = divmod(n, scale)
        if chunk:
            parts.append(f"{_below_thousand(chunk)} {name}".rstrip())
    return " ".join(parts)


def _below_thousand(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    words = [f"{_ONES[hundreds]} hundred"] if hundreds else []
    if rest >= 20:
        words.append(_TENS[rest // 10] + (f"-{_ONES[rest % 10]}" if rest % 10 else ""))
    elif rest:
        words.append(_ONES[rest])
    return " ".join(words)


__all__ = ["LARGEST", "number_words", "spell_out"]
