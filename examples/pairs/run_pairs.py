#!/usr/bin/env python
"""Every encoder on SICK, from scratch and from translation encoders, several seeds: resumable.

    .venv/bin/python examples/pairs/run_pairs.py [--out runs/pairs] [--updates 1500] \
        [--encoders san,ssan,disan,biblosan,resa] [--seeds 1,2,3] [--targets entailment,relatedness] \
        [--inits scratch,translation --translation-data data-bin/multi30k_en_de \
         --translation-checkpoint san=CKPT --translation-checkpoint ssan=CKPT ...] [--dry-run]

Protocol (examples/pairs/README.md): SICK's TRAIN split here (4,439 pairs) is split once, by a
seeded shuffle, into train (all but --valid-pairs) and valid (--valid-pairs, default 500); SICK's
TRIAL split (495 pairs, ../shared/data/nli/sick/valid.tsv) is the test split, predicted once per
run with the checkpoint chosen on valid (best valid accuracy for entailment, lowest valid MSE
for relatedness). Every run has the same shape (pair_classifier_small, the *_small translation
models' encoder), flags and number of updates.

Resumable and sequential:
- one training at a time (a lock file refuses a second runner on the same --out);
- a run whose result is in the archive (below) is skipped;
- a killed run resumes: fairseq-train is started again on the same save dir and continues from
  its checkpoint_last.pt (saved every --save-interval updates); ``OUT/runs/NAME/TRAINED`` marks a
  finished training, so evaluation alone is redone when it was the step killed;
- results are written as they come, into the archive ``--archive`` (default
  ``examples/pairs/experiments``, committed, so that a fresh clone continues where the last
  session stopped; checkpoints stay in OUT): per run ``NAME/result.json`` (evaluate_pairs.py's
  JSON on the test split, plus the valid split's), ``NAME/{valid,test}.predictions.tsv`` and
  ``NAME/curve.jsonl`` (fairseq's train and valid records); ``summary.md`` (mean and standard
  deviation over seeds) rewritten after every run; per (target, init, seed) with two encoders or
  more archived, ``compare/TARGET_INIT_sSEED.json``: the encoders' test predictions compared with the
  first encoder's (``evaluate_pairs.py --pred``, paired bootstrap); every encoder archived for
  that target, init and seed takes part, also those of an earlier plan, and the comparison is
  redone when another one is archived; per (target, init), ``compare/pooled/TARGET_INIT.json``:
  every encoder over the seeds all of them have, compared as groups ``ENC@SEED`` (the seed mean
  against the first encoder's, paired bootstrap with seeds pooled).
With ``--dry-run`` the commands are printed, nothing is run.
"""

import json
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script: the plugin package from this checkout
from ssan_plugin.cli.arguments import positive_int
from ssan_plugin.experiments.arguments import add_run_options, name_list_arg, runner_parser, seed_list
from ssan_plugin.experiments.archive import (
    Run,
    RunFailed,
    execute,
    locked,
    log,
    run_command,
    write_atomic,
)

PY = sys.executable
FAIRSEQ_TRAIN = str(Path(PY).parent / "fairseq-train")
SICK = ROOT.parent / "shared" / "data" / "nli" / "sick"
ENCODERS = ("san", "ssan", "disan", "biblosan", "resa")

MODEL = ["--arch", "pair_classifier_small", "--dropout", "0.1", "--pair-pooling", "source2token"]
OPTIM = ["--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", "0.0005",
         "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "200", "--clip-norm", "1.0",
         "--batch-size", "32", "--required-batch-size-multiple", "1"]
BEST = {"entailment": ["--best-checkpoint-metric", "accuracy", "--maximize-best-checkpoint-metric"],
        "relatedness": ["--best-checkpoint-metric", "mse"]}
HEADLINE = {"entailment": ("entailment", "accuracy"), "relatedness": ("relatedness", "pearson")}


