#!/usr/bin/env python
"""Regenerate the tables of examples/*/RESULTS.md from the committed run archives.

    scripts/make_results.py            # rewrite every generated block in place
    scripts/make_results.py --check    # exit 1 when a committed block differs (what the test runs)
    scripts/make_results.py --only examples/stability/RESULTS.md   # that file only
    scripts/make_results.py --root DIR # the archives and RESULTS files of another copy

Each RESULTS file marks its generated tables with <!-- begin generated: KEY --> ...
<!-- end generated: KEY -->; the prose around them is written by hand. Every verdict is the
seed-level test (ssan_plugin.stats.significance.seed_level_test) with Holm's correction over the
comparisons of its table. Needs the test references of ../shared/data (the translation runs)
and makes the built-in corpus (scripts/make_synthetic_corpus.py, deterministic) when missing.
A damaged archive (a truncated or invalid file, a missing key, a number that is not finite)
stops it with one line naming the file and the key or position, exit status 2, nothing written.
"""

import argparse
import difflib
import sys
from pathlib import Path

from tqdm import tqdm

from ssan_plugin.cli.arguments import ArgumentParser, script_main

ROOT = Path(__file__).resolve().parents[1]
# below: paths relative to the root the tables are made from (--root, default this checkout)
TRANSLATION_PLAN = Path("examples") / "translation" / "experiments.json"
STABILITY_PLAN = Path("examples") / "stability" / "demo_plan.json"
STABILITY_RERUN_PLAN = Path("examples") / "stability" / "rerun_plan.json"


def translation_blocks(root: Path):
    from ssan_plugin.experiments.plan import Plan
    from ssan_plugin.experiments.tables.translation import runs_table, translation_comparisons
    from ssan_plugin.experiments.tables.verdicts import (power_table, spread_ratio_table,
                                                         verdict_table)

    plan = Plan.load(root / TRANSLATION_PLAN, root)
    rows = translation_comparisons(plan, "translation")
    order = {"post-norm En-De": 0, "post-norm En-Ro": 1, "post-norm En-Ja": 2,
             "pre-norm En-De": 3}
    rows.sort(key=lambda r: (order.get(r.label, 9), plan.studies[0].systems.index(r.system)
                             if r.system in plan.studies[0].systems else 99))
    ssan = [r for r in rows if r.system in ("ssan", "ssan_cap0")]  # from scratch: the six-seed study
    return {"translation-verdicts": verdict_table(rows),
            "translation-power": power_table(ssan, family=len(rows)),
            "translation-spread": spread_ratio_table(ssan),
            "translation-runs": runs_table(plan), **translation_cost_blocks(root)}


TRANSLATION_BENCH = Path("examples") / "translation" / "bench"
COST_BLOCKS = (  # (block key, archive of make bench, table maker name)
    ("translation-cost-process-builtin", "process.builtin.json", "process_table"),
    ("translation-cost-process-news", "process.news.json", "process_table"),
    ("translation-cost-steps-builtin", "steps.builtin.json", "steps_table"),
    ("translation-cost-steps-news", "steps.news.json", "steps_table"),
    ("translation-cost-layers-train", "layers_train/bench_encoder_layers.csv", "layers_table"),
    ("translation-cost-layers-eval", "layers_eval/bench_encoder_layers.csv", "layers_table"),
)


def translation_cost_blocks(root: Path):
    """The cost tables of `make bench`'s archive (examples/translation/bench/), each whose
    archive exists; a block whose archive is missing stays unfilled, which main() refuses."""
    from ssan_plugin.experiments.tables import bench

    folder = root / TRANSLATION_BENCH
    return {key: getattr(bench, maker)(folder / name)
            for key, name, maker in COST_BLOCKS if (folder / name).is_file()}


