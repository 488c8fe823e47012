#!/usr/bin/env python
"""SRL taggers on EWT, several encoders and seeds, same budget: resumable, results archived.

    .venv/bin/python examples/srl/run_srl.py [--out runs/srl] [--config small] \
        [--flags "--srl-predicate-distance 10"] [--encoders san,ssan] [--seeds 1,2,3] \
        [--updates 4000] [--validate-interval 500] [--dry-run]

Data: ../shared/data/srl/ewt/{train,dev}.gold_conll, prepared once into OUT/data by
scripts/prepare_srl.py. EWT has no test split here: validation on dev chooses
``checkpoint_best.pt`` by span F1 (``--best-checkpoint-metric f1``), and dev F1 is reported,
so the numbers are optimistic for every system alike. Each run: ``srl_tagger_small`` with
``--srl-encoder ENC`` and the ``--flags`` of the configuration, ``--max-update --updates``,
validation (dev F1, the learning curve) and a checkpoint every ``--validate-interval`` updates;
then scripts/evaluate_srl.py decodes dev with the best checkpoint.

Archive (``--archive``, default examples/srl/experiments, committed; built on
ssan_plugin.run_archive, so a fresh clone skips archived runs and a killed run resumes):
per run ``CONFIG_ENC_sSEED/result.json`` (overall P/R/F1 and counts, the flags),
``dev.pred.props.gz`` and ``curve.jsonl`` (fairseq's train and valid records, valid ``f1``
included); ``summary.md`` (mean ± sd of dev F1 over seeds) after every run; per (config,
seed) with every encoder archived, ``compare/CONFIG_sSEED.json``: evaluate_srl.py's paired
bootstrap of each encoder against the first on the archived props.
"""

import argparse
import json
import shlex
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script: the plugin package from this checkout
from ssan_plugin.run_archive import (Run, RunFailed, execute, locked, log,  # noqa: E402
                                     run_command, write_atomic)

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
    if not (dest / "manifest.json").exists():
        run_command([PY, "scripts/prepare_srl.py", "--format", "conll2012", "--train",
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
                "--save-interval-updates", args.validate_interval, "--keep-interval-updates", 1,
                "--log-format", "json", "--log-interval", 100, "--num-workers", 0]

    def evaluate(save):
        return [[PY, "scripts/evaluate_srl.py", "--data", data, "--checkpoint",
                 save / "checkpoint_best.pt", "--subset", "valid", "--gold-props",
                 save / "dev.gold.props", "--pred-props", save / "dev.pred.props.gz",
                 "--json", save / "dev.json", "--cpu"]]

    def result(save):
        scores = json.loads((save / "dev.json").read_text())
        return {"config": config, "flags": list(map(str, flags)), "encoder": encoder,
                "seed": seed, "updates": args.updates, "dev": scores["overall"],
                "propositions": scores.get("propositions")}

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
    write_atomic(archive / "summary.md", "\n".join(lines) + "\n")


def compare_seeds(archive: Path, config: str, encoders, seeds, gold: Path, env) -> None:
    """Per seed with every encoder archived: evaluate_srl.py --pred-props (paired bootstrap
    against the first encoder) -> ARCHIVE/compare/CONFIG_sSEED.json."""
    for seed in seeds:
        names = [f"{config}_{e}_s{seed}" for e in encoders]
        out = archive / "compare" / f"{config}_s{seed}.json"
        if len(names) < 2 or out.exists() or not all(
                (archive / n / "result.json").exists() for n in names):
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        systems = []
        for encoder, name in zip(encoders, names):
            systems += ["--pred-props", f"{encoder}={archive / name / 'dev.pred.props.gz'}"]
        run_command([PY, "scripts/evaluate_srl.py", "--gold-props", gold, *systems,
                     "--json", out], env=env)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/srl", type=Path, help="data, checkpoints (not kept)")
    ap.add_argument("--archive", default=ROOT / "examples" / "srl" / "experiments", type=Path)
    ap.add_argument("--raw", default=EWT, type=Path, help="directory of {train,dev}.gold_conll")
    ap.add_argument("--config", default="small", help="name of this configuration (run names)")
    ap.add_argument("--flags", default="", help="extra fairseq-train flags of the configuration")
    ap.add_argument("--encoders", default="san,ssan")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--updates", type=int, default=4000)
    ap.add_argument("--validate-interval", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of each training")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)

    encoders = args.encoders.split(",")
    unknown = set(encoders) - set(ENCODERS)
    if unknown:
        ap.error(f"unknown encoder(s) {', '.join(sorted(unknown))}")
    if not args.config.replace("-", "").replace(".", "").isalnum():
        ap.error(f"--config {args.config!r}: letters, digits, '-' and '.' only (a run-name prefix)")
    seeds = [int(s) for s in args.seeds.split(",")]
    flags = shlex.split(args.flags)
    out, archive = args.out, args.archive
    env = {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    with locked(out, "run_srl.py"):
        data = prepare(args.raw, out / "data", args.dry_run)
        runs = [srl_run(args.config, flags, e, s, args, data) for s in seeds for e in encoders]

        def after_each(archive):
            summarise(archive)
            compare_seeds(archive, args.config, encoders, seeds, data / "valid.props", env)

        try:
            execute(runs, out, archive, env, args.dry_run, after_each)
        except RunFailed as err:
            raise SystemExit(str(err)) from None
    log(f"all runs done; {archive / 'summary.md'}")


if __name__ == "__main__":
    main()
