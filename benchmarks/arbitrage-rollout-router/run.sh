#!/bin/sh
# Resumable: a finished fold is read back from oof.jsonl. Run from the repository root:
#   nohup sh benchmarks/arbitrage-rollout-router/run.sh > /tmp/router-cv.log 2>&1 &
set -e
MODEL=${MODEL:-$HOME/.cache/langchain-specreason/models/smollm2-135m}
for MARGIN in 0 0.25; do
  .venv/bin/specreason arbitrage cv --dataset benchmarks/labels-cpu/dev --folds 5 \
    --margin "$MARGIN" --base-model "$MODEL" --threads 1 --no-progress \
    --out "benchmarks/arbitrage-rollout-router/cv-smollm2-m$MARGIN"
done
