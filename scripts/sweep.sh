#!/usr/bin/env bash
# Sensitivity to alpha and K (paper Figs. 7-8), as queued DVC experiments that re-use the cached
# training: run `make repro` (or `dvc repro`) first. Each experiment re-runs select-checkpoints
# through evaluate-rauc only. Writes metrics/sensitivity.md, plots/sensitivity/*.csv and PNGs;
# the next `dvc repro` puts them in the report.
#   ALPHAS="0.1 0.5" KS="10 30" scripts/sweep.sh   # a smaller sweep
#   scripts/sweep.sh --resume                      # finish an interrupted sweep's queue
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" DVC_NO_ANALYTICS=1
ALPHAS=${ALPHAS:-"0.1 0.3 0.5 0.7 0.9"}
KS=${KS:-"10 20 30 50 70 90"}

if ! git rev-parse HEAD >/dev/null 2>&1; then
  echo "error: DVC experiments need a git commit; commit the project first" >&2; exit 2
fi
if [ "${1:-}" != "--resume" ]; then
  names=()
  for a in $ALPHAS; do names+=("sweep-alpha-$a"); done
  for k in $KS; do names+=("sweep-k-$k"); done
  # a re-run replaces the previous sweep's experiments of the same names
  dvc exp remove "${names[@]}" >/dev/null 2>&1 || true
  for a in $ALPHAS; do dvc exp run --queue evaluate-rauc -S "alpha=$a" -n "sweep-alpha-$a"; done
  for k in $KS; do dvc exp run --queue evaluate-rauc -S "k=$k" -n "sweep-k-$k"; done
fi
# one worker: parallel workers are known to be flaky (treeverse/dvc#10673)
dvc queue start -j 1
# (the status is captured first: `dvc ... | grep -q` under pipefail fails on SIGPIPE)
queue_status() { dvc queue status 2>/dev/null || true; }
sleep 5
while st=$(queue_status) && grep -qE "Queued|Running" <<< "$st"; do
  # DVC's worker can stop with tasks left (seen here after a broker read error): restart it
  if ! grep -q "Running" <<< "$st" && grep -q "0 active" <<< "$st"; then
    echo "sweep: no worker is running; restarting it" >&2
    dvc queue start -j 1 >/dev/null
  fi
  sleep 15
done
if grep -q "Failed" <<< "$(queue_status)"; then
  echo "error: some sweep experiments failed; see 'dvc queue logs <name>'" >&2
  dvc queue status >&2
  exit 1
fi
dvc exp show --json > .dvc/tmp/sweep.json
python scripts/collect_sweep.py --exps .dvc/tmp/sweep.json --params params.yaml \
  --metrics-out metrics/sensitivity.md --plots-dir plots/sensitivity
# re-render the report with the sensitivity section (the report stage alone, forced)
dvc repro --force --single-item report
