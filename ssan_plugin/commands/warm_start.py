"""Continue a trained fairseq Transformer as an encoder variant: weights, update counter and
learning-rate schedule carry over, the optimizer state is fresh, new parameters are logged.

    ssan-warm-start --base BASE/checkpoint_last.pt --arch ssan_transformer_small \\
        --out SSAN_DIR/checkpoint_last.pt [--criterion selective_label_smoothed_cross_entropy] \\
        [--data DATA] -- [variant options, e.g. --ssan-tau 0.5]
    fairseq-train DATA --user-dir ssan_plugin --arch ssan_transformer_small ... --save-dir SSAN_DIR

fairseq-train then resumes from SSAN_DIR/checkpoint_last.pt at the base's update and place in
the epoch (give the same model shape and optimizer as the base, and the --criterion named
here). See ssan_plugin/warm_start.py.
"""

import argparse
import sys

from ssan_plugin.cli.arguments import (
    ArgumentParser,
    add_overwrite,
    input_dir_arg,
    script_main,
    setup_logging,
)
from ssan_plugin.errors import InputError
from ssan_plugin.cli.files import Input, guard_outputs, output_file
from ssan_plugin.cli.checkpoints import load_checkpoint
from ssan_plugin.commands import command_prog


prog = command_prog(__file__)  # this command's name, as it was started


@script_main(prog=prog)
def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    variant_flags = []
    if "--" in argv:
        cut = argv.index("--")
        argv, variant_flags = argv[:cut], argv[cut + 1:]
    ap = ArgumentParser(prog=prog(), description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="checkpoint of a trained fairseq transformer")
    ap.add_argument("--arch", required=True, help="the variant architecture, e.g. ssan_transformer")
    ap.add_argument("--out", required=True, help="checkpoint to write (e.g. SAVE_DIR/checkpoint_last.pt)")
    ap.add_argument("--criterion", default="selective_label_smoothed_cross_entropy",
                    help="the criterion the continued training will use")
    ap.add_argument("--data", type=input_dir_arg,
                    help="data-bin (default: the one recorded in the base checkpoint)")
    add_overwrite(ap, "an existing --out (e.g. a run's checkpoint_last.pt)")
    args = ap.parse_args(argv)
    setup_logging(fmt="%(levelname)s | %(message)s")
    guard_outputs([output_file("--out", args.out)],
                  [Input("--base", args.base), Input("--data", args.data)], args.overwrite)
    load_checkpoint(args.base, expect_task="translation", what="--base")  # before any work
    from ssan_plugin.warm_start import WarmStartError, continue_as_variant

    try:
        report = continue_as_variant(args.base, args.out, args.arch, variant_flags, args.criterion, args.data)
    except WarmStartError as err:
        raise InputError(str(err)) from None
    print(f"wrote {args.out}: {args.arch} at update {report.num_updates}, "
          f"{len(report.new_parameters)} new and {len(report.dropped_parameters)} dropped parameter tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
