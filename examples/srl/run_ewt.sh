#!/usr/bin/env bash
# EWT SRL: baseline-attention (san) vs SSAN tagger, same size and budget; dev F1 per system.
# EWT has train and dev only: checkpoints are chosen on the dev span F1 that validation logs
# (the same scorer as evaluate_srl.py), and dev F1 is reported (no test split is touched).
#
#   bash examples/srl/run_ewt.sh                 # seed 1, 2000 updates each, two runs at once
#   SEEDS="1 2" UPDATES=4000 bash examples/srl/run_ewt.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
RAW=${RAW:-../shared/data/srl/ewt}
OUT=${OUT:-runs/srl_ewt}
BIN=${BIN:-data-bin/srl_ewt}
SEEDS=${SEEDS:-1}
UPDATES=${UPDATES:-2000}
PARALLEL=${PARALLEL:-2}
COMMON="--user-dir ssan_plugin --task srl --arch srl_tagger_small --cpu
  --dropout 0.1 --criterion srl_cross_entropy --report-accuracy
  --optimizer adam --adam-betas (0.9,0.98) --lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 400
  --max-tokens 4096 --best-checkpoint-metric f1 --maximize-best-checkpoint-metric
  --no-epoch-checkpoints --log-format simple --log-interval 100"

[ -f "$BIN/manifest.json" ] || $PY scripts/prepare_srl.py --format conll2012 \
  --train "$RAW/train.gold_conll" --valid "$RAW/dev.gold_conll" --dest "$BIN"

run() {  # ENCODER SEED
  local save="$OUT/$1_s$2"
  mkdir -p "$save"
  OMP_NUM_THREADS=$((2 / PARALLEL)) .venv/bin/fairseq-train "$BIN" $COMMON --srl-encoder "$1" \
    --seed "$2" --max-update "$UPDATES" --save-dir "$save" > "$save/train.log" 2>&1
  OMP_NUM_THREADS=$((2 / PARALLEL)) $PY scripts/evaluate_srl.py --data "$BIN" \
    --checkpoint "$save/checkpoint_best.pt" --subset valid --gold-props "$save/dev.gold.props" \
    --pred-props "$save/dev.pred.props" --json "$save/dev.json" > "$save/eval.log" 2>&1
  echo "$1 seed $2: $(grep -m1 -i overall "$save/eval.log")"
}

running=0
for seed in $SEEDS; do
  for enc in san ssan; do
    run "$enc" "$seed" &
    running=$((running + 1))
    if [ "$running" -ge "$PARALLEL" ]; then wait -n; running=$((running - 1)); fi
  done
done
wait
