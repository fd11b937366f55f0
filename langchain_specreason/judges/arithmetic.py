r"""A model-free arithmetic judge: recompute the equations a reasoning step writes.

:func:`check_step` finds each ``expression = number`` in a step ("Natalia sold 48/2 = 24
clips"), evaluates the left side with :func:`safe_eval` (an ``ast`` walk, never ``eval``) and
compares it with the stated number. It checks only what it parses unambiguously and says
``"unsure"`` when it found nothing to check.

Read: numbers ``48 1,000 3.5 .5 $12``; ``+ - − * / × ÷ ·``; ``x`` between two numbers (never a
variable); LaTeX ``\times \cdot \div \frac{a}{b}``; parentheses; the wrappers ``\( \) \[ \] $
\text{} \boxed{} **bold**``. A word, unit, newline or other punctuation ends an expression
("3 apples and 5 + 2 = 7 pears" gives ``5 + 2 = 7``); words or punctuation may follow the stated
number (``= $60.``; ``= 24.`` is 24). Each link of a chain ``a = b = c`` whose left side has a
binary operator and whose right side is a lone, maybe negative, number is checked.

Never judged: left sides without a binary operator (``x = 7``, ``Total = 7``); anything with
``%``; right sides that are not a lone number (``= 12 + 0``); expressions touching a letter,
``^ _ \ ! |``, a superscript, ``√``, a dash, a time or a decimal comma (``x2 + 1``,
``2^3 + 1``, ``= 3:45``, ``= 1,5``); a leading minus after a word or ``)`` (``x - 3 = 4``);
numbers side by side (``1 000``); implicit products (``2(3 + 4)``); parentheses mixing prose and
numbers (``2 * (3 + 4 = 14)``).

Tolerance: a stated number showing ``d > 0`` decimals is right if it is the value rounded to
``d`` decimals, either way on a tie (``10/3 = 3.3``, ``1/3 = 0.33`` pass; ``2/3 = 0.66`` fails);
any is right if ``|value - stated| <= 1e-6 * max(1, |value|)``. A whole number is never a
rounding: ``10/3 = 3`` is wrong. Limitations: English number format only (``1.000`` is one); a
hyphen between numbers is a minus (``pages 10-12 = 3`` is judged); ``[ ]`` do not group.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal, NamedTuple

from .base import JudgeSpec, StepContext, Verdict

__all__ = [
    "ArithmeticCheck",
    "ArithmeticJudge",
    "Equation",
    "check_step",
    "find_equations",
    "safe_eval",
]


@dataclass(frozen=True)
class Equation:
    """One ``expression = number`` the judge recomputed."""

    text: str  #: the original span, e.g. ``"48/2 = 24"`` (LaTeX kept as written)
    expression: str  #: the normalised Python-style left side, e.g. ``"48/2"``
    stated: float  #: the number written after ``=``
    value: float  #: the left side's value
    ok: bool  #: whether ``stated`` agrees with ``value`` under the module's tolerance rule


@dataclass(frozen=True)
class ArithmeticCheck:
    """The equations found in one step, and the verdict they give."""

    equations: tuple[Equation, ...]

    @property
    def checked(self) -> int:
        """How many equations were checked."""
        return len(self.equations)

    @property
    def wrong(self) -> tuple[Equation, ...]:
        """The equations whose stated result disagrees with the recomputed value."""
        return tuple(eq for eq in self.equations if not eq.ok)

    @property
    def verdict(self) -> Literal["right", "wrong", "unsure"]:
        """``"wrong"`` if any equation is wrong, ``"right"`` if any was checked, else unsure."""
        return "wrong" if self.wrong else "right" if self.equations else "unsure"


class _Tok(NamedTuple):
    kind: str  # num, op, lp, rp, eq, pct, word, other
    text: str  # normalised: "1000" for "1,000", "*" for "×"
    start: int
    end: int


_TOKEN = re.compile(
    r"(?P<nl>\n|<\|[^|\n]{1,40}\|>)"
    r"|(?P<skip>[^\S\n]+|&|\*\*|\\?\$|\\[()\[\],;:! ]|\\\\|\\q?quad(?![A-Za-z])"
    r"|\\(?:left|right)(?=[()])|(?<=[A-Za-z:.!?])\*|\*(?=[A-Za-z]))"
    r"|(?P<frac>\\[dt]?frac\s*\{)|(?P<open>\\(?:text|mathrm|textbf|mbox|boxed)\s*\{|\{)"
    r"|(?P<mid>\}\s*\{)|(?P<close>\})"
    r"|(?P<num>[0-9]{1,3}(?:(?:,|\{,\})[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"
    r"|(?P<mul>\\times(?![A-Za-z])|\\cdot(?![A-Za-z])|[*×·⋅∙])|(?P<div>\\div(?![A-Za-z])|[/÷])"
    r"|(?P<add>\+)|(?P<sub>[-−])|(?P<lp>\()|(?P<rp>\))|(?P<eq>=)|(?P<pct>\\?%)"
    r"|(?P<word>[A-Za-z]+)|(?P<other>.)",
    re.DOTALL,
)
_OPS = {"mul": "*", "div": "/", "add": "+", "sub": "-"}
_MATH = frozenset({"num", "op", "lp", "rp", "eq", "pct"})
_GAP = re.compile(r"[ \t$]*")  # what may separate an ``x`` meaning times from its numbers
_LOOSE = frozenset(".,;:?!\"'<>[]{}#\n→⇒∴“”‘’")  # may border an equation across a space
_TIGHT_BEFORE = frozenset("[{<\n\"'“‘")  # may touch the start of a left side
_TIGHT_AFTER = frozenset(".,;?]}>\n\"'”’")  # may touch the stated number
_BEFORE_MINUS = frozenset(":,;[{\n")  # a leading minus after these is unary
_EXPR = re.compile(r"[0-9.+\-*/() \t]+")
_BINOPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    braces: list[str] = []  # "n"/"d": a \frac numerator/denominator; "o": any other group

    def add(m: re.Match[str], *pairs: tuple[str, str]) -> None:
        toks.extend(_Tok(kind, tok, m.start(), m.end()) for kind, tok in pairs)

    for m in _TOKEN.finditer(text):
        kind, tok = m.lastgroup or "other", m.group()
        if kind == "frac":
            braces.append("n")
            add(m, ("lp", "("), ("lp", "("))
        elif kind == "open":
            braces.append("o")
            add(m, *([("other", tok)] if tok == "{" else []))
        elif kind == "mid" and braces and braces[-1] == "n":
            braces[-1] = "d"
            add(m, ("rp", ")"), ("op", "/"), ("lp", "("))
        elif kind in ("mid", "close"):
            closed = braces.pop() if braces else "o"
            add(m, *([("rp", ")")] * 2 if closed == "d" else [("other", "}")]))
            if kind == "mid":
                braces.append("o")
                add(m, ("other", "{"))
        elif kind != "skip":
            # a chat special token (<|im_end|>) separates like a line break: a step that forges
            # the end of its turn right after a result does not hide that result
            norm = {"num": tok.replace("{,}", "").replace(",", ""), "nl": "\n"}.get(
                kind, _OPS.get(kind, tok)
            )
            add(m, ("op" if kind in _OPS else "other" if kind == "nl" else kind, norm))
    for i in range(1, len(toks) - 1):  # "3 x 4" is a product, "2x + 3" or "x = 7" is not
        a, t, b = toks[i - 1], toks[i], toks[i + 1]
        if t.text in ("x", "X") and a.kind in ("num", "rp") and b.kind in ("num", "lp"):
            if _GAP.fullmatch(text, a.end, t.start) and _GAP.fullmatch(text, t.end, b.start):
                toks[i] = t._replace(kind="op", text="*")
    return toks


def _lhs_start(toks: list[_Tok], lo: int, hi: int) -> int | None:
    """Where the left side ``toks[lo:hi]`` really starts, or None if it is not checkable."""
    start, opened = lo, []
    for k in range(lo, hi):
        if toks[k].kind == "lp":
            opened.append(k)
        elif toks[k].kind == "rp" and opened:
            opened.pop()
        elif toks[k].kind == "rp":
            start = k + 1  # an unmatched ")" ends a label such as "(a)"
    start = opened[-1] + 1 if opened else start
    body = toks[start:hi]
    if not body or any(t.kind not in ("lp", "rp") for t in toks[lo:start]):
        return None
    if any(t.kind == "pct" for t in body) or not any(
        t.kind == "op" and p.kind in ("num", "rp") for p, t in pairwise(body)
    ):
        return None
    first, prev = body[0], (toks[start - 1] if start > 0 else None)
    if first.kind == "op" and first.text != "-":
        return None
    if prev is None or prev.kind in ("eq", "lp"):
        return start
    if first.kind == "op":
        return start if prev.text in _BEFORE_MINUS else None
    if prev.end == first.start:
        return start if prev.text in _TIGHT_BEFORE else None
    return start if prev.kind in ("word", "rp") or prev.text in _LOOSE else None


def _stated(text: str, toks: list[_Tok], lo: int, hi: int) -> int | None:
    """The index of the lone number ``toks[lo:hi]`` states (maybe after a "-"), or None."""
    k = lo + 1 if lo < hi and toks[lo].text == "-" else lo
    if k >= hi or toks[k].kind != "num":
        return None
    num, rest, nxt = toks[k], toks[k + 1 : hi], toks[k + 1] if k + 1 < len(toks) else None
    if rest and not all(t.kind == "rp" for t in rest):  # only "= 8 (apples)" may follow
        label = len(rest) == 1 and rest[0].kind == "lp" and num.end < rest[0].start
        word = hi < len(toks) and toks[hi].kind == "word" and len(toks[hi].text) > 1
        return k if label and word else None
    if rest or nxt is None or nxt.kind == "eq":
        return k
    if num.end < nxt.start:
        return k if nxt.kind == "word" or nxt.text in _LOOSE else None
    comma_digit = nxt.text == "," and text[nxt.end : nxt.end + 1].isdigit()  # "1,50"
    return k if nxt.text in _TIGHT_AFTER and not comma_digit else None


def _agrees(shown: str, stated: float, value: float) -> bool:
    gap, scale = abs(value - stated), max(1.0, abs(value))
    decimals = len(shown.partition(".")[2])
    rounded = decimals > 0 and gap <= 0.5 * 10.0**-decimals + 1e-9 * scale
    return gap <= 1e-6 * scale or rounded


def find_equations(text: str) -> list[Equation]:
    """Every checkable ``expression = number`` in ``text``, in order (see the module doc)."""
    toks, i = _tokenize(text), 0
    found: list[Equation] = []
    while i < len(toks):
        j = i
        while j < len(toks) and toks[j].kind in _MATH:
            j += 1
        bounds = [i - 1, *(k for k in range(i, j) if toks[k].kind == "eq"), j]
        for a, b, c in zip(bounds, bounds[1:], bounds[2:], strict=False):
            k, start = _stated(text, toks, b + 1, c), _lhs_start(toks, a + 1, b)
            if k is None or start is None:
                continue
            body = toks[start:b]  # a space keeps "1 000" two numbers, so it does not parse
            expression = body[0].text + "".join(
                (" " if p.kind == t.kind == "num" else "") + t.text for p, t in pairwise(body)
            )
            value = safe_eval(expression)
            if value is not None:
                stated = float(toks[k].text) * (-1 if k > b + 1 else 1)
                span, ok = text[body[0].start : toks[k].end], _agrees(toks[k].text, stated, value)
                found.append(Equation(span, expression, stated, value, ok))
        i = max(j, i + 1)
    return found


@functools.lru_cache(maxsize=1024)
def check_step(text: str) -> ArithmeticCheck:
    """Recompute every equation of one reasoning step; see :attr:`ArithmeticCheck.verdict`.

    Pure and cached: in ``arithmetic+learned`` the check and the learned judge's feature
    read one step once.
    """
    return ArithmeticCheck(tuple(find_equations(text)))


def _eval(node: ast.expr) -> float:
    match node:
        case ast.Constant(value=bool()):
            pass
        case ast.Constant(value=int() | float() as number):
            return float(number)
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_eval(operand)
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINOPS:
            return _BINOPS[type(op)](_eval(left), _eval(right))
    raise ValueError("not plain arithmetic")


def safe_eval(expression: str) -> float | None:
    """The value of an arithmetic expression, or None if it is anything else.

    Only numbers, ``+ - * /``, unary ``-`` and parentheses are allowed, with Python's precedence;
    names, calls, attributes, ``**``, division by zero and non-finite results give None.
    """
    if not _EXPR.fullmatch(expression):
        return None
    try:
        value = _eval(ast.parse(expression.strip(), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError, MemoryError):
        return None
    return value if math.isfinite(value) else None


class ArithmeticJudge:
    """``arithmetic``: reject a step that writes a wrong result; score 0 wrong, 0.5 unsure, 1."""

    async def judge(self, ctx: StepContext) -> Verdict:
        """Recompute the step's equations."""
        start = time.perf_counter()
        check = check_step(ctx.step)
        score = {"wrong": 0.0, "unsure": 0.5, "right": 1.0}[check.verdict]
        return Verdict(
            score=score,
            accept=check.verdict != "wrong",
            seconds=time.perf_counter() - start,
            detail={
                "arithmetic": check.verdict,
                "equations": check.checked,
                "wrong": [eq.text for eq in check.wrong],
            },
        )


SPEC = JudgeSpec(
    name="arithmetic",
    description="recomputes each `expression = number` the step writes (no call); "
    "rejects a wrong result",
    build=lambda settings, draft, base, fmt: ArithmeticJudge(),
)
