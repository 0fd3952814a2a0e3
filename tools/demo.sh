#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and trains the default
# model on the default (synthetic) data, one line per step and a summary at the end.
# Extra arguments go to `tetra train`, e.g. tools/demo.sh --steps 50.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
source tools/env.sh
exec mpirun -np 1 build/tetra train "$@"
