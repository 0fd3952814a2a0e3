#!/usr/bin/env bash
# For a machine with a GPU: builds with the CUDA backend, compares every CUDA op with the
# CPU backend (tests/unit/test_cuda_backend.cpp), runs compute-sanitizer over those tests,
# trains a few steps on the GPU next to the CPU and prints both losses. The CUDA backend
# has been compiled but not yet run on hardware: this script is its first check.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi -L
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTETRA_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=native >/dev/null
cmake --build build-gpu -j"$(nproc)"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=./build-gpu/tests/unit_tests
out=$($T --source-file='*test_cuda_backend.cpp' 2>&1 || true)
echo "$out" | tail -4
if echo "$out" | grep -q "no GPU: skipped"; then echo "FAIL: no GPU seen"; exit 1; fi
echo "$out" | grep -q "Status: SUCCESS" || { echo "$out" | grep -B2 -A6 ERROR | head -80; exit 1; }
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck synccheck initcheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 1 "$T" \
      --source-file='*test_cuda_backend.cpp' >"/tmp/sanitizer_$tool.log" 2>&1 ||
      { echo "FAIL: $tool"; tail -40 "/tmp/sanitizer_$tool.log"; exit 1; }
  done
fi
args=(--steps 20 --dim 512 --layers 8 --heads 8 --kv-heads 4 --ffn-dim 1536 --seq-len 256)
./build-gpu/tetra train "${args[@]}" --device cuda | tail -3
./build-gpu/tetra train "${args[@]}" --device cpu | tail -3
echo "CUDA backend OK"