def stability_blocks(root: Path):
    from dataclasses import replace

    from ssan_plugin.experiments.plan import Plan
    from ssan_plugin.experiments.runner import Runner
    from ssan_plugin.experiments.tables.stability import (calibration_table, seed_spreads,
                                                          spread_table)
    from ssan_plugin.experiments.tables.translation import translation_comparisons
    from ssan_plugin.experiments.tables.verdicts import verdict_table

    plan = Plan.load(root / STABILITY_PLAN, root)
    spreads = seed_spreads(plan, "start", "builtin")  # the archive only: checked first
    if not spreads:
        return {}
    pair = plan.pairs["builtin"]
    if not (Path(pair.raw) / f"test.{pair.tgt}").is_file():  # the deterministic corpus
        Runner(plan, root / "runs" / "stability").prepare_raw(pair)
    rows = translation_comparisons(plan, "stability")
    blocks = {"stability-demo-spread": spread_table(spreads),
              "stability-demo-verdicts": verdict_table(rows)}
    calibration = sorted((root / "examples" / "stability" / "calibration").glob("*.json"))
    if calibration:
        blocks["stability-calibration"] = calibration_table(calibration, root)
    rerun = Plan.load(root / STABILITY_RERUN_PLAN, root)
    again = seed_spreads(rerun, "rerun", "builtin")
    if len(again) > 1:  # the default start trained again by the current code, beside the first
        before = {s.system: s for s in spreads}
        blocks["stability-rerun-spread"] = spread_table(
            [before["baseline"], replace(before["ssan_cap0"], system="ssan_cap0 (start study)"),
             replace(again[1], system="ssan_cap0 (current code)")])
        blocks["stability-rerun-verdicts"] = verdict_table(
            translation_comparisons(rerun, "stability-rerun"))
    return blocks


SRL_SPECS = (  # (comparison, baseline runs, system runs) of examples/srl/experiments
    ("SAN vs SSAN, predicate distance, lr 4e-3", "d10lr4-3k_san", "d10lr4-3k_ssan"),
    ("SAN vs SSAN, characters, lr 2e-3", "ch32lr2_san", "ch32lr2_ssan"),
    ("SAN vs SSAN with the straight-through cap at 0", "ch32lr2_san", "ch32lr2cap0_ssan"),
    ("SAN: lr decay and word dropout vs lr 2e-3", "ch32lr2_san", "ch32decaywd_san"),
)


