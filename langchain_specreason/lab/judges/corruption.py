"""The corruption engine: one computed line of a GSM8K solution made wrong, in three kinds.

A GSM8K solution line marks each calculator call with ``<<expr=result>>``; :func:`corrupt`
changes one such annotation of a line as one of :data:`KINDS`:

* ``arithmetic``: the computation is wrong. The visible result after the annotation becomes a
  different number; the expression is untouched, so ``48/2 = 24`` reads ``48/2 = 26``.
* ``operand``: the wrong number is used. One operand of the expression becomes another number
  of the question or of the earlier steps, and the result is recomputed: ``48/2 = 24`` reads
  ``72/2 = 36``. The arithmetic is right, the reasoning is not.
* ``operation``: the wrong operation is used. One operator becomes another of ``+ - * /`` and
  the result is recomputed: ``48/2 = 24`` reads ``48+2 = 50``.

Each corruption changes only the expression and result text of the chosen annotation (and the
annotation itself, so the raw line stays self-describing); the rest of the line is unchanged.
Expressions are evaluated with a tiny :mod:`ast` walker over numbers and ``+ - * /``, never
with ``eval``. The judge examples built from these corruptions are in :mod:`.data`.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

from ...errors import ConfigError

KINDS: tuple[str, ...] = ("arithmetic", "operand", "operation")
"""The corruption kinds, in the order :func:`.data.build_examples` emits them (after
``correct``)."""

_ANNOTATION = re.compile(r"<<(.*?)>>")
_NUMBER = r"(?:\d+(?:,\d{3})*(?:\.\d+)?|\.\d+)"
_NUMBER_RE = re.compile(_NUMBER)
_SIGNED_NUMBER_RE = re.compile(rf"-?{_NUMBER}")
_TOKEN = re.compile(rf"\s*(?:(?P<num>{_NUMBER})|(?P<op>[-+*/])|(?P<par>[()]))")
# The visible result right after ">>": maybe a space and a "$", then the number.
_VISIBLE_RESULT = re.compile(rf" ?\$? ?(?P<num>-?{_NUMBER})(?!\d)")
_VISIBLE_OP = {"+": r"\+", "-": "[-−–]", "*": "[*x×X]", "/": "[/÷]"}
# Up to three unit words between an operand and what follows: "5 snakes/jaguar * 6 jaguars".
_UNIT = r"(?:\s+[A-Za-z][A-Za-z'’/-]*){0,3}"
_TIMES_STYLE = re.compile(r"\d\s*([x×])\s*\$?\s*\d")
_OPERATORS = "+-*/"
_BINOPS: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


@dataclass(frozen=True)
class Annotated:
    """One calculator annotation ``<<expr=result>>`` found in a raw gold line."""

    expr: str
    """The expression, as written (e.g. ``48/2``)."""
    result: str
    """The result, as written inside the annotation (e.g. ``24``)."""
    start: int
    """Where ``<<`` starts in the raw line."""
    end: int
    """Just past ``>>`` in the raw line."""


@dataclass(frozen=True)
class _Token:
    kind: str  # "num", "op" or "par"
    text: str
    start: int  # span inside the annotation's expression
    end: int


@dataclass(frozen=True)
class _Site:
    """An annotation that can be corrupted, with where its visible parts are."""

    ann: Annotated
    tokens: tuple[_Token, ...]
    value: Fraction  # the expression's exact value
    result: tuple[int, int]  # span of the visible result number in the raw line
    visible: dict[int, tuple[int, int]] | None  # token index -> span of the visible token


def strip_annotations(text: str) -> str:
    """``text`` without its ``<<...>>`` calculator annotations (nothing else changes)."""
    return _ANNOTATION.sub("", text)


def find_annotations(line: str) -> list[Annotated]:
    """The ``<<expr=result>>`` annotations of a raw line, left to right."""
    found = []
    for match in _ANNOTATION.finditer(line):
        inner = match.group(1)
        if "=" not in inner:
            continue
        expr, result = inner.rsplit("=", 1)
        found.append(Annotated(expr, result, match.start(), match.end()))
    return found


def format_number(value: Fraction | float | int) -> str:
    """An integer without decimals, else rounded to at most 2 decimals, trailing zeros removed."""
    frac = _frac(value)
    if frac.denominator == 1:
        return str(frac.numerator)
    with localcontext() as ctx:
        ctx.prec = 60
        exact = Decimal(frac.numerator) / Decimal(frac.denominator)
        text = format(exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP), "f")
    text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def text_numbers(text: str) -> list[float]:
    """The numbers written in ``text`` (commas of thousands removed), left to right."""
    return [float(m.group().replace(",", "")) for m in _NUMBER_RE.finditer(text)]


def corrupt(line: str, kind: str, rng: random.Random, numbers: Sequence[float]) -> str | None:
    """The raw line with one annotation corrupted as ``kind``, or None when it cannot be.

    ``numbers`` are the numbers of the question and of the earlier steps (the ``operand``
    replacements). The annotation is rewritten too, so the raw line stays self-describing.
    """
    if kind not in KINDS:
        raise ConfigError(f"unknown corruption kind {kind!r}; known: {', '.join(KINDS)}")
    sites = _sites(line)
    if kind != "arithmetic":
        sites = [site for site in sites if site.visible is not None]
    rng.shuffle(sites)
    for site in sites:
        if kind == "arithmetic":
            out = _arithmetic(line, site, rng)
        elif kind == "operand":
            out = _operand(line, site, rng, numbers)
        else:
            out = _operation(line, site, rng)
        if out is not None:
            return out
    return None


# --- numbers and expressions --------------------------------------------------------------


def _frac(value: Fraction | float | int) -> Fraction:
    if isinstance(value, float):
        return Fraction(repr(value))
    return Fraction(value)


def _value(text: str) -> Fraction | None:
    text = text.strip().replace(",", "")
    if not _SIGNED_NUMBER_RE.fullmatch(text):
        return None
    return Fraction(text)


def _exact_text(value: Fraction) -> str | None:
    """``value`` written exactly as a decimal (no rounding), or None if it has no such form."""
    den = value.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    if den != 1:
        return None
    if value.denominator == 1:
        return str(value.numerator)
    with localcontext() as ctx:
        ctx.prec = 60
        exact = Decimal(value.numerator) / Decimal(value.denominator)
    return format(exact.normalize(), "f")


def _two_decimals(value: Fraction) -> bool:
    return (value * 100).denominator == 1


def _like(text: str, template: str) -> str:
    """A number's ``text`` in the style of ``template``: thousands commas, cents (``9.00``)."""
    if re.fullmatch(r"-?[\d,]*\.\d\d", template) and (Fraction(text) * 100).denominator == 1:
        text = format(Decimal(text).quantize(Decimal("0.01")), "f")
    if "," in template:
        sign = "-" if text.startswith("-") else ""
        whole, _, decimals = text.lstrip("-").partition(".")
        text = sign + f"{int(whole):,}" + (f".{decimals}" if decimals else "")
    return text


