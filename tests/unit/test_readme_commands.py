"""Every ``specreason`` command the READMEs show parses with today's command line.

A flag renamed in the code but not in the docs would fail a user who pastes the command; this
catches it without running anything (the integration suite runs the demo itself).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from langchain_specreason.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "serve/README.md")


def commands(path: Path) -> list[str]:
    """The ``specreason ...`` lines of the doc's bash blocks (continuations joined)."""
    out = []
    for block in re.findall(r"^```(?:bash|sh|console)\n(.*?)^```", path.read_text(), re.S | re.M):
        text = re.sub(r"\\\n\s*", " ", block)
        for line in text.splitlines():
            line = line.strip().removeprefix("$ ")
            line = re.sub(r"^(?:\w+=\S+\s+)+", "", line)  # VAR=value specreason ...
            line = re.sub(r"^(?:\.venv/bin/|uv run |nohup )", "", line)
            if line.startswith("specreason "):
                out.append(line.split(" #", 1)[0].split(" &", 1)[0].split(" |", 1)[0])
    return out


CASES = [(doc, cmd) for doc in DOCS for cmd in commands(ROOT / doc)]


def test_the_readmes_show_commands():
    assert len([c for d, c in CASES if d == "README.md"]) >= 5


@pytest.mark.parametrize(("doc", "command"), CASES, ids=[f"{d}:{c[:60]}" for d, c in CASES])
def test_a_documented_command_parses(doc, command, capsys):
    argv = shlex.split(command)[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code:  # 0: a --help line
            pytest.fail(f"{doc}: `{command}` does not parse: {capsys.readouterr().err}")
