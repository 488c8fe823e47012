"""The analysis report: markdown tables (probing accuracy per layer with 95% intervals, tree
induction F1, selection by word class and distance) and a probing figure from the JSON files
that examples/analysis/run_analysis.sh wrote into one directory. See examples/analysis/README.md."""

import sys
from pathlib import Path

from ssan_plugin.cli.arguments import ArgumentParser, add_overwrite, input_dir_arg, script_main
from ssan_plugin.cli.files import Input, guard_outputs, output_file
from ssan_plugin.commands import command_prog


prog = command_prog(__file__)  # this command's name, as it was started


@script_main(prog=prog)
def main(argv=None) -> int:
    parser = ArgumentParser(prog=prog(), description=__doc__)
    parser.add_argument("--dir", required=True, type=input_dir_arg, help="analysis output directory")
    parser.add_argument("--systems", nargs="+", required=True,
                        help="system names as in the file names; the first is the reference (no selection)")
    parser.add_argument("--md", required=True, help="output markdown")
    parser.add_argument("--png", help="output probing figure")
    add_overwrite(parser, "an existing --md or --png")
    args = parser.parse_args(argv)
    # the inputs: the JSON files of --dir (the report reads some of them)
    guard_outputs([output_file("--md", args.md), args.png and output_file("--png", args.png)],
                  [Input("--dir", path) for path in sorted(Path(args.dir).glob("*.json"))],
                  args.overwrite)
    from ssan_plugin.analysis.report import AnalysisResults, plot_probing, report_markdown

    results = AnalysisResults.read(args.dir, args.systems)
    with open(args.md, "w", encoding="utf-8") as f:
        f.write(report_markdown(results))
    if args.png:
        plot_probing(results, args.png)
    print(f"{prog()}: {len(args.systems)} systems -> {args.md}"
          + (f", {args.png}" if args.png else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
