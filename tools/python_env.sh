#!/usr/bin/env bash
# The Python packages of the tests that check tetra with other programs: Debian's torch
# (python3-torch) and, from PyPI into the virtual environment build/venv (made with
# --system-site-packages, so that it sees Debian's torch and numpy), transformers and
# sentencepiece (tests/hf_transformers.py loads an export with them; transformers brings
# tokenizers, which tests/hf_tokenizers.py holds tetra's tokenizer.json to) and tensorboard
# (tests/tensorboard_readback.py reads --tensorboard's event files with it). Idempotent:
# installs only what is missing. Where something cannot be installed (no network) it says so
# and goes on; the tests that need it then report themselves skipped, unless
# TETRA_REQUIRE_PYTHON_TESTS is set (as CI sets it): then it fails. Used by tools/test.sh.
set -uo pipefail
cd "$(dirname "$0")/.."

# transformers 4.46 is the newest line checked against Debian 12's torch 1.13 (5.x needs
# torch 2.6); numpy stays Debian's 1.x, which that torch was built against.
pins=("transformers==4.46.3" "sentencepiece==0.2.3" "tensorboard==2.21.0")
venv=build/venv

skip() {
  if [ -n "${TETRA_REQUIRE_PYTHON_TESTS:-}" ]; then
    echo "tetra python env: $1 (TETRA_REQUIRE_PYTHON_TESTS is set)" >&2
    exit 1
  fi
  echo "tetra python env: $1; the tests that need it will be skipped"
  exit 0
}

missing=()
for p in python3-venv python3-torch; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "tetra python env: installing ${missing[*]} (Debian)"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null || skip "cannot install ${missing[*]}"
fi

if [ ! -x "$venv/bin/python3" ]; then
  mkdir -p build
  /usr/bin/python3 -m venv --system-site-packages "$venv" || skip "cannot create $venv"
fi
# The pins whose version is not installed in the environment.
need=$("$venv/bin/python3" - "${pins[@]}" <<'EOF'
import sys
from importlib import metadata
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    try:
        if metadata.version(name) == version:
            continue
    except metadata.PackageNotFoundError:
        pass
    print(pin)
EOF
)
if [ -n "$need" ]; then
  echo "tetra python env: installing" $need "into $venv (PyPI)"
  # shellcheck disable=SC2086
  "$venv/bin/python3" -m pip install -q "numpy<2" $need || skip "cannot install ${need//$'\n'/ }"
fi
"$venv/bin/python3" -c "import torch, transformers, tokenizers, sentencepiece, tensorboard" \
  2>/dev/null ||
  skip "torch, transformers, tokenizers, sentencepiece or tensorboard does not import in $venv"
