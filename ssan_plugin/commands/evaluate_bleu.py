"""Decode and score translation systems on a data-bin made by ssan-prepare-translation.

Each --system NAME=CHECKPOINT is decoded with fairseq-generate (every sentence checked, order
restored), sentencepiece removed, detokenised as the data was prepared, and scored against the
raw --ref with sacrebleu: detokenised BLEU (with signature), chrF, tokenised BLEU (for German
also the compound-split ##AT## tokenised BLEU). --hyp NAME=FILE scores existing detokenised
hypotheses; without --data only --hyp systems are allowed, and the target language is
--tgt-lang or the suffix of --ref. With two or more systems, a paired bootstrap (or approximate
randomisation) test compares each against the first (the baseline); two-sided with ties
counted, so identical outputs get p = 1. Systems named GROUP@SEED (baseline@1, ssan@1, ...)
are also pooled per group, and each is compared with the first group's system of the same seed
(a sentence-level p: it describes that seed). Per group against the first: the seed mean and
sd, the per-seed deltas, and the verdict, the seed-level test (95 % interval over seeds and
sentences, p, Holm-corrected p over the groups; --aso adds Almost Stochastic Order over the
seeds as a second opinion); the pooled sentence-level bootstrap is shown, labelled.
--planned-seeds GROUP=N (as the experiment runner passes it) says how many seeds a plan runs of
GROUP: while GROUP or the baseline has fewer, the verdict reads "interim: K of N seeds" (a plan
is read at its seeds, not at each look). --source FILE
(raw source of any test set) makes checkpoints translate it with the data-bin's preprocessing
and adds BLEU by source length (also from the data-bin's own raw test source when unchanged).

Example:
  ssan-evaluate-bleu --data data-bin/multi30k_en_de --ref ../shared/data/mt/en-de/test.de \\
      --system baseline=checkpoints/base/checkpoint_best.pt \\
      --system ssan=checkpoints/ssan/checkpoint_best.pt --json runs/en_de_test.json
  ssan-evaluate-bleu --ref test.de --hyp base=base.de --hyp ssan=ssan.de
  ssan-evaluate-bleu --data data-bin/multi30k_en_de --source held_out.en --ref held_out.de \\
      --system baseline@1=runs/b1/checkpoint_best.pt --system baseline@2=runs/b2/checkpoint_best.pt \\
      --system ssan@1=runs/s1/checkpoint_best.pt --system ssan@2=runs/s2/checkpoint_best.pt
"""

import argparse
import json
import sys
from pathlib import Path

from ssan_plugin import register
from ssan_plugin.translation.decode import PACKAGE_DIR, GenerateOptions
from ssan_plugin.translation.evaluate import EvalConfig, SystemSpec, evaluate, markdown_table
from ssan_plugin.cli.arguments import (
    ArgumentParser,
    add_overwrite,
    check_decoding_limits,
    finite_float,
    named_path,
    nonnegative_float,
    nonnegative_int,
    positive_int,
    script_main,
    setup_logging,
)
from ssan_plugin.cli.files import Input, guard_outputs, output_dir, output_file
from ssan_plugin.commands import command_prog


prog = command_prog(__file__)  # this command's name, as it was started


def _planned_seeds(text: str):
    """``GROUP=N`` -> ``(group, n)``, n a positive integer."""
    name, count = named_path("N")(text)
    return name, positive_int(count)


class _AppendSystem(argparse.Action):
    """--system and --hyp share one ordered list: the first one given is the baseline."""

    def __call__(self, parser, namespace, value, option_string=None):
        kind = "checkpoint" if option_string == "--system" else "hyp"
        name, path = value  # named_path: NAME=PATH
        getattr(namespace, self.dest).append(SystemSpec(name=name, kind=kind, path=path))


