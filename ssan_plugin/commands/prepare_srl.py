"""Prepare CoNLL SRL data for ``fairseq-train --task srl`` (public contract).

    ssan-prepare-srl --format conll2012|conll2005 --train F [--valid F] [--test F] --dest DIR

F: for conll2012 a ``*_conll`` file; for conll2005 a prefix P (``P.words`` + ``P.props``,
each optionally ``.gz``) or ``WORDS,PROPS``. Each predicate of each sentence becomes one
instance (words, predicate position, BIO tags of its argument column; ``C-``/``R-`` kept).

DIR gets (splits named train / valid / test):
  dict.words.txt, dict.labels.txt   fairseq Dictionaries (words and labels seen in train)
  S.words, S.predicate, S.labels    fairseq mmap indexed datasets (.bin/.idx), one item per
                                    instance, one entry per word, no EOS; predicate: 1 at the
                                    predicate word, 0 elsewhere
  S.props                           gold CoNLL-2005 props file (the source brackets verbatim)
  S.instances.tsv                   instance, sentence, predicate position (0-based)
  manifest.json                     sources, counts, label set
Malformed input stops with ``path:line: message``. The layout is ssan_plugin.srl.datadir; the
conversion is ssan_plugin.srl.binarize.
"""

import argparse
import os
import sys

from ssan_plugin.cli.arguments import ArgumentParser, positive_int, script_main
from ssan_plugin.cli.files import Input, guard_outputs, output_dir
from ssan_plugin.commands import command_prog
from ssan_plugin.srl.binarize import FORMATS, own_files, prepare


prog = command_prog(__file__)  # this command's name, as it was started


def input_files(fmt: str, spec: str):
    """The files a split spec may read: a CoNLL-2012 file; CoNLL-2005 ``P.words`` and
    ``P.props`` (each maybe ``.gz``) or ``WORDS,PROPS``."""
    if fmt != "conll2005":
        return [spec]
    if "," in spec:
        return spec.split(",", 1)
    return [f"{spec}.{kind}{gz}" for kind in ("words", "props") for gz in ("", ".gz")
            if os.path.exists(f"{spec}.{kind}{gz}")]


@script_main(prog=prog)
def main(argv=None):
    parser = ArgumentParser(prog=prog(), description=__doc__.split("\n")[1],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--format", required=True, choices=list(FORMATS))
    parser.add_argument("--train", required=True, metavar="F")
    parser.add_argument("--valid", metavar="F")
    parser.add_argument("--test", metavar="F")
    parser.add_argument("--dest", required=True, metavar="DIR")
    parser.add_argument("--word-threshold", type=positive_int, default=1, metavar="N",
                        help="keep training words seen at least N times (default 1)")
    parser.add_argument("--overwrite", action="store_true",
                        help="prepare into a non-empty --dest: the files a preparation writes "
                             "there (every split's) are removed first, once the inputs are "
                             "read; other files are kept")
    args = parser.parse_args(argv)

    splits = {name: getattr(args, name) for name in ("train", "valid", "test")
              if getattr(args, name)}
    guard_outputs([output_dir("--dest", args.dest, writes=set(own_files()))],
                  [Input(f"--{name}", path) for name, spec in splits.items()
                   for path in input_files(args.format, spec)], args.overwrite)
    manifest = prepare(args.format, splits, args.dest, args.word_threshold, args.overwrite)
    for name, stats in manifest["splits"].items():
        print(f"{name}: {stats['sentences']} sentences, {stats['instances']} instances, "
              f"{stats['instance_tokens']} instance tokens, {stats['unknown_word_tokens']} unknown words, "
              f"{stats['unknown_label_tokens']} unknown labels, "
              f"{stats['unknown_characters']} unknown characters")
    print(f"wrote {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
