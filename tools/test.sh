#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
source tools/env.sh
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