def parse_args(argv=None):
    ap = ArgumentParser(prog=prog(), description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", metavar="DIR",
                    help="data-bin with manifest.json (needed to decode --system checkpoints)")
    ap.add_argument("--tgt-lang", metavar="LANG",
                    help="without --data: the target language (default: the suffix of --ref)")
    ap.add_argument("--system", dest="systems", action=_AppendSystem, default=[],
                    type=named_path("CHECKPOINT"), metavar="NAME=CHECKPOINT",
                    help="a checkpoint to decode (repeatable)")
    ap.add_argument("--hyp", dest="systems", action=_AppendSystem, default=[],
                    type=named_path("FILE"), metavar="NAME=FILE",
                    help="detokenised hypotheses, one per line (repeatable)")
    ap.add_argument("--subset", default="test", help="split to decode (default test)")
    ap.add_argument("--ref", required=True, metavar="FILE", help="raw reference of the subset")
    ap.add_argument("--source", metavar="FILE",
                    help="raw source of the test set (any test set): --system checkpoints "
                         "translate it in-process with the manifest's preprocessing instead "
                         "of decoding --subset; also gives BLEU by source length")
    ap.add_argument("--too-long", choices=("error", "truncate", "empty"), default="error",
                    help="a test sentence longer than the model's source positions is "
                         "refused before decoding (default), truncated to fit or given an "
                         "empty output; the number is reported")
    ap.add_argument("--by-length-png", metavar="OUT.png",
                    help="BLEU by source length plot (default: beside --json)")
    ap.add_argument("--json", dest="json_out", metavar="OUT", help="write the results as JSON")
    ap.add_argument("--hyp-dir", metavar="DIR",
                    help="where to write detokenised hypotheses and generate logs (default: "
                         "beside --json)")
    ap.add_argument("--beam", type=positive_int, default=5)
    ap.add_argument("--lenpen", type=finite_float, default=1.0)
    ap.add_argument("--max-len-a", type=nonnegative_float, default=0.0)
    ap.add_argument("--max-len-b", type=nonnegative_int, default=200)
    ap.add_argument("--batch-size", type=positive_int, default=64,
                    help="sentences per generate batch")
    ap.add_argument("--user-dir", default=str(PACKAGE_DIR),
                    help=f"fairseq --user-dir (default {PACKAGE_DIR})")
    ap.add_argument("--cpu", action="store_true", default=None,
                    help="decode on CPU (default: CPU unless CUDA is available)")
    ap.add_argument("--generate-args", default="", metavar="'ARGS'",
                    help="further fairseq-generate options, shell-quoted")
    test = ap.add_mutually_exclusive_group()
    test.add_argument("--paired-bs", dest="paired", action="store_const", const="bs",
                      help="paired bootstrap resampling (default)")
    test.add_argument("--paired-ar", dest="paired", action="store_const", const="ar",
                      help="paired approximate randomisation")
    ap.add_argument("--paired-n", type=positive_int, default=0,
                    help="resamples (bs, default 1000) or trials (ar, default 10000)")
    ap.add_argument("--aso", action="store_true",
                    help="GROUP@SEED systems: also Almost Stochastic Order over the seeds' BLEU "
                         "(deepsig; eps_min, below 0.5 leans to the group) against the first "
                         "group")
    ap.add_argument("--planned-seeds", action="append", default=[], type=_planned_seeds,
                    metavar="GROUP=N",
                    help="the seeds a plan runs of GROUP (repeatable): until GROUP and the "
                         "baseline have theirs, the verdict is interim")
    ap.add_argument("--skip-recorded-data-check", action="store_true",
                    help="do not compare the dictionaries of the data dir recorded in a "
                         "checkpoint with --data's (embedding sizes are always compared)")
    add_overwrite(ap, "an existing --json or --by-length-png (the hypotheses of --hyp-dir, "
                      "NAME.SUBSET.LANG, are replaced without it: that folder collects them)")
    args = ap.parse_args(argv)
    check_decoding_limits(ap, args.max_len_a, args.max_len_b)
    if not args.systems:
        ap.error("give at least one --system NAME=CHECKPOINT or --hyp NAME=FILE")
    if args.data is None and any(spec.kind == "checkpoint" for spec in args.systems):
        ap.error("--system NAME=CHECKPOINT needs --data (the data-bin it was trained on); "
                 "without --data only --hyp NAME=FILE can be scored")
    named = [name for name, _ in args.planned_seeds]
    twice = sorted({name for name in named if named.count(name) > 1})
    if twice:
        ap.error(f"--planned-seeds names {', '.join(twice)} more than once")
    if args.data is not None and args.tgt_lang is not None:
        ap.error("--tgt-lang is only for scoring without --data (the manifest names the "
                 "target language)")
    return args


def guard(cfg: EvalConfig, overwrite: bool) -> None:
    """The outputs (--json, the by-length figure, the hypotheses and generate logs of the
    checkpoints in --hyp-dir) checked against the inputs before anything is decoded. The
    hypothesis folder is designed to collect files: it may hold others, and a checkpoint's
    own hypotheses of the same name are replaced."""
    outputs, inputs = [], [Input("--ref", cfg.ref), Input("--source", cfg.source),
                           Input("--data", cfg.data)]
    for spec in cfg.systems:
        option = "--system" if spec.kind == "checkpoint" else "--hyp"
        inputs.append(Input(option, spec.path, f"{option} {spec.name}={spec.path}"))
    if cfg.json_out:
        outputs.append(output_file("--json", cfg.json_out))
    if cfg.by_length_png:
        outputs.append(output_file("--by-length-png", cfg.by_length_png))
    elif cfg.json_out:
        outputs.append(output_file("the by-length figure beside --json",
                                   Path(cfg.json_out).with_suffix(".by_length.png")))
    hyp_dir = cfg.hyp_dir or (Path(cfg.json_out).resolve().parent if cfg.json_out else None)
    if hyp_dir is not None:
        label = Path(cfg.source).name if cfg.source is not None else cfg.subset
        decoded = [s.name for s in cfg.systems if s.kind == "checkpoint"]

        def writes(relative: str) -> bool:
            return "/" not in relative and any(
                relative.startswith(f"{name}.{label}.") or
                relative == f"{name}.{cfg.subset}.generate.log" for name in decoded)

        outputs.append(output_dir("--hyp-dir", hyp_dir, adds=True, writes=writes))
    guard_outputs(outputs, inputs, overwrite)


@script_main(prog=prog)
def main(argv=None):
    setup_logging()
    args = parse_args(argv)
    cfg = EvalConfig(
        data=args.data,
        systems=args.systems,
        ref=args.ref, subset=args.subset, json_out=args.json_out, hyp_dir=args.hyp_dir,
        generate=GenerateOptions(beam=args.beam, lenpen=args.lenpen,
                                 max_len_a=args.max_len_a, max_len_b=args.max_len_b,
                                 batch_size=args.batch_size, user_dir=args.user_dir,
                                 cpu=args.cpu, extra=args.generate_args,
                                 too_long=args.too_long),
        paired=args.paired or "bs", paired_n=args.paired_n,
        skip_recorded_data_check=args.skip_recorded_data_check, tgt_lang=args.tgt_lang,
        source=args.source, by_length_png=args.by_length_png, aso=args.aso,
        planned_seeds=dict(args.planned_seeds))
    guard(cfg, args.overwrite)
    if any(spec.kind == "checkpoint" for spec in cfg.systems):
        register()  # checkpoints translating --source are loaded in this process
    result = evaluate(cfg)
    print(markdown_table(result["report"], result["notes"]))
    if args.json_out:
        print(f"\nwrote {args.json_out}")
    else:
        print(json.dumps(result["report"], indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