def _tokenize(expr: str) -> tuple[_Token, ...] | None:
    tokens = []
    pos = 0
    while pos < len(expr):
        if not expr[pos:].strip():
            break
        match = _TOKEN.match(expr, pos)
        if match is None:
            return None
        kind = match.lastgroup or ""
        tokens.append(_Token(kind, match.group(kind), match.start(kind), match.end(kind)))
        pos = match.end()
    return tuple(tokens) if tokens else None


def _py_number(text: str) -> str:
    whole, dot, decimals = text.replace(",", "").partition(".")
    whole = whole.lstrip("0") or "0"
    return f"{whole}{dot}{decimals}"


def _evaluate(texts: Sequence[str]) -> Fraction | None:
    """The exact value of an expression given as token texts, or None if undefined/invalid."""
    source = " ".join(_py_number(t) if t[0].isdigit() or t[0] == "." else t for t in texts)
    try:
        tree = ast.parse(source, mode="eval")
        return _eval_node(tree.body)
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None


def _eval_node(node: ast.AST) -> Fraction:
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval_node(node.left), _eval_node(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _eval_node(node.operand)
        return -operand if isinstance(node.op, ast.USub) else operand
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return _frac(node.value)
    raise ValueError("not an arithmetic expression")


# --- finding what a line shows -------------------------------------------------------------


def _number_pattern(text: str) -> str:
    """A regex for a number as a line may write it: thousands commas, trailing zeros, ``.5``."""
    whole, _, decimals = text.replace(",", "").partition(".")
    whole = whole.lstrip("0")
    decimals = decimals.rstrip("0")
    if whole:
        groups: list[str] = []
        while whole:
            groups.insert(0, whole[-3:])
            whole = whole[:-3]
        pattern = ",?".join(groups)
    else:
        pattern = "0?" if decimals else "0"
    if decimals:
        return pattern + r"\." + decimals + "0*"
    return pattern + r"(?:\.0+)?"


def _expression_pattern(tokens: Sequence[_Token]) -> re.Pattern[str]:
    """A regex for the expression as the text shows it, one named group ``t<i>`` per token.

    Allows spaces, ``$`` before numbers, ``x`` or ``×`` for ``*``, dashes for ``-``, other ways
    of writing a number, and up to three unit words after an operand ("5 snakes/jaguar * 6").
    """
    parts = []
    for index, token in enumerate(tokens):
        if token.kind == "num":
            unit = _UNIT if index + 1 < len(tokens) else ""
            parts.append(rf"(?:\$\s*)?(?P<t{index}>{_number_pattern(token.text)}){unit}")
        elif token.kind == "op":
            parts.append(f"(?P<t{index}>{_VISIBLE_OP[token.text]})")
        else:
            parts.append(re.escape(token.text))
    return re.compile(r"(?<![\d.])(?<!\d,)" + r"\s*".join(parts) + r"(?!\d|[.,]\d)")


def _sites(line: str) -> list[_Site]:
    sites = []
    previous_end = 0
    for ann in find_annotations(line):
        segment_start, previous_end = previous_end, ann.end
        tokens = _tokenize(ann.expr)
        written = _value(ann.result)
        shown = _VISIBLE_RESULT.match(line, ann.end)
        if tokens is None or written is None or shown is None:
            continue
        if not any(t.kind == "op" for t in tokens):
            continue  # a bare number: no computation to get wrong
        value = _evaluate([t.text for t in tokens])
        if value is None or _value(shown.group("num")) != written:
            continue
        visible = None
        matches = list(_expression_pattern(tokens).finditer(line, segment_start, ann.start))
        if matches:
            last = matches[-1]
            visible = {i: last.span(f"t{i}") for i, t in enumerate(tokens) if t.kind != "par"}
        sites.append(_Site(ann, tokens, value, shown.span("num"), visible))
    return sites


def _times_style(line: str, site: _Site) -> str:
    """How the line writes a multiplication: ``x``, ``×`` or ``*``."""
    assert site.visible is not None
    for index, token in enumerate(site.tokens):
        if token.text == "*":
            start, end = site.visible[index]
            return line[start:end]
    match = _TIMES_STYLE.search(strip_annotations(line))
    return match.group(1) if match else "*"


# --- rewriting -----------------------------------------------------------------------------


def _rewrite(
    line: str,
    site: _Site,
    new_value: Fraction,
    changes: dict[int, tuple[str, str]] | None = None,
) -> str:
    """``line`` with the site's result set to ``new_value``, in the annotation and the text.

    ``changes[i] = (annotation text, visible text)`` also replaces expression token ``i``.
    """
    changes = changes or {}
    expr = site.ann.expr
    for index in sorted(changes, reverse=True):
        token = site.tokens[index]
        expr = expr[: token.start] + changes[index][0] + expr[token.end :]
    edits = [(site.ann.start, site.ann.end, f"<<{expr}={format_number(new_value)}>>")]
    start, end = site.result
    edits.append((start, end, _like(format_number(new_value), line[start:end])))
    if changes:
        assert site.visible is not None
        for index, (_, shown) in changes.items():
            edits.append((*site.visible[index], shown))
    for start, end, text in sorted(edits, reverse=True):
        line = line[:start] + text + line[end:]
    return line


def _wrong_number(value: Fraction, rng: random.Random) -> Fraction:
    """A plausible different number: off by a few units of its scale, or one digit changed.

    Never negative unless ``value`` is, never zero unless ``value`` is.
    """
    whole = abs(int(value))
    step = 10 ** max(0, len(str(whole)) - 2)
    while True:
        if rng.random() < 0.5:
            delta = rng.randint(1, 9) * step
            sign = rng.choice((1, -1))
            if (value >= 0) != (value + sign * delta >= 0):
                sign = -sign  # keep the sign
            new = value + sign * delta
        else:
            text = format_number(abs(value))
            digits = [i for i, ch in enumerate(text) if ch.isdigit()]
            pos = rng.choice(digits)
            leading = pos == 0 and len(digits) > 1 and text[1:2] != "."
            choices = [d for d in "0123456789" if d != text[pos] and not (leading and d == "0")]
            new = Fraction(text[:pos] + rng.choice(choices) + text[pos + 1 :])
            new = -new if value < 0 else new
        if format_number(new) != format_number(value) and (new != 0 or value == 0):
            return new


def _arithmetic(line: str, site: _Site, rng: random.Random) -> str | None:
    shown = _value(line[site.result[0] : site.result[1]])
    assert shown is not None
    for _ in range(20):
        new = _wrong_number(shown, rng)
        if format_number(new) != format_number(site.value):
            return _rewrite(line, site, new)
    return None


def _choose(
    options: list[tuple[int, str, Fraction]], rng: random.Random
) -> tuple[int, str, Fraction]:
    """A seeded option: first which token (uniformly), then what it becomes."""
    positions = sorted({index for index, _, _ in options})
    index = rng.choice(positions)
    return rng.choice([option for option in options if option[0] == index])


def _operand(line: str, site: _Site, rng: random.Random, numbers: Sequence[float]) -> str | None:
    old = format_number(site.value)
    texts = [t.text for t in site.tokens]
    candidates: list[tuple[Fraction, str]] = []
    for number in numbers:
        value = _frac(number)
        text = _exact_text(value)
        if text is not None and value >= 0 and all(value != v for v, _ in candidates):
            candidates.append((value, text))
    options: list[tuple[int, str, Fraction]] = []
    for index, token in enumerate(site.tokens):
        if token.kind != "num":
            continue
        current = Fraction(_py_number(token.text))
        for value, text in candidates:
            if value == current:
                continue
            new = _evaluate([*texts[:index], text, *texts[index + 1 :]])
            if new is None or format_number(new) == old or (site.value >= 0 > new):
                continue
            options.append((index, text, new))
    if not options:
        return None
    nice = [option for option in options if _two_decimals(option[2])]
    index, text, new = _choose(nice or options, rng)
    assert site.visible is not None
    start, end = site.visible[index]
    return _rewrite(line, site, new, {index: (text, _like(text, line[start:end]))})


def _operation(line: str, site: _Site, rng: random.Random) -> str | None:
    old = format_number(site.value)
    texts = [t.text for t in site.tokens]
    options: list[tuple[int, str, Fraction]] = []
    for index, token in enumerate(site.tokens):
        if token.kind != "op" or index == 0 or site.tokens[index - 1].kind == "op":
            continue  # unary signs are not operations
        if site.tokens[index - 1].text == "(":
            continue
        for op in _OPERATORS:
            if op == token.text:
                continue
            new = _evaluate([*texts[:index], op, *texts[index + 1 :]])
            if new is None or format_number(new) == old:
                continue
            options.append((index, op, new))
    nice = [o for o in options if o[2] >= 0 and _two_decimals(o[2])]
    fallback = [o for o in options if not (site.value >= 0 > o[2])]
    pool = nice or fallback
    if not pool:
        return None
    index, op, new = _choose(pool, rng)
    shown = _times_style(line, site) if op == "*" else op
    return _rewrite(line, site, new, {index: (op, shown)})


__all__ = [
    "KINDS",
    "Annotated",
    "corrupt",
    "find_annotations",
    "format_number",
    "strip_annotations",
    "text_numbers",
]
