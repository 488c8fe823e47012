"""ssan_plugin.experiments.tables.verdicts: the power calculation against a simulation of the test it plans
for, Holm per table, the verdict table's cells, and the row a seed-group comparison builds."""

import numpy as np
import pytest

from ssan_plugin.experiments.tables.verdicts import (
    Comparison,
    SPLIT_VERDICT,
    apply_holm,
    corrected_header,
    holm_first_level,
    power_of_seeds,
    power_table,
    seed_comparison,
    seeds_for_power,
    spread_against_goal,
    spread_ratio_table,
    verdict_table,
)
from ssan_plugin.stats.significance import SeedLevelResult


def simulated_power(n, effect, sd, alpha=0.05, trials=6000, seed=0):
    """Share of paired t-tests over n seeds (per-seed deltas ~ N(effect, sd)) with p < alpha."""
    from scipy.stats import ttest_1samp

    rng = np.random.default_rng(seed)
    deltas = rng.normal(effect, sd, (trials, n))
    return float(np.mean(ttest_1samp(deltas, 0, axis=1).pvalue < alpha))


@pytest.mark.parametrize("effect,sd", [(0.5, 0.44), (1.0, 0.71)])
def test_seeds_for_power_is_the_fewest_seeds_reaching_80_percent(effect, sd):
    n = seeds_for_power(effect, sd, 0.0)
    assert simulated_power(n, effect, sd) >= 0.78
    assert simulated_power(n - 1, effect, sd) < 0.80


@pytest.mark.parametrize("n, effect, sd, alpha", [(5, 1.0, 0.58, 0.05), (5, 1.0, 0.58, 0.05 / 8),
                                                  (20, 0.5, 0.5, 0.05 / 13)])
def test_power_of_seeds_is_the_simulated_rejection_rate(n, effect, sd, alpha):
    assert power_of_seeds(n, effect, sd, 0.0, alpha) == pytest.approx(
        simulated_power(n, effect, sd, alpha, trials=20000), abs=0.015)


@pytest.mark.parametrize("n", [2, 3, 6, 14, 45, 200])
@pytest.mark.parametrize("alpha", [0.05, 0.05 / 13])
def test_power_of_seeds_is_the_noncentral_t_wherever_scipy_computes_it(n, alpha):
    from scipy.stats import nct, t

    for effect, sd, var in ((0.5, 0.58, 0.04 ** 2), (1.0, 1.17, 0.09 ** 2), (0.2, 0.3, 0.0)):
        ncp = effect / np.sqrt(sd ** 2 / n + var)
        crit = t.ppf(1 - alpha / 2, n - 1)
        exact = nct.sf(crit, n - 1, ncp) + nct.cdf(-crit, n - 1, ncp)
        if np.isfinite(exact):
            assert power_of_seeds(n, effect, sd, var, alpha) == pytest.approx(exact, abs=1e-6)
    assert 0.999 < power_of_seeds(200, 1.0, 0.3, 0.0, 0.05 / 8) <= 1.0  # where nct gives NaN


def test_at_holms_first_step_more_seeds_are_needed():
    """A verdict needs its Holm-corrected p below 0.05: the first comparison of a family of m
    is called only below 0.05 / m, and planning at that level asks for more seeds."""
    assert holm_first_level(0.05, 13) == pytest.approx(0.05 / 13)
    assert holm_first_level(0.05, 1) == 0.05
    with pytest.raises(ValueError):
        holm_first_level(0.05, 0)
    plain = seeds_for_power(0.5, 0.58, 0.04 ** 2)
    corrected = seeds_for_power(0.5, 0.58, 0.04 ** 2, alpha=0.05 / 13)
    assert corrected > 1.6 * plain
    assert power_of_seeds(corrected, 0.5, 0.58, 0.04 ** 2, 0.05 / 13) >= 0.8
    assert power_of_seeds(corrected - 1, 0.5, 0.58, 0.04 ** 2, 0.05 / 13) < 0.8
    # five seeds of the pre-norm spread, 1 BLEU: about four times in five unadjusted, about
    # three times in ten at 0.05 / 8
    assert power_of_seeds(5, 1.0, 0.58, 0.04 ** 2) == pytest.approx(0.8, abs=0.05)
    assert power_of_seeds(5, 1.0, 0.58, 0.04 ** 2, 0.05 / 8) == pytest.approx(0.3, abs=0.07)


