"""The README's snippets and commands, run as a user pastes and types them.

Each ```python block of the README's "Quickstart" and "Use" sections runs as a script in a fresh
interpreter, with only the two server URLs in the environment (what the Quickstart tells the
user to export); no python block stands anywhere else in the README. `specreason demo` runs
through the installed console script.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def section_snippets(title: str) -> list[str]:
    """The ```python blocks of the README's ``## title`` section (its subsections included)."""
    text = (ROOT / "README.md").read_text()
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return python_blocks(section)


def use_snippets() -> list[str]:
    return section_snippets("Use")


def quickstart_snippets() -> list[str]:
    return section_snippets("Quickstart")


def run_python(code: str, servers, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "snippet.py"
    script.write_text(code)
    env = {
        name: value for name, value in os.environ.items() if not name.startswith("SPECREASON_")
    }  # only the two URLs the Quickstart exports
    env.update(SPECREASON_DRAFT_URL=servers.draft_url, SPECREASON_BASE_URL=servers.base_url)
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )


SNIPPETS = (
    "create_specreason_graph",
    "ChatSpecReason(budget=512",
    "with_structured_output",
    "custom_judge=",
)
"""What each snippet of the Use section shows, in order."""


def test_the_use_section_has_its_snippets_in_order():
    snippets = use_snippets()
    assert len(snippets) == len(SNIPPETS)
    assert all(mark in code for mark, code in zip(SNIPPETS, snippets, strict=True))


def test_every_python_block_of_the_readme_is_run_by_these_tests():
    """A ```python block outside the Quickstart and the Use section would go untested."""
    every = python_blocks((ROOT / "README.md").read_text())
    assert every == quickstart_snippets() + use_snippets()
    assert len(quickstart_snippets()) == 1


def test_the_quickstart_snippet_runs_as_pasted(servers, tmp_path):
    done = run_python(quickstart_snippets()[0], servers, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "84" in done.stdout  # 12*7, in the reply the snippet prints
    assert "'steps_accepted'" in done.stdout, done.stdout  # response_metadata["specreason"]
    assert "'total_tokens'" in done.stdout, done.stdout  # usage_metadata


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_each_use_snippet_runs_as_pasted(servers, tmp_path, index):
    done = run_python(use_snippets()[index], servers, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    if index == 0:  # the graph snippet prints each step's decision, then the stream's events
        assert "84" in done.stdout  # 12*7, in the answer the snippet prints
        assert re.search(r"^(accepted|rewritten|base) ", done.stdout, flags=re.M), done.stdout
        assert "'type': 'done'" in done.stdout
    elif index == 1:  # the chat model's metadata, then the streamed reply
        assert "84" in done.stdout
        assert "'steps_accepted'" in done.stdout, done.stdout
    elif index == 2:  # structured output: the parsed object
        assert re.search(r"^Product\(name=.*price=", done.stdout, flags=re.M), done.stdout
    else:  # the custom judge decided every step: counts, then the reply
        assert re.search(r"^\d+ accepted, \d+ rewritten$", done.stdout, flags=re.M), done.stdout


def test_demo_command_answers_and_compares_with_the_base_model(servers):
    script = Path(sys.executable).with_name("specreason")
    done = subprocess.run(
        [
            str(script),
            "demo",
            "--draft-url",
            servers.draft_url,
            "--base-url",
            servers.base_url,
            "--profile",
            "cpu-test",
            "--budget",
            "96",
            "--question",
            "What is 12*7?",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "judge arithmetic+likelihood" in out  # the default judge
    assert re.search(r"step +0 (ACCEPTED|REWRITTEN)", out), out
    assert re.search(r"vs base alone \d+\.\d s: \d+\.\d\dx", out), out
