"""Verdict and power tables: a group of seeds against its baseline group with the seed-level test
(``stats.significance.seed_level_test``; :func:`seed_comparison` builds the row), Holm's
correction over every comparison of a table (:func:`apply_holm`)."""

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, TypeVar

import numpy as np

from ...stats import seed_groups
from ...stats.significance import ScoreFn, holm, seed_level_test

Run = TypeVar("Run")  # whatever names one archived run to a table's ``stats_of``


@dataclass
class Comparison:
    """One row of a verdict table: a group of seeds against its baseline group."""

    table: str  # rows of one table share Holm's correction
    label: str  # e.g. "pre-norm En-De"
    system: str
    baseline: str
    baseline_scores: List[float]
    system_scores: List[float]
    result: object  # significance.SeedLevelResult
    p_holm: Optional[float] = None
    extra: Dict[str, object] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """``stats.seed_groups.verdict`` of the row's Holm-corrected test, 'better' / 'worse' in
        bold; empty before :func:`apply_holm`."""
        if self.p_holm is None:
            return ""
        word = seed_groups.verdict({"p_holm": self.p_holm, "delta": self.result.delta})
        return word if word == "no difference shown" else f"**{word}**"


def apply_holm(rows: Sequence[Comparison]) -> None:
    """Holm over the rows of each table (``Comparison.table``)."""
    for table in sorted({r.table for r in rows}):
        family = [r for r in rows if r.table == table]
        for row, adjusted in zip(family, holm([r.result.p_value for r in family])):
            row.p_holm = adjusted


def seed_comparison(baseline_runs: Mapping[int, Run], system_runs: Mapping[int, Run],
                    stats_of: Callable[[Run], np.ndarray], score: ScoreFn, *, table: str,
                    label: str, system: str, baseline: str,
                    scored: Optional[Callable[[Run], float]] = None,
                    extra: Optional[Callable[[list, list], dict]] = None,
                    n_samples: int = 1000, seed: int = 12345) -> Optional[Comparison]:
    """One row of a verdict table (p_holm unset: :func:`apply_holm` over the table's rows), or
    None with fewer than two seeds a side. ``baseline_runs`` / ``system_runs``: {seed: run};
    ``stats_of(run)``: its (N, k) per-item statistics, ``score`` maps their sum to the corpus
    score; the seed-level test over the seeds ascending, paired by seed when the system's seeds
    are among the baseline's (``baseline_scores`` then of those seeds only). ``scored(run)``:
    the score a row shows per seed (default ``score`` of its summed statistics);
    ``extra(baseline stats, system stats)``, the per-seed arrays in that order: the row's
    ``extra``."""
    if len(baseline_runs) < 2 or len(system_runs) < 2:
        return None
    if scored is None:
        def scored(run):
            return score(stats_of(run).sum(0))
    b_seeds, s_seeds = sorted(baseline_runs), sorted(system_runs)
    b_stats = [stats_of(baseline_runs[s]) for s in b_seeds]
    s_stats = [stats_of(system_runs[s]) for s in s_seeds]
    result = seed_level_test(b_stats, s_stats, score, [str(s) for s in b_seeds],
                             [str(s) for s in s_seeds], n_samples, seed)
    described = {} if extra is None else extra(b_stats, s_stats)
    compared = [int(s) for s in result.baseline_seeds]
    return Comparison(table=table, label=label, system=system, baseline=baseline,
                      baseline_scores=[scored(baseline_runs[s]) for s in compared],
                      system_scores=[scored(system_runs[s]) for s in s_seeds], result=result,
                      extra=described)


def mean_sd(values: Sequence[float], digits: int = 2) -> str:
    """``mean ± sd`` over seeds (sample standard deviation); one value as it is; none: —."""
    if not len(values):
        return "—"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{np.mean(values):.{digits}f} ± {np.std(values, ddof=1):.{digits}f}"