def srl_blocks(root: Path):
    """Every table of examples/srl/RESULTS.md: each archived run's dev predictions rescored
    once against the EWT dev gold (and checked against its result.json), curves from its
    curve.jsonl; the seed-level verdicts over SRL_SPECS."""
    from ssan_plugin.experiments.tables import srl
    from ssan_plugin.experiments.tables.verdicts import verdict_table

    dev = root.parent / "shared" / "data" / "srl" / "ewt" / "dev.gold_conll"
    gold = srl.srl_gold_props(dev, root / "runs" / "results" / "srl.dev.gold.props")
    runs = srl.SrlArchive(root / "examples" / "srl" / "experiments", gold)
    rows = srl.srl_comparisons(runs, SRL_SPECS)

    def f1(*names, digits=1, key="f1"):  # curve rows: (label, run, valid key, digits)
        what = {"f1": "dev F1", "accuracy": "dev token accuracy", "loss": "dev loss",
                "sel": "dev selection rate"}[key]
        return [(f"{n} {what}", n, key, digits) for n in names]

    def seeds(prefix):
        return [f"{prefix}_s{s}" for s in sorted(runs.group(prefix))]

    every_500 = (500, 1000, 1500, 2000, 2500, 3000)
    blocks = {"srl-verdicts": verdict_table(rows, metric="dev F1")}
    blocks["srl-inputs"] = srl.runs_table(
        runs, [("wd", "wd_san_s1"), ("d10", "d10_san_s1"), ("d10wd", "d10wd_san_s1")],
        [srl.flags_column(), srl.P, srl.R, srl.F1, srl.COUNTS, srl.BEST_UPDATE, srl.MINUTES])
    blocks["srl-inputs-curve"] = srl.curve_table(
        runs, f1("d10wd_san_s1") + f1("d10wd_san_s1", key="accuracy")
        + f1("d10_san_s1", "wd_san_s1"), (261, 500, 783, 1000, 1044, 1305, 1500))
    blocks["srl-tuning"] = srl.runs_table(
        runs, [(c, f"{c}_san_s1") for c in ("d10", "d10do3", "d10mlp", "d10ls", "d10L6",
                                            "d10lr2", "d10lr4")],
        [srl.flags_column(base="d10_san_s1", header="flags added to d10's"), srl.P, srl.R,
         srl.F1, srl.MINUTES])
    blocks["srl-d10lr4-3k-runs"] = srl.seeds_table(
        runs, [("san", "d10lr4-3k_san"), ("ssan", "d10lr4-3k_ssan")], [srl.MINUTES])
    blocks["srl-d10lr4-3k-curves"] = srl.curve_table(
        runs, f1(*seeds("d10lr4-3k_san"), *seeds("d10lr4-3k_ssan"))
        + f1(*seeds("d10lr4-3k_ssan"), key="sel", digits=3), (261,) + every_500)
    probe = ["d10lr4-3k_san_s2", "d10lr4-3k_ssan_s2", "d10lr2-3k_ssan_s2"]
    blocks["srl-d10lr2-3k"] = srl.runs_table(
        runs, [(n, n) for n in probe],
        [srl.flags_column(), srl.F1, srl.BEST_UPDATE, srl.SELECTION, srl.MINUTES])
    blocks["srl-d10lr2-3k-curve"] = srl.curve_table(
        runs, f1(*probe) + f1(*probe[1:], key="sel", digits=3), every_500)
    blocks["srl-overfit"] = srl.runs_table(
        runs, [(n, n) for n in ("d10lr4-3k_san_s1", "d10lr4do3-3k_san_s1", "ch32_san_s1")],
        [srl.flags_column(base="d10lr4-3k_san_s1", header="flags added to d10lr4-3k's"),
         srl.P, srl.R, srl.F1, srl.f1_at(1305), srl.TRAIN_ACCURACY, srl.MINUTES])
    blocks["srl-overfit-curve"] = srl.curve_table(
        runs, f1("d10lr4-3k_san_s1", digits=2) + f1("d10lr4-3k_san_s1", key="accuracy")
        + f1("d10lr4-3k_san_s1", key="loss", digits=2) + f1("ch32_san_s1", digits=2),
        every_500)
    blocks["srl-ch32lr2-runs"] = srl.seeds_table(
        runs, [("san", "ch32lr2_san"), ("ssan", "ch32lr2_ssan")],
        [srl.MAX_GNORM, srl.entropy_at(500, 3000), srl.MINUTES])
    blocks["srl-ch32lr2-curves"] = srl.curve_table(
        runs, f1(*seeds("ch32lr2_san"), *seeds("ch32lr2_ssan")), every_500)
    blocks["srl-cap0-runs"] = srl.seeds_table(
        runs, [("san (ch32lr2)", "ch32lr2_san"), ("ssan, cap 0 (ch32lr2cap0)", "ch32lr2cap0_ssan"),
               ("ssan, cap 10 (ch32lr2)", "ch32lr2_ssan")],
        [srl.MAX_GNORM, srl.SELECTION, srl.entropy_at(500, 3000), srl.MINUTES])
    blocks["srl-cap0-curves"] = srl.curve_table(runs, f1(*seeds("ch32lr2cap0_ssan")), every_500)
    cap0 = [("san (ch32lr2)", "ch32lr2_san"), ("ssan, cap 0", "ch32lr2cap0_ssan")]
    blocks["srl-cap0-length"] = srl.breakdown_table(runs, cap0, "by_length")
    blocks["srl-cap0-distance"] = srl.breakdown_table(runs, cap0, "by_distance")
    blocks["srl-decay"] = srl.runs_table(
        runs, [(n, n) for n in ("ch32_san_s1", "ch32decay_san_s1", "ch32decay5k_san_s1")],
        [srl.flags_column(base="ch32_san_s1", header="flags added to ch32's"), srl.UPDATES,
         srl.archived_best_f1(), srl.BEST_UPDATE, srl.checkpoint_column(), srl.P, srl.R,
         srl.F1, srl.MINUTES])
    plateau = ("ch32decay_san_s1", "ch32decay5k_san_s1", "w256decay_san_s1",
               "w256decay5k_san_s1")
    blocks["srl-width"] = srl.runs_table(
        runs, [(n, n) for n in plateau],
        [srl.flags_column(base="ch32decay_san_s1", header="flags added to ch32decay's"),
         srl.UPDATES, srl.P, srl.R, srl.F1, srl.BEST_UPDATE, srl.MINUTES])
    blocks["srl-width-curves"] = srl.curve_table(
        runs, f1(*plateau), (500, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000))
    blocks["srl-decaywd-runs"] = srl.seeds_table(
        runs, [("san ch32lr2", "ch32lr2_san"),
               ("san ch32decay (average of the last 4 checkpoints)", "ch32decay_san"),
               ("san ch32decaywd", "ch32decaywd_san")], [srl.f1_at(3000), srl.MINUTES])
    blocks["srl-decaywd-curves"] = srl.curve_table(
        runs, f1("ch32decay_san_s1", *seeds("ch32decaywd_san")),
        (500, 1000, 1500, 2000, 2250, 2500, 2750, 3000))
    decaywd = [("san ch32lr2", "ch32lr2_san"), ("san ch32decaywd", "ch32decaywd_san")]
    blocks["srl-decaywd-length"] = srl.breakdown_table(runs, decaywd, "by_length")
    blocks["srl-decaywd-distance"] = srl.breakdown_table(runs, decaywd, "by_distance")
    return blocks


