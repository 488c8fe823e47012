"""Verdict and power tables: a group of seeds against its baseline group with the seed-level test
(``stats.significance.seed_level_test``; :func:`seed_comparison` builds the row), Holm's
correction over every comparison of a table (:func:`apply_holm`)."""

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar

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
    higher_is_better: bool = True  # False for an error rate (AER): a negative Δ is better
    tests: Optional[int] = None  # the size of the row's Holm family (set by apply_holm)

    @property
    def verdict(self) -> str:
        """``stats.seed_groups.verdict`` of the row's Holm-corrected test, 'better' / 'worse' in
        bold; empty before :func:`apply_holm`. Holm's step-down test can reject where the
        row's interval corrected over the same tests (Bonferroni, the table's column) still
        holds 0; a comparative word needs both, so such a row says so instead of 'better' or
        'worse' (SPLIT_VERDICT)."""
        if self.p_holm is None:
            return ""
        word = seed_groups.verdict({"p_holm": self.p_holm, "delta": self.result.delta},
                                   higher_is_better=self.higher_is_better)
        if word == "no difference shown":
            return word
        low, high = corrected_bounds(self.result, self.tests or 1)
        if low <= 0 <= high:
            return SPLIT_VERDICT
        return f"**{word}**"


# A row whose Holm-corrected p is below 0.05 while its corrected interval holds 0: no
# comparative word (the table's intervals do not exclude the null together).
SPLIT_VERDICT = "Holm's p below 0.05, but the corrected interval holds 0"


def apply_holm(rows: Sequence[Comparison]) -> None:
    """Holm over the rows of each table (``Comparison.table``)."""
    for table in sorted({r.table for r in rows}):
        family = [r for r in rows if r.table == table]
        for row, adjusted in zip(family, holm([r.result.p_value for r in family])):
            row.p_holm, row.tests = adjusted, len(family)


def seed_comparison(baseline_runs: Mapping[int, Run], system_runs: Mapping[int, Run],
                    stats_of: Callable[[Run], np.ndarray], score: ScoreFn, *, table: str,
                    label: str, system: str, baseline: str,
                    scored: Optional[Callable[[Run], float]] = None,
                    extra: Optional[Callable[[list, list], dict]] = None,
                    n_samples: int = 1000, seed: int = 12345,
                    higher_is_better: bool = True) -> Optional[Comparison]:
    """One row of a verdict table (p_holm unset: :func:`apply_holm` over the table's rows), or
    None with fewer than two seeds a side. ``baseline_runs`` / ``system_runs``: {seed: run};
    ``stats_of(run)``: its (N, k) per-item statistics, ``score`` maps their sum to the corpus
    score; the seed-level test over the seeds ascending, paired by seed when the system's seeds
    are among the baseline's (``baseline_scores`` then of those seeds only). ``scored(run)``:
    the score a row shows per seed (default ``score`` of its summed statistics);
    ``extra(baseline stats, system stats)``, the per-seed arrays in that order: the row's
    ``extra``; ``higher_is_better``: the score's direction (the verdict's words)."""
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
                      extra=described, higher_is_better=higher_is_better)


def mean_sd(values: Sequence[float], digits: int = 2) -> str:
    """``mean ± sd`` over seeds (sample standard deviation); one value as it is; none: —."""
    if not len(values):
        return "—"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{np.mean(values):.{digits}f} ± {np.std(values, ddof=1):.{digits}f}"


def corrected_header(tests: int) -> str:
    """The header of a verdict table's corrected-interval column."""
    return f"interval corrected over the {tests} tests (Bonferroni)"


def corrected_bounds(result, tests: int) -> Tuple[float, float]:
    """``result``'s interval of Δ at 1 - 0.05 / ``tests``: the table's intervals that hold
    together, what a comparative word about the table needs to exclude (SeedLevelResult.interval)."""
    return result.interval(1 - 0.05 / max(tests, 1))


def corrected_interval(result, tests: int, digits: int = 2) -> str:
    """:func:`corrected_bounds`, as the table prints it."""
    low, high = corrected_bounds(result, tests)
    return f"[{low:+.{digits}f}, {high:+.{digits}f}]"


