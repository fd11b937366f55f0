#!/bin/sh
# Resumable: a finished fold is read back from oof.jsonl. Run from the repository root:
#   nohup sh benchmarks/arbitrage-rollout-router/run.sh > /tmp/router-cv.log 2>&1 &
# Attempt 2 (see PLAN.md): batch 2 (attempt 1's batch 8 was OOM-killed), 2 threads (no vLLM
# server runs beside it). NAME picks the output folder, MODEL the classifier's base.
set -e
MODEL=${MODEL:-$HOME/.cache/langchain-specreason/models/smollm2-135m}
NAME=${NAME:-smollm2}
MARGINS=${MARGINS:-"0"}  # margin 0.25 left out for time (PLAN.md)
for MARGIN in $MARGINS; do
  .venv/bin/specreason arbitrage cv --dataset benchmarks/labels-cpu/dev --folds 5 \
    --margin "$MARGIN" --base-model "$MODEL" --batch-size 2 --threads 2 \
    --out "benchmarks/arbitrage-rollout-router/cv-$NAME-m$MARGIN"
done
