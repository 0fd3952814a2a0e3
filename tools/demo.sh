#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and trains the default
# model on the default (synthetic) data with all four kinds of parallelism at once,
# TP 2 x CP 2 x PP 2 x DP 2 on 16 ranks: one line per step and a summary at the end.
# Extra arguments go to `tetra train` (e.g. --steps 50); giving any of --tp --cp --pp --dp
# replaces the default layout (tetra refuses a flag given twice). TETRA_RANKS sets the number
# of ranks (the layout's product must match it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
source tools/env.sh
ranks=${TETRA_RANKS:-16}
layout=()
[ "$ranks" = 16 ] && layout=(--tp 2 --cp 2 --pp 2 --dp 2)
for a in "$@"; do
  case $a in --tp | --tp=* | --cp | --cp=* | --pp | --pp=* | --dp | --dp=*) layout=() ;; esac
done
exec mpirun --bind-to none -np "$ranks" build/tetra train "${layout[@]}" "$@"