def pairs_blocks(root: Path):
    """Every table of examples/pairs/RESULTS.md: each archived run's test predictions rescored
    once against SICK TRIAL (the test split; checked against its result.json); each encoder
    against SAN, and each encoder's translation start against its scratch start, seed level,
    Holm over each table."""
    from ssan_plugin.experiments.tables import pairs

    encoders = ("san", "ssan", "disan", "biblosan", "resa")
    targets, inits = ("entailment", "relatedness"), ("scratch", "translation")
    runs = pairs.PairsArchive(root / "examples" / "pairs" / "experiments",
                              root.parent / "shared" / "data" / "nli" / "sick" / "valid.tsv")
    against_san = [(f"{t}, {i}", (t, i, "san"), (t, i, e))
                   for t in targets for i in inits for e in encoders[1:]]
    transfer = [(f"{t}, {e}", (t, "scratch", e), (t, "translation", e))
                for t in targets for e in encoders]
    return {"pairs-runs": pairs.runs_table(runs, targets, inits, encoders),
            "pairs-verdicts": pairs.pair_verdict_table(
                pairs.pair_comparisons(runs, against_san, "against SAN")),
            "pairs-transfer": pairs.pair_verdict_table(
                pairs.pair_comparisons(runs, transfer, "transfer"))}


def readme_blocks(root: Path):
    """The demo's table as a fresh `make demo` printed it (examples/stability/demo_run.json,
    written by `scripts/demo.py --record`; a test pins its recipe to the demo's), with where its
    hypotheses are (:func:`demo_hypotheses_note`); the
    calibration of the significance tests (examples/significance/: simulated.json and
    sentences.*.json, from scripts/calibrate_significance.py --json)."""
    from ssan_plugin.experiments.tables.archives import archive_json, archived_value
    from ssan_plugin.experiments.tables.blocks import ResultsError
    from ssan_plugin.experiments.tables.calibration import sentence_level_table, simulated_table

    blocks = {}
    path = root / "examples" / "stability" / "demo_run.json"
    if path.is_file():
        record = archive_json(path)
        lines = archived_value(path, "printed", number=False, data=record)
        if not (isinstance(lines, list) and all(isinstance(x, str) for x in lines)):
            raise ResultsError(f"{path}: key 'printed' must be a list of lines")
        printed = "\n".join(lines).strip("\n")
        minutes = archived_value(path, "minutes", data=record)
        blocks["demo-run"] = (f"```\n{printed}\n```\n\nMeasured on an idle 2-core machine, "
                              f"{minutes:.1f} minutes after installation. "
                              + demo_hypotheses_note(root, path, record))
    calibration = root / "examples" / "significance"
    if (calibration / "simulated.json").is_file():
        blocks["significance-simulated"] = simulated_table(calibration / "simulated.json")
    sentences = sorted(calibration.glob("sentences.*.json"))
    if sentences:
        blocks["significance-sentences"] = sentence_level_table(sentences)
    return blocks


def demo_hypotheses_note(root: Path, path: Path, record: dict) -> str:
    """Where the recorded demo's hypotheses are (``scripts/demo.py --record`` copies them
    beside the record, named relative to the root; each file checked to exist) and the
    commands that re-score them; a record made before that says it cannot be re-scored."""
    from ssan_plugin.experiments.tables.archives import archived_value
    from ssan_plugin.experiments.tables.blocks import ResultsError

    if "hypotheses" not in record:
        return ("This record keeps no hypotheses (it was made before `--record` stored them), "
                "so its BLEU and p cannot be re-scored from the repository; the next "
                f"`scripts/demo.py --record {path.relative_to(root)}` stores them in "
                f"`{path.with_suffix('').relative_to(root)}/`.")
    copies = archived_value(path, "hypotheses", number=False, data=record)
    rescore = archived_value(path, "rescore", number=False, data=record)
    if not isinstance(copies, dict) or not copies:
        raise ResultsError(f"{path}: key 'hypotheses' must name each system's hypotheses")
    for name, copy in copies.items():
        if not isinstance(copy, str) or copy.startswith("/") or not (root / copy).is_file():
            raise ResultsError(f"{path}: hypotheses of {name}: {copy!r} is not a file of the "
                               f"project (a path relative to its root)")
    if not (isinstance(rescore, list) and all(isinstance(x, str) for x in rescore)):
        raise ResultsError(f"{path}: key 'rescore' must be a list of commands")
    commands = "\n".join(f"    {line}" for line in rescore)
    return (f"Its hypotheses are committed beside the record ("
            + ", ".join(f"`{copy}`" for copy in copies.values())
            + "); to score them again (the reference made afresh by the corpus command, "
              "CORPUS any new folder):\n\n" + commands)


