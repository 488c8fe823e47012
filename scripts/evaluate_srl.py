#!/usr/bin/env python
"""Decode an SRL subset with a checkpoint and score it as srl-eval.pl does (public contract).

    evaluate_srl.py --data DIR --checkpoint PATH --subset test \
        --gold-props OUT --pred-props OUT --json OUT

DIR is a directory from scripts/prepare_srl.py (the one the checkpoint was trained on).
Every instance (predicate) of the subset is decoded with BIO-constrained Viterbi (the
predicate word always V); the gold and predicted propositions are written as CoNLL-2005 props
files (one column per predicate, bracket notation; both files list every sentence of the
subset), then scored: precision, recall, F1 in percent, overall and per label, V excluded
(ssan_plugin.srl.scorer, equal to srl-eval.pl on the same files). The JSON has
``overall.{precision,recall,f1,correct,excess,missed}``, ``per_label``, ``excluded`` and
the counts; the srl-eval.pl table is printed. The work is ssan_plugin.srl.evaluate.
"""

import sys

from ssan_plugin.cli import ArgumentParser, positive_int, script_main
from ssan_plugin.srl.evaluate import evaluate_checkpoint


@script_main
def main(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--data", required=True, metavar="DIR")
    parser.add_argument("--checkpoint", required=True, metavar="PATH")
    parser.add_argument("--subset", default="test")
    parser.add_argument("--gold-props", required=True, metavar="OUT")
    parser.add_argument("--pred-props", required=True, metavar="OUT")
    parser.add_argument("--json", required=True, metavar="OUT")
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--cpu", action="store_true", help="decode on CPU even with a GPU")
    args = parser.parse_args(argv)

    _, result = evaluate_checkpoint(args.data, args.checkpoint, args.subset, args.gold_props,
                                    args.pred_props, args.json, args.batch_size, args.cpu)
    sys.stdout.write(result.report())
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
