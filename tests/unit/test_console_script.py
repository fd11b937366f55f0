"""The installed `specreason` console script, run as a user types it (no server needed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("specreason")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def test_the_console_script_is_installed_beside_python():
    assert SCRIPT.is_file(), f"no console script at {SCRIPT}; is the package installed?"
    assert shutil.which("specreason", path=str(SCRIPT.parent)) == str(SCRIPT)


def test_serve_list_needs_no_profile():
    done = run("serve", "--list")
    assert done.returncode == 0, done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert names == ["cpu", "cpu-test", "gpu-1x", "gpu-2x"]


def test_serve_without_profile_says_what_to_do():
    done = run("serve")
    assert done.returncode == 2
    assert "serve needs --profile NAME" in done.stderr
    assert "Traceback" not in done.stderr


def test_models_list_names_the_catalog():
    done = run("models", "list")
    assert done.returncode == 0, done.stderr
    for name in ("smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        assert name in done.stdout


# servers nobody listens on: the flags must be refused before any request
UNREACHABLE_URLS = ("--draft-url", "http://127.0.0.1:9/v1", "--base-url", "http://127.0.0.1:9/v1")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("bench", "judges", "--judge", "vibes"), "unknown judge 'vibes'"),
        (
            ("bench", "--judge", "vibes", *UNREACHABLE_URLS),
            "unknown judge 'vibes'",
        ),
        (
            ("bench", "--judge", "likelihood", "--likelihood-threshold=0.5", *UNREACHABLE_URLS),
            "likelihood_threshold: Input should be less than or equal to 0",
        ),
        (
            ("demo", "--judge", "vibes", *UNREACHABLE_URLS),
            "unknown judge 'vibes'",
        ),
    ],
)
def test_bad_judge_flags_are_one_line_errors(args, message):
    done = run(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