def selectors_blocks(root: Path):
    """The selector head-to-head (examples/selectors/experiments.json, study prenorm on En-De,
    then study postnorm on En-Ro for the selectors the rule carries forward):
    verdicts against the baseline, with the baseline and gumbel read from the translation
    plan's archive (borrowed runs); the validation losses that choose the selectors for En-Ro;
    cost ratios from examples/selectors/bench/*.json
    (benchmarks/bench_ssan.py --plan); selection by word class and distance from each run's
    selection.json. Whatever is archived: no run, some, or all."""
    from ssan_plugin.experiments.plan import Plan
    from ssan_plugin.experiments.tables.selectors import selector_blocks

    plan = Plan.load(root / "examples" / "selectors" / "experiments.json", root)
    # the pre-registered rule for En-Ro: SSAN and the two other selectors with the lowest mean
    # best validation loss on En-De (examples/selectors/RESULTS.md, "Which selectors go on")
    return selector_blocks(plan, "prenorm", "en-de", root / "examples" / "selectors" / "bench",
                           keep=("gumbel",), choose=2, next_pair=("postnorm", "en-ro"))


def everywhere_blocks(root: Path):
    """Selection at every attention (examples/everywhere/experiments.json): pre-norm En-De
    verdicts against the borrowed baseline (SSAN in the encoder borrowed too), the development
    losses and the rule, fixed before any run, that carries two systems to post-norm En-Ro
    (study postnorm) with its own verdicts, power and rates, each site's evaluation selection
    rate, the cost per site
    (examples/everywhere/bench/*.json, benchmarks/bench_ssan.py --plan
    examples/everywhere/bench_plan.json), and the En-Ro runs' AER on the WPT Ro-En gold beside
    eflomal's and the diagonal reference's (examples/everywhere/alignment/*.ro-en.json)."""
    from ssan_plugin.experiments.plan import Plan
    from ssan_plugin.experiments.tables.bench import PROCESS_MEASURES, steps_table
    from ssan_plugin.experiments.tables.everywhere import (alignment_rows, alignment_table,
                                                           alignment_verdict_table,
                                                           cross_alone_systems, gold_words_table,
                                                           reference_rows, site_cost_goal_table,
                                                           site_rates_table, steps_goal_table)
    from ssan_plugin.experiments.tables.selectors import (check_carried_forward, cost_table,
                                                          development_table, selector_power_table,
                                                          selector_rows, verdict_table)

    where = root / "examples" / "everywhere"
    plan = Plan.load(where / "experiments.json", root)
    bench_plan = Plan.load(where / "bench_plan.json", root)
    rows = selector_rows(plan, "prenorm", "en-de", table="everywhere")
    check_carried_forward(plan, "prenorm", "en-de", (), 2, "postnorm", also=cross_alone_systems)
    en_ro = selector_rows(plan, "postnorm", "en-ro", table="everywhere")
    bench = sorted((where / "bench").glob("process.*.json")) if (where / "bench").is_dir() else []
    steps = where / "bench" / "steps.news.json"
    native = where / "bench" / "steps.native.news.json"  # bench_plan.json's study kernels
    return {"everywhere-verdicts": verdict_table(rows),
            "everywhere-power": selector_power_table(rows),
            "everywhere-rates": site_rates_table(plan, "prenorm", "en-de"),
            "everywhere-development": development_table(plan, "prenorm", "en-de", (), 2),
            "everywhere-en-ro-verdicts": verdict_table(en_ro),
            "everywhere-en-ro-power": selector_power_table(en_ro),
            "everywhere-en-ro-rates": site_rates_table(plan, "postnorm", "en-ro"),
            "everywhere-alignment": alignment_table(
                plan, "postnorm", "en-ro", peers=[where / "alignment" / f"{name}.ro-en.json"
                                                  for name in ("eflomal", "diagonal")]),
            "everywhere-alignment-gold-words": gold_words_table(
                where / "alignment" / "eflomal.ro-en.json"),
            "everywhere-alignment-verdicts": alignment_verdict_table(
                alignment_rows(plan, "postnorm", "en-ro")),
            "everywhere-alignment-reference": alignment_verdict_table(
                reference_rows(plan, "postnorm", "en-ro", where / "alignment" / "diagonal.ro-en.json")),
            "everywhere-cost": cost_table(bench, bench_plan.studies[0].systems, PROCESS_MEASURES,
                                          "examples/everywhere/bench/"),
            "everywhere-cost-goal": site_cost_goal_table(where / "bench" / "process.news.json",
                                                         steps if steps.is_file() else None),
            "everywhere-cost-steps": steps_table(steps) if steps.is_file() else
            "No paired-steps bench archived yet.",
            "everywhere-cost-steps-native": steps_table(native) if native.is_file() else
            "No paired-steps bench of the native kernel archived yet.",
            "everywhere-cost-goal-native": steps_goal_table(native) if native.is_file() else
            "No paired-steps bench of the native kernel archived yet."}