def split_sick(out: Path, valid_pairs: int, seed: int = 1):
    """OUT/raw/{train,valid,test}.tsv: SICK TRAIN split by a seeded shuffle, TRIAL as test."""
    raw = out / "raw"
    if (raw / "test.tsv").exists():
        return raw
    raw.mkdir(parents=True, exist_ok=True)
    lines = (SICK / "train.tsv").read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], lines[1:]
    held = set(random.Random(seed).sample(range(len(rows)), valid_pairs))
    write_atomic(raw / "train.tsv", "\n".join([header] + [r for i, r in enumerate(rows)
                                                          if i not in held]) + "\n")
    write_atomic(raw / "valid.tsv", "\n".join([header] + [r for i, r in enumerate(rows)
                                                          if i in held]) + "\n")
    write_atomic(raw / "test.tsv", (SICK / "valid.tsv").read_text(encoding="utf-8"))
    log(f"split SICK TRAIN into {len(rows) - valid_pairs} train / {valid_pairs} valid pairs; "
        f"TRIAL is the test split -> {raw}")
    return raw


def prepare(raw: Path, dest: Path, extra, dry):
    if (dest / "manifest.json").exists():
        return
    run_command([PY, "-m", "ssan_plugin.commands.prepare_pairs", "--format", "sick", "--train", raw / "train.tsv",
                 "--valid", raw / "valid.tsv", "--test", raw / "test.tsv", "--dest", dest,
                 "--overwrite", *extra], dry_run=dry)


