#!/usr/bin/env bash
# WMT14 English->German, prepared with ssan-prepare-translation.
#   scripts/prepare_wmt14_en_de.sh [--raw-dir DIR] [--dest DIR] [--vocab-size N] [--no-download] [-- OPTS]
# Defaults: --raw-dir raw/wmt14_en_de --dest data-bin/wmt14_en_de --vocab-size 32000.
# --raw-dir with train/valid/test.{en,de} (e.g. ../shared/data/mt/en-de, Multi30k) is used as is.
# Otherwise the official WMT14 files (statmt.org), as in fairseq's prepare-wmt14en2de.sh:
#   training-parallel-europarl-v7.tgz  training/europarl-v7.de-en.{en,de}
#   training-parallel-commoncrawl.tgz  commoncrawl.de-en.{en,de}
#   training-parallel-nc-v9.tgz        training/news-commentary-v9.de-en.{en,de}
#   valid: newstest2013, test: newstest2014 (full), as plain text newstest201{3,4}.{en,de}
#          (fetched with sacrebleu -t wmt13 / wmt14/full when missing)
# are downloaded into --raw-dir when missing (offline: put them there yourself).
source "$(dirname "$0")/translation_data_lib.sh"
SRC=en TGT=de RAW=raw/wmt14_en_de DEST=data-bin/wmt14_en_de VOCAB=32000
PREPARE_DEFAULTS=()
parse_wrapper_args "$@"
if has_ready_layout "$RAW"; then run_prepare "$RAW"; fi

fetch http://statmt.org/wmt13/training-parallel-europarl-v7.tgz training-parallel-europarl-v7.tgz
fetch http://statmt.org/wmt13/training-parallel-commoncrawl.tgz training-parallel-commoncrawl.tgz
fetch http://statmt.org/wmt14/training-parallel-nc-v9.tgz training-parallel-nc-v9.tgz
OUT=$RAW/assembled
mkdir -p "$OUT"
for archive in europarl-v7 commoncrawl nc-v9; do
    tar -xzf "$RAW/training-parallel-$archive.tgz" -C "$RAW"
done
for lang in en de; do
    cat "$RAW/training/europarl-v7.de-en.$lang" "$RAW/commoncrawl.de-en.$lang" \
        "$RAW/training/news-commentary-v9.de-en.$lang" > "$OUT/train.$lang"
done
sacrebleu_set wmt13 en-de src "$RAW/newstest2013.en"
sacrebleu_set wmt13 en-de ref "$RAW/newstest2013.de"
sacrebleu_set wmt14/full en-de src "$RAW/newstest2014.en"
sacrebleu_set wmt14/full en-de ref "$RAW/newstest2014.de"
for lang in en de; do
    cp "$RAW/newstest2013.$lang" "$OUT/valid.$lang"
    cp "$RAW/newstest2014.$lang" "$OUT/test.$lang"
done
run_prepare "$OUT"
