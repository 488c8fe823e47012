"""Prepare sentence pairs (SICK, SNLI) for ``fairseq-train --task sentence_pair``.

    ssan-prepare-pairs --format sick|snli --train F --valid F --test F --dest DIR \
        [--tokens spm|words] [--vocab-size N] [--translation-data BIN --lang en]

F: for sick a tab-separated file with SICK's header (pair_ID, sentence_A, sentence_B,
entailment_label, relatedness_score, ...); for snli ``DIR/SPLIT`` (reads DIR/s1.SPLIT,
DIR/s2.SPLIT, DIR/labels.SPLIT) or ``S1,S2,LABELS``. The text gets the translation pipeline's
normalisation and Moses tokenisation, then sentencepiece pieces (trained on the training pairs,
or the model and dictionary of the translation data-bin ``--translation-data``, which
``--encoder-init`` needs) or words; fairseq-preprocess binarises both sentences with one
dictionary. DIR gets the data, ``S.gold.tsv`` (pair_ID, label, score per pair, input order) and
``manifest.json``. Malformed or misaligned input stops with the file and line named (exit 2).
The work is ssan_plugin.pairs.prepare.
"""

import argparse
import shlex
import sys

from ssan_plugin.cli.arguments import (
    ArgumentParser,
    input_dir_arg,
    int_arg,
    script_main,
    setup_logging,
)
from ssan_plugin.cli.files import Input, guard_outputs, output_dir
from ssan_plugin.commands import command_prog
from ssan_plugin.pairs.corpus import FORMATS, spec_paths
from ssan_plugin.pairs.prepare import TOKENS, PairPrepareConfig, own_files, prepare


prog = command_prog(__file__)  # this command's name, as it was started


def parse_args(argv):
    ap = ArgumentParser(prog=prog(), description=__doc__.split("\n")[1],
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--format", required=True, choices=FORMATS)
    for split in ("train", "valid", "test"):
        ap.add_argument(f"--{split}", required=True, metavar="F")
    ap.add_argument("--dest", required=True, metavar="DIR")
    ap.add_argument("--tokens", choices=TOKENS, default="spm",
                    help="spm: sentencepiece pieces (default); words: the tokenised words")
    ap.add_argument("--vocab-size", type=int_arg(8), default=4000, metavar="N",
                    help="sentencepiece vocabulary size (default 4000; not with "
                         "--translation-data, whose model is used)")
    ap.add_argument("--translation-data", type=input_dir_arg, metavar="BIN",
                    help="a data-bin of ssan-prepare-translation: use its sentencepiece model, "
                         "language handling and --lang dictionary (for --encoder-init)")
    ap.add_argument("--lang", default="en", help="language of the sentences (default en)")
    ap.add_argument("--segmented", choices=("auto", "yes", "no"), default="auto",
                    help="the text is already tokenised (auto: detect); not re-tokenised then")
    ap.add_argument("--threads", type=int_arg(1), default=1)
    ap.add_argument("--workers", type=int_arg(1), default=1)
    ap.add_argument("--overwrite", action="store_true",
                    help="prepare into a non-empty --dest: the files a preparation writes there "
                         "are removed first (once the inputs are checked), other files are kept")
    return ap.parse_args(argv)


def inputs(args):
    """The files the splits read (a malformed spec is left to the preparation's own message)
    and the translation data-bin."""
    found = [Input("--translation-data", args.translation_data)]
    for split in ("train", "valid", "test"):
        try:
            paths = spec_paths(args.format, getattr(args, split))
        except Exception:  # noqa: BLE001  (reported, with the file, when the split is read)
            paths = []
        found += [Input(f"--{split}", path) for path in paths]
    return found


@script_main(prog=prog)
def main(argv=None):
    setup_logging()
    args = parse_args(argv)
    command = shlex.join([sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv)))
    guard_outputs([output_dir("--dest", args.dest, writes=set(own_files()))], inputs(args),
                  args.overwrite)
    values = vars(args)
    values["translation_data"] = str(args.translation_data) if args.translation_data else None
    manifest = prepare(PairPrepareConfig(command=command, **values))
    counts = ", ".join(f"{split} {c['pairs']}" for split, c in manifest["counts"].items())
    pieces = (manifest["sentencepiece"] or {}).get("pieces")
    print(f"prepared {args.dest}: {counts} pairs; tokens {manifest['tokens']}"
          + (f" ({pieces} sentencepiece pieces)" if pieces else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
