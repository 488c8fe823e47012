"""Tree induction from attention: per encoder layer, attention averaged over heads and mapped
to words, split-point binary trees, scored against the CoNLL-2012 file's trees (punctuation
removed, unlabelled micro precision/recall/F1) with a right-branching baseline. See
examples/analysis/README.md."""

import sys

from ssan_plugin.analysis.inputs import add_model_args
from ssan_plugin.cli.arguments import ArgumentParser, add_overwrite, script_main
from ssan_plugin.cli.files import Input, guard_outputs, output_file
from ssan_plugin.commands import command_prog


prog = command_prog(__file__)  # this command's name, as it was started


@script_main(prog=prog)
def main(argv=None) -> int:
    parser = ArgumentParser(prog=prog(), description=__doc__)
    add_model_args(parser)
    parser.add_argument("--conll", required=True, help="CoNLL-2012 *_conll file with parse bits")
    parser.add_argument("--json", required=True, help="output JSON")
    add_overwrite(parser, "an existing --json")
    args = parser.parse_args(argv)
    guard_outputs([output_file("--json", args.json)],
                  [Input("--data", args.data), Input("--checkpoint", args.checkpoint),
                   Input("--conll", args.conll)], args.overwrite)
    from ssan_plugin.analysis.inputs import AnalysisInput
    from ssan_plugin.analysis.tools import induce_trees, write_json

    result = induce_trees(AnalysisInput(args.data, args.checkpoint), args.conll)
    write_json(result, args.json)
    f1 = ", ".join(f"layer {l['layer']} {l['f1']:.2f}" for l in result["layers"])
    print(f"{prog()}: {result['n_sentences']} sentences; F1 {f1}; right-branching "
          f"{result['right_branching']['f1']:.2f} -> {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
