#!/usr/bin/env python
"""Regenerate the tables of examples/*/RESULTS.md from the committed run archives.

    scripts/make_results.py            # rewrite every generated block in place
    scripts/make_results.py --check    # exit 1 when a committed block differs (what the test runs)

Each RESULTS file marks its generated tables with <!-- begin generated: KEY --> ...
<!-- end generated: KEY -->; the prose around them is written by hand. Every verdict is the
seed-level test (ssan_plugin.stats.significance.seed_level_test) with Holm's correction over the
comparisons of its table. Needs the test references of ../shared/data (the translation runs)
and makes the built-in corpus (scripts/make_synthetic_corpus.py, deterministic) when missing.
"""

import argparse
import difflib
import sys
from pathlib import Path

from tqdm import tqdm

from ssan_plugin.cli.arguments import ArgumentParser, script_main

ROOT = Path(__file__).resolve().parents[1]
TRANSLATION_PLAN = ROOT / "examples" / "translation" / "experiments.json"
STABILITY_PLAN = ROOT / "examples" / "stability" / "demo_plan.json"


def translation_blocks():
    from ssan_plugin.experiments.runner import Plan
    from ssan_plugin.experiments.tables.translation import runs_table, translation_comparisons
    from ssan_plugin.experiments.tables.verdicts import power_table, verdict_table

    plan = Plan.load(TRANSLATION_PLAN)
    rows = translation_comparisons(plan, "translation")
    order = {"post-norm En-De": 0, "post-norm En-Ro": 1, "post-norm En-Ja": 2,
             "pre-norm En-De": 3}
    rows.sort(key=lambda r: (order.get(r.label, 9), plan.studies[0].systems.index(r.system)
                             if r.system in plan.studies[0].systems else 99))
    ssan = [r for r in rows if r.system == "ssan"]
    return {"translation-verdicts": verdict_table(rows),
            "translation-power": power_table(ssan),
            "translation-runs": runs_table(plan)}


def stability_blocks():
    from ssan_plugin.experiments.runner import Plan, Runner
    from ssan_plugin.experiments.tables.stability import seed_spreads, spread_table
    from ssan_plugin.experiments.tables.translation import translation_comparisons
    from ssan_plugin.experiments.tables.verdicts import verdict_table

    plan = Plan.load(STABILITY_PLAN)
    pair = plan.pairs["builtin"]
    if not (Path(pair.raw) / f"test.{pair.tgt}").is_file():  # the deterministic corpus
        Runner(plan, ROOT / "runs" / "stability").prepare_raw(pair)
    spreads = seed_spreads(plan, "start", "builtin")
    if not spreads:
        return {}
    rows = translation_comparisons(plan, "stability")
    blocks = {"stability-demo-spread": spread_table(spreads),
              "stability-demo-verdicts": verdict_table(rows)}
    calibration = sorted((ROOT / "examples" / "stability" / "calibration").glob("*.json"))
    if calibration:
        blocks["stability-calibration"] = calibration_table(calibration)
    return blocks


def calibration_table(paths):
    """The outputs of calibrate_significance.py --seed-level --json calibration/SYSTEM.json,
    one per system whose archived seeds it drew from."""
    import json

    rows = ["| seeds of | seeds in the pool | groups of | nulls | test sentences | seed-level "
            "test: p < 0.05 | pooled sentence-level bootstrap: p < 0.05 |",
            "|---|---|---|---|---|---|---|"]
    for path in paths:
        run = json.loads(path.read_text())
        rate = run["rejection_rate"]
        rows.append(f"| {path.stem} | {len(run['bleu'])} | {run['group_size']} | "
                    f"{run['nulls']} | {run['n_sentences']} | {rate['seed_level']:.1%} | "
                    f"{rate['pooled_sentences']:.1%} |")
    return "\n".join(rows)


SRL_SPECS = (  # (comparison, baseline runs, system runs) of examples/srl/experiments
    ("SAN vs SSAN, predicate distance, lr 4e-3", "d10lr4-3k_san", "d10lr4-3k_ssan"),
    ("SAN vs SSAN, characters, lr 2e-3", "ch32lr2_san", "ch32lr2_ssan"),
    ("SAN vs SSAN with the straight-through cap at 0", "ch32lr2_san", "ch32lr2cap0_ssan"),
    ("SAN: lr decay and word dropout vs lr 2e-3", "ch32lr2_san", "ch32decaywd_san"),
)


def srl_blocks():
    from ssan_plugin.experiments.tables.srl import srl_comparisons, srl_gold_props
    from ssan_plugin.experiments.tables.verdicts import verdict_table

    dev = ROOT.parent / "shared" / "data" / "srl" / "ewt" / "dev.gold_conll"
    gold = srl_gold_props(dev, ROOT / "runs" / "results" / "srl.dev.gold.props")
    rows = srl_comparisons(ROOT / "examples" / "srl" / "experiments", gold, SRL_SPECS)
    return {"srl-verdicts": verdict_table(rows, metric="dev F1")}


def readme_blocks():
    """The demo's table as a fresh `make demo` printed it (examples/stability/demo_run.json,
    written by `scripts/demo.py --record`; a test pins its recipe to the demo's)."""
    import json

    path = ROOT / "examples" / "stability" / "demo_run.json"
    if not path.is_file():
        return {}
    record = json.loads(path.read_text())
    printed = "\n".join(record["printed"]).strip("\n")
    return {"demo-run": f"```\n{printed}\n```\n\nMeasured on an idle 2-core machine, "
                        f"{record['minutes']:.1f} minutes after installation."}


FILES = {
    ROOT / "README.md": readme_blocks,
    ROOT / "examples" / "srl" / "RESULTS.md": srl_blocks,
    ROOT / "examples" / "translation" / "RESULTS.md": translation_blocks,
    ROOT / "examples" / "stability" / "RESULTS.md": stability_blocks,
}


@script_main(prog="make_results.py")
def main(argv=None):
    from ssan_plugin.experiments.tables.blocks import fill_blocks

    ap = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help="change nothing; exit 1 when a generated block is out of date")
    args = ap.parse_args(argv)
    stale = []
    for path, make in tqdm(FILES.items(), desc="results", unit=" files"):
        text = path.read_text(encoding="utf-8")
        new = fill_blocks(text, make())
        if new == text:
            continue
        rel = path.relative_to(ROOT)
        if args.check:
            stale.append(str(rel))
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(True), new.splitlines(True), f"{rel} (committed)",
                f"{rel} (regenerated)"))
        else:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {rel}")
    if stale:
        print(f"make_results.py: out of date: {', '.join(stale)} (run scripts/make_results.py)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
