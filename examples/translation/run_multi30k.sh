#!/usr/bin/env bash
# Multi30k En-De: baseline Transformer vs SSAN, same size and budget, several seeds.
# Checkpoints are chosen on the valid split (checkpoint_best = lowest valid loss); the test
# split is decoded once per system with scripts/evaluate_bleu.py (paired bootstrap per seed).
#
#   bash examples/translation/run_multi30k.sh            # seeds 1 2, 1500 updates each
#   SEEDS="1 2 3" UPDATES=3000 PARALLEL=2 bash examples/translation/run_multi30k.sh
#
# PARALLEL=2 runs two trainings at once with one thread each (2-core machines).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
RAW=${RAW:-../shared/data/mt/en-de}
OUT=${OUT:-runs/multi30k}
BIN=${BIN:-data-bin/multi30k_en_de}
SEEDS=${SEEDS:-1 2}
UPDATES=${UPDATES:-1500}
PARALLEL=${PARALLEL:-2}
MODEL="--share-all-embeddings --dropout 0.2"  # size: the *_small architectures
OPTIM="--optimizer adam --adam-betas (0.9,0.98) --lr 0.002 --lr-scheduler inverse_sqrt
  --warmup-updates 400 --clip-norm 1.0 --label-smoothing 0.1 --max-tokens 4096"

[ -f "$BIN/manifest.json" ] || $PY scripts/prepare_translation.py --src en --tgt de \
  --train "$RAW/train" --valid "$RAW/valid" --test "$RAW/test" --dest "$BIN" --vocab-size 6000

train() {  # NAME SEED ARCH CRITERION
  local save="$OUT/$1_s$2"
  mkdir -p "$save"
  OMP_NUM_THREADS=$((2 / PARALLEL)) .venv/bin/fairseq-train "$BIN" --user-dir ssan_plugin --cpu \
    --arch "$3" --criterion "$4" $MODEL $OPTIM --max-update "$UPDATES" --seed "$2" \
    --save-dir "$save" --no-epoch-checkpoints --log-format simple --log-interval 50 \
    > "$save/train.log" 2>&1
  echo "trained $1 seed $2: $(grep -o 'best_loss [0-9.]*' "$save/train.log" | tail -1)"
}

jobs=()
for seed in $SEEDS; do
  jobs+=("baseline $seed transformer_small label_smoothed_cross_entropy")
  jobs+=("ssan $seed ssan_transformer_small selective_label_smoothed_cross_entropy")
done
running=0
for job in "${jobs[@]}"; do
  train $job &
  running=$((running + 1))
  if [ "$running" -ge "$PARALLEL" ]; then wait -n; running=$((running - 1)); fi
done
wait

for seed in $SEEDS; do
  OMP_NUM_THREADS=2 $PY scripts/evaluate_bleu.py --data "$BIN" --ref "$RAW/test.de" --cpu \
    --system "baseline_s$seed=$OUT/baseline_s$seed/checkpoint_best.pt" \
    --system "ssan_s$seed=$OUT/ssan_s$seed/checkpoint_best.pt" \
    --json "$OUT/test_s$seed.json"
done
