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
    multiple of the baseline's, the first system; for BLEU with its 95 % interval, its interval
    corrected over the table's m ratios (level 1 - 0.05 / m, Bonferroni) and where the corrected
    one lies against the 1.5x goal, ``verdicts.spread_against_goal``), at the first validation
    the lowest selection rate of any layer over the seeds, and each seed's largest logged
    gradient norm (a mean over a log interval, before clipping)."""
    from ...stats.significance import sd_ratio_interval
    from .verdicts import spread_against_goal

    base = spreads[0]
    m = sum(1 for s in spreads if s is not base and len(s.bleu) > 1 and len(base.bleu) > 1
            and base.sd(base.bleu) > 0)
    level = 1 - 0.05 / max(m, 1)
    out = ["| system | seeds | test BLEU per seed | BLEU mean ± sd | sd / baseline sd [95% "
           f"interval]; corrected over the table's {m} ratios ({1 - level:.3g} in the tails), "
           "against the 1.5x goal | "
           "best valid loss mean ± sd | loss sd / baseline sd | first validation: lowest "
           "layer selection rate over seeds | largest gradient norm per seed |",
           "|---|---|---|---|---|---|---|---|---|"]
    for s in spreads:
        if s is base:
            ratio = "1"
        elif len(s.bleu) > 1 and len(base.bleu) > 1 and base.sd(base.bleu) > 0:
            interval = sd_ratio_interval(s.bleu, base.bleu)
            corrected = sd_ratio_interval(s.bleu, base.bleu, level=level)
            ratio = (f"{interval[0]:.2f} [{interval[1]:.2f}, {interval[2]:.2f}]; corrected "
                     f"[{corrected[1]:.2f}, {corrected[2]:.2f}], "
                     f"{spread_against_goal(corrected, 1.5)}")
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


def calibration_stats(path: Path, run: dict, root: Path):
    """(per-seed sentence statistics, score function) of the hypotheses a ``--seed-level``
    calibration archive names (its ``ref`` and ``hyp``, relative to ``root``), scored as the
    script scores them (sacreBLEU, the archive's ``tokenize``, default 13a) and checked: each
    seed's BLEU is the one the archive holds."""
    from sacrebleu.metrics import BLEU

    from ...stats.significance import sacrebleu_score_fn, sacrebleu_stats
    from ...translation.textio import read_lines

    ref = archived_value(path, "ref", number=False, data=run)
    hyps = archived_value(path, "hyp", number=False, data=run)
    bleu = archived_value(path, "bleu", number=False, data=run)
    if not isinstance(hyps, list) or not isinstance(bleu, list) or len(hyps) != len(bleu):
        raise ResultsError(f"{path}: keys 'hyp' and 'bleu' must list the pool's seeds, one "
                           f"BLEU a file")
    for name in [ref, *hyps]:
        if not (Path(root) / name).is_file():
            raise ResultsError(f"{path}: {name} is missing (the calibration's inputs)")
    refs = read_lines(Path(root) / ref)
    metric = BLEU(tokenize=run.get("tokenize", "13a"))
    score = sacrebleu_score_fn(metric)
    stats = []
    for k, name in enumerate(hyps):
        lines = read_lines(Path(root) / name)
        if len(lines) != len(refs):
            raise ResultsError(f"{path}: {name} has {len(lines)} lines, {ref} {len(refs)}")
        stats.append(sacrebleu_stats(metric, lines, refs))
        archived = archived_value(path, "bleu", k, data=run)
        if abs(score(stats[-1].sum(0)) - archived) > 1e-6:
            raise ResultsError(f"{path}: {name} scores {score(stats[-1].sum(0)):.4f} BLEU, the "
                               f"archive {archived:.4f}")
    return stats, score


def _share(rate: float, nulls: int) -> str:
    return f"{round(rate * nulls)} of {nulls} ({rate:.1%})"


def calibration_table(paths: Sequence[Path], root: Path) -> str:
    """Markdown, one row per output of ``scripts/calibrate_significance.py --seed-level --json
    calibration/SYSTEM.json`` (the system whose archived seeds it drew from): its seeds, the
    group size, the number of distinct nulls those seeds make (``calibration.seed_splits``),
    the test sentences, and how many of the distinct nulls each test rejects at the archive's
    level (the seed-level test's share should be about that level). An archive of the earlier
    calibration, which drew its ``nulls`` at random with repeats, is recomputed here over the
    distinct nulls from the hypotheses it names (:func:`calibration_stats`, its resamples and
    level), and its own draws are shown beside: how many, how many distinct among them
    (``calibration.drawn_splits``), and its rates over the draws."""
    from ...stats.calibration import drawn_splits, seed_level_null_rates
    from ...stats.significance import DEFAULT_SEED

    rows = ["| seeds of | seeds in the pool | groups of | distinct nulls | test sentences | "
            "seed-level test: p < 0.05 | pooled sentence-level bootstrap: p < 0.05 | the "
            "first calibration's draws (with repeats): draws (distinct), seed-level, pooled |",
            "|---|---|---|---|---|---|---|---|"]
    for path in paths:
        run = archive_json(path)
        bleu = archived_value(path, "bleu", number=False, data=run)
        if not isinstance(bleu, list) or not bleu:
            raise ResultsError(f"{path}: key 'bleu' must list the pool's seeds")
        size, sentences, samples, alpha = (archived_value(path, k, data=run) for k in
                                           ("group_size", "n_sentences", "samples", "alpha"))
        if alpha != 0.05:
            raise ResultsError(f"{path}: alpha must be 0.05, the level this table reports")
        seed = int(archived_value(path, "seed", data=run)) if "seed" in run else DEFAULT_SEED
        if "distinct_splits" in run:  # every distinct null once per test set
            distinct, nulls = (int(archived_value(path, k, data=run))
                               for k in ("distinct_splits", "nulls"))
            rates = [archived_value(path, "rejection_rate", k, data=run)
                     for k in ("seed_level", "pooled_sentences")]
            draws = "—"
        else:  # drawn at random with repeats: recomputed over the distinct nulls
            stats, score = calibration_stats(path, run, root)
            if stats[0].shape[0] != sentences:
                raise ResultsError(f"{path}: {stats[0].shape[0]} sentences, the archive "
                                   f"says {sentences}")
            fresh = seed_level_null_rates(stats, score, int(size), 1, int(samples), alpha, seed)
            distinct, nulls = fresh["distinct_splits"], fresh["nulls"]
            rates = [fresh["rejection_rate"][k] for k in ("seed_level", "pooled_sentences")]
            drawn = int(archived_value(path, "nulls", data=run))
            seen = len(set(drawn_splits(len(bleu), int(size), drawn, int(sentences), seed)))
            old = [archived_value(path, "rejection_rate", k, data=run)
                   for k in ("seed_level", "pooled_sentences")]
            draws = f"{drawn} ({seen}), {old[0]:.1%}, {old[1]:.1%}"
        per_split = f" x {nulls // distinct}" if nulls != distinct else ""
        rows.append(f"| {path.stem} | {len(bleu)} | {int(size)} | {distinct}{per_split} | "
                    f"{int(sentences)} | {_share(rates[0], nulls)} | {_share(rates[1], nulls)} | "
                    f"{draws} |")
    return "\n".join(rows)