def test_power_table_states_its_family_and_both_levels_or_one_for_one_comparison():
    base, system = [32.0, 32.1, 32.5, 32.7, 32.6, 31.7], [31.9, 33.0, 33.7, 32.3, 33.1, 32.0]
    res = result(0.4, 0.16, list(np.subtract(system, base)))
    res.se_sentence, res.var_sentence_mc = 0.09, 0.004
    rows = [Comparison("t", "pre-norm En-De", "ssan_cap0", "baseline", base, system, res)]
    table = power_table(rows, family=13, with_power=True)
    caption, blank, head, rule, line = table.splitlines()
    assert "0.05 / 13 = 0.00385" in caption and "family of 13 comparisons" in caption
    assert blank == "" and rule == "|" + "---|" * 14
    assert "| seeds for 0.5 BLEU at 0.05 | seeds for 0.5 BLEU at 0.00385 (Holm, 13) |" in head
    assert "| power of these seeds for 1 BLEU at 0.00385 |" in head
    cells = [c.strip() for c in line.strip("|").split("|")]
    sd = float(np.std(res.per_seed, ddof=1))
    low, high = np.sqrt(0.09 ** 2 - 0.008), np.sqrt(0.09 ** 2 + 0.008)
    assert cells[:6] == ["pre-norm En-De", "ssan_cap0", "6", f"{sd:.2f}",
                         f"0.09 ({low:.2f} to {high:.2f})", f"{0.09 ** 2 / (sd * sd / 6):.2f}"]
    assert cells[7] == f"{power_of_seeds(6, 0.5, sd, 0.09 ** 2, 0.05 / 13):.2f}"
    needed = [seeds_for_power(0.5, sd, v, 0.05 / 13) for v in (0.09 ** 2, low ** 2, high ** 2)]
    def count(n):
        return str(n) if n is not None else "> 200"

    assert len(set(needed)) > 1  # the range moves the count
    assert cells[11] == f"{count(needed[0])} ({count(needed[1])} to {count(needed[2])})"
    res.var_sentence_mc = None  # no Monte Carlo error known: no range
    plain = power_table(rows, family=1, with_power=True).splitlines()
    assert "one comparison, no correction" in plain[0] and "Holm" not in plain[0]
    # one level: one power column and one seeds column per effect, none repeated
    head = [c.strip() for c in plain[2].strip("|").split("|")]
    assert head[6:] == ["power of these seeds for 0.5 BLEU at 0.05", "power of these seeds for 1 BLEU at 0.05",
                        "seeds for 0.5 BLEU at 0.05", "seeds for 1 BLEU at 0.05"]
    cells = [c.strip() for c in plain[4].strip("|").split("|")]
    assert len(cells) == len(head) and cells[4] == "0.09"
    assert cells[6] == f"{power_of_seeds(6, 0.5, sd, 0.09 ** 2, 0.05):.2f}"
    assert cells[9] == count(seeds_for_power(1.0, sd, 0.09 ** 2, 0.05))


def test_a_sentence_part_that_seeds_cannot_shrink_needs_more_seeds_or_never_enough():
    assert seeds_for_power(0.5, 0.44, 0.15 ** 2) > seeds_for_power(0.5, 0.44, 0.0)
    assert seeds_for_power(0.5, 0.1, 0.3 ** 2, most=50) is None  # se never below 0.3


def result(delta, p, per_seed):
    return SeedLevelResult(score=30 + delta, baseline=30.0, delta=delta, paired=True,
                           seeds=["1", "2", "3"], baseline_seeds=["1", "2", "3"],
                           per_seed=per_seed, same_sign=3, se=0.1, se_seed=0.1, se_sentence=0.0,
                           df=2.0, ci=(delta - 0.4, delta + 0.4), p_value=p, identical=False,
                           n_samples=100)


def test_holm_is_applied_within_each_table_and_the_verdict_follows_it():
    rows = [Comparison("t1", "x", "a", "b", [30.0] * 3, [31.0] * 3, result(1.0, 0.01, [1.0] * 3)),
            Comparison("t1", "x", "c", "b", [30.0] * 3, [30.5] * 3, result(0.5, 0.04, [0.5] * 3)),
            Comparison("t2", "y", "a", "b", [30.0] * 3, [29.0] * 3, result(-1.0, 0.04, [-1.0] * 3))]
    apply_holm(rows)
    assert [r.p_holm for r in rows] == pytest.approx([0.02, 0.04, 0.04])
    # the second row: Holm's p 0.04, but its interval corrected over two, 0.5 ± 6.205 * 0.1,
    # holds 0, so no comparative word; the third is alone in its table (interval at 0.95)
    assert [r.verdict for r in rows] == ["**better**", SPLIT_VERDICT, "**worse**"]
    assert rows[1].result.interval(1 - 0.05 / 2)[0] < 0 < rows[0].result.interval(1 - 0.05 / 2)[0]
    table = verdict_table(rows[:2])
    assert "p (Holm, 2 tests)" in table
    assert f"| {corrected_header(2)} |" in table.splitlines()[0]
    # corrected over the two tests: t(2) at 1 - 0.0125 is 6.205 (printed tables), times se 0.1
    assert "| x | a | 3 | 30.00 ± 0.00 | 31.00 ± 0.00 | +1.00 [+0.60, +1.40] | [+0.38, +1.62] | " \
           "0.01 | 0.02 | +1.00 +1.00 +1.00 | 3/3 | **better** |" in table
    # the 95 % interval from the same t: 4.303 (printed tables) times se
    assert rows[0].result.interval(0.95) == pytest.approx((1 - 0.4303, 1 + 0.4303), abs=1e-4)
    identical = result(0.0, 1.0, [0.0] * 3)
    identical.se = 0.0
    assert identical.interval(0.99) == (0.0, 0.0)