def comparison_rows(archive: Path):
    """Markdown rows from ARCHIVE/compare/*.json: per comparison and system the headline test
    metric, its difference from the first system and the paired bootstrap p-value."""
    rows = []
    for path in sorted((archive / "compare").glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        for name, system in result["systems"].items():
            head = "entailment" if "entailment" in system else "relatedness"
            metric = HEADLINE[head][1]
            test = result["comparisons"].get(name, {}).get(metric)
            delta = "(first)" if test is None else f"{test['delta']:+.4g}"
            p_value = "" if test is None else f"{test['p_value']:.3g}"
            rows.append(f"| {path.stem} | {name} | {metric} {system[head][metric]:.4g} | "
                        f"{delta} | {p_value} |")
    return rows


def pooled_rows(archive: Path):
    """Markdown rows from ARCHIVE/compare/pooled/*.json: per (target, init) and encoder the
    headline test metric's mean over seeds and, against the first encoder, the seed-level test
    (the verdict; Holm over every comparison of these rows) and the pooled bootstrap's
    sentence-level p (these seeds held fixed)."""
    from ssan_plugin.stats.seed_groups import seed_level_cells, verdict
    from ssan_plugin.stats.significance import holm

    found = []
    for path in sorted((archive / "compare" / "pooled").glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        for group in result["groups"]:
            metric = "accuracy" if "accuracy" in group["mean"] else "pearson"
            test = group.get("comparison", {}).get(metric)
            found.append((path.stem, group, metric, test,
                          dict((test or {}).get("seed_level") or {})))
    tested = [entry for *_, test, entry in found if test is not None and entry]
    for entry, adjusted in zip(tested, holm([e["p"] for e in tested])):
        entry["p_holm"] = adjusted
    rows = []
    for stem, group, metric, test, entry in found:
        head = (f"| {stem} | {group['name']} | {group['n_seeds']} | {metric} "
                f"{group['mean'][metric]:.4g} |")
        if test is None:
            rows.append(head + " (first) | | | | | | |")
            continue
        rows.append(head + " " + " | ".join(seed_level_cells(entry, 4)) +
                    f" | {verdict(entry)} | {test['p_value']:.3g} |")
    return rows


def summarise(archive: Path):
    """ARCHIVE/summary.md: per (target, init, encoder) mean and sd over seeds of the headline
    test metric (and the valid one), from every ARCHIVE/*/result.json; then the pooled
    comparisons (:func:`pooled_rows`) and the per-seed ones (:func:`comparison_rows`)."""
    groups = {}
    for path in sorted(archive.glob("*/result.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        head, metric = HEADLINE[result["target"]]
        values = (result["test"][head][metric], result["valid"][head][metric])
        groups.setdefault((result["target"], result["init"], result["encoder"]), []).append(values)
    if not groups:
        return
    lines = ["| target | init | encoder | seeds | test metric (mean ± sd) | valid metric (mean) |",
             "|---|---|---|---|---|---|"]
    for (target, init, encoder), members in sorted(groups.items()):
        test = [t for t, _ in members]
        valid = [v for _, v in members]
        sd = statistics.stdev(test) if len(test) > 1 else 0.0
        metric = HEADLINE[target][1]
        lines.append(f"| {target} | {init} | {encoder} | {len(members)} | {metric} "
                     f"{statistics.mean(test):.4g} ± {sd:.2g} | {statistics.mean(valid):.4g} |")
    pooled = pooled_rows(archive)
    if pooled:
        lines += ["", "Test split, seed groups: each encoder's mean over seeds against the "
                  "first encoder's; the verdict is the seed-level test (Holm over these rows); "
                  "the last column is the pooled bootstrap over test pairs with these seeds held "
                  "fixed, a description of these seeds only:", "",
                  "| comparison | encoder | seeds | test metric (mean) | Δ [95% seed-level "
                  "interval] | p (seeds) | p (Holm) | per-seed Δ | same sign | verdict | "
                  "p (sentences, seeds fixed) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|", *pooled]
    compared = comparison_rows(archive)
    if compared:
        lines += ["", "Test split, per seed, each encoder against the first of its comparison "
                  "(paired bootstrap over test pairs, two-sided, ties counted: a description of "
                  "that seed, never a verdict):", "",
                  "| comparison | system | test metric | Δ | p (sentences, this seed) |",
                  "|---|---|---|---|---|", *compared]
    write_atomic(archive / "summary.md", "\n".join(lines) + "\n")


def pair_run(target, init, encoder, seed, args, data, translation) -> Run:
    """One run of the plan: train, predict valid and test with the best checkpoint."""
    name = f"{target}_{init}_{encoder}_s{seed}"

    def train(save):
        command = [FAIRSEQ_TRAIN, data[init], "--user-dir", "ssan_plugin", "--cpu",
                   "--task", "sentence_pair", "--pair-target", target,
                   *MODEL, "--pair-encoder", encoder,
                   "--criterion", "sentence_pair_loss", *OPTIM,
                   *BEST[target], "--max-update", args.updates, "--seed", seed,
                   "--save-dir", save, "--no-epoch-checkpoints",
                   "--save-interval-updates", args.save_interval,
                   "--keep-interval-updates", 1, "--log-format", "json",
                   "--log-interval", 50, "--num-workers", 0]
        if init == "translation":
            command += ["--encoder-init", translation[encoder]]
        return command

    def evaluate(save):
        return [[PY, "-m", "ssan_plugin.commands.evaluate_pairs", "--data", data[init], "--checkpoint",
                 f"{name}={save / 'checkpoint_best.pt'}", "--subset", subset, "--json",
                 save / f"{subset}.json", "--predictions", save / f"{subset}.predictions.tsv",
                 "--cpu", "--overwrite"] for subset in ("valid", "test")]  # resumed: again

    def result(save):
        out = {"target": target, "init": init, "encoder": encoder, "seed": seed,
               "updates": args.updates}
        for subset in ("valid", "test"):
            system = json.loads((save / f"{subset}.json").read_text())["systems"][name]
            system.pop("checkpoint", None)
            system.pop("predictions", None)
            out[subset] = system
        return out

    skip = (f"no --translation-checkpoint {encoder}=..."
            if init == "translation" and encoder not in translation else None)
    return Run(name=name, train=train, evaluate=evaluate, result=result,
               keep=("valid.predictions.tsv", "test.predictions.tsv"), skip_reason=skip)


def main(argv=None):
    ap = runner_parser(__doc__)
    add_run_options(ap, out="runs/pairs", archive=ROOT / "examples" / "pairs" / "experiments")
    ap.add_argument("--encoders", default=",".join(ENCODERS),
                    type=name_list_arg(ENCODERS, "encoder"))
    ap.add_argument("--seeds", default="1,2,3", type=seed_list)
    ap.add_argument("--targets", default="entailment,relatedness", type=name_list_arg(BEST, "target"))
    ap.add_argument("--inits", default="scratch",
                    type=name_list_arg(("scratch", "translation"), "init"))
    ap.add_argument("--updates", type=positive_int, default=1500)
    ap.add_argument("--save-interval", type=positive_int, default=250)
    ap.add_argument("--valid-pairs", type=positive_int, default=500)
    ap.add_argument("--vocab-size", type=positive_int, default=4000,
                    help="scratch data's sentencepiece")
    ap.add_argument("--translation-data", type=Path,
                    help="the translation data-bin the --translation-checkpoint models used")
    ap.add_argument("--translation-checkpoint", action="append", default=[], metavar="ENC=CKPT")
    args = ap.parse_args(argv)

    encoders = args.encoders
    inits = args.inits
    translation = dict(spec.split("=", 1) for spec in args.translation_checkpoint)
    if "translation" in inits and not args.translation_data:
        ap.error("--inits translation needs --translation-data and --translation-checkpoint ENC=CKPT")

    out, archive = args.out, args.archive
    with locked(out, "run_pairs.py"):
        raw = split_sick(out, args.valid_pairs) if not args.dry_run else out / "raw"
        data = {"scratch": out / "data" / "scratch", "translation": out / "data" / "translation"}
        if "scratch" in inits:
            prepare(raw, data["scratch"], ["--vocab-size", args.vocab_size], args.dry_run)
        if "translation" in inits:
            prepare(raw, data["translation"], ["--translation-data", args.translation_data],
                    args.dry_run)
        plan = [(t, i, e, s) for t in args.targets for i in inits
                for e in encoders for s in args.seeds]
        runs = [pair_run(*spec, args, data, translation) for spec in plan]
        env = {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}

        def after_each(archive):
            compare_seeds(archive, plan, data, env)
            compare_pooled(archive, plan, data, env)
            summarise(archive)

        try:
            execute(runs, out, archive, env, args.dry_run, after_each)
        except RunFailed as err:
            raise SystemExit(str(err)) from None
    log(f"all runs done; {archive / 'summary.md'}")


def compare_predictions(json_out: Path, systems, data_dir: Path, env) -> None:
    """evaluate_pairs.py --pred of ``systems`` [(name, test.predictions.tsv)], the first the
    baseline -> ``json_out``; nothing when ``json_out`` already compares exactly these names."""
    names = [name for name, _ in systems]
    if json_out.exists() and list(json.loads(json_out.read_text(encoding="utf-8"))["systems"]) == names:
        return
    json_out.parent.mkdir(parents=True, exist_ok=True)
    preds = [a for name, path in systems for a in ("--pred", f"{name}={path}")]
    run_command([PY, "-m", "ssan_plugin.commands.evaluate_pairs", "--data", data_dir, *preds,
                 "--subset", "test", "--json", json_out, "--overwrite"], env=env)


def compare_seeds(archive: Path, plan, data, env):
    """Per (target, init, seed) of the plan: every encoder archived for it (the plan's and those
    of earlier plans, in ENCODERS order, so san is the baseline whenever it is there) compared,
    paired bootstrap against the first -> ARCHIVE/compare/TARGET_INIT_sSEED.json; rewritten
    when the set of archived encoders changed."""
    for target, init, seed in dict.fromkeys((t, i, s) for t, i, _, s in plan):
        runs = [(e, archive / f"{target}_{init}_{e}_s{seed}") for e in ENCODERS]
        systems = [(e, run / "test.predictions.tsv") for e, run in runs
                   if (run / "result.json").exists()]
        if len(systems) >= 2:
            compare_predictions(archive / "compare" / f"{target}_{init}_s{seed}.json", systems,
                                data[init], env)


def compare_pooled(archive: Path, plan, data, env):
    """Per (target, init) of the plan: every encoder archived for every seed that all of them
    share (at least two encoders, two seeds) compared as groups ENC@SEED, seeds pooled
    -> ARCHIVE/compare/pooled/TARGET_INIT.json; rewritten when the set of systems changed."""
    for target, init in dict.fromkeys((t, i) for t, i, _, _ in plan):
        seeds = {e: {int(p.parent.name.rsplit("_s", 1)[1]) for p in
                     archive.glob(f"{target}_{init}_{e}_s*/result.json")} for e in ENCODERS}
        encoders = [e for e in ENCODERS if seeds[e]]
        common = sorted(set.intersection(*(seeds[e] for e in encoders))) if encoders else []
        if len(encoders) < 2 or len(common) < 2:
            continue
        systems = [(f"{e}@{s}", archive / f"{target}_{init}_{e}_s{s}" / "test.predictions.tsv")
                   for e in encoders for s in common]
        compare_predictions(archive / "compare" / "pooled" / f"{target}_{init}.json", systems,
                            data[init], env)


if __name__ == "__main__":
    main()