def verdict_table(rows: Sequence[Comparison], metric: str = "BLEU") -> str:
    """Markdown: per comparison the seeds, both means ± sd over seeds, Δ with its seed-level
    95 % interval and its interval corrected over the table's tests, p and Holm-corrected p,
    per-seed deltas, how many share the sign, the verdict."""
    out = [f"| comparison | system | seeds | baseline {metric} | system {metric} | Δ [95% "
           f"interval, seeds and sentences] | {corrected_header(len(rows))} | p (seeds) | "
           f"p (Holm, {len(rows)} tests) | per-seed Δ | same sign | verdict |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        res = r.result
        low, high = res.ci
        per_seed = " ".join(f"{d:+.2f}" for d in res.per_seed) if res.per_seed else "unpaired"
        sign = f"{res.same_sign}/{len(res.per_seed)}" if res.per_seed else ""
        out.append(f"| {r.label} | {r.system} | {len(r.system_scores)} | "
                   f"{mean_sd(r.baseline_scores)} | {mean_sd(r.system_scores)} | "
                   f"{res.delta:+.2f} [{low:+.2f}, {high:+.2f}] | "
                   f"{corrected_interval(res, len(rows))} | {res.p_value:.3g} | "
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


def spread_ratio_table(rows: Sequence[Comparison], goal: float = 1.5, most: int = 1000,
                       alpha: float = 0.05) -> str:
    """Markdown: per comparison the seeds, the baseline's and the system's standard deviation
    over seeds, their ratio with its 95 % interval (``significance.sd_ratio_interval``: normal
    seed scores, F distribution) and with its interval corrected over the table's m
    comparisons (level 1 - ``alpha`` / m, Bonferroni: simultaneous for the m ratios), where the
    corrected interval lies against ``goal``, and how many seeds a side would place it at that
    level (80 % power, were the true ratio the one observed:
    ``significance.seeds_to_place_sd_ratio``; "> ``most``" beyond)."""
    from ...stats.significance import sd_ratio_interval, seeds_to_place_sd_ratio

    m = len(rows)
    level = 1 - alpha / m
    out = ["| comparison | system | seeds (baseline / system) | baseline sd | system sd | sd "
           f"ratio [95% interval] | interval corrected over the table's {m} comparisons "
           f"({1 - level:.3g} in the tails) | against the {goal:g}x goal (corrected interval) | "
           "seeds a side to place it (80 % power, corrected level, at the observed ratio) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = sd_ratio_interval(r.system_scores, r.baseline_scores)
        corrected = sd_ratio_interval(r.system_scores, r.baseline_scores, level=level)
        needed = seeds_to_place_sd_ratio(ratio[0], goal, level=level, most=most)
        out.append(f"| {r.label} | {r.system} | {len(r.baseline_scores)} / "
                   f"{len(r.system_scores)} | {np.std(r.baseline_scores, ddof=1):.2f} | "
                   f"{np.std(r.system_scores, ddof=1):.2f} | {ratio[0]:.2f} [{ratio[1]:.2f}, "
                   f"{ratio[2]:.2f}] | [{corrected[1]:.2f}, {corrected[2]:.2f}] | "
                   f"{spread_against_goal(corrected, goal)} | "
                   f"{needed if needed is not None else f'> {most}'} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- power
def power_of_seeds(n: int, effect: float, sd_seed: float, var_sentence: float,
                   alpha: float = 0.05) -> float:
    """Probability that the seed-level test over ``n`` paired seeds has p < ``alpha``
    (two-sided) when the true difference is ``effect``: t on n - 1 degrees of freedom,
    noncentrality ``effect / sqrt(sd_seed^2 / n + var_sentence)``. Computed as an integral
    over the chi distribution of the seeds' standard deviation (T = (Z + ncp) / (X / sqrt(df)),
    X ~ chi(df); Gauss-Legendre over the range that holds its mass), which stays accurate
    where scipy's noncentral t returns NaN (large noncentralities)."""
    from scipy.stats import chi, norm, t

    if n < 2:
        raise ValueError(f"the seed-level test needs two seeds or more, got {n}")
    se = np.sqrt(sd_seed ** 2 / n + var_sentence)
    if se <= 0:
        return 1.0 if effect != 0 else alpha
    df = n - 1
    crit = float(t.ppf(1 - alpha / 2, df))
    ncp = abs(effect) / se
    nodes, weights = _GAUSS_LEGENDRE
    centre = np.sqrt(df)
    low, high = max(0.0, centre - 12.0), centre + 12.0  # chi(df): sd below 0.71
    x = low + (high - low) * (nodes + 1) / 2
    s = crit * x / np.sqrt(df)
    rejected = (norm.sf(s - ncp) + norm.cdf(-s - ncp)) * chi.pdf(x, df)
    achieved = float(np.dot(weights, rejected) * (high - low) / 2)
    return min(1.0, max(0.0, achieved))


#: nodes and weights on [-1, 1] of :func:`power_of_seeds`'s integral
_GAUSS_LEGENDRE = np.polynomial.legendre.leggauss(400)


def seeds_for_power(effect: float, sd_seed: float, var_sentence: float, alpha: float = 0.05,
                    power: float = 0.8, most: int = 200) -> Optional[int]:
    """Fewest paired seeds n (>= 2) for which the seed-level test detects a true difference
    ``effect`` with probability ``power`` at ``alpha`` (two-sided; :func:`power_of_seeds`,
    which grows with n). None: more than ``most``."""
    if most < 2 or power_of_seeds(most, effect, sd_seed, var_sentence, alpha) < power:
        return None
    low, high = 2, most  # power(high) >= power; find the first n that reaches it
    while low < high:
        middle = (low + high) // 2
        if power_of_seeds(middle, effect, sd_seed, var_sentence, alpha) >= power:
            high = middle
        else:
            low = middle + 1
    return low


def holm_first_level(alpha: float, family: int) -> float:
    """The per-comparison level of Holm's first step over ``family`` comparisons: a verdict
    needs its Holm-corrected p below ``alpha``, which the smallest p of the family reaches
    only below ``alpha / family`` (later steps: alpha / (family - 1), ...; so this is the
    level a comparison must plan for when nothing else in its table is called first)."""
    if family < 1:
        raise ValueError(f"a family needs one comparison or more, got {family}")
    return alpha / family


def sentence_part_range(result, errors: float = 2.0) -> Tuple[float, float, float]:
    """(variance of the sentence part, and that variance ``errors`` Monte Carlo standard errors
    lower (not below 0) and higher): the bootstrap's own error, what another bootstrap seed
    moves it by (``SeedLevelResult.var_sentence_mc``; none known: no range)."""
    var = result.se_sentence ** 2
    mc = getattr(result, "var_sentence_mc", None) or 0.0
    return var, max(0.0, var - errors * mc), var + errors * mc


def _count(n: Optional[int], most: int) -> str:
    return str(n) if n is not None else f"> {most}"


def power_table(rows: Sequence[Comparison], family: int, effects=(0.5, 1.0),
                alpha: float = 0.05, power: float = 0.8, most: int = 200,
                with_power: bool = False, metric: str = "BLEU") -> str:
    """Markdown, one row per paired comparison: its seeds, the spread of its per-seed deltas
    and its sentence part (se, with the range of two Monte Carlo standard errors of its
    bootstrap, :func:`sentence_part_range`; and over the seed part, sd² / n), and per effect the seeds the seed-level test needs
    to see it with probability ``power`` at ``alpha`` unadjusted and at Holm's first step over
    the table's ``family`` comparisons (:func:`holm_first_level`), each with, in parentheses, the
    counts at the two ends of the sentence part's range when they differ; ``with_power``: also
    the power of the comparison's own seeds at both levels. A family of one comparison has one
    level, and one column per effect. A caption line above the table states the family and the
    level."""
    corrected = holm_first_level(alpha, family)
    level = f"{corrected:.3g}"
    levels = (alpha,) if family == 1 else (alpha, corrected)  # one comparison: no second level
    if family == 1:
        caption = f"Level: {alpha:g} (one comparison, no correction)."
    else:
        caption = (f"Per-comparison level: {alpha:g} unadjusted; {alpha:g} / {family} = {level} "
                   f"at Holm's first step over the verdict table's family of {family} comparisons "
                   f"(a verdict needs its Holm-corrected p below {alpha:g}: the family's smallest "
                   f"p must be below {level}, the next below {alpha:g} / {family - 1}, and so on).")
    caption += (f" Seeds: paired seeds a side for {power:.0%} power. In parentheses: the same "
                f"count with the sentence part two Monte Carlo standard errors of its bootstrap "
                f"lower and higher (another bootstrap seed moves it about that much).")

    def at(a: float, holm: bool = True) -> str:
        return f"{a:g}" if a == alpha else level + (f" (Holm, {family})" if holm else "")

    head = ["comparison", "system", "seeds measured", "sd of per-seed Δ",
            "sentence part: se (± 2 bootstrap errors)", "sentence part / seed part (variances)"]
    if with_power:
        for e in effects:
            head += [f"power of these seeds for {e:g} {metric} at {at(a, holm=False)}" for a in levels]
    for e in effects:
        head += [f"seeds for {e:g} {metric} at {at(a)}" for a in levels]
    out = [caption, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        res = r.result
        if not res.per_seed:
            continue
        n = len(res.per_seed)
        sd = float(np.std(res.per_seed, ddof=1))
        var, low, high = sentence_part_range(res)
        cells = [r.label, r.system, str(n), f"{sd:.2f}",
                 f"{np.sqrt(var):.2f}" + (f" ({np.sqrt(low):.2f} to {np.sqrt(high):.2f})"
                                         if high > low else ""),
                 f"{var / (sd * sd / n):.2f}" if sd > 0 else "—"]
        if with_power:
            for e in effects:
                cells += [f"{power_of_seeds(n, e, sd, var, a):.2f}" for a in levels]
        for e in effects:
            for a in levels:
                needed = [seeds_for_power(e, sd, v, a, power, most) for v in (var, low, high)]
                text = _count(needed[0], most)
                if len(set(needed)) > 1:
                    text += f" ({_count(needed[1], most)} to {_count(needed[2], most)})"
                cells.append(text)
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
