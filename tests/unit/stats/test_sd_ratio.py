"""significance.sd_ratio_interval: the ratio of two systems' seed spreads and its interval."""

import numpy as np
import pytest

from ssan_plugin.stats.significance import sd_ratio_interval, seeds_to_place_sd_ratio


def test_equal_spreads_of_six_seeds_give_the_tabled_f_interval():
    # F(5, 5) upper 2.5 % point is 7.146 (printed F tables); the interval for sigma ratios is
    # r / sqrt(F) .. r * sqrt(F) when both groups have the same size
    a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    r, low, high = sd_ratio_interval([x * 10 for x in a], a)
    assert r == pytest.approx(10.0)
    assert low == pytest.approx(10 / 7.146 ** 0.5, rel=1e-3)
    assert high == pytest.approx(10 * 7.146 ** 0.5, rel=1e-3)


def test_unequal_groups_take_each_groups_degrees_of_freedom():
    """Five system seeds, four baseline seeds: (s1^2 / sigma1^2) / (s2^2 / sigma2^2) is F(4, 3),
    so the interval is r / sqrt(F_0.975(4, 3)) .. r * sqrt(F_0.975(3, 4)), 15.10 and 9.979 in
    printed F tables; the degrees of freedom swapped would give other ends."""
    system, baseline = [1.0, 3.0, 2.0, 6.0, 4.0], [2.0, 2.5, 4.0, 3.0]
    r, low, high = sd_ratio_interval(system, baseline)
    assert r == pytest.approx(np.std(system, ddof=1) / np.std(baseline, ddof=1))
    assert low == pytest.approx(r / 15.10 ** 0.5, rel=1e-3)
    assert high == pytest.approx(r * 9.979 ** 0.5, rel=1e-3)


def test_ratio_is_of_sample_standard_deviations():
    system, baseline = [31.93, 33.04, 33.70, 32.33, 33.06], [32.01, 32.12, 32.53, 32.70]
    r, low, high = sd_ratio_interval(system, baseline)
    assert r == pytest.approx(np.std(system, ddof=1) / np.std(baseline, ddof=1))
    assert low < r < high


def test_interval_covers_the_true_ratio_about_as_often_as_it_says():
    rng = np.random.default_rng(7)
    sims, covered = 2000, 0
    for _ in range(sims):
        system = rng.normal(0.0, 2.0, size=6)
        baseline = rng.normal(5.0, 1.0, size=5)
        _, low, high = sd_ratio_interval(system, baseline)
        covered += low <= 2.0 <= high
    # binomial sd at 0.95 over 2000 draws is about 0.005
    assert 0.93 <= covered / sims <= 0.97


@pytest.mark.parametrize("system, baseline, level, message", [
    ([1.0], [1.0, 2.0], 0.95, "two seeds a side"),
    ([1.0, 2.0], [3.0, 3.0], 0.95, "all score the same"),
    ([1.0, 2.0], [1.0, 3.0], 1.0, "not between 0 and 1"),
])
def test_bad_input_is_refused(system, baseline, level, message):
    with pytest.raises(ValueError, match=message):
        sd_ratio_interval(system, baseline, level)


@pytest.mark.parametrize("ratio", [3.0, 0.5])
def test_seeds_to_place_a_ratio_against_simulation(ratio):
    """At the returned n, normal seeds with that true ratio give an interval wholly on the
    ratio's side of the goal about 80 % of the time (2,000 draws: binomial sd 0.009); at n - 1
    less often than 80 %."""
    n = seeds_to_place_sd_ratio(ratio, 1.5)
    assert n is not None and n > 2
    rng = np.random.default_rng(11)

    def placed(k, sims=2000):
        hits = 0
        for _ in range(sims):
            _, low, high = sd_ratio_interval(rng.normal(0, ratio, k), rng.normal(0, 1.0, k))
            hits += low > 1.5 if ratio > 1.5 else high < 1.5
        return hits / sims

    assert 0.77 <= placed(n) <= 0.84
    assert placed(n - 1) < 0.8


def test_seeds_to_place_a_ratio_near_the_goal_is_out_of_reach():
    assert seeds_to_place_sd_ratio(1.5, 1.5) is None
    assert seeds_to_place_sd_ratio(1.76, 1.5, most=100) is None  # hundreds of seeds
    assert 150 < seeds_to_place_sd_ratio(1.76, 1.5) < 400
    with pytest.raises(ValueError, match="must be positive"):
        seeds_to_place_sd_ratio(0.0, 1.5)
