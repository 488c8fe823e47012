"""Selection maps: per sentence a PNG grid (layers x heads) of the eval-mode selection and
one of the attention weights, axes labelled with the pieces, and a JSON with, per layer and
head, the pieces, the 0/1 selection and the attention matrix (ReSA: selected heads and
dependents). See examples/analysis/README.md."""

import sys

from ssan_plugin.analysis.inputs import add_model_args
from ssan_plugin.cli.arguments import ArgumentParser, script_main
from ssan_plugin.translation.textio import PipelineError

PROG = "show_selection.py"



@script_main(prog=PROG)
def main(argv=None) -> int:
    parser = ArgumentParser(prog=PROG, description=__doc__)
    add_model_args(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--sentence", help="one raw sentence")
    source.add_argument("--input", help="raw text file, one sentence a line")
    parser.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args(argv)
    from ssan_plugin.analysis.inputs import AnalysisInput
    from ssan_plugin.analysis.tools import show_selection
    from ssan_plugin.translation.textio import read_lines

    lines = [args.sentence] if args.sentence is not None else read_lines(args.input)
    if not lines:
        raise PipelineError(f"{args.input}: empty input (no sentence)")
    written = show_selection(AnalysisInput(args.data, args.checkpoint), lines, args.out)
    print(f"{PROG}: {len(lines)} sentence(s), {len(written)} files in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
