#!/usr/bin/env python
"""SRL taggers on EWT, several encoders and seeds, same budget: resumable, results archived.

    .venv/bin/python examples/srl/run_srl.py [--out runs/srl] [--config small] \
        [--flags "--srl-predicate-distance 10"] [--encoders san,ssan] [--seeds 1,2,3] \
        [--updates 4000] [--validate-interval 500] [--average-last N] [--dry-run]

Data: ../shared/data/srl/ewt/{train,dev}.gold_conll, prepared once into OUT/data by
ssan-prepare-srl. EWT has no test split here: validation on dev chooses
``checkpoint_best.pt`` by span F1 (``--best-checkpoint-metric f1``), and dev F1 is reported,
so the numbers are optimistic for every system alike. Each run: ``srl_tagger_small`` with
``--srl-encoder ENC`` and the ``--flags`` of the configuration, ``--max-update --updates``,
validation (dev F1, the learning curve) and a checkpoint every ``--validate-interval`` updates;
then ssan-evaluate-srl decodes dev with the best checkpoint, or with ``--average-last N``
with the average of the last N interval checkpoints (ssan-average-checkpoints; the best
one is scored as well, ``dev_best`` in result.json).

Archive (``--archive``, default examples/srl/experiments, committed; built on
ssan_plugin.experiments.archive, so a fresh clone skips archived runs and a killed run resumes):
per run ``CONFIG_ENC_sSEED/result.json`` (overall P/R/F1 and counts, the flags),
``dev.pred.props.gz`` and ``curve.jsonl`` (fairseq's train and valid records, valid ``f1``
included); per (config, seed) with every encoder archived, ``compare/CONFIG_sSEED.json``:
evaluate_srl.py's paired bootstrap of each encoder against the first on the archived props;
``compare/pooled/CONFIG.json``: the same over every such seed, pooled (ENC@SEED names);
``summary.md`` (mean ± sd of dev F1 over seeds, and the pooled comparisons) and
``curves.png`` (dev F1 against updates, every run, a panel per configuration) after every run.
"""

import json
import shlex
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script: the plugin package from this checkout
from ssan_plugin.cli.arguments import nonnegative_int, positive_int
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
EWT = ROOT.parent / "shared" / "data" / "srl" / "ewt"
ENCODERS = ("san", "ssan", "disan", "biblosan", "resa")
TRAINING = ["--arch", "srl_tagger_small", "--dropout", "0.1", "--criterion", "srl_cross_entropy",
            "--report-accuracy", "--optimizer", "adam", "--adam-betas", "(0.9,0.98)",
            "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "400",
            "--max-tokens", "4096", "--best-checkpoint-metric", "f1",
            "--maximize-best-checkpoint-metric"]


def prepare(raw: Path, dest: Path, dry: bool) -> Path:
    """The data directory, prepared again if missing or from before characters existed."""
    if not (dest / "manifest.json").exists() or not (dest / "dict.chars.txt").exists():
        run_command([PY, "-m", "ssan_plugin.commands.prepare_srl", "--format", "conll2012", "--train",
                     raw / "train.gold_conll", "--valid", raw / "dev.gold_conll", "--dest", dest],
                    dry_run=dry)
    return dest


def srl_run(config: str, flags, encoder: str, seed: int, args, data: Path) -> Run:
    name = f"{config}_{encoder}_s{seed}"

    def train(save):
        return [FAIRSEQ_TRAIN, data, "--user-dir", "ssan_plugin", "--cpu", "--task", "srl",
                *TRAINING, "--srl-encoder", encoder, *flags, "--seed", seed,
                "--max-update", args.updates, "--save-dir", save, "--no-epoch-checkpoints",
                "--validate-interval-updates", args.validate_interval,
                "--save-interval-updates", args.validate_interval,
                "--keep-interval-updates", max(1, args.average_last),
                "--log-format", "json", "--log-interval", 100, "--num-workers", 0]

    def score(save, checkpoint, props, report):
        return [PY, "-m", "ssan_plugin.commands.evaluate_srl", "--data", data, "--checkpoint", checkpoint,
                "--subset", "valid", "--gold-props", save / "dev.gold.props", "--pred-props",
                props, "--json", report, "--cpu", "--overwrite"]  # a resumed run: scored again

    def evaluate(save):
        if not args.average_last:
            return [score(save, save / "checkpoint_best.pt", save / "dev.pred.props.gz",
                          save / "dev.json")]
        # the reported checkpoint is the average of the last N interval checkpoints; the
        # best-on-dev one is scored as well, for the comparison (result "dev_best")
        average = save / f"checkpoint_avg{args.average_last}.pt"
        return [[PY, "-m", "ssan_plugin.commands.average_checkpoints", "--last", args.average_last, save,
                 "--kind", "update", "--output", average, "--overwrite"],
                score(save, average, save / "dev.pred.props.gz", save / "dev.json"),
                score(save, save / "checkpoint_best.pt", save / "dev.best.props",
                      save / "dev.best.json")]

    def result(save):
        scores = json.loads((save / "dev.json").read_text())
        out = {"config": config, "flags": list(map(str, flags)), "encoder": encoder,
               "seed": seed, "updates": args.updates, "dev": scores["overall"],
               "propositions": scores.get("propositions"), "checkpoint": "best"}
        if args.average_last:
            out["checkpoint"] = (f"average of the last {args.average_last} checkpoints, "
                                 f"every {args.validate_interval} updates")
            out["dev_best"] = json.loads((save / "dev.best.json").read_text())["overall"]
        return out

    return Run(name=name, train=train, evaluate=evaluate, result=result,
               keep=("dev.pred.props.gz",))


