#!/usr/bin/env bash
# Regenerates the README's pictures (docs/img/*.svg). `bash tools/plots.sh` makes them all;
# `demo` or `sweep` makes one part.
#   demo: from the demo (tools/demo.sh: the default model, TP 2 x CP 2 x PP 2 x DP 2 on 16
#     ranks, 200 steps): the loss curve, the first traced step (step 1), and the barrier of the
#     last step, in which rank 5 is slowed by 300 ms on purpose (--inject-failure
#     5@199:slow=300) so that the picture has a straggler to mark.
#   sweep: tetra sweep of the demo's model over every layout of 16 ranks, 5 steps each: its
#     output in docs/img/sweep.txt, its ranked table in README.md, and its picture.
set -euo pipefail
cd "$(dirname "$0")/.."
parts=${1:-demo sweep}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p docs/img
if [[ " $parts " == *" demo "* ]]; then
  bash tools/demo.sh --metrics "$work/run.jsonl" --trace "$work/trace.json" --trace-steps 1 \
    --inject-failure 5@199:slow=300
  build/tetra plot --loss "$work/run.jsonl" --out docs/img/loss.svg
  build/tetra plot --trace "$work/trace.json" --out docs/img/step.svg
  build/tetra plot --barrier "$work/run.jsonl" --out docs/img/barrier.svg
fi
if [[ " $parts " == *" sweep "* ]]; then
  bash tools/setup.sh
  source tools/env.sh
  build/tetra sweep --ranks 16 --steps 5 --out "$work/sweep" | grep -v '^wrote ' |
    tee docs/img/sweep.txt
  cp "$work/sweep/sweep.svg" docs/img/sweep.svg
  # The README quotes the ranked table and the verdict, between its two markers.
  python3 - <<'PY'
table = open("docs/img/sweep.txt").read()
table = table[table.index("MFU at one peak"):]
block = "".join("    " + line + "\n" if line else "\n" for line in table.splitlines())
readme = open("README.md").read()
begin, end = "<!-- the sweep's table: tools/plots.sh sweep writes it -->\n", "<!-- end of the table -->"
at, to = readme.index(begin) + len(begin), readme.index(end)
open("README.md", "w").write(readme[:at] + "\n" + block + "\n" + readme[to:])
PY
fi
