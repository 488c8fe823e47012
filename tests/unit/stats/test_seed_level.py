"""ssan_plugin.stats.significance.seed_level_test and holm: the seed as the unit of evidence.

Checked against direct formulas (the standard error of a mean-type metric in closed form, Holm
by hand), for calibration under a hierarchical null where seeds AND test sentences are random
(ssan_plugin.stats.calibration: the seed-level test rejects about 5 %; the sentence-level
pooled bootstrap and a t-test over the per-seed deltas alone do not), and for its edge cases (identical outputs p = 1, one
seed refused, unpaired groups)."""

import numpy as np
import pytest

from ssan_plugin.stats.calibration import (
    SCENARIOS,
    drawn_splits,
    hierarchical_null,
    mean_score,
    seed_level_null_rates,
    seed_splits,
    simulated_null_rates,
    split_key,
    stats_of,
    summarise_parts,
    variance_parts,
)
from ssan_plugin.stats.significance import (
    almost_stochastic_order,
    holm,
    seed_level_test,
)


def seeds(n):
    return [str(s) for s in range(1, n + 1)]


def test_standard_error_matches_the_closed_form():
    """For a mean-type metric: seed part = s^2/n of the per-seed deltas; sentence part =
    (1/N) x the mean over seed pairs s != t of cov_i(d_is, d_it), d_is the per-sentence
    difference of seed s (what the seeds share across sentences)."""
    rng = np.random.default_rng(0)
    base, sys_ = hierarchical_null(rng, 5, n_sentences=400)
    result = seed_level_test(base, sys_, mean_score, seeds(5), seeds(5), n_samples=4000, seed=1)
    per_seed = np.array([mean_score(s.sum(0)) - mean_score(b.sum(0)) for b, s in zip(base, sys_)])
    d = 100 * np.array([s[:, 0] - b[:, 0] for b, s in zip(base, sys_)])  # (seeds, N)
    cov = np.cov(d, bias=True)
    shared = (cov.sum() - np.trace(cov)) / (5 * 4)
    assert result.paired and result.per_seed == pytest.approx(list(per_seed))
    assert result.delta == pytest.approx(per_seed.mean())
    assert result.se_seed == pytest.approx(np.sqrt(np.var(per_seed, ddof=1) / 5), rel=1e-12)
    assert result.se_sentence == pytest.approx(np.sqrt(shared / 400), rel=0.08)
    assert result.se == pytest.approx(np.hypot(result.se_seed, result.se_sentence))
    assert result.same_sign == int(np.sum(np.sign(per_seed) == np.sign(per_seed.mean())))
    # the seeds' degrees of freedom (n - 1, paired; the sentence part adds none) and the 95 %
    # interval Δ ± t(0.975, 4) se, t(0.975, 4) = 2.776 (printed tables)
    assert result.df == 4
    assert result.ci == pytest.approx((result.delta - 2.776 * result.se, result.delta + 2.776 * result.se),
                                      abs=1e-3 * result.se)
    assert result.interval(0.95) == pytest.approx(result.ci)
    # at 1 - 0.05 / 5 (five tests): t(0.995, 4) = 4.604 (printed tables)
    assert result.interval(0.99) == pytest.approx(
        (result.delta - 4.604 * result.se, result.delta + 4.604 * result.se), abs=1e-3 * result.se)


def test_identical_outputs_keep_p_one():
    rng = np.random.default_rng(1)
    base, _ = hierarchical_null(rng, 3)
    result = seed_level_test(base, [b.copy() for b in base], mean_score, seeds(3), seeds(3), 200)
    assert result.identical and result.delta == 0 and result.p_value == 1.0
    assert result.ci == (0.0, 0.0)


def test_a_real_difference_is_found_and_the_p_follows_student_t():
    from scipy.stats import t as student

    rng = np.random.default_rng(2)
    base, _ = hierarchical_null(rng, 6, n_sentences=300)
    better = [stats_of(np.maximum(b[:, 0], rng.random(300) < 0.15)) for b in base]
    result = seed_level_test(base, better, mean_score, seeds(6), seeds(6), 1000)
    assert result.delta > 5 and result.p_value < 0.001 and result.same_sign == 6
    assert result.p_value == pytest.approx(2 * student.sf(result.delta / result.se, result.df))


