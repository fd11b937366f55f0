"""A tool without its extra: one line naming the extra, exit 2 (the library alone imports)."""

from __future__ import annotations

import subprocess
import sys

import pytest

RUN = (
    "import sys; sys.modules[{module!r}] = None; "
    "from langchain_specreason.cli import main; sys.exit(main({argv!r}))"
)


@pytest.mark.parametrize(
    ("module", "argv", "extra"),
    [
        ("tqdm", ["bench", "--help"], "bench"),
        ("prometheus_client", ["bench", "--limit", "1"], "bench"),
        ("platformdirs", ["serve", "--profile", "cpu-test"], "serve"),
        ("tqdm", ["label", "--out", "x"], "bench"),
    ],
)
def test_a_tool_without_its_extra_names_the_extra(module, argv, extra):
    done = subprocess.run(
        [sys.executable, "-c", RUN.format(module=module, argv=argv)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"error: `specreason {argv[0]}` needs the `{extra}` extra")
    assert f"pip install 'langchain-specreason[{extra}]'" in lines[-1]
    assert "Traceback" not in done.stderr


def test_the_library_imports_without_any_tool_module():
    code = (
        "import sys\n"
        "for m in ('tqdm', 'platformdirs', 'matplotlib', 'prometheus_client', 'vllm', 'torch',"
        " 'transformers'):\n"
        "    sys.modules[m] = None\n"
        "from langchain_specreason import ChatSpecReason, create_specreason_graph\n"
        "print(ChatSpecReason.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ChatSpecReason"
