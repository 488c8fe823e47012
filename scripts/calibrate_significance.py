#!/usr/bin/env python
"""How often does the paired test call two systems different when they are not?

From two real hypothesis files of one test set, builds --nulls pairs of systems whose outputs
are random per-sentence swaps of the two (no true difference) and reports, for the paired
bootstrap and paired approximate randomisation, the share with p < --alpha (BLEU, sacrebleu
13a unless --tokenize). A calibrated test gives about --alpha.

    scripts/calibrate_significance.py --ref test.de --hyp base.de --hyp ssan.de --json out.json

--seed-level: the same question for the seed-level test, from one system's own seeds (four or
more --hyp files, each a seed of the same system): every distinct split of the seeds into two
disjoint groups (--group-size each, default half; seed i of one group paired with seed i of
the other), each on --test-sets resampled test sets, so both groups come from one system;
reports how many distinct nulls that makes (five seeds in groups of two: 30) and the
seed-level test's rejection rate over them and, on the same nulls, the pooled sentence-level
bootstrap's. --nulls does not apply: the seeds decide how many distinct nulls there are.

    scripts/calibrate_significance.py --seed-level --ref test.tgt --hyp ssan@1.tgt ... --hyp ssan@5.tgt

--simulate: no files; synthetic nulls where seeds and test sentences are both random
(ssan_plugin.stats.calibration.hierarchical_null), for each scenario of
calibration.SCENARIOS and each --seeds count: the seed-level test, the pooled sentence-level
bootstrap and a t-test over the per-seed deltas alone, on the same nulls; and, per cell, the
seed-level test's sentence part over its seed part (variances: median, mean, quartiles).

    scripts/calibrate_significance.py --simulate --nulls 400 --samples 200 --json out.json

The JSON names its input files relative to the project root, as the committed archives do.
"""

import argparse
import json
import sys
from pathlib import Path

from tqdm import tqdm

from ssan_plugin.cli.arguments import ArgumentParser, float_arg, positive_int, script_main
from ssan_plugin.stats.calibration import (SCENARIOS, SIMULATED_SENTENCES, null_rejection_rate,
                                           seed_level_null_rates, simulated_null_rates,
                                           summarise_parts)
from ssan_plugin.stats.significance import DEFAULT_SEED, sacrebleu_score_fn, sacrebleu_stats
from ssan_plugin.translation.textio import PipelineError, read_lines


def parse_args(argv=None):
    ap = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", metavar="FILE")
    ap.add_argument("--hyp", action="append", default=[], metavar="FILE",
                    help="two hypothesis files of the --ref test set (with --seed-level: four "
                         "or more, the seeds of one system)")
    ap.add_argument("--seed-level", action="store_true",
                    help="calibrate the seed-level test from one system's seeds")
    ap.add_argument("--simulate", action="store_true",
                    help="synthetic nulls instead of files (every scenario, every --seeds)")
    ap.add_argument("--seeds", type=positive_int, nargs="+", default=[3, 6],
                    help="--simulate: seeds per group (default 3 6)")
    ap.add_argument("--group-size", type=positive_int, default=None,
                    help="--seed-level: seeds per group (default: half the files)")
    ap.add_argument("--tokenize", default="13a", help="sacrebleu tokeniser (default 13a)")
    ap.add_argument("--nulls", type=positive_int, default=None,
                    help="null system pairs (default 200; not with --seed-level, whose nulls "
                         "are every distinct split of the seeds)")
    ap.add_argument("--test-sets", type=positive_int, default=1,
                    help="--seed-level: resampled test sets per distinct split (default 1)")
    ap.add_argument("--samples", type=positive_int, default=1000,
                    help="resamples / trials per test")
    ap.add_argument("--alpha", type=float_arg(0.0, 1.0, lo_open=True, hi_open=True), default=0.05)
    ap.add_argument("--json", dest="json_out", metavar="OUT")
    args = ap.parse_args(argv)
    if args.simulate:
        if args.ref or args.hyp or args.seed_level:
            ap.error("--simulate takes no --ref, --hyp or --seed-level")
        if min(args.seeds) < 2:
            ap.error(f"--seeds: each group needs at least 2 seeds, got {args.seeds}")
        if args.nulls is None:
            args.nulls = 200
        return args
    if not args.ref or not args.hyp:
        ap.error("give --ref and --hyp files (or --simulate)")
    if args.seed_level:
        if args.nulls is not None:
            ap.error("--seed-level tests every distinct split of the seeds once per test set: "
                     "give --test-sets, not --nulls")
        if len(args.hyp) < 4:
            ap.error(f"--seed-level: give four or more --hyp files (seeds of one system), got "
                     f"{len(args.hyp)}")
        size = args.group_size or len(args.hyp) // 2
        if size < 2 or 2 * size > len(args.hyp):
            ap.error(f"--group-size {size}: two disjoint groups of at least 2 seeds need "
                     f"2 x {size} <= {len(args.hyp)} files")
    elif len(args.hyp) != 2:
        ap.error(f"--hyp: give exactly two files, got {len(args.hyp)}")
    if args.nulls is None and not args.seed_level:
        args.nulls = 200
    return args