def test_unpaired_groups_and_a_subset_of_seeds():
    rng = np.random.default_rng(3)
    base, sys_ = hierarchical_null(rng, 6)
    # other seed names: unpaired (Welch), no per-seed deltas
    unpaired = seed_level_test(base[:4], sys_[:3], mean_score, seeds(4), ["7", "8", "9"], 500)
    assert not unpaired.paired and unpaired.per_seed is None and unpaired.same_sign is None
    expected = np.mean([mean_score(s.sum(0)) for s in sys_[:3]]) - \
        np.mean([mean_score(b.sum(0)) for b in base[:4]])
    assert unpaired.delta == pytest.approx(expected)
    # Welch by hand: the seed part s_sys^2 / 3 + s_base^2 / 4 and Welch-Satterthwaite's df over
    # it (the sentence part adds no degrees of freedom)
    sys_scores = np.array([mean_score(s.sum(0)) for s in sys_[:3]])
    base_scores = np.array([mean_score(b.sum(0)) for b in base[:4]])
    v_sys, v_base = np.var(sys_scores, ddof=1) / 3, np.var(base_scores, ddof=1) / 4
    assert unpaired.se_seed == pytest.approx(np.sqrt(v_sys + v_base), rel=1e-12)
    assert unpaired.df == pytest.approx((v_sys + v_base) ** 2 / (v_sys ** 2 / 2 + v_base ** 2 / 3))
    assert unpaired.se == pytest.approx(np.hypot(unpaired.se_seed, unpaired.se_sentence))
    # the sentence part in closed form: what the two groups' means share across sentences,
    # C_sys,sys + C_base,base - 2 C_sys,base (C: the mean covariance over sentences of two
    # different seeds' per-sentence scores, over N); large samples for a closed-form check
    big_base, big_sys = hierarchical_null(np.random.default_rng(3), 6, n_sentences=400,
                                          **SCENARIOS["sentences dominate"])
    wide = seed_level_test(big_base[:4], big_sys[:3], mean_score, seeds(4), ["7", "8", "9"], 4000,
                           seed=2)
    x_sys = 100 * np.array([s[:, 0] for s in big_sys[:3]])
    x_base = 100 * np.array([b[:, 0] for b in big_base[:4]])

    def shared(a, b=None):
        if b is None:
            cov = np.cov(a, bias=True)
            return (cov.sum() - np.trace(cov)) / (len(a) * (len(a) - 1))
        return np.mean([np.cov(u, v, bias=True)[0, 1] for u in a for v in b])

    n = x_sys.shape[1]
    closed = (shared(x_sys) + shared(x_base) - 2 * shared(x_sys, x_base)) / n
    # within three Monte Carlo errors of the bootstrap's own estimate, an error small here
    assert wide.var_sentence_mc < 0.05 * closed
    assert abs(wide.se_sentence ** 2 - closed) < 3 * wide.var_sentence_mc
    # the system's seeds are among the baseline's: paired on those, against those
    subset = seed_level_test(base, sys_[:3], mean_score, seeds(6), seeds(3), 500)
    assert subset.paired and subset.baseline_seeds == seeds(3)
    assert subset.baseline == pytest.approx(np.mean([mean_score(b.sum(0)) for b in base[:3]]))


