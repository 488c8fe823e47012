"""Selection by word class: runs the encoder on the words of a CoNLL-2012 file and reports, per
layer, the selection rate of keys and of queries by POS tag and for content vs function words
(with counts), and the rate against the word distance |i - j|. See examples/analysis/README.md."""

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
    parser.add_argument("--conll", required=True, help="CoNLL-2012 *_conll file (words, POS)")
    parser.add_argument("--json", required=True, help="output JSON")
    parser.add_argument("--png", help="output figure (content vs function, rate vs distance)")
    add_overwrite(parser, "an existing --json or --png")
    args = parser.parse_args(argv)
    guard_outputs([output_file("--json", args.json), args.png and output_file("--png", args.png)],
                  [Input("--data", args.data), Input("--checkpoint", args.checkpoint),
                   Input("--conll", args.conll)], args.overwrite)
    from ssan_plugin.analysis.inputs import AnalysisInput
    from ssan_plugin.analysis.tools import selection_stats, write_json
    from ssan_plugin.analysis.word_classes import plot_word_class_stats

    stats = selection_stats(AnalysisInput(args.data, args.checkpoint), args.conll)
    write_json(stats, args.json)
    if args.png:
        plot_word_class_stats(stats, args.png)
    print(f"{prog()}: {stats['n_sentences']} sentences -> {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
