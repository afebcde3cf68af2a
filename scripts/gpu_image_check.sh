#!/usr/bin/env bash
# The device check on a GPU machine whose image has PyTorch but not all of ncip's dependencies
# and no network (this project's lent H200: Python 3.12, torch 2.11): the missing packages
# travel as wheels in .whl/, made on a networked machine with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     -d .whl $(cat scripts/gpu_image_wheels.txt)
# Then: bash scripts/gpu_image_check.sh OUTDIR. It prints the environment, runs the GPU tests
# (tests/test_cuda.py and the pinned-memory test) and the device check (scripts/gpu_check.sh),
# writing pytest-cuda.txt, gpu-check.txt and dvc.log to OUTDIR.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: gpu_image_check.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 DVC_NO_ANALYTICS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/ncip-site .whl/*.whl >"$out/pip.log" 2>&1 || { tail -20 "$out/pip.log"; exit 3; }
export PYTHONPATH=/tmp/ncip-site:$PWD/src
nvidia-smi -L || true
python3 - <<'PY' || exit 4
import dvc, numpy, pandas, sklearn, torch, torchattacks, xgboost  # noqa: F401
print("python", __import__("sys").version.split()[0], "torch", torch.__version__,
      "cuda", torch.version.cuda, torch.cuda.is_available(), "dvc", dvc.__version__,
      "numpy", numpy.__version__, "pandas", pandas.__version__)
PY
timeout "${GPU_TEST_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py \
  "tests/test_training.py::test_a_training_set_too_big_for_the_gpu_share_stays_on_the_host" \
  >"$out/pytest-cuda.txt" 2>&1
echo "GPU tests: exit $?"
tail -25 "$out/pytest-cuda.txt"
NCIP_PYTHON=python3 timeout "${GPU_CHECK_TIMEOUT:-400}" bash scripts/gpu_check.sh \
  --out "$out/gpu-check.txt" --log "$out/dvc.log" 2>&1 | tail -45
echo "device check: exit $?"