@script_main(prog="calibrate_significance.py")
def main(argv=None):
    from sacrebleu.metrics import BLEU

    args = parse_args(argv)
    if args.simulate:
        return simulate(args)
    refs = read_lines(args.ref)
    hyps = [read_lines(h) for h in args.hyp]
    for path, lines in zip(args.hyp, hyps):
        if len(lines) != len(refs):
            raise PipelineError(f"--hyp {path} has {len(lines)} lines, --ref {len(refs)}")
    bleu = BLEU(tokenize=args.tokenize)
    stats = [sacrebleu_stats(bleu, h, refs) for h in hyps]
    score = sacrebleu_score_fn(bleu)
    result = {"ref": archive_path(args.ref), "hyp": [archive_path(h) for h in args.hyp],
              "n_sentences": len(refs), "nulls": args.nulls, "samples": args.samples,
              "alpha": args.alpha, "tokenize": args.tokenize,
              "bleu": [score(s.sum(0)) for s in stats], "rejection_rate": {}}
    if args.seed_level:
        result["seed_level"] = True
        result["group_size"] = args.group_size or len(stats) // 2
        result["seed"] = DEFAULT_SEED
        result.update(seed_level_null_rates(stats, score, result["group_size"], args.test_sets,
                                            args.samples, args.alpha, DEFAULT_SEED))
        for test, rate in result["rejection_rate"].items():
            print(f"{test}: p < {args.alpha} in {rate:.1%} of {result['nulls']} nulls "
                  f"({result['distinct_splits']} distinct splits of {len(stats)} seeds into two "
                  f"groups of {result['group_size']}, x {args.test_sets} test set(s) of "
                  f"{len(refs)} sentences resampled)")
        _write(args, result)
        return 0
    for test in tqdm(("bootstrap", "randomization"), desc="calibration", unit=" tests"):
        result["rejection_rate"][test] = null_rejection_rate(
            stats[0], stats[1], score, test, args.nulls, args.samples, args.alpha)
    for test, rate in result["rejection_rate"].items():
        print(f"{test}: p < {args.alpha} in {rate:.1%} of {args.nulls} null pairs "
              f"({len(refs)} sentences, {args.samples} samples each)")
    _write(args, result)
    return 0


def simulate(args) -> int:
    """--simulate: every (scenario, seeds per group) cell on its own deterministic nulls."""
    cells = [(scenario, n) for scenario in SCENARIOS for n in args.seeds]
    result = {"simulated": True, "nulls": args.nulls, "samples": args.samples,
              "alpha": args.alpha, "n_sentences": SIMULATED_SENTENCES, "cells": []}
    for scenario, n in tqdm(cells, desc="calibration", unit=" cells"):
        parts = []
        rates = simulated_null_rates(n, scenario, args.nulls, args.samples,
                                     result["n_sentences"], args.alpha, seed=n, parts=parts)
        result["cells"].append({"scenario": scenario, "spreads": SCENARIOS[scenario],
                                "n_seeds": n, "seed": n, "rejection_rate": rates,
                                "sentence_to_seed": summarise_parts(parts)})
        print(f"{scenario}, {n} seeds a side: " + ", ".join(
            f"{test} {rate:.1%}" for test, rate in rates.items()) + f" of {args.nulls} nulls")
    _write(args, result)
    return 0


def archive_path(path) -> str:
    """``path`` as the committed archives name it: relative to the project root."""
    from ssan_plugin.experiments.archive import relativize_text

    return relativize_text(str(Path(path).resolve()))


def _write(args, result):
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