def variants_blocks(root: Path):
    """The efficiency study of examples/variants/README.md from its bench_encoder_layers.csv
    (benchmarks/bench_encoder_layers.py with its defaults, the last line of `make bench`)."""
    from ssan_plugin.experiments.tables.bench import layers_absolute_table, layers_growth

    path = root / "examples" / "variants" / "bench_encoder_layers.csv"
    lines = "\n".join(f"- {line}" for line in layers_growth(path))
    return {"variants-layers": f"{layers_absolute_table(path)}\n\n{lines}"}


def analysis_blocks(root: Path):
    """The analysis report (examples/analysis/archive/: run_analysis.sh's JSON files and its
    systems.json) and its models' scores from the translation archive."""
    from ssan_plugin.experiments.tables.analysis import analysis_blocks as blocks

    return blocks(root / "examples" / "analysis" / "archive",
                  root / "examples" / "translation" / "experiments")


FILES = {  # RESULTS file (relative to the root) -> its blocks
    "README.md": readme_blocks,
    "examples/srl/RESULTS.md": srl_blocks,
    "examples/translation/RESULTS.md": translation_blocks,
    "examples/stability/RESULTS.md": stability_blocks,
    "examples/pairs/RESULTS.md": pairs_blocks,
    "examples/selectors/RESULTS.md": selectors_blocks,
    "examples/everywhere/RESULTS.md": everywhere_blocks,
    "examples/analysis/RESULTS.md": analysis_blocks,
    "examples/variants/README.md": variants_blocks,
}


@script_main(prog="make_results.py")
def main(argv=None):
    from ssan_plugin.errors import InputError
    from ssan_plugin.experiments.tables.blocks import block_keys, fill_blocks

    ap = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help="change nothing; exit 1 when a generated block is out of date")
    ap.add_argument("--only", action="append", choices=list(FILES), metavar="FILE",
                    help=f"only this RESULTS file (repeat: several); one of {', '.join(FILES)}")
    ap.add_argument("--root", type=Path, default=ROOT, metavar="DIR",
                    help="the project copy whose archives are read and whose RESULTS files are "
                         "written (default: this checkout; the shared data is DIR/../shared)")
    args = ap.parse_args(argv)
    root = args.root.absolute()
    if not (root / "examples").is_dir():
        raise InputError(f"--root {args.root}: no examples/ folder there (not a copy of the "
                         f"project)")
    chosen = {name: make for name, make in FILES.items() if not args.only or name in args.only}
    stale, made = [], {}
    # every table is made before any file is written: a damaged archive changes nothing
    for name, make in tqdm(chosen.items(), desc="results", unit=" files", disable=None):
        path = root / name
        text = path.read_text(encoding="utf-8")
        blocks = make(root)
        unmade = [k for k in block_keys(text) if k not in blocks]
        if unmade:  # a table whose archive is gone would otherwise keep its old numbers
            print(f"make_results.py: {name}: nothing to regenerate {', '.join(unmade)} from "
                  f"(its archive is missing)", file=sys.stderr)
            return 1
        made[name] = (path, text, fill_blocks(text, blocks))
    for name, (path, text, new) in made.items():
        if new == text:
            continue
        if args.check:
            stale.append(name)
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(True), new.splitlines(True), f"{name} (committed)",
                f"{name} (regenerated)"))
        else:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {name}")
    if stale:
        print(f"make_results.py: out of date: {', '.join(stale)} (run scripts/make_results.py)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
