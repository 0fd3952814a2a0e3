#!/usr/bin/env bash
# Installs what tetra needs to build and test on Debian 12, only what is missing, and
# builds it into build/. Idempotent: a second run installs nothing and rebuilds only
# what changed. Used by tools/demo.sh and tools/test.sh; arguments name further packages
# (tools/test.sh's for the cluster tests).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake libopenmpi-dev openmpi-bin libeigen3-dev libopenblas-pthread-dev
  doctest-dev nlohmann-json3-dev libcli11-dev libsentencepiece-dev libpcre2-dev libcpp-httplib-dev
  pkg-config python3 "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "tetra setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Where nvcc exists the CUDA backend is built, with cuDNN's fused attention when its frontend's
# headers are here.
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; then
  bash tools/cudnn_frontend.sh
fi

# Through ccache where it is (tools/test.sh installs it), with file names relative to this
# tree: tetra lab --check's copies of the sources then find these objects (jobs/lab_exercise.cpp).
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build -j"$(nproc)"
