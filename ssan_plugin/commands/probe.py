"""Probing (Conneau et al., 2018): freezes the encoder, mean-pools each layer's output (the
embedding layer is layer 0), trains a classifier per layer on the 'tr' part of a SentEval
probing file (chosen on 'va', seeded) and reports test accuracy per layer with a 95% Wilson
interval and the majority baseline of the test part. See examples/analysis/README.md."""

import sys

from ssan_plugin.errors import PipelineError
from ssan_plugin.analysis.inputs import add_model_args
from ssan_plugin.cli.arguments import ArgumentParser, add_overwrite, script_main
from ssan_plugin.cli.files import Input, guard_outputs, output_file
from ssan_plugin.commands import command_prog


prog = command_prog(__file__)  # this command's name, as it was started


@script_main(prog=prog)
def main(argv=None) -> int:
    from ssan_plugin.analysis.probe import CLASSIFIERS
    from ssan_plugin.analysis.probing_data import TASKS

    parser = ArgumentParser(prog=prog(), description=__doc__)
    add_model_args(parser)
    parser.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}")
    parser.add_argument("--probing-file", required=True, help="SentEval file: split TAB label TAB sentence")
    parser.add_argument("--json", required=True, help="output JSON")
    parser.add_argument("--classifier", choices=CLASSIFIERS, default="logreg")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--wrd-target", choices=("inserted", "original", "pair"), default="inserted",
                        help="wrd: predict the moved word's position, its original slot, or both")
    add_overwrite(parser, "an existing --json")
    args = parser.parse_args(argv)
    if args.task not in TASKS:
        raise PipelineError(f"unknown probing task {args.task!r} (choose from {', '.join(TASKS)})")
    guard_outputs([output_file("--json", args.json)],
                  [Input("--data", args.data), Input("--checkpoint", args.checkpoint),
                   Input("--probing-file", args.probing_file)], args.overwrite)
    from ssan_plugin.analysis.inputs import AnalysisInput
    from ssan_plugin.analysis.tools import probe, write_json

    result = probe(AnalysisInput(args.data, args.checkpoint), args.task, args.probing_file,
                   args.classifier, args.seed, args.wrd_target)
    write_json(result, args.json)
    best = max(result["layers"], key=lambda l: l["accuracy"])
    print(f"{prog()}: {args.task}: best layer {best['layer']} accuracy {best['accuracy']:.3f} "
          f"(majority {result['majority']:.3f}, {result['n_test']} test) -> {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
