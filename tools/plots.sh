#!/usr/bin/env bash
# Regenerates the README's pictures (docs/img/*.svg) from the demo (tools/demo.sh: the
# default model, TP 2 x CP 2 x PP 2 x DP 2 on 16 ranks, 200 steps): the loss curve, the first
# traced step (step 1), and the barrier of the last step, in which rank 5 is slowed by 300 ms
# on purpose (--inject-failure 5@199:slow=300) so that the picture has a straggler to mark.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash tools/demo.sh --metrics "$work/run.jsonl" --trace "$work/trace.json" --trace-steps 1 \
  --inject-failure 5@199:slow=300
mkdir -p docs/img
build/tetra plot --loss "$work/run.jsonl" --out docs/img/loss.svg
build/tetra plot --trace "$work/trace.json" --out docs/img/step.svg
build/tetra plot --barrier "$work/run.jsonl" --out docs/img/barrier.svg
