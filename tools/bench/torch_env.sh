#!/usr/bin/env bash
# PyTorch at its best for tools/bench/cpu.py: the newest release from PyPI (its products are
# MKL's, its elementwise ops vectorized, torch.compile there) in its own virtual environment,
# build/torch-venv, apart from Debian's torch 1.13 that the tests use (tools/python_env.sh).
# Idempotent: installs only when the pinned version is missing. PyPI's x86 wheel brings its CUDA
# libraries with it (about 5 GB), which it loads even on the CPU. Prints the interpreter's path.
set -euo pipefail
cd "$(dirname "$0")/../.."

pin="torch==2.15.0"
venv=build/torch-venv
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p build
  python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python" -c "import torch, numpy, sys; sys.exit(torch.__version__.split('+')[0] != '${pin#*==}')" \
  2>/dev/null; then
  echo "torch env: installing $pin and numpy into $venv (PyPI)" >&2
  "$venv/bin/python" -m pip install -q "$pin" numpy >&2
fi
echo "$PWD/$venv/bin/python"
