r"""Score SRL as srl-eval.pl does: decode a subset with a checkpoint, or compare props files.

Decode and score (public contract):

    ssan-evaluate-srl --data DIR --checkpoint PATH --subset test \
        --gold-props OUT --pred-props OUT --json OUT

DIR is a directory from ssan-prepare-srl (the one the checkpoint was trained on).
Every instance (predicate) of the subset is decoded with BIO-constrained Viterbi (the
predicate word always V); the gold and predicted propositions are written as CoNLL-2005 props
files (one column per predicate, bracket notation; both files list every sentence of the
subset), then scored: precision, recall, F1 in percent, overall and per label, V excluded
(ssan_plugin.srl.scorer, equal to srl-eval.pl on the same files). The JSON has
``overall.{precision,recall,f1,correct,excess,missed}``, ``per_label``, ``excluded`` and
the counts; the srl-eval.pl table is printed. The work is ssan_plugin.srl.evaluate.

Compare systems (no --checkpoint; every --pred-props NAME=FILE is an existing props file):

    ssan-evaluate-srl --gold-props G --pred-props san=A.props --pred-props ssan=B.props \
        [--json OUT] [--bootstrap-samples 1000] [--seed 12345]

Each system is scored against G and compared with the first by a paired bootstrap over
sentences on per-sentence (correct, excess, missed), F1 = 200c/(2c+e+m); two-sided, ties
counted, add-one, identical outputs get p = 1 (README "Significance"). JSON: systems[].name,
precision, recall, f1, correct, excess, missed, per_label, by_length, by_distance and, after
the first, delta, p_value, identical; a markdown table is printed. Seeds pooled: systems
named GROUP@SEED (san@1, san@2, ssan@1, ...) are compared with the first group's same seed,
and the JSON gains groups[].name, n_seeds, systems, mean/std of precision, recall, f1 and,
after the first group, delta and p_value (the paired bootstrap of the seed-mean F1, the same
sentences resampled for every seed). Definitions: ssan_plugin.srl.compare. Bad input: one line
``ssan-evaluate-srl: error: ...``, exit 2.
"""

import argparse
import sys

from ssan_plugin import register
from ssan_plugin.cli.arguments import (
    ArgumentParser,
    add_overwrite,
    int_arg,
    named_path,
    positive_int,
    script_main,
)
from ssan_plugin.cli.files import Input, guard_outputs, output_file
from ssan_plugin.commands import command_prog

CHECKPOINT_ONLY = ("data", "subset", "batch_size", "cpu")
COMPARE_ONLY = ("bootstrap_samples", "seed")


prog = command_prog(__file__)  # this command's name, as it was started


def _option(dest):
    return "--" + dest.replace("_", "-")


@script_main(prog=prog)
def main(argv=None):
    parser = ArgumentParser(prog=prog(), description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", metavar="DIR", help="decode: the prepared data directory")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="decode with this checkpoint; without it, props files are compared")
    parser.add_argument("--subset", default=None, help="decode: the split (default: test)")
    parser.add_argument("--gold-props", required=True, metavar="PROPS",
                        help="decode: where to write the gold props; compare: the gold props")
    parser.add_argument("--pred-props", required=True, action="append",
                        metavar="[NAME=]PROPS",
                        help="decode: where to write the predictions (once); compare: a "
                             "system's props file (repeat; the first is the baseline)")
    parser.add_argument("--json", metavar="OUT", help="the JSON report (required to decode)")
    parser.add_argument("--batch-size", type=positive_int, default=None, metavar="N",
                        help="decode: sentences per batch (default: 64)")
    parser.add_argument("--cpu", action="store_true", default=None,
                        help="decode on CPU even with a GPU")
    parser.add_argument("--bootstrap-samples", type=int_arg(1), default=None, metavar="N",
                        help="compare: paired bootstrap resamples (default: 1000)")
    parser.add_argument("--seed", type=int, default=None,
                        help="compare: bootstrap seed (default: 12345)")
    add_overwrite(parser, "existing output files (decode: --gold-props, --pred-props, --json; "
                          "compare: --json)")
    args = parser.parse_args(argv)

    if args.checkpoint is not None:
        return _decode(parser, args)
    if args.data is not None or not all("=" in p for p in args.pred_props):
        missing = [o for o, v in (("--data", args.data), ("--checkpoint", args.checkpoint))
                   if v is None]
        parser.error(f"the following arguments are required: {', '.join(missing)} (or, to "
                     "compare existing props files, no --data and every --pred-props as "
                     "NAME=FILE)")
    return _compare(parser, args)


def _decode(parser, args):
    missing = [_option(d) for d in ("data", "json") if getattr(args, d) is None]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    if len(args.pred_props) != 1:
        parser.error("argument --pred-props: with --checkpoint, give one output file (several "
                     "NAME=FILE systems are compared without --checkpoint)")
    wrong = [_option(d) for d in COMPARE_ONLY if getattr(args, d) is not None]
    if wrong:
        parser.error(f"argument {wrong[0]}: only when comparing props files (no --checkpoint)")
    # the gold and predicted props written here never replace the data's own gold props (a
    # file of --data) nor each other (the predictions would be scored against themselves)
    guard_outputs([output_file("--gold-props", args.gold_props),
                   output_file("--pred-props", args.pred_props[0]),
                   output_file("--json", args.json)],
                  [Input("--data", args.data), Input("--checkpoint", args.checkpoint)],
                  args.overwrite)
    from ssan_plugin.srl.evaluate import evaluate_checkpoint

    register()

    _, result = evaluate_checkpoint(args.data, args.checkpoint,
                                    "test" if args.subset is None else args.subset,
                                    args.gold_props, args.pred_props[0], args.json,
                                    64 if args.batch_size is None else args.batch_size,
                                    bool(args.cpu))
    sys.stdout.write(result.report())
    print(f"wrote {args.json}")
    return 0


def _compare(parser, args):
    from ssan_plugin.stats.significance import DEFAULT_BOOTSTRAP_SAMPLES, DEFAULT_SEED
    from ssan_plugin.srl.compare import compare_props, markdown

    wrong = [_option(d) for d in CHECKPOINT_ONLY if getattr(args, d) is not None]
    if wrong:
        parser.error(f"argument {wrong[0]}: only with --checkpoint (comparing props files "
                     "needs no data or model)")
    systems, parse = [], named_path("FILE")
    for text in args.pred_props:
        try:
            systems.append(parse(text))
        except argparse.ArgumentTypeError as err:
            parser.error(f"argument --pred-props: {err}")
    guard_outputs([args.json and output_file("--json", args.json)],
                  [Input("--gold-props", args.gold_props)] +
                  [Input("--pred-props", path, f"--pred-props {name}={path}")
                   for name, path in systems], args.overwrite)
    report = compare_props(args.gold_props, systems,
                           args.bootstrap_samples or DEFAULT_BOOTSTRAP_SAMPLES,
                           DEFAULT_SEED if args.seed is None else args.seed, args.json)
    sys.stdout.write(markdown(report))
    for s in report["systems"]:
        if s["warnings"]:
            print(f"{s['name']}: {len(s['warnings'])} scorer warnings (in the JSON), first: "
                  f"{s['warnings'][0]}", file=sys.stderr)
    if args.json is not None:
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