def test_bad_input():
    a = stats_of([0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="at least 2 seeds per group"):
        seed_level_test([a], [a, a], mean_score, ["1"], ["1", "2"])
    with pytest.raises(ValueError, match="twice"):
        seed_level_test([a, a], [a, a], mean_score, ["1", "1"], ["1", "2"])
    with pytest.raises(ValueError, match="different sentence sets"):
        seed_level_test([a, a], [a, stats_of([0.1])], mean_score, ["1", "2"], ["1", "2"])
    with pytest.raises(ValueError, match="one seed name per"):
        seed_level_test([a, a], [a, a], mean_score, ["1"], ["1", "2"])


@pytest.mark.parametrize("n_seeds", [3, 6])
def test_calibration_at_seed_level(n_seeds):
    """No true difference, seeds and test sentences random, the sentence part a fifth of the
    seed part (as in the project's runs): the seed-level test rejects at 0.05 about 5 % of the
    time (400 nulls: binomial standard error 1.1 points). On the same nulls the sentence-level
    pooled bootstrap (seeds held fixed) rejects far more often."""
    rates = simulated_null_rates(n_seeds, "seeds dominate", n_nulls=400, n_samples=200,
                                 seed=100 + n_seeds)
    assert 0.02 <= rates["seed_level"] <= 0.08, rates
    assert rates["pooled_sentences"] > 0.15, rates


def test_calibration_when_the_test_set_matters():
    """Systems that differ strongly sentence by sentence (equal on average): a t-test over the
    per-seed deltas alone (test set held fixed) over-rejects; the seed-level test, whose
    sentence part covers the test set's draw, does not."""
    rates = simulated_null_rates(6, "sentences dominate", n_nulls=400, n_samples=200, seed=7)
    assert rates["seed_level"] <= 0.07, rates
    assert rates["seeds_only"] > 0.12, rates


def test_simulated_nulls_follow_their_scenario():
    """hierarchical_null against its definition: 0/1 outcomes, paired seeds of one test set;
    with every spread at zero but the interaction, each system's per-sentence success
    probability is difficulty -/+ half the interaction, so the two systems' mean scores over
    many seeds agree (no true difference) while single sentences differ."""
    rng = np.random.default_rng(11)
    base, sys_ = hierarchical_null(rng, 4, n_sentences=50)
    assert len(base) == len(sys_) == 4
    assert all(b.shape == (50, 2) and set(np.unique(b[:, 0])) <= {0.0, 1.0} for b in base)
    rng = np.random.default_rng(12)
    base, sys_ = hierarchical_null(rng, 400, n_sentences=200, seed_sd=0, shared_sd=0,
                                   interaction_sd=0.3)
    per_sentence = np.mean([s[:, 0] - b[:, 0] for b, s in zip(base, sys_)], axis=0)
    assert abs(per_sentence.mean()) < 0.02  # equal on average
    assert per_sentence.std() > 0.15  # but not sentence by sentence
    with pytest.raises(ValueError, match="scenario must be one of"):
        simulated_null_rates(3, "no such scenario", n_nulls=1)
    with pytest.raises(ValueError, match="n_seeds must be >= 2"):
        simulated_null_rates(1, n_nulls=1)


def test_holm_against_the_definition():
    p = [0.01, 0.04, 0.03, 0.005, 0.5]
    # sorted: 0.005 (x5), 0.01 (x4), 0.03 (x3), 0.04 (x2), 0.5 (x1), running maximum, capped at 1
    assert holm(p) == pytest.approx([0.04, 0.09, 0.09, 0.025, 0.5])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []
    for adjusted, raw in zip(holm(p), p):
        assert adjusted >= raw


def test_almost_stochastic_order_reads_the_direction():
    base = [30.0, 30.5, 29.8, 30.2, 30.1, 29.9]
    better = [x + 2 for x in base]
    assert almost_stochastic_order(base, better) < 0.2  # the system dominates
    assert almost_stochastic_order(better, base) > 0.8


def test_the_same_sentence_multisets_for_every_seed():
    """Both groups are scored on one sentence multiset per resample: with a system equal to the
    baseline plus a constant on every sentence, the sentence part vanishes."""
    rng = np.random.default_rng(4)
    base = [stats_of(rng.random(50)) for _ in range(3)]
    shifted = [np.stack([b[:, 0] + 0.1, b[:, 1]], axis=1) for b in base]
    result = seed_level_test(base, shifted, mean_score, seeds(3), seeds(3), 300)
    assert result.se_sentence == pytest.approx(0, abs=1e-9)
    assert result.delta == pytest.approx(10)


def test_seed_level_null_rates_from_one_systems_seeds():
    """Every distinct split of one system's seeds into two disjoint groups, on resampled test
    sets: the seed-level test rejects rarely; fewer than four seeds cannot make two groups."""
    rng = np.random.default_rng(9)
    one_system, _ = hierarchical_null(rng, 6)
    found = seed_level_null_rates(one_system, mean_score, group_size=3, n_samples=100)
    # 6 seeds, groups of 3: 6! / (0! 3! 2) = 60 distinct nulls, each on one test set
    assert (found["distinct_splits"], found["test_sets"], found["nulls"]) == (60, 1, 60)
    rates = found["rejection_rate"]
    assert set(rates) == {"seed_level", "pooled_sentences"}
    assert rates["seed_level"] <= 0.12 and rates["pooled_sentences"] >= rates["seed_level"]
    assert len({split_key(s["a"], s["b"]) for s in found["splits"]}) == 60
    assert rates["seed_level"] == sum(s["seed_level"][0] < 0.05 for s in found["splits"]) / 60
    twice = seed_level_null_rates(one_system[:4], mean_score, test_sets=2, n_samples=50)
    assert (twice["distinct_splits"], twice["nulls"]) == (6, 12)
    assert all(len(s["seed_level"]) == 2 for s in twice["splits"])
    with pytest.raises(ValueError, match="at least 4 seeds"):
        seed_level_null_rates(one_system[:3], mean_score)


@pytest.mark.parametrize("k, n, count", [(4, 2, 6), (5, 2, 30), (6, 2, 90), (6, 3, 60)])
def test_seed_splits_are_every_distinct_null_once(k, n, count):
    """k! / ((k - 2n)! n! 2) nulls, none of which the seed-level test could tell from another
    (same pairs in another order, or the groups swapped), and together every way to draw
    them."""
    import itertools

    splits = seed_splits(k, n)
    assert len(splits) == count
    keys = {split_key(a, b) for a, b in splits}
    assert len(keys) == count
    every = {split_key(order[:n], order[n:2 * n]) for order in itertools.permutations(range(k))}
    assert keys == every


def test_a_split_and_its_twins_give_one_p():
    """What split_key treats as one null is one null for the test: the pairs reordered or the
    groups swapped give the same p."""
    rng = np.random.default_rng(3)
    runs, _ = hierarchical_null(rng, 4, n_sentences=60)
    names = seeds(2)

    def p(a, b):
        return seed_level_test([runs[i] for i in a], [runs[i] for i in b], mean_score, names,
                               names, 200, 7).p_value

    assert split_key((0, 1), (2, 3)) == split_key((1, 0), (3, 2)) == split_key((2, 3), (0, 1))
    assert p((0, 1), (2, 3)) == pytest.approx(p((1, 0), (3, 2)))
    assert p((0, 1), (2, 3)) == pytest.approx(p((2, 3), (0, 1)))
    assert split_key((0, 1), (2, 3)) != split_key((0, 1), (3, 2))  # other pairs: another null


def test_the_earlier_random_draws_repeat_thirty_nulls():
    """Drawing 200 nulls at random from five seeds in groups of two (the first calibration)
    repeats the 30 distinct ones; the replay follows the draws' own generator."""
    keys = drawn_splits(5, 2, 200, 500)
    assert len(keys) == 200
    assert set(keys) <= {split_key(a, b) for a, b in seed_splits(5, 2)}
    rng = np.random.default_rng(12345)
    rng.integers(0, 500, 500)
    order = rng.permutation(5)
    assert keys[0] == split_key(order[:2], order[2:4])


def test_the_sentence_parts_monte_carlo_error_is_what_another_bootstrap_seed_moves():
    """var_sentence_mc, from one bootstrap, is about the spread of the sentence part's variance
    over bootstrap seeds."""
    rng = np.random.default_rng(11)
    base, sys_ = hierarchical_null(rng, 3, n_sentences=300)
    results = [seed_level_test(base, sys_, mean_score, seeds(3), seeds(3), 200, s)
               for s in range(40)]
    unclipped = [r.se_sentence ** 2 for r in results]
    spread = float(np.std(unclipped, ddof=1))
    typical = float(np.median([r.var_sentence_mc for r in results]))
    assert spread > 0 and 0.6 < typical / spread < 1.6


def test_variance_parts_replay_the_simulated_nulls():
    """variance_parts measures, on the same nulls and bootstrap seeds, what
    simulated_null_rates's seed-level tests had: the sentence part over the seed part."""
    parts = []
    simulated_null_rates(3, "seeds dominate", n_nulls=12, n_samples=50, seed=3, parts=parts)
    replayed = variance_parts(3, SCENARIOS["seeds dominate"], 12, 50, seed=3)
    assert replayed == summarise_parts(parts)
    assert replayed["nulls"] == 12 and replayed["q1"] <= replayed["median"] <= replayed["q3"]
    with pytest.raises(ValueError, match="no null with a seed part"):
        summarise_parts([None])
