"""Probing data in SentEval's format (split TAB label TAB sentence, about 80/10/10, seeded):
bigram_shift and wrd from raw text (--input FILE; for wrd also a directory laid out as
../shared/data/probing/wrd/), tree_depth and top_constituent from a CoNLL-2012 file (--conll).
See examples/analysis/README.md."""

import sys

from ssan_plugin.errors import PipelineError
from ssan_plugin.cli.arguments import ArgumentParser, add_overwrite, script_main
from ssan_plugin.cli.files import Input, guard_outputs, output_file
from ssan_plugin.commands import command_prog


prog = command_prog(__file__)  # this command's name, as it was started


@script_main(prog=prog)
def main(argv=None) -> int:
    from ssan_plugin.analysis.probing_data import TASKS

    parser = ArgumentParser(prog=prog(), description=__doc__)
    parser.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}")
    parser.add_argument("--input", help="bigram_shift, wrd: raw text, one sentence a line (wrd: "
                                        "or a directory of NAME.SPLIT.x/.y files)")
    parser.add_argument("--conll", help="tree_depth, top_constituent: CoNLL-2012 file with parse bits")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True, help="output probing file")
    add_overwrite(parser, "an existing --out")
    args = parser.parse_args(argv)
    from pathlib import Path

    from ssan_plugin.analysis import probing_data as pd
    from ssan_plugin.analysis.trees import read_parsed_conll

    if args.task not in TASKS:
        raise PipelineError(f"unknown probing task {args.task!r} (choose from {', '.join(TASKS)})")
    # --input may be a folder (wrd): every file in it is an input
    guard_outputs([output_file("--out", args.out)],
                  [Input("--input", args.input), Input("--conll", args.conll)], args.overwrite)
    if args.task in ("bigram_shift", "wrd"):
        if args.input is None:
            raise PipelineError(f"--task {args.task} needs --input")
        if args.task == "wrd" and Path(args.input).is_dir():
            examples = pd.read_wrd_dir(args.input)
            if {e[0] for e in examples} != set(pd.SPLITS):
                examples = pd.resplit(examples, args.seed)
        else:
            examples = pd.make_examples(args.task, raw_sentences=pd.read_raw_sentences(args.input),
                                        seed=args.seed)
    else:
        if args.conll is None:
            raise PipelineError(f"--task {args.task} needs --conll")
        examples = pd.make_examples(args.task, parsed=read_parsed_conll(args.conll), seed=args.seed)
    pd.write_probing_file(examples, args.out)
    counts = {s: sum(e[0] == s for e in examples) for s in pd.SPLITS}
    print(f"{prog()}: {args.task}: {len(examples)} examples ({counts}) -> {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
