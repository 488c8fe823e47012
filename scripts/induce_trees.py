#!/usr/bin/env python
"""Tree induction from attention: per encoder layer, attention averaged over heads and mapped
to words, split-point binary trees, scored against the CoNLL-2012 file's trees (punctuation
removed, unlabelled micro precision/recall/F1) with a right-branching baseline. See
examples/analysis/README.md."""

import sys

from ssan_plugin.cli import ArgumentParser, script_main


PROG = "induce_trees.py"


def model_args(parser):
    parser.add_argument("--data", required=True, help="data-bin written by prepare_translation.py")
    parser.add_argument("--checkpoint", required=True, help="fairseq checkpoint (.pt)")


@script_main(prog=PROG)
def main(argv=None) -> int:
    parser = ArgumentParser(prog=PROG, description=__doc__)
    model_args(parser)
    parser.add_argument("--conll", required=True, help="CoNLL-2012 *_conll file with parse bits")
    parser.add_argument("--json", required=True, help="output JSON")
    args = parser.parse_args(argv)
    from ssan_plugin.analysis.inputs import AnalysisInput
    from ssan_plugin.analysis.tools import induce_trees, write_json

    result = induce_trees(AnalysisInput(args.data, args.checkpoint), args.conll)
    write_json(result, args.json)
    f1 = ", ".join(f"layer {l['layer']} {l['f1']:.2f}" for l in result["layers"])
    print(f"{PROG}: {result['n_sentences']} sentences; F1 {f1}; right-branching "
          f"{result['right_branching']['f1']:.2f} -> {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