def summarise(archive: Path) -> None:
    """ARCHIVE/summary.md: per (config, encoder) dev F1 mean ± sd over seeds."""
    groups = {}
    for path in sorted(archive.glob("*/result.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        groups.setdefault((r["config"], r["encoder"]), []).append(r)
    if not groups:
        return
    lines = ["| config | encoder | seeds | updates | dev P | dev R | dev F1 (mean ± sd) |",
             "|---|---|---|---|---|---|---|"]
    for (config, encoder), runs in sorted(groups.items()):
        f1 = [r["dev"]["f1"] for r in runs]
        sd = statistics.stdev(f1) if len(f1) > 1 else 0.0
        p = statistics.mean(r["dev"]["precision"] for r in runs)
        rec = statistics.mean(r["dev"]["recall"] for r in runs)
        updates = ",".join(sorted({str(r["updates"]) for r in runs}))
        lines.append(f"| {config} | {encoder} | {len(runs)} | {updates} | {p:.2f} | {rec:.2f} | "
                     f"{statistics.mean(f1):.2f} ± {sd:.2f} |")
    write_atomic(archive / "summary.md", "\n".join(lines) + "\n" + pooled_table(archive))


def compare_props_files(out: Path, systems, gold: Path, env) -> None:
    """evaluate_srl.py --pred-props of ``systems`` [(name, props file)], the first the
    baseline -> ``out``; nothing when ``out`` already compares exactly these names."""
    names = [name for name, _ in systems]
    if out.exists() and [s["name"] for s in json.loads(out.read_text())["systems"]] == names:
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    preds = [a for name, path in systems for a in ("--pred-props", f"{name}={path}")]
    run_command([PY, "-m", "ssan_plugin.commands.evaluate_srl", "--gold-props", gold, *preds, "--json", out,
                 "--overwrite"], env=env)


def compare_seeds(archive: Path, config: str, encoders, seeds, gold: Path, env) -> None:
    """Per seed with every encoder archived: evaluate_srl.py --pred-props (paired bootstrap
    against the first encoder) -> ARCHIVE/compare/CONFIG_sSEED.json."""
    for seed in seeds:
        runs = [(e, archive / f"{config}_{e}_s{seed}") for e in encoders]
        if len(runs) < 2 or not all((run / "result.json").exists() for _, run in runs):
            continue
        compare_props_files(archive / "compare" / f"{config}_s{seed}.json",
                            [(e, run / "dev.pred.props.gz") for e, run in runs], gold, env)


def compare_pooled(archive: Path, config: str, encoders, gold: Path, env) -> None:
    """Every seed with every encoder archived, pooled: evaluate_srl.py --pred-props ENC@SEED
    (each encoder's seed-mean F1 against the first's, paired bootstrap resampling the same
    sentences for every seed) -> ARCHIVE/compare/pooled/CONFIG.json, redone when seeds join."""
    if len(encoders) < 2:
        return
    seeds = sorted({int(p.parent.name.rsplit("_s", 1)[1])
                    for p in archive.glob(f"{config}_{encoders[0]}_s*/result.json")})
    seeds = [seed for seed in seeds if all(
        (archive / f"{config}_{e}_s{seed}" / "result.json").exists() for e in encoders)]
    if seeds:
        compare_props_files(archive / "compare" / "pooled" / f"{config}.json",
                            [(f"{e}@{seed}", archive / f"{config}_{e}_s{seed}" / "dev.pred.props.gz")
                             for e in encoders for seed in seeds], gold, env)


def pooled_table(archive: Path) -> str:
    """Markdown of every compare/pooled/CONFIG.json: seed-mean F1 ± sd and, against the first
    encoder, the seed-level test (the verdict; Holm over every comparison of this table) and the
    sentence-level p of the pooled bootstrap (these seeds only)."""
    from ssan_plugin.stats.seed_groups import seed_level_cells, verdict
    from ssan_plugin.stats.significance import holm

    rows = []
    for path in sorted((archive / "compare" / "pooled").glob("*.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        for k, g in enumerate(report.get("groups", [])):
            rows.append((path.stem, k, g, dict(g.get("seed_level") or {})))
    if not rows:
        return ""
    tested = [entry for _, k, _, entry in rows if k and entry]
    for entry, adjusted in zip(tested, holm([e["p"] for e in tested])):
        entry["p_holm"] = adjusted
    lines = []
    for config, k, g, entry in rows:
        head = f"| {config} | {g['name']} | {g['n_seeds']} | {g['mean']['f1']:.2f} ± {g['std']['f1']:.2f} |"
        if k == 0:
            lines.append(head + " (baseline) | | | | | | |")
            continue
        lines.append(head + " " + " | ".join(seed_level_cells(entry)) +
                     f" | {verdict(entry)} | {g['p_value']:.3f} |")
    return ("\nSeeds pooled (dev F1 mean ± sd; against the first encoder the seed-level test, "
            f"the verdict, Holm over the {len(tested)} comparisons of this table; the last "
            "column is the pooled bootstrap over sentences with these seeds held fixed, a "
            "description of these seeds only):\n\n"
            "| config | encoder | seeds | dev F1 | Δ F1 [95% seed-level interval] | p (seeds) | "
            "p (Holm) | per-seed Δ | same sign | verdict | p (sentences, seeds fixed) |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n")


def plot_curves(archive: Path) -> None:
    """ARCHIVE/curves.png: dev F1 against updates, one line per archived run (from its
    curve.jsonl valid records), one panel per configuration, four panels a row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = {}
    for path in sorted(archive.glob("*/curve.jsonl")):
        points = []
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record["kind"] == "valid" and "valid_f1" in record:
                points.append((int(float(record["valid_num_updates"])), float(record["valid_f1"])))
        config = json.loads((path.parent / "result.json").read_text(encoding="utf-8"))["config"]
        curves.setdefault(config, []).append((path.parent.name, sorted(points)))
    if not curves:
        return
    cols = min(4, len(curves))
    rows = -(-len(curves) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.4 * rows), squeeze=False,
                             sharey=True)
    for ax in axes.flat[len(curves):]:
        ax.set_visible(False)
    for ax, (config, runs) in zip(axes.flat, sorted(curves.items())):
        for name, points in runs:
            ax.plot([u for u, _ in points], [f for _, f in points], marker=".",
                    label=name[len(config) + 1:])
        ax.set_title(config)
        ax.set_xlabel("updates")
        ax.set_ylabel("dev span F1")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    tmp = archive / "curves.tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(archive / "curves.png")


def main(argv=None):
    ap = runner_parser(__doc__)
    add_run_options(ap, out="runs/srl", archive=ROOT / "examples" / "srl" / "experiments")
    ap.add_argument("--raw", default=EWT, type=Path, help="directory of {train,dev}.gold_conll")
    ap.add_argument("--config", default="small", help="name of this configuration (run names)")
    ap.add_argument("--flags", default="", help="extra fairseq-train flags of the configuration")
    ap.add_argument("--encoders", default="san,ssan", type=name_list_arg(ENCODERS, "encoder"))
    ap.add_argument("--seeds", default="1,2,3", type=seed_list)
    ap.add_argument("--updates", type=positive_int, default=4000)
    ap.add_argument("--validate-interval", type=positive_int, default=500)
    ap.add_argument("--average-last", type=nonnegative_int, default=0, metavar="N",
                    help="report the average of the last N interval checkpoints (kept while "
                         "training; ssan-average-checkpoints) instead of the best one; "
                         "the best is scored too (result.json dev_best). 0: the best only")
    args = ap.parse_args(argv)

    encoders = args.encoders
    if not args.config.replace("-", "").replace(".", "").isalnum():
        ap.error(f"--config {args.config!r}: letters, digits, '-' and '.' only (a run-name prefix)")
    if args.average_last * args.validate_interval > args.updates:
        ap.error(f"--average-last {args.average_last} checkpoints every "
                 f"{args.validate_interval} updates need more than --updates {args.updates}")
    seeds = args.seeds
    flags = shlex.split(args.flags)
    out, archive = args.out, args.archive
    env = {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    with locked(out, "run_srl.py"):
        data = prepare(args.raw, out / "data", args.dry_run)
        runs = [srl_run(args.config, flags, e, s, args, data) for s in seeds for e in encoders]

        def after_each(archive):
            compare_seeds(archive, args.config, encoders, seeds, data / "valid.props", env)
            compare_pooled(archive, args.config, encoders, data / "valid.props", env)
            summarise(archive)
            plot_curves(archive)

        try:
            execute(runs, out, archive, env, args.dry_run, after_each)
        except RunFailed as err:
            raise SystemExit(str(err)) from None
    log(f"all runs done; {archive / 'summary.md'}")


if __name__ == "__main__":
    main()
