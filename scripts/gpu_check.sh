#!/usr/bin/env bash
# The prepared device check: the whole study on a CIFAR-10-format ResNet-18, a table of stage
# times with the device named (see scripts/gpu_check.py). On a GPU machine:
#   bash scripts/gpu_check.sh --out gpu-check.txt [--log dvc.log]
# Anywhere (the test suite runs this):
#   bash scripts/gpu_check.sh --dry                   # CPU-sized, a few minutes
# With NCIP_PYTHON set (an interpreter that already has ncip's dependencies, such as a GPU
# image's python3 with the missing packages on PYTHONPATH), no .venv is made: that interpreter
# runs the check and every stage, with this checkout's src/ on PYTHONPATH.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${NCIP_PYTHON:-}" ]; then
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
  exec "$NCIP_PYTHON" scripts/gpu_check.py "$@"
fi
bash scripts/setup.sh >&2
exec .venv/bin/python scripts/gpu_check.py "$@"
