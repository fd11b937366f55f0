"""A router run in-process with transformers: the ``Classifier`` protocol without a server.

For a 135M router a vLLM server costs about 4.5 GB of RAM (API server, engine, worker, KV
cache); in-process it costs well under 1 GB. Same weights, same left cut to ``max_tokens`` as
the served router (``tests/integration/test_arbitrage.py`` checks the two agree).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from ..endpoint import Classified
from ..errors import ConfigError


class LocalClassifier:
    """A sequence-classifier folder (the router ``arbitrage train`` writes), run in-process.

    Example::

        judge = RouterJudge.from_folder(LocalClassifier(folder), folder, tau=0.5)
    """

    def __init__(self, folder: str | Path, *, name: str = "router", threads: int = 1) -> None:
        self.folder = Path(folder)
        if not (self.folder / "config.json").is_file():
            raise ConfigError(f"{self.folder} is not a model folder (no config.json)")
        self.name = name
        self.threads = threads
        self._model: Any = None
        self._tokenizer: Any = None
        self._lock = asyncio.Lock()

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        torch.set_num_threads(self.threads)
        self._tokenizer = AutoTokenizer.from_pretrained(self.folder, truncation_side="left")
        self._model = AutoModelForSequenceClassification.from_pretrained(
            self.folder, dtype=torch.float32
        ).eval()

    def _probs(self, texts: list[str], truncate: int | None) -> tuple[list[list[float]], int]:
        import torch

        if self._model is None:
            self._load()
        rows, tokens = [], 0
        with torch.no_grad():
            for text in texts:  # one at a time: no padding, exactly what the server computes
                enc = self._tokenizer(
                    text, return_tensors="pt", truncation=bool(truncate), max_length=truncate
                )
                tokens += int(enc["input_ids"].shape[1])
                logits = self._model(**enc).logits.float()
                rows.append(torch.softmax(logits, -1)[0].tolist())
        return rows, tokens

    async def classify(self, texts: list[str], *, truncate: int | None = None) -> Classified:
        """Class probabilities of each text (computed in a worker thread)."""
        async with self._lock:
            start = time.perf_counter()
            probs, tokens = await asyncio.to_thread(self._probs, texts, truncate)
        return Classified(probs=probs, prompt_tokens=tokens, seconds=time.perf_counter() - start)
