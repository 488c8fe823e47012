#!/usr/bin/env bash
# WMT16 English->Romanian, prepared with ssan-prepare-translation.
#   scripts/prepare_wmt16_en_ro.sh [--raw-dir DIR] [--dest DIR] [--vocab-size N] [--no-download] [-- OPTS]
# Defaults: --raw-dir raw/wmt16_en_ro --dest data-bin/wmt16_en_ro --vocab-size 32000.
# --raw-dir with train/valid/test.{en,ro} (e.g. ../shared/data/mt/en-ro, RO-STS) is used as is.
# Otherwise the official WMT16 files, as in Sennrich's wmt16-scripts:
#   training-parallel-ep-v8.tgz (data.statmt.org)  training-parallel-ep-v8/europarl-v8.ro-en.{en,ro}
#   SETIMES2 en-ro.txt.zip (opus.nlpl.eu)          SETIMES.en-ro.{en,ro}
#   valid: newsdev2016, test: newstest2016, as plain text newsdev2016.{en,ro}, newstest2016.{en,ro}
#          (fetched with sacrebleu -t wmt16/dev / wmt16 when missing)
# Romanian gets cedilla -> comma-below normalisation; add `-- --romanian-remove-diacritics` for
# the diacritic-free setting of the WMT16 Edinburgh systems.
source "$(dirname "$0")/translation_data_lib.sh"
SRC=en TGT=ro RAW=raw/wmt16_en_ro DEST=data-bin/wmt16_en_ro VOCAB=32000
PREPARE_DEFAULTS=()
parse_wrapper_args "$@"
if has_ready_layout "$RAW"; then run_prepare "$RAW"; fi

fetch http://data.statmt.org/wmt16/translation-task/training-parallel-ep-v8.tgz training-parallel-ep-v8.tgz
fetch "https://opus.nlpl.eu/download.php?f=SETIMES/v2/moses/en-ro.txt.zip" en-ro.txt.zip
OUT=$RAW/assembled
mkdir -p "$OUT"
tar -xzf "$RAW/training-parallel-ep-v8.tgz" -C "$RAW"
"$PY" -m zipfile -e "$RAW/en-ro.txt.zip" "$RAW"
for lang in en ro; do
    cat "$RAW/training-parallel-ep-v8/europarl-v8.ro-en.$lang" "$RAW/SETIMES.en-ro.$lang" \
        > "$OUT/train.$lang"
done
sacrebleu_set wmt16/dev en-ro src "$RAW/newsdev2016.en"
sacrebleu_set wmt16/dev en-ro ref "$RAW/newsdev2016.ro"
sacrebleu_set wmt16 en-ro src "$RAW/newstest2016.en"
sacrebleu_set wmt16 en-ro ref "$RAW/newstest2016.ro"
for lang in en ro; do
    cp "$RAW/newsdev2016.$lang" "$OUT/valid.$lang"
    cp "$RAW/newstest2016.$lang" "$OUT/test.$lang"
done
run_prepare "$OUT"
