#!/usr/bin/env bash
# The prepared device check: the whole study on a CIFAR-10-format ResNet-18, a table of stage
# times with the device named (see scripts/gpu_check.py). On a GPU machine:
#   bash scripts/gpu_check.sh --out gpu-check.txt     # about 8 minutes on one GPU (not yet run)
# Anywhere (the test suite runs this):
#   bash scripts/gpu_check.sh --dry                   # CPU-sized, a few minutes
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >&2
exec .venv/bin/python scripts/gpu_check.py "$@"
