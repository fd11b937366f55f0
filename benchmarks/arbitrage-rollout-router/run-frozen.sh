#!/bin/sh
# The frozen-feature routers of PLAN.md's attempt 2 (hidden states cached under
# ~/.cache/langchain-specreason/router-features, so each model reads each step once).
# Run from the repository root:
#   nohup sh benchmarks/arbitrage-rollout-router/run-frozen.sh > /tmp/router-frozen.log 2>&1 &
set -e
for MODEL in smollm2-135m qwen2.5-coder-0.5b; do
  for MARGIN in 0 0.25; do
    .venv/bin/specreason arbitrage cv --method frozen --dataset benchmarks/labels-cpu/dev \
      --folds 5 --margin "$MARGIN" --base-model "$MODEL" --threads 1 --no-progress \
      --out "benchmarks/arbitrage-rollout-router/cv-frozen-$MODEL-m$MARGIN"
  done
done