def verdict_table(rows: Sequence[Comparison], metric: str = "BLEU") -> str:
    """Markdown: per comparison the seeds, both means ± sd over seeds, Δ with its seed-level
    95 % interval, p and Holm-corrected p, per-seed deltas, how many share the sign, the
    verdict."""
    out = [f"| comparison | system | seeds | baseline {metric} | system {metric} | Δ [95% "
           f"interval, seeds and sentences] | p (seeds) | p (Holm, {len(rows)} tests) | "
           f"per-seed Δ | same sign | verdict |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        res = r.result
        low, high = res.ci
        per_seed = " ".join(f"{d:+.2f}" for d in res.per_seed) if res.per_seed else "unpaired"
        sign = f"{res.same_sign}/{len(res.per_seed)}" if res.per_seed else ""
        out.append(f"| {r.label} | {r.system} | {len(r.system_scores)} | "
                   f"{mean_sd(r.baseline_scores)} | {mean_sd(r.system_scores)} | "
                   f"{res.delta:+.2f} [{low:+.2f}, {high:+.2f}] | {res.p_value:.3g} | "
                   f"{r.p_holm:.3g} | {per_seed} | {sign} | {r.verdict} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- spread
def spread_against_goal(ratio_interval, goal: float) -> str:
    """Where a spread ratio's interval lies against ``goal``: wholly below it, wholly above
    it, or across it (these seeds cannot tell)."""
    _, low, high = ratio_interval
    if high < goal:
        return f"within {goal:g}x"
    if low > goal:
        return f"above {goal:g}x"
    return "cannot tell at these seeds"


def spread_ratio_table(rows: Sequence[Comparison], goal: float = 1.5, most: int = 1000) -> str:
    """Markdown: per comparison the seeds, the baseline's and the system's standard deviation
    over seeds, their ratio with its 95 % interval (``significance.sd_ratio_interval``: normal
    seed scores, F distribution), where that interval lies against ``goal``, and how many seeds
    a side would place it (80 % power, were the true ratio the one observed:
    ``significance.seeds_to_place_sd_ratio``; "> ``most``" beyond)."""
    from ...stats.significance import sd_ratio_interval, seeds_to_place_sd_ratio

    out = ["| comparison | system | seeds (baseline / system) | baseline sd | system sd | sd "
           f"ratio [95% interval] | against the {goal:g}x goal | seeds a side to place it "
           "(80 % power, at the observed ratio) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = sd_ratio_interval(r.system_scores, r.baseline_scores)
        needed = seeds_to_place_sd_ratio(ratio[0], goal, most=most)
        out.append(f"| {r.label} | {r.system} | {len(r.baseline_scores)} / "
                   f"{len(r.system_scores)} | {np.std(r.baseline_scores, ddof=1):.2f} | "
                   f"{np.std(r.system_scores, ddof=1):.2f} | {ratio[0]:.2f} [{ratio[1]:.2f}, "
                   f"{ratio[2]:.2f}] | {spread_against_goal(ratio, goal)} | "
                   f"{needed if needed is not None else f'> {most}'} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- power
def seeds_for_power(effect: float, sd_seed: float, var_sentence: float, alpha: float = 0.05,
                    power: float = 0.8, most: int = 200) -> Optional[int]:
    """Fewest paired seeds n (>= 2) for which the seed-level test detects a true difference
    ``effect`` with probability ``power`` at ``alpha`` (two-sided): t on n - 1 degrees of
    freedom, noncentrality ``effect / sqrt(sd_seed^2 / n + var_sentence)``. None: more than
    ``most``."""
    from scipy.stats import nct, t

    for n in range(2, most + 1):
        se = np.sqrt(sd_seed ** 2 / n + var_sentence)
        crit = t.ppf(1 - alpha / 2, n - 1)
        ncp = effect / se
        achieved = nct.sf(crit, n - 1, ncp) + nct.cdf(-crit, n - 1, ncp)
        if achieved >= power:
            return n
    return None


def power_table(rows: Sequence[Comparison], effects=(0.5, 1.0)) -> str:
    """Seeds needed per comparison, from its measured per-seed spread and sentence part."""
    head = " | ".join(f"seeds for {e:g} BLEU" for e in effects)
    out = [f"| comparison | system | seeds measured | sd of per-seed Δ | sentence part (se) | "
           f"{head} |", "|---|---|---|---|---|" + "---|" * len(effects)]
    for r in rows:
        res = r.result
        if not res.per_seed:
            continue
        sd = float(np.std(res.per_seed, ddof=1))
        cells = []
        for e in effects:
            n = seeds_for_power(e, sd, res.se_sentence ** 2)
            cells.append(str(n) if n is not None else "> 200")
        out.append(f"| {r.label} | {r.system} | {len(res.per_seed)} | {sd:.2f} | "
                   f"{res.se_sentence:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(out)
