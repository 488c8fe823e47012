"""Seed spread of a study (``examples/stability``): per system its seeds' BLEU, best valid loss,
first-validation selection rates and largest gradient norms."""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

from .archives import archive_json, archived_record, archived_value, curve_records
from .blocks import ResultsError
from .translation import archived_runs


def first_validation(run_dir: Path) -> Dict[str, float]:
    """The first validation record of a run: ``update``, ``loss`` and the per-layer selection
    rates ``sel_0``, ``sel_1``, ... (absent for a run without selection)."""
    path = run_dir / "curve.jsonl"
    for number, record in enumerate(curve_records(run_dir), 1):
        if record.get("kind") == "valid":
            out = {"update": int(archived_record(path, number, record, "valid_num_updates")),
                   "loss": archived_record(path, number, record, "valid_loss")}
            out.update({k[len("valid_"):]: archived_record(path, number, record, k)
                        for k in record if re.fullmatch(r"valid_sel_\d+", k)})
            return out
    raise ResultsError(f"{run_dir}: no validation record in curve.jsonl")


@dataclass
class SeedSpread:
    """One system's seeds: test BLEU, best valid loss, the first validation's selection."""

    system: str
    seeds: List[int]
    bleu: List[float]
    valid_loss: List[float]
    first_sel: List[Dict[str, float]]
    max_gnorm: List[float]  # per seed, the largest logged gradient norm (interval means)

    def sd(self, values: Sequence[float]) -> float:
        return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def seed_spreads(plan, study: str, pair: str) -> List[SeedSpread]:
    """Every system of ``study`` on ``pair`` in the plan's archive, seeds ascending."""
    runs = archived_runs(plan).get((study, pair), {})
    out = []
    for system in plan.study(study).systems:
        by_seed = runs.get(system, {})
        if not by_seed:
            continue
        seeds = sorted(by_seed)
        bleu, loss, sel, gnorm = [], [], [], []
        for s in seeds:
            d = by_seed[s]
            bleu.append(archived_value(d / "test.json", "systems", 0, "bleu"))
            loss.append(archived_value(d / "train.json", "best_valid_loss"))
            sel.append(first_validation(d))
            norms = [archived_record(d / "curve.jsonl", k, r, "gnorm")
                     for k, r in enumerate(curve_records(d), 1)
                     if r.get("kind") != "valid" and "gnorm" in r]
            if not norms:
                raise ResultsError(f"{d / 'curve.jsonl'}: no training record with 'gnorm'")
            gnorm.append(max(norms))
        out.append(SeedSpread(system, seeds, bleu, loss, sel, gnorm))
    return out


def spread_table(spreads: Sequence[SeedSpread]) -> str:
    """Markdown: per system its seeds' BLEU and best valid loss (each seed, mean ± sd, sd as a
    multiple of the baseline's, the first system; for BLEU with its 95 % interval and where
    that lies against the 1.5x goal, ``verdicts.spread_against_goal``), at the first validation the lowest
    selection rate of any layer over the seeds, and each seed's largest logged gradient norm
    (a mean over a log interval, before clipping)."""
    from ...stats.significance import sd_ratio_interval
    from .verdicts import spread_against_goal

    base = spreads[0]
    out = ["| system | seeds | test BLEU per seed | BLEU mean ± sd | sd / baseline sd [95% "
           "interval], against the 1.5x goal | "
           "best valid loss mean ± sd | loss sd / baseline sd | first validation: lowest "
           "layer selection rate over seeds | largest gradient norm per seed |",
           "|---|---|---|---|---|---|---|---|---|"]
    for s in spreads:
        if s is base:
            ratio = "1"
        elif len(s.bleu) > 1 and len(base.bleu) > 1 and base.sd(base.bleu) > 0:
            interval = sd_ratio_interval(s.bleu, base.bleu)
            ratio = (f"{interval[0]:.2f} [{interval[1]:.2f}, {interval[2]:.2f}], "
                     f"{spread_against_goal(interval, 1.5)}")
        else:
            ratio = "—"
        loss_ratio = (s.sd(s.valid_loss) / base.sd(base.valid_loss)
                      if base.sd(base.valid_loss) > 0 else float("nan"))
        rates = [min(v for k, v in f.items() if k.startswith("sel_")) for f in s.first_sel
                 if any(k.startswith("sel_") for k in f)]
        first = (f"{min(rates):.2f} (update {s.first_sel[0]['update']})" if rates else
                 "— (no selection)")
        out.append(f"| {s.system} | {len(s.seeds)} | " + " ".join(f"{b:.2f}" for b in s.bleu)
                   + f" | {np.mean(s.bleu):.2f} ± {s.sd(s.bleu):.2f} | {ratio} | "
                   f"{np.mean(s.valid_loss):.3f} ± {s.sd(s.valid_loss):.3f} | {loss_ratio:.2f} "
                   f"| {first} | " + " ".join(f"{g:.3g}" for g in s.max_gnorm) + " |")
    return "\n".join(out)


def calibration_table(paths: Sequence[Path]) -> str:
    """Markdown, one row per output of ``scripts/calibrate_significance.py --seed-level --json
    calibration/SYSTEM.json`` (the system whose archived seeds it drew from): its seeds, the
    group size, the nulls and test sentences, and the share of nulls each test rejects at
    0.05 (the seed-level test's should be about 5 %)."""
    rows = ["| seeds of | seeds in the pool | groups of | nulls | test sentences | seed-level "
            "test: p < 0.05 | pooled sentence-level bootstrap: p < 0.05 |",
            "|---|---|---|---|---|---|---|"]
    for path in paths:
        run = archive_json(path)
        bleu = archived_value(path, "bleu", number=False, data=run)
        if not isinstance(bleu, (list, dict)) or not bleu:
            raise ResultsError(f"{path}: key 'bleu' must list the pool's seeds")
        size, nulls, sentences = (archived_value(path, k, data=run)
                                  for k in ("group_size", "nulls", "n_sentences"))
        seed_level, pooled = (archived_value(path, "rejection_rate", k, data=run)
                              for k in ("seed_level", "pooled_sentences"))
        rows.append(f"| {path.stem} | {len(bleu)} | {size} | {nulls} | {sentences} | "
                    f"{seed_level:.1%} | {pooled:.1%} |")
    return "\n".join(rows)