def test_spread_against_goal_reads_the_whole_interval():
    assert spread_against_goal((0.4, 0.13, 1.28), 1.5) == "within 1.5x"
    assert spread_against_goal((4.0, 1.6, 9.0), 1.5) == "above 1.5x"
    assert spread_against_goal((1.75, 0.65, 4.68), 1.5) == "cannot tell at these seeds"


def test_spread_ratio_table_cells():
    from ssan_plugin.stats.significance import seeds_to_place_sd_ratio

    base, system = [32.01, 32.12, 32.53, 32.70, 32.60, 31.69], [31.93, 33.04, 33.70, 32.33,
                                                                  33.06, 32.00]
    rows = [Comparison("t", "pre-norm En-De", "ssan_cap0", "baseline", base, system,
                       result(0.4, 0.16, list(np.subtract(system, base))))]
    line = spread_ratio_table(rows).splitlines()[2]
    ratio = np.std(system, ddof=1) / np.std(base, ddof=1)
    f = 7.146  # F(5, 5) upper 2.5 % point, from printed tables
    interval = f"[{ratio / f ** 0.5:.2f}, {ratio * f ** 0.5:.2f}]"
    assert line == (f"| pre-norm En-De | ssan_cap0 | 6 / 6 | {np.std(base, ddof=1):.2f} | "
                    f"{np.std(system, ddof=1):.2f} | {ratio:.2f} {interval} | {interval} | "
                    f"cannot tell at these seeds | {seeds_to_place_sd_ratio(ratio, 1.5)} |")
    assert spread_ratio_table(rows, most=5).splitlines()[2].endswith("| > 5 |")
    # five comparisons: every interval also at 1 - 0.05 / 5 (F(5, 5) upper 0.5 % point 14.94,
    # printed tables), the goal read on it and the seeds planned at that level
    table = spread_ratio_table(rows * 5)
    assert "interval corrected over the table's 5 comparisons (0.01 in the tails)" in table
    wide = 14.94
    assert table.splitlines()[2] == (
        f"| pre-norm En-De | ssan_cap0 | 6 / 6 | {np.std(base, ddof=1):.2f} | "
        f"{np.std(system, ddof=1):.2f} | {ratio:.2f} {interval} | [{ratio / wide ** 0.5:.2f}, "
        f"{ratio * wide ** 0.5:.2f}] | cannot tell at these seeds | "
        f"{seeds_to_place_sd_ratio(ratio, 1.5, level=0.99)} |")
    assert seeds_to_place_sd_ratio(ratio, 1.5, level=0.99) > seeds_to_place_sd_ratio(ratio, 1.5)


def test_seed_comparison_pairs_by_seed_and_shows_the_scores_of_the_seeds_compared():
    rng = np.random.default_rng(0)
    base = {3: rng.random((40, 1)), 1: rng.random((40, 1)), 2: rng.random((40, 1))}
    system = {2: rng.random((40, 1)) + 0.1, 1: rng.random((40, 1)) + 0.1}

    def score(sums):
        return float(sums[0]) / 40

    seen = []
    row = seed_comparison(base, system, lambda run: run, score, table="t", label="x",
                          system="s", baseline="b", n_samples=50,
                          extra=lambda b, s: seen.append((b, s)) or {"k": 1})
    assert (row.table, row.label, row.system, row.baseline) == ("t", "x", "s", "b")
    assert row.result.paired and row.result.seeds == ["1", "2"]
    assert row.result.baseline_seeds == ["1", "2"]  # seed 3 has no partner
    assert row.baseline_scores == [score(base[1].sum(0)), score(base[2].sum(0))]
    assert row.system_scores == [score(system[1].sum(0)), score(system[2].sum(0))]
    assert row.p_holm is None and row.extra == {"k": 1}
    ((b, s),) = seen  # every seed's statistics, seeds ascending
    assert [id(a) for a in b] == [id(base[k]) for k in (1, 2, 3)]
    assert [id(a) for a in s] == [id(system[k]) for k in (1, 2)]
    shown = seed_comparison(base, system, lambda run: run, score, table="t", label="x",
                            system="s", baseline="b", scored=lambda run: 7.0, n_samples=50)
    assert shown.baseline_scores == [7.0, 7.0] and shown.system_scores == [7.0, 7.0]
    assert shown.extra == {}


def test_seed_comparison_needs_two_seeds_a_side_and_reads_nothing_without():
    def unread(run):
        raise AssertionError("read")

    one, two = {1: "r1"}, {1: "r1", 2: "r2"}
    for base, system in ((one, two), (two, one)):
        assert seed_comparison(base, system, unread, unread, table="t", label="x", system="s",
                               baseline="b") is None
