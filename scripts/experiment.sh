#!/usr/bin/env bash
# A CPU study beside the default one, as one DVC experiment: `scripts/experiment.sh NAME`
# (`make extended`, `make epochs`, `make text`, `make lm`) runs `ncip preset NAME`'s subjects
# and settings outside the workspace (`dvc exp run --temp`, re-using every stage DVC has
# cached), then writes metrics/NAME.md (its models, Table 5, per-subject intervals and what
# else the experiment reports, with its command and time) and metrics/NAME.json (its numbers),
# and re-renders the report with it where this workspace holds the default study's outputs. Interrupted? Run it again: DVC's run-cache restores every
# stage that finished.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: scripts/experiment.sh NAME (ncip preset lists them)}
export PATH="$PWD/.venv/bin:$PATH" DVC_NO_ANALYTICS=1
# the experiment runs in a temporary copy without .venv: its stages use this one (scripts/py)
export NCIP_PYTHON="$PWD/.venv/bin/python"

if ! git rev-parse HEAD >/dev/null 2>&1; then
  echo "error: DVC experiments need a git commit; commit the project first" >&2; exit 2
fi
cmd=$(python -m ncip preset "$name")
echo "$name study: $cmd" >&2
start=$(date +%s)
dvc exp remove "$name" >/dev/null 2>&1 || true
mkdir -p .dvc/tmp
# DVC's output also to a log: metrics/NAME.md says how many stages ran and how many came from
# the run-cache (the time means little without it)
eval "$cmd --temp -n $name" 2>&1 | tee ".dvc/tmp/$name.log"
seconds=$(( $(date +%s) - start ))
ref=$(git for-each-ref --format='%(refname)' refs/exps | grep "/$name\$" | head -1)
if [ -z "$ref" ]; then
  echo "error: the experiment '$name' left no result (see the output above)" >&2; exit 1
fi
# what metrics/NAME.md is made of: the experiment's report, or its own result file (make lm)
result=$(python -c "from ncip.study.presets import EXPERIMENTS as E; print(E['$name'].result or 'metrics/report.md')")
git show "$ref:$result" > ".dvc/tmp/$name-report.md"
python scripts/collect_experiment.py --name "$name" --report ".dvc/tmp/$name-report.md" --figures "plots/$name/report" \
  --seconds "$seconds" --command "$cmd" --commit "$(git rev-parse --short HEAD)" \
  --log ".dvc/tmp/$name.log" --out "metrics/$name.md"
# its per-ordering data, paired intervals, primary and chooser tables, full report, each stage's
# seconds (cost.json) and figures
# (metrics/NAME/, plots/NAME/): what anyone needs to recompute its tables (issue 49)
rm -rf "metrics/$name" "plots/$name"
mkdir -p "metrics/$name"
if [ "$result" = "metrics/report.md" ]; then  # a study of subjects: its own tables and figures
  mkdir -p "plots/$name"
  for f in per_ordering.csv paired.csv primary.csv chooser.csv tables.md report.md significance.json cost.json; do
    if git cat-file -e "$ref:metrics/$f" 2>/dev/null; then git show "$ref:metrics/$f" > "metrics/$name/$f"; fi
  done
  if [ -f "metrics/$name/report.md" ]; then  # its links, from metrics/NAME/ to plots/NAME/
    sed -i "s#](\.\./plots/#](../../plots/$name/#g" "metrics/$name/report.md"
  fi
  git ls-tree -r --name-only "$ref" -- plots/report plots/training | while read -r f; do
    mkdir -p "plots/$name/$(dirname "${f#plots/}")"
    git show "$ref:$f" > "plots/$name/${f#plots/}"
  done
else  # the language-model study: its per-prompt data and full results (metrics/lm/<model>-*);
  # the default study's tables in the experiment's commit are not its own
  git ls-tree -r --name-only "$ref" -- metrics/lm | grep -E -- '-(prompts\.csv|results\.json)$' | while read -r f; do
    git show "$ref:$f" > "metrics/$name/$(basename "$f")"
  done || true
fi
# its numbers as metrics/NAME.json, for `dvc metrics show/diff` (dvc.yaml's metrics list)
metrics=$(python -c "from ncip.study.presets import EXPERIMENTS as E; print(E['$name'].metrics)")
git show "$ref:$metrics" > "metrics/$name.json.tmp" && mv "metrics/$name.json.tmp" "metrics/$name.json"
# re-render the report with the experiment's section (the report stage alone, forced), where
# the default study's outputs are here to render it from
if dvc status report >/dev/null 2>&1 && [ -d scores ]; then
  dvc repro --force --single-item report
else
  echo "metrics/$name.md written; the report shows it after the default study's next" \
       "\`make repro\` (its outputs are not in this workspace)" >&2
fi
