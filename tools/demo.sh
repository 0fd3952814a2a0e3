#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and runs `tetra train --preset
# demo`: the default model on the default (synthetic) data with all four kinds of parallelism
# at once, TP 2 x CP 2 x PP 2 x DP 2 on 16 ranks; one line per step and a summary at the end.
# Extra arguments go to `tetra train` (e.g. --steps 50); giving any of --tp --cp --pp --dp
# replaces the demo's layout as a whole (the others 1, DP the rest of the ranks). TETRA_RANKS
# sets the number of ranks; other than 16 it also replaces the demo's layout.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
source tools/env.sh
ranks=${TETRA_RANKS:-16}
given=" "
for a in "$@"; do
  case $a in --tp | --tp=* | --cp | --cp=* | --pp | --pp=* | --dp | --dp=*) given+="${a%%=*} " ;; esac
done
layout=()
if [ "$ranks" != 16 ] || [ "$given" != " " ]; then
  for flag in --tp --cp --pp; do
    [[ $given == *" $flag "* ]] || layout+=("$flag" 1)
  done
  [[ $given == *" --dp "* ]] || layout+=(--dp 0)
fi
exec mpirun --bind-to none -np "$ranks" build/tetra train --preset demo "${layout[@]}" "$@"
