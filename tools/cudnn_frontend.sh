#!/usr/bin/env bash
# Unpacks cudnn-frontend's headers (header-only C++; PyPI's nvidia-cudnn-frontend wheel) into
# .gpu/cudnn-frontend/include, where CMake looks for them, unless they are there. Called by
# tools/setup.sh where nvcc exists and by tools/gpu_bundle.sh. A failed download leaves the
# build without the cuDNN path (attention takes the GEMM fallback), which CMake then says.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
version=1.32.0  # compiled and validated against cuDNN 9.19 (tests/unit/test_cudnn_validate.cpp)
dest=.gpu/cudnn-frontend
[ -f "$dest/include/cudnn_frontend.h" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
  --platform manylinux_2_28_x86_64 -d "$tmp" "nvidia-cudnn-frontend==$version" >"$tmp/log" 2>&1; then
  echo "tetra setup: could not download nvidia-cudnn-frontend $version (cuDNN attention off):"
  tail -2 "$tmp/log"
  exit 0
fi
python3 - "$tmp" "$dest" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(glob.glob(os.path.join(tmp, "*.whl"))[0]) as z:
    z.extractall(tmp, [n for n in z.namelist() if n.startswith("include/")])
shutil.rmtree(dest, ignore_errors=True)
os.makedirs(dest)
shutil.move(os.path.join(tmp, "include"), os.path.join(dest, "include"))
PY
echo "tetra setup: cudnn-frontend $version headers in $dest/include"
