#!/usr/bin/env bash
# The extended CPU study (issue 22): `ncip preset extended`'s subjects (eleven independent
# dataset-architecture pairs, one training run each), so that Table 5 can reach significance.
# Runs as one DVC experiment outside the workspace (`dvc exp run --temp`), which re-uses the
# default study's cached run 0 of its Fashion-MNIST subjects; then writes metrics/extended.md
# (its Table 5, per-subject intervals, models and time) and re-renders the report with it.
# Interrupted? Run it again: DVC's run-cache restores every stage that finished.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" DVC_NO_ANALYTICS=1
# the experiment runs in a temporary copy without .venv: its stages use this one (scripts/py)
export NCIP_PYTHON="$PWD/.venv/bin/python"

if ! git rev-parse HEAD >/dev/null 2>&1; then
  echo "error: DVC experiments need a git commit; commit the project first" >&2; exit 2
fi
cmd=$(python -m ncip preset extended)
echo "extended study: $cmd" >&2
start=$(date +%s)
dvc exp remove extended >/dev/null 2>&1 || true
eval "$cmd --temp -n extended"
seconds=$(( $(date +%s) - start ))
ref=$(git for-each-ref --format='%(refname)' refs/exps | grep '/extended$' | head -1)
if [ -z "$ref" ]; then
  echo "error: the experiment 'extended' left no result (see the output above)" >&2; exit 1
fi
mkdir -p .dvc/tmp
git show "$ref:metrics/report.md" > .dvc/tmp/extended-report.md
python scripts/collect_extended.py --report .dvc/tmp/extended-report.md --seconds "$seconds" \
  --command "$cmd" --commit "$(git rev-parse --short HEAD)" --out metrics/extended.md
# re-render the report with the extended section (the report stage alone, forced)
dvc repro --force --single-item report
