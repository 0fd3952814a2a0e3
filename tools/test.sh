#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
# The cluster tests (tests/cluster/) start a Slurm cluster and network namespaces of their own.
bash tools/setup.sh slurm-wlm munge iproute2 util-linux
source tools/env.sh
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
