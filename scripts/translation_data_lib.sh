# Shared by prepare_wmt14_en_de.sh, prepare_wmt16_en_ro.sh, prepare_wat_en_ja.sh (sourced).
# Usage of every wrapper:
#   WRAPPER [--raw-dir DIR] [--dest DIR] [--vocab-size N] [--no-download] [-- PREPARE_OPTIONS...]
# --raw-dir either holds the ready layout train/valid/test.{SRC,TGT} (e.g. ../shared/data/mt/PAIR)
# or is where the official files are (or get downloaded to). Everything after -- goes to
# ssan-prepare-translation unchanged.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
DOWNLOAD=1
EXTRA=()

parse_wrapper_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --raw-dir) RAW=$2; shift 2 ;;
            --dest) DEST=$2; shift 2 ;;
            --vocab-size) VOCAB=$2; shift 2 ;;
            --no-download) DOWNLOAD=0; shift ;;
            --) shift; EXTRA=("$@"); break ;;
            -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
            *) echo "$(basename "$0"): unknown argument $1 (see --help)" >&2; exit 2 ;;
        esac
    done
}

die() { echo "$(basename "$0"): error: $*" >&2; exit 1; }

# fetch URL FILE: download into $RAW unless FILE is already there.
fetch() {
    local url=$1 file=$RAW/$2
    [ -s "$file" ] && return 0
    [ "$DOWNLOAD" = 1 ] || die "missing $file (official source: $url); download it or pass --raw-dir"
    echo "downloading $url -> $file" >&2
    mkdir -p "$RAW"
    if ! curl -fL --retry 2 --connect-timeout 20 -o "$file.part" "$url"; then
        rm -f "$file.part"
        die "download of $url failed (offline?). Put $(basename "$file") into $RAW yourself, or \
pass --raw-dir DIR with train/valid/test.{$SRC,$TGT}"
    fi
    mv "$file.part" "$file"
}

# sacrebleu_set TESTSET LANGPAIR SIDE OUT: a WMT dev/test set as plain text via sacrebleu
# (which downloads and unwraps the official SGML), unless OUT exists.
sacrebleu_set() {
    local set=$1 pair=$2 side=$3 out=$4
    [ -s "$out" ] && return 0
    [ "$DOWNLOAD" = 1 ] || die "missing $out ($set $pair $side); pass --raw-dir with it"
    "$PY" -m sacrebleu -t "$set" -l "$pair" --echo "$side" > "$out.part" \
        || { rm -f "$out.part"; die "sacrebleu could not fetch $set $pair (offline?); put $out in place"; }
    mv "$out.part" "$out"
}

has_ready_layout() {
    local d=$1 split lang
    for split in train valid test; do
        for lang in "$SRC" "$TGT"; do [ -f "$d/$split.$lang" ] || return 1; done
    done
}

run_prepare() {  # run_prepare DIR_WITH_train/valid/test.LANG
    local d=$1
    exec "$PY" -m ssan_plugin.commands.prepare_translation --src "$SRC" --tgt "$TGT" \
        --train "$d/train" --valid "$d/valid" --test "$d/test" --dest "$DEST" \
        --vocab-size "$VOCAB" ${PREPARE_DEFAULTS[@]+"${PREPARE_DEFAULTS[@]}"} \
        ${EXTRA[@]+"${EXTRA[@]}"}
}
