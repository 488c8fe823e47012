#!/usr/bin/env bash
# WAT English->Japanese (ASPEC-JE), prepared with ssan-prepare-translation.
#   scripts/prepare_wat_en_ja.sh [--raw-dir DIR] [--dest DIR] [--vocab-size N] [-- OPTS]
# Defaults: --raw-dir raw/aspec_je --dest data-bin/wat_en_ja --vocab-size 32000.
# --raw-dir with train/valid/test.{en,ja} (e.g. ../shared/data/mt/en-ja, small_parallel_enja,
# already tokenised/segmented: detected, never re-tokenised) is used as is.
# Otherwise --raw-dir must hold the ASPEC-JE release (https://jipsti.jst.go.jp/aspec/; it needs
# a signed agreement, so there is nothing to download):
#   ASPEC-JE/train/train-1.txt train-2.txt   (the first 2M pairs, as usual at WAT)
#   ASPEC-JE/dev/dev.txt  ASPEC-JE/test/test.txt
# lines "... ||| JAPANESE ||| ENGLISH" (the last two fields are taken). Japanese stays raw
# (sentencepiece on raw text); WAT's official scores use juman/kytea segmentation instead.
source "$(dirname "$0")/translation_data_lib.sh"
SRC=en TGT=ja RAW=raw/aspec_je DEST=data-bin/wat_en_ja VOCAB=32000
PREPARE_DEFAULTS=()
parse_wrapper_args "$@"
if has_ready_layout "$RAW"; then run_prepare "$RAW"; fi

A=$RAW/ASPEC-JE
for f in train/train-1.txt train/train-2.txt dev/dev.txt test/test.txt; do
    [ -f "$A/$f" ] || die "missing $A/$f: ASPEC-JE is distributed by JST on request \
(https://jipsti.jst.go.jp/aspec/); unpack it into $RAW or pass --raw-dir DIR with train/valid/test.{en,ja}"
done
OUT=$RAW/assembled
mkdir -p "$OUT"
split_aspec() {  # split_aspec OUTPREFIX FILES...: last two ' ||| ' fields -> .ja, .en
    local out=$1; shift
    cat "$@" | awk -F ' \\|\\|\\| ' -v ja="$out.ja" -v en="$out.en" \
        '{ print $(NF-1) > ja; print $NF > en }'
}
split_aspec "$OUT/train" "$A/train/train-1.txt" "$A/train/train-2.txt"
split_aspec "$OUT/valid" "$A/dev/dev.txt"
split_aspec "$OUT/test" "$A/test/test.txt"
run_prepare "$OUT"
