#!/usr/bin/env bash
# The README's test command: installs what is missing (the build's packages, then the Python
# packages of the tests that check tetra with transformers and TensorBoard), builds, runs
# every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
# The cluster tests (tests/cluster/) start a Slurm cluster and network namespaces of their own;
# the browser test (tests/serve_browser.py) drives Debian's chromium with selenium; ccache lets
# the lab exercise's test build its copy of the sources from this build's objects.
bash tools/setup.sh slurm-wlm munge iproute2 util-linux chromium chromium-driver python3-selenium \
  ccache
bash tools/python_env.sh
source tools/env.sh
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
