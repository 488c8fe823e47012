"""Translate raw text, one sentence per line, with a checkpoint and the data-bin it was trained on.

Reads stdin (or --input), writes one translation per input line to stdout (or --output), in
order. Each line gets exactly the preprocessing recorded in DIR/manifest.json (normalisation,
Moses tokenisation, the sentencepiece model), is decoded in-process with fairseq's own batching
and beam search, and is detokenised as ssan-evaluate-bleu does: with the same --beam,
length options and --batch-size the output equals the hypotheses ssan-evaluate-bleu writes.

Never a shorter output: an empty line gives an empty line (not decoded); CRLF line ends are
removed; a line with more pieces than the model's source positions stops the run before any
decoding (default), or is truncated (--too-long truncate) or left empty (--too-long empty).
Each of these is reported on stderr.

Example:
  ssan-translate --data data-bin/multi30k_en_de --checkpoint checkpoints/ssan/checkpoint_best.pt \\
      --beam 5 < raw.en > out.de
"""

import argparse
import logging
import sys

from ssan_plugin import register
from ssan_plugin.cli.arguments import (
    ArgumentParser,
    add_overwrite,
    check_decoding_limits,
    finite_float,
    input_file_arg,
    nonnegative_float,
    nonnegative_int,
    positive_int,
    script_main,
    setup_logging,
)
from ssan_plugin.cli.files import Input, guard_outputs, output_file, read_bytes
from ssan_plugin.commands import command_prog
from ssan_plugin.translation.textio import split_lines
from ssan_plugin.translation.translator import TOO_LONG, TranslateOptions, Translator


prog = command_prog(__file__)  # this command's name, as it was started


def parse_args(argv=None):
    ap = ArgumentParser(prog=prog(), description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, metavar="DIR",
                    help="the data-bin (with manifest.json) the checkpoint was trained on")
    ap.add_argument("--checkpoint", required=True, metavar="CKPT", help="fairseq checkpoint")
    ap.add_argument("--input", metavar="FILE", type=input_file_arg,
                    help="raw text, one sentence per line (default stdin)")
    ap.add_argument("--output", metavar="FILE", help="translations (default stdout)")
    ap.add_argument("--beam", type=positive_int, default=5)
    ap.add_argument("--lenpen", type=finite_float, default=1.0)
    ap.add_argument("--max-len-a", type=nonnegative_float, default=0.0)
    ap.add_argument("--max-len-b", type=nonnegative_int, default=200)
    ap.add_argument("--batch-size", type=positive_int, default=64, help="sentences per batch (64)")
    ap.add_argument("--too-long", choices=TOO_LONG, default="error",
                    help="a line longer than the model's source positions: stop before "
                         "decoding (error, default), translate its first pieces (truncate), "
                         "or output an empty line (empty)")
    ap.add_argument("--threads", type=positive_int, default=1,
                    help="sentencepiece encoding threads")
    ap.add_argument("--cpu", action="store_true", default=None,
                    help="decode on CPU (default: CPU unless CUDA is available)")
    ap.add_argument("--skip-recorded-data-check", action="store_true",
                    help="do not compare the dictionaries of the data dir recorded in the "
                         "checkpoint with --data's (embedding sizes are always compared)")
    ap.add_argument("--quiet", action="store_true", help="only warnings and errors on stderr")
    add_overwrite(ap, "an existing --output")
    args = ap.parse_args(argv)
    check_decoding_limits(ap, args.max_len_a, args.max_len_b)
    return args


def read_input(path):
    if path is None:
        return split_lines(sys.stdin.buffer.read(), "stdin")
    return split_lines(read_bytes(path, "--input"), str(path))


@script_main(prog=prog)
def main(argv=None):
    args = parse_args(argv)
    setup_logging(logging.WARNING if args.quiet else logging.INFO)
    guard_outputs([args.output and output_file("--output", args.output)],
                  [Input("--input", args.input), Input("--data", args.data),
                   Input("--checkpoint", args.checkpoint)], args.overwrite)
    lines, crlf = read_input(args.input)
    if crlf:
        print(f"{prog()}: {crlf} of {len(lines)} input lines ended in \\r\\n (CRLF): "
              f"the \\r was removed", file=sys.stderr)
    options = TranslateOptions(beam=args.beam, lenpen=args.lenpen, max_len_a=args.max_len_a,
                               max_len_b=args.max_len_b, batch_size=args.batch_size,
                               too_long=args.too_long, threads=args.threads, cpu=args.cpu)
    register()
    translator = Translator(args.checkpoint, args.data, options,
                            compare_recorded_data=not args.skip_recorded_data_check)
    outputs, report = translator.translate_with_report(lines)
    for message in report.messages():
        print(f"{prog()}: {message}", file=sys.stderr)
    text = "".join(x + "\n" for x in outputs)
    if args.output:
        with open(args.output, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    else:
        sys.stdout.reconfigure(encoding="utf-8", newline="\n")
        sys.stdout.write(text)
        sys.stdout.flush()
    print(f"{prog()}: {len(outputs)} lines in, {len(outputs)} lines out ({report.translated} "
          f"decoded) in {report.seconds:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
