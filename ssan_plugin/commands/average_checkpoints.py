"""Average the parameters of fairseq checkpoints into one checkpoint.

Every input is loaded with torch's weights_only check and the plugin's allow-list (the globals
fairseq checkpoints need, nothing else): a file that pickles anything else is refused. The
result decodes like any checkpoint (fairseq-generate --user-dir ssan_plugin --path AVG.pt,
ssan-evaluate-bleu, ssan-translate).

Examples:
  ssan-average-checkpoints --inputs ck/checkpoint8.pt ck/checkpoint9.pt ck/checkpoint10.pt \\
      --output ck/checkpoint_avg3.pt
  ssan-average-checkpoints --last 5 ck --output ck/checkpoint_avg5.pt

--last N DIR takes the N newest epoch checkpoints (checkpointE.pt) or, when DIR holds update
checkpoints (checkpoint_E_U.pt, from --save-interval-updates), the N newest of those; keep them
with --keep-last-epochs N / --keep-interval-updates N while training.
"""

import argparse
import sys

from ssan_plugin.cli.arguments import (
    ArgumentParser,
    add_overwrite,
    positive_int,
    script_main,
    setup_logging,
)
from ssan_plugin.cli.files import Input, guard_outputs, output_file
from ssan_plugin.commands import command_prog
from ssan_plugin.translation.average import average_checkpoints, last_checkpoints


prog = command_prog(__file__)  # this command's name, as it was started


def parse_args(argv=None):
    ap = ArgumentParser(prog=prog(), description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--inputs", nargs="+", metavar="CKPT", help="checkpoints to average")
    which.add_argument("--last", nargs=2, metavar=("N", "DIR"),
                       help="the N newest checkpoints of DIR")
    ap.add_argument("--kind", choices=["auto", "epoch", "update"], default="auto",
                    help="with --last: epoch (checkpointE.pt) or update (checkpoint_E_U.pt) "
                         "checkpoints (auto: whichever DIR has)")
    ap.add_argument("--output", required=True, metavar="AVG.pt")
    add_overwrite(ap, "an existing --output")
    args = ap.parse_args(argv)
    if args.last is not None:
        try:
            args.last[0] = positive_int(args.last[0])
        except argparse.ArgumentTypeError as err:
            ap.error(f"argument --last N DIR: N {err}")
    return args


@script_main(prog=prog)
def main(argv=None):
    setup_logging()
    args = parse_args(argv)
    paths = (args.inputs if args.inputs is not None
             else last_checkpoints(args.last[1], args.last[0], args.kind))
    option = "--inputs" if args.inputs is not None else "--last"
    guard_outputs([output_file("--output", args.output)], [Input(option, p) for p in paths],
                  args.overwrite)
    average_checkpoints(paths, args.output)
    print(f"averaged {len(paths)} checkpoints -> {args.output}: " + " ".join(map(str, paths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
