#!/usr/bin/env bash
# The paper's analysis on baseline/SSAN checkpoints trained on the same data,
# size and budget. Resumable: every output that exists is kept, so a killed run continues.
#
#   bash examples/analysis/run_analysis.sh [NAME=CHECKPOINT ...]
#
# Defaults: the pre-norm En-De seed-5 runs of the translation experiments, the Transformer and
# SSAN with the straight-through cap at 0
# (ssan-run-experiments --plan examples/translation/experiments.json --out runs/experiments).
# Besides each tool's JSON, OUT/systems.json lists the systems in order with their checkpoints,
# and OUT/report.md, OUT/probing.png are the report (ssan-analysis-report). To archive for
# examples/analysis/RESULTS.md: copy OUT/*.json into examples/analysis/archive/ and run
# scripts/make_results.py.
# Environment: DATA (data-bin), OUT (default runs/analysis), SHARED (default ../shared),
# PROBE_LINES (raw English sentences for bigram_shift / wrd, default 10000), SEED (default 1).
# The first system is the reference the report compares against; systems with selection also get
# selection_stats and selection maps. One process at a time (two cores).
set -euo pipefail
cd "$(dirname "$0")/../.."

PY=${PY:-.venv/bin/python}
SHARED=${SHARED:-../shared}
EXP=${EXP:-runs/experiments}
DATA=${DATA:-$EXP/data/en-de}
OUT=${OUT:-runs/analysis}
SEED=${SEED:-1}
PROBE_LINES=${PROBE_LINES:-10000}
EWT=$SHARED/data/srl/ewt
MT=$SHARED/data/mt/en-de
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

if [ $# -eq 0 ]; then
  set -- "san=$EXP/prenorm/en-de/baseline@5/checkpoint_best.pt" \
         "ssan=$EXP/prenorm/en-de/ssan_cap0@5/checkpoint_best.pt"
fi
for f in "$EWT/train.gold_conll" "$EWT/dev.gold_conll" "$MT/train.en" "$MT/test.en" \
         "$SHARED/data/probing/wrd" "$DATA/manifest.json"; do
  [ -e "$f" ] || { echo "run_analysis.sh: error: $f is missing" >&2; exit 2; }
done
mkdir -p "$OUT"

# step OUTPUT COMMAND...: run COMMAND unless OUTPUT exists; its log goes to OUTPUT.log
step() {
  local out=$1; shift
  if [ -e "$out" ]; then echo "done     $out"; return; fi
  echo "running  $out"
  local start=$SECONDS
  if ! "$@" > "$out.log" 2>&1; then
    echo "run_analysis.sh: error: step for $out failed, see $out.log" >&2; tail -3 "$out.log" >&2; exit 1
  fi
  [ -e "$out" ] || touch "$out"   # steps whose output is a directory mark completion with a file
  echo "         $((SECONDS - start)) s"
}

# probing sets (SentEval format), built once, shared by every system
[ -e "$OUT/probe_text.en" ] || head -n "$PROBE_LINES" "$MT/train.en" > "$OUT/probe_text.en"
step "$OUT/tree_depth.txt" $PY -m ssan_plugin.commands.make_probing_data --task tree_depth --conll "$EWT/train.gold_conll" --out "$OUT/tree_depth.txt"
step "$OUT/top_const.txt" $PY -m ssan_plugin.commands.make_probing_data --task top_constituent --conll "$EWT/train.gold_conll" --out "$OUT/top_const.txt"
step "$OUT/bshift.txt" $PY -m ssan_plugin.commands.make_probing_data --task bigram_shift --input "$OUT/probe_text.en" --seed "$SEED" --out "$OUT/bshift.txt"
step "$OUT/wrd.txt" $PY -m ssan_plugin.commands.make_probing_data --task wrd --input "$OUT/probe_text.en" --seed "$SEED" --out "$OUT/wrd.txt"
step "$OUT/wrd_shared.txt" $PY -m ssan_plugin.commands.make_probing_data --task wrd --input "$SHARED/data/probing/wrd" --seed "$SEED" --out "$OUT/wrd_shared.txt"
[ -e "$OUT/examples.en" ] || head -n 3 "$MT/test.en" > "$OUT/examples.en"

for spec in "$@"; do
  name=${spec%%=*}; ck=${spec#*=}
  [ -f "$ck" ] || { echo "run_analysis.sh: error: checkpoint $ck ($name) is missing" >&2; exit 2; }
  for t in tree_depth:tree_depth top_constituent:top_const bigram_shift:bshift wrd:wrd wrd:wrd_shared; do
    step "$OUT/probe_${t##*:}.$name.json" $PY -m ssan_plugin.commands.probe --data "$DATA" --checkpoint "$ck" \
      --task "${t%%:*}" --probing-file "$OUT/${t##*:}.txt" --seed "$SEED" --json "$OUT/probe_${t##*:}.$name.json"
  done
  step "$OUT/trees.$name.json" $PY -m ssan_plugin.commands.induce_trees --data "$DATA" --checkpoint "$ck" \
    --conll "$EWT/dev.gold_conll" --json "$OUT/trees.$name.json"
  if [ "$name" != "${1%%=*}" ]; then   # the reference (first) system has no selection
    step "$OUT/selection_stats.$name.json" $PY -m ssan_plugin.commands.selection_stats --data "$DATA" --checkpoint "$ck" \
      --conll "$EWT/dev.gold_conll" --json "$OUT/selection_stats.$name.json" --png "$OUT/selection_stats.$name.png"
  fi
  step "$OUT/maps.$name.done" $PY -m ssan_plugin.commands.show_selection --data "$DATA" --checkpoint "$ck" \
    --input "$OUT/examples.en" --out "$OUT/maps.$name" --overwrite  # maps of a stopped step redone
done
# the systems in order, checkpoints as given (relative to the project when run from it)
$PY - "$OUT/systems.json" "$@" <<'PYEOF'
import json, sys
names = [spec.split("=", 1) for spec in sys.argv[2:]]
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump({"systems": [{"name": n, "checkpoint": c} for n, c in names]}, f, indent=1)
    f.write("\n")
PYEOF
$PY -m ssan_plugin.commands.analysis_report --dir "$OUT" --systems "${@%%=*}" \
  --md "$OUT/report.md" --png "$OUT/probing.png" --overwrite
echo "outputs in $OUT"
