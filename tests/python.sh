#!/bin/sh
# Runs a Python test in the tests' virtual environment ($TETRA_VENV, made by
# tools/python_env.sh) when there is one, else in the system's python3.
if [ -n "${TETRA_VENV:-}" ] && [ -x "$TETRA_VENV/bin/python3" ]; then
  exec "$TETRA_VENV/bin/python3" "$@"
fi
exec python3 "$@"
