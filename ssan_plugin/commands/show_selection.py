"""Selection maps: per sentence a PNG grid (layers x heads) of the eval-mode selection and
one of the attention weights, axes labelled with the pieces, and a JSON with, per layer and
head, the pieces, the 0/1 selection and the attention matrix (ReSA: selected heads and
dependents). With a reference translation (--target / --target-input), teacher-forced, a model
that selects in its decoder also gets the decoder self-attention's (target x target) and the
cross attention's (target x source) selection maps. See examples/analysis/README.md."""

import re
import sys
from pathlib import Path

from ssan_plugin.errors import PipelineError
from ssan_plugin.analysis.inputs import add_model_args
from ssan_plugin.cli.arguments import ArgumentParser, add_overwrite, script_main
from ssan_plugin.cli.files import Input, guard_outputs, output_dir, remove_own_files
from ssan_plugin.commands import command_prog


prog = command_prog(__file__)  # this command's name, as it was started


#: the files show_selection writes in --out (sentence K, 1-based)
OWN_FILE = re.compile(r"sent\d+(\.json|_selection\.png|_attention\.png|_decoder_selection\.png|"
                      r"_cross_selection\.png)")


def own_file(relative: str) -> bool:
    return OWN_FILE.fullmatch(relative) is not None


@script_main(prog=prog)
def main(argv=None) -> int:
    parser = ArgumentParser(prog=prog(), description=__doc__)
    add_model_args(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--sentence", help="one raw sentence")
    source.add_argument("--input", help="raw text file, one sentence a line")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--target", help="the reference translation of --sentence (decoder maps)")
    target.add_argument("--target-input", help="reference translations of --input, one a line "
                                               "(decoder maps)")
    parser.add_argument("--out", required=True, help="output directory")
    add_overwrite(parser, "the maps of a non-empty --out (its sentK.json / sentK_*.png files "
                          "are removed first; other files are kept)")
    args = parser.parse_args(argv)
    guard_outputs([output_dir("--out", args.out, writes=own_file)],
                  [Input("--data", args.data), Input("--checkpoint", args.checkpoint),
                   Input("--input", args.input), Input("--target-input", args.target_input)],
                  args.overwrite)
    from ssan_plugin.analysis.inputs import AnalysisInput
    from ssan_plugin.analysis.tools import show_selection
    from ssan_plugin.translation.textio import read_lines

    lines = [args.sentence] if args.sentence is not None else read_lines(args.input)
    if not lines:
        raise PipelineError(f"{args.input}: empty input (no sentence)")
    if (args.target is not None and args.sentence is None) or (args.target_input and args.input is None):
        raise PipelineError("--target goes with --sentence, --target-input with --input")
    targets = ([args.target] if args.target is not None else
               read_lines(args.target_input) if args.target_input else None)
    model = AnalysisInput(args.data, args.checkpoint)
    model.encode_lines(lines)  # every sentence checked before an earlier map is removed
    out = Path(args.out)
    if out.is_dir():  # --overwrite: the maps of an earlier run go, other files stay
        remove_own_files(out, [p.name for p in out.iterdir() if own_file(p.name)])
    written = show_selection(model, lines, args.out, targets)
    print(f"{prog()}: {len(lines)} sentence(s), {len(written)} files in {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
