"""Prepare a parallel corpus for fairseq: normalise, filter (training split only), joint
sentencepiece, fairseq-preprocess --joined-dictionary, manifest.json.

Inputs are PREFIX.LANG files, e.g. --src en --tgt de --train raw/train reads raw/train.en and
raw/train.de. Any language code works; en/de/ro/... get Moses normalisation and tokenisation,
ja/zh/ko are never Moses-tokenised, other codes get whitespace clean-up only.

Example:
  ssan-prepare-translation --src en --tgt de --train ../shared/data/mt/en-de/train \\
      --valid ../shared/data/mt/en-de/valid --test ../shared/data/mt/en-de/test \\
      --dest data-bin/multi30k_en_de --vocab-size 8000
"""

import argparse
import shlex
import sys

from ssan_plugin.cli.arguments import (
    ArgumentParser,
    float_arg,
    int_arg,
    positive_int,
    script_main,
    setup_logging,
)
from ssan_plugin.cli.files import Input, guard_outputs, output_dir
from ssan_plugin.commands import command_prog
from ssan_plugin.translation.prepare import (
    DEFAULT_MAX_POSITIONS,
    PrepareConfig,
    dest_files,
    prepare,
    split_files,
)


prog = command_prog(__file__)  # this command's name, as it was started


def parse_args(argv=None):
    ap = ArgumentParser(prog=prog(), description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", required=True, help="source language code (file suffix)")
    ap.add_argument("--tgt", required=True, help="target language code (file suffix)")
    ap.add_argument("--train", required=True, metavar="PREFIX", help="training files PREFIX.LANG")
    ap.add_argument("--valid", required=True, metavar="PREFIX", help="validation files PREFIX.LANG")
    ap.add_argument("--test", required=True, metavar="PREFIX", help="test files PREFIX.LANG")
    ap.add_argument("--dest", required=True, metavar="DIR", help="output fairseq data-bin")
    ap.add_argument("--vocab-size", required=True, type=int_arg(8), metavar="N",
                    help="joint sentencepiece vocabulary size (an upper bound on tiny corpora)")
    ap.add_argument("--segmented", default="auto", choices=["auto", "none", "src", "tgt", "both"],
                    help="which sides are already tokenised/word-segmented (never re-tokenised "
                         "or detokenised); auto detects it per side (default)")
    ap.add_argument("--no-moses-tokenize", dest="moses_tokenize", action="store_false",
                    help="sentencepiece on normalised raw text, no Moses tokenisation")
    ap.add_argument("--moses-aggressive-dash-splits", dest="aggressive_dash_splits",
                    action="store_true", help="Moses tokeniser -a (split hyphenated words)")
    ap.add_argument("--romanian-remove-diacritics", action="store_true",
                    help="Romanian side: also remove diacritics, as the WMT16 Edinburgh systems")
    ap.add_argument("--max-len", type=positive_int, default=250, metavar="PIECES",
                    help="training split only: drop pairs with a side longer than this (250)")
    ap.add_argument("--max-positions", type=int_arg(2), default=DEFAULT_MAX_POSITIONS,
                    metavar="N", help="the model's source/target positions (fairseq's default "
                    f"{DEFAULT_MAX_POSITIONS}, which the recipes use): valid/test lines with more "
                    "pieces (+ end of sentence) are kept but reported, with their line numbers")
    ap.add_argument("--ratio", type=float_arg(1.0), default=9.0,
                    help="training split only: drop pairs whose piece-length ratio exceeds "
                         "this (9, as Moses clean-corpus-n)")
    ap.add_argument("--spm-model-type", default="unigram", choices=["unigram", "bpe", "char", "word"])
    ap.add_argument("--character-coverage", type=float_arg(0.98, 1.0), default=None,
                    help="sentencepiece character coverage, in [0.98, 1] (default 0.9995 with "
                         "a ja/zh/ko side, else 1.0)")
    ap.add_argument("--threads", type=positive_int, default=1,
                    help="sentencepiece training threads")
    ap.add_argument("--workers", type=positive_int, default=1, help="fairseq-preprocess workers")
    ap.add_argument("--overwrite", action="store_true",
                    help="prepare into a non-empty --dest: the files an earlier preparation "
                         "wrote there (per its manifest.json) and those this one writes are "
                         "removed first, once every input is checked; other files are kept")
    return ap.parse_args(argv)


def too_long_note(counts, max_positions):
    found = {split: len(set().union(*counts[split]["too_long_kept"].values()))
             for split in ("valid", "test")}
    if not any(found.values()):
        return ""
    return (" (longer than " + str(max_positions) + " positions, kept: " +
            ", ".join(f"{split} {n}" for split, n in found.items() if n) + ")")


@script_main(prog=prog)
def main(argv=None):
    setup_logging()
    args = parse_args(argv)
    command = shlex.join([sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv)))
    cfg = PrepareConfig(command=command, **vars(args))
    guard_outputs([output_dir("--dest", cfg.dest, writes=set(dest_files(cfg)))],
                  [Input(f"--{split}", path) for split, sides in split_files(cfg).items()
                   for path in sides.values()], cfg.overwrite)
    manifest = prepare(cfg)
    c = manifest["counts"]
    print(f"prepared {cfg.dest}: train {c['train']['kept']}/{c['train']['input']} pairs kept "
          f"(dropped: empty {c['train']['dropped_empty']}, too long "
          f"{c['train']['dropped_too_long']}, ratio {c['train']['dropped_ratio']}), valid "
          f"{c['valid']['kept']}, test {c['test']['kept']}{too_long_note(c, args.max_positions)}; "
          f"{manifest['sentencepiece']['pieces']} sentencepiece pieces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
