"""Predict a sentence-pair subset with one or more checkpoints and score it (public contract).

    ssan-evaluate-pairs --data DIR --checkpoint [NAME=]CKPT [--checkpoint NAME=CKPT ...] \
        --subset test --json OUT [--predictions OUT.tsv]
    ssan-evaluate-pairs --data DIR --pred NAME=PREDICTIONS.tsv [--pred NAME=TSV ...] \
        --subset test --json OUT

DIR is a directory from ssan-prepare-pairs. Per checkpoint, for the heads it has:
entailment accuracy, per-class precision / recall / F1 and the confusion matrix; relatedness
Pearson r, Spearman rho and MSE. Later checkpoints are compared with the first by a paired
bootstrap (accuracy, Pearson r, MSE; p-value, two-sided; identical predictions give p = 1).
The predictions file has one line per pair, in input order: ``pair_ID <TAB> predicted_label
<TAB> predicted_score`` (``-`` for a head the model lacks); with several checkpoints one file
per checkpoint, OUT.NAME.tsv. ``--pred`` scores such files instead of checkpoints (same
metrics and comparisons; every pair of the subset, in order). Systems named GROUP@SEED
(e.g. san@1 san@2 ssan@1 ssan@2) are also pooled per group: mean and sd over seeds, and each
group's seed mean against the first group's by a paired bootstrap drawing the same pairs for
every seed (JSON ``groups``). Bad input: one line
``ssan-evaluate-pairs: error: ...``, exit 2.
The work is ssan_plugin.pairs.evaluate.
"""

import argparse
import sys
from pathlib import Path

from ssan_plugin import register
from ssan_plugin.cli.arguments import (ArgumentParser, add_overwrite, int_arg, named_path,
                                       script_main)
from ssan_plugin.cli.files import Input, guard_outputs, output_file
from ssan_plugin.commands import command_prog


prog = command_prog(__file__)  # this command's name, as it was started


def _run_name(path: str) -> str:
    """A bare CKPT's name: its directory (checkpoints/ssan/checkpoint_best.pt -> ssan)."""
    return Path(path).parent.name or Path(path).stem


@script_main(prog=prog)
def main(argv=None):
    parser = ArgumentParser(prog=prog(), description=__doc__.split("\n")[1],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, metavar="DIR")
    systems = parser.add_mutually_exclusive_group(required=True)
    systems.add_argument("--checkpoint", action="append",
                         type=named_path("CKPT", default_name=_run_name),
                         metavar="[NAME=]CKPT", help="repeat to compare; the first is the baseline")
    systems.add_argument("--pred", action="append", type=named_path("TSV"), metavar="NAME=TSV",
                         help="a predictions file instead of a checkpoint; repeat to compare")
    parser.add_argument("--subset", default="test")
    parser.add_argument("--json", required=True, metavar="OUT")
    parser.add_argument("--predictions", metavar="OUT.tsv")
    parser.add_argument("--batch-size", type=int_arg(1), default=64)
    parser.add_argument("--bootstrap-samples", type=int_arg(1), default=1000)
    parser.add_argument("--seed", type=int, default=12345, help="bootstrap seed")
    parser.add_argument("--cpu", action="store_true", help="predict on CPU even with a GPU")
    add_overwrite(parser, "an existing --json or predictions file")
    args = parser.parse_args(argv)
    if args.pred and args.predictions:
        parser.error("--predictions writes the predictions of checkpoints; with --pred they "
                     "are the inputs")

    from ssan_plugin.pairs.evaluate import (
        evaluate_checkpoints,
        evaluate_predictions,
        predictions_path,
        report,
    )

    systems = args.pred or args.checkpoint
    option = "--pred" if args.pred else "--checkpoint"
    names = [name for name, _ in systems]
    if len(set(names)) != len(names):
        parser.error(f"argument {option}: system names repeat: {', '.join(names)}")
    outputs = [output_file("--json", args.json)]
    if args.predictions:
        outputs += [output_file("--predictions", predictions_path(args.predictions, name,
                                                                  len(systems) > 1))
                    for name, _ in systems]
    guard_outputs(outputs, [Input("--data", args.data)] +
                  [Input(option, path, f"{option} {name}={path}") for name, path in systems],
                  args.overwrite)
    if args.pred:
        result = evaluate_predictions(args.data, args.pred, args.subset, args.json,
                                      args.bootstrap_samples, args.seed)
    else:
        register()
        result = evaluate_checkpoints(args.data, args.checkpoint, args.subset, args.json,
                                      args.predictions, args.batch_size, args.cpu,
                                      args.bootstrap_samples, args.seed)
    sys.stdout.write(report(result))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
