"""Calibration of the project's tests: how often each one calls two systems different when
they are not (a calibrated test at level alpha rejects about alpha of such nulls).

Three sources of nulls, each a function here and a mode of ``scripts/calibrate_significance.py``:

- ``null_rejection_rate``: two real outputs of one test set, swapped sentence by sentence at
  random (the sentence-level paired bootstrap and approximate randomisation);
- ``seed_level_null_rates``: one system's real seeds split into two disjoint groups on a
  resampled test set (the seed-level test, and the pooled bootstrap on the same nulls), every
  distinct split once (``seed_splits``: five seeds in groups of two make only 30);
- ``simulated_null_rates``: synthetic comparisons where seeds AND test sentences are random
  (``hierarchical_null``; the scenarios of ``SCENARIOS``), with a t-test over the per-seed
  deltas alone as a third contender.

Statistics arrays and score functions follow ``significance``: ``(N, k)`` per-sentence
statistics, ``score`` from summed statistics ``(k,)`` to the corpus score.
"""

import itertools
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .significance import (DEFAULT_SEED, ScoreFn, as_stats, check_same_sentences,
                           paired_bootstrap, paired_randomization, seed_level_test)

#: name -> hierarchical_null's spreads (probability units): ``seed_sd`` each system's own
#: training effect per seed, ``shared_sd`` the effect both systems of a seed share (same data
#: order), ``interaction_sd`` how much easier a sentence is for one system than the other
#: (mean 0 over sentences). "seeds dominate" has the seed part of the seed-level variance
#: dominate, as on the project's translation runs, though its sentence part is a larger share
#: of it than there (``variance_parts`` measures the share on the simulated nulls, the power
#: table of examples/translation/RESULTS.md on the runs); "sentences dominate" has systems
#: that differ strongly sentence by sentence but not on average.
SCENARIOS: Dict[str, Dict[str, float]] = {
    "seeds dominate": {"seed_sd": 0.06, "shared_sd": 0.03, "interaction_sd": 0.15},
    "sentences dominate": {"seed_sd": 0.02, "shared_sd": 0.01, "interaction_sd": 0.5},
}


#: test sentences of each simulated null (``hierarchical_null``, ``simulated_null_rates``)
SIMULATED_SENTENCES = 150


def mean_score(sums: np.ndarray) -> float:
    """Score of statistics (value, 1) per sentence: 100 x the mean value (an accuracy)."""
    return float(100 * sums[0] / sums[1])


def stats_of(values) -> np.ndarray:
    """Per-sentence values (N,) -> statistics (N, 2) for ``mean_score``."""
    return np.stack([np.asarray(values, float), np.ones(len(values))], axis=1)


def hierarchical_null(rng: np.random.Generator, n_seeds: int,
                      n_sentences: int = SIMULATED_SENTENCES, seed_sd: float = 0.06,
                      shared_sd: float = 0.03, interaction_sd: float = 0.15,
                      ) -> Tuple[List[np.ndarray], List[np.ndarray]]:
    """One null comparison, everything random: a fresh test set (per-sentence difficulty, and
    per sentence how much easier it is for the system than for the baseline, mean 0 over
    sentences) and, per seed, a training effect shared by both systems of that seed plus each
    system's own; 0/1 outcomes per sentence. No true difference in expectation. Returns
    (baseline, system): ``n_seeds`` statistics arrays (n_sentences, 2) each, seed k paired."""
    difficulty = rng.beta(2, 2, n_sentences)
    interaction = rng.normal(0, interaction_sd, n_sentences)
    base, sys_ = [], []
    for _ in range(n_seeds):
        shared = rng.normal(0, shared_sd)
        for group, sign in ((base, -0.5), (sys_, 0.5)):
            p = np.clip(difficulty + sign * interaction + shared + rng.normal(0, seed_sd), 0, 1)
            group.append(stats_of(rng.random(n_sentences) < p))
    return base, sys_


def simulated_nulls(n_seeds: int, spreads: Dict[str, float], n_nulls: int,
                    n_sentences: int = SIMULATED_SENTENCES, seed: int = 0):
    """The simulated nulls of :func:`simulated_null_rates`, in its order: (k, baseline,
    system) with ``hierarchical_null``'s ``spreads``, from ``numpy.random.default_rng(seed)``
    (null k's bootstrap seed is ``seed + k``)."""
    rng = np.random.default_rng(seed)
    for k in range(n_nulls):
        base, sys_ = hierarchical_null(rng, n_seeds, n_sentences, **spreads)
        yield k, base, sys_


def sentence_to_seed(result) -> Optional[float]:
    """A seed-level result's sentence part over its seed part (variances); None when the seed
    part is 0."""
    seed_part = result.se_seed ** 2
    return result.se_sentence ** 2 / seed_part if seed_part > 0 else None


def summarise_parts(ratios: Sequence[Optional[float]]) -> Dict[str, float]:
    """Median, mean and quartiles of :func:`sentence_to_seed` over nulls (None left out) and
    how many nulls they summarise."""
    values = np.array([r for r in ratios if r is not None], dtype=np.float64)
    if not len(values):
        raise ValueError("no null with a seed part to compare the sentence part with")
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {"median": float(median), "mean": float(values.mean()), "q1": float(q1),
            "q3": float(q3), "nulls": int(len(values))}


def variance_parts(n_seeds: int, spreads: Dict[str, float], n_nulls: int, n_samples: int = 200,
                   n_sentences: int = SIMULATED_SENTENCES, seed: int = 0) -> Dict[str, float]:
    """:func:`summarise_parts` of the seed-level test's sentence part over its seed part on the
    first ``n_nulls`` nulls :func:`simulated_null_rates` draws with the same arguments (the same
    nulls and bootstrap seeds, so the same results): what a simulated archive without this
    summary tested, replayed."""
    names = [str(s) for s in range(1, n_seeds + 1)]
    return summarise_parts(
        sentence_to_seed(seed_level_test(base, sys_, mean_score, names, names, n_samples,
                                         seed + k))
        for k, base, sys_ in simulated_nulls(n_seeds, spreads, n_nulls, n_sentences, seed))


def simulated_null_rates(n_seeds: int, scenario: str = "seeds dominate", n_nulls: int = 400,
                         n_samples: int = 200, n_sentences: int = SIMULATED_SENTENCES,
                         alpha: float = 0.05, seed: int = 0,
                         parts: Optional[list] = None) -> Dict[str, float]:
    """Share of ``n_nulls`` simulated null comparisons (``hierarchical_null`` with the spreads
    of ``SCENARIOS[scenario]``, ``n_seeds`` paired seeds a side) with p < ``alpha`` for:
    ``seed_level`` (``seed_level_test``), ``pooled_sentences`` (the pooled paired bootstrap,
    seeds held fixed) and ``seeds_only`` (Student's t over the per-seed deltas, test set held
    fixed). Deterministic in ``seed``. ``parts``: a list that receives each null's
    :func:`sentence_to_seed` of the seed-level test."""
    from scipy.stats import ttest_1samp

    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {sorted(SCENARIOS)}, got {scenario!r}")
    if n_seeds < 2:
        raise ValueError(f"n_seeds must be >= 2, got {n_seeds}")
    names = [str(s) for s in range(1, n_seeds + 1)]
    rejected = {"seed_level": 0, "pooled_sentences": 0, "seeds_only": 0}
    for k, base, sys_ in simulated_nulls(n_seeds, SCENARIOS[scenario], n_nulls, n_sentences,
                                         seed):
        result = seed_level_test(base, sys_, mean_score, names, names, n_samples, seed + k)
        rejected["seed_level"] += result.p_value < alpha
        if parts is not None:
            parts.append(sentence_to_seed(result))
        rejected["pooled_sentences"] += paired_bootstrap(base, sys_, mean_score, n_samples,
                                                         seed=seed + k).p_value < alpha
        per_seed = [mean_score(s.sum(0)) - mean_score(b.sum(0)) for b, s in zip(base, sys_)]
        with warnings.catch_warnings():  # nearly equal deltas: scipy warns of lost precision
            warnings.simplefilter("ignore", RuntimeWarning)
            rejected["seeds_only"] += bool(ttest_1samp(per_seed, 0).pvalue < alpha)
    return {name: count / n_nulls for name, count in rejected.items()}


def null_rejection_rate(stats_a, stats_b, score: ScoreFn, test: str = "bootstrap",
                        n_nulls: int = 200, n_samples: int = 1000, alpha: float = 0.05,
                        seed: int = DEFAULT_SEED) -> float:
    """Calibration under no true difference: the share of ``n_nulls`` pairs of systems with
    p < ``alpha``, each pair built by swapping the two real outputs of every sentence with
    probability 1/2 (both systems then come from the same distribution). A calibrated test
    gives about ``alpha``."""
    if test not in ("bootstrap", "randomization"):
        raise ValueError(f"test must be 'bootstrap' or 'randomization', got {test!r}")
    a, b = as_stats(stats_a), as_stats(stats_b)
    check_same_sentences([a, b])
    rng = np.random.default_rng(seed)
    rejected = 0
    for k in range(n_nulls):
        swap = (rng.random(a.shape[0]) < 0.5)[:, None]
        x, y = np.where(swap, b, a), np.where(swap, a, b)
        run = paired_bootstrap if test == "bootstrap" else paired_randomization
        rejected += run(x, y, score, n_samples, seed + 1 + k).p_value < alpha
    return rejected / n_nulls


def perfect_matchings(items: Sequence[int]):
    """Every way to cut ``items`` (an even number) into unordered pairs, each pair in
    ``items`` order, the pairs ordered by their first element."""
    if not items:
        yield []
        return
    first, rest = items[0], list(items[1:])
    for i, partner in enumerate(rest):
        for more in perfect_matchings(rest[:i] + rest[i + 1:]):
            yield [(first, partner)] + more


def split_key(a: Sequence[int], b: Sequence[int]) -> tuple:
    """One name for the seed-level null of groups ``a`` and ``b`` (``a[i]`` paired with
    ``b[i]``) and of every null the test cannot tell from it: the same pairs in another order,
    or the groups swapped (Δ changes sign, the p does not)."""
    pairs = tuple(sorted(zip((int(x) for x in a), (int(x) for x in b))))
    flipped = tuple(sorted((y, x) for x, y in pairs))
    return min(pairs, flipped)


def seed_splits(k: int, n: int) -> List[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
    """Every distinct seed-level null of k seeds with groups of n (seed indices 0..k-1): two
    disjoint groups ``a`` and ``b``, ``a[i]`` paired with ``b[i]``, one of each class of
    :func:`split_key`; k! / ((k - 2n)! n! 2) of them (30 for 5 seeds in groups of 2). The
    pooled bootstrap ignores the pairing, so it tells only C(k, n) C(k - n, n) / 2 of them
    apart (15 for 5 seeds in groups of 2)."""
    if n < 1 or 2 * n > k:
        raise ValueError(f"{k} seeds cannot make two disjoint groups of {n}")
    out = []
    for chosen in itertools.combinations(range(k), 2 * n):
        for matching in perfect_matchings(list(chosen)):
            # the first pair's orientation fixed: swapping every pair swaps the groups
            for turns in itertools.product((False, True), repeat=n - 1):
                pairs = [matching[0]] + [(y, x) if turn else (x, y)
                                         for (x, y), turn in zip(matching[1:], turns)]
                out.append((tuple(x for x, _ in pairs), tuple(y for _, y in pairs)))
    return out


def drawn_splits(k: int, n: int, n_draws: int, n_sentences: int,
                 seed: int = DEFAULT_SEED) -> List[tuple]:
    """The :func:`split_key` of each null the earlier calibration drew at random (with
    repeats): per draw a resampled test set, then a permutation of the k seeds whose first n
    are one group and next n the other, from ``numpy.random.default_rng(seed)``. What an
    archive of that calibration (``nulls`` draws, no ``distinct_splits``) tested, replayed
    without its data."""
    rng = np.random.default_rng(seed)
    keys = []
    for _ in range(n_draws):
        rng.integers(0, n_sentences, n_sentences)  # the draw's test set
        order = rng.permutation(k)
        keys.append(split_key(order[:n], order[n:2 * n]))
    return keys


def seed_level_null_rates(seeds_stats: Sequence, score: ScoreFn, group_size: Optional[int] = None,
                          test_sets: int = 1, n_samples: int = 200, alpha: float = 0.05,
                          seed: int = DEFAULT_SEED) -> dict:
    """Calibration at seed level from one system's real seeds (k statistics arrays, k >= 4):
    every distinct null of :func:`seed_splits` (two disjoint groups of ``group_size`` seeds,
    default k // 2, paired in order; both groups from the same system), each on ``test_sets``
    test sets resampled with replacement. Five seeds in groups of two make only 30 distinct
    nulls: drawing more repeats them. Returns ``distinct_splits``, ``test_sets``, ``nulls``
    (their product), ``rejection_rate`` (the share of nulls with p < ``alpha``) for the
    seed-level test (``seed_level``) and the pooled sentence-level bootstrap
    (``pooled_sentences``), and ``splits``: per null its groups (seed numbers from 1, in the
    order given) and each test's p on each of its test sets. Deterministic in ``seed``."""
    runs = [as_stats(s) for s in seeds_stats]
    check_same_sentences(runs)
    k = len(runs)
    n = group_size or k // 2
    if n < 2 or 2 * n > k:
        raise ValueError(f"{k} seeds cannot make two disjoint groups of {n} >= 2 seeds "
                         f"(give at least 4 seeds)")
    if test_sets < 1:
        raise ValueError(f"test_sets must be >= 1, got {test_sets}")
    rng = np.random.default_rng(seed)
    names = [str(i) for i in range(1, n + 1)]
    splits, rejected, trial = [], {"seed_level": 0, "pooled_sentences": 0}, 0
    for a_index, b_index in seed_splits(k, n):
        entry = {"a": [i + 1 for i in a_index], "b": [i + 1 for i in b_index],
                 "seed_level": [], "pooled_sentences": []}
        for _ in range(test_sets):
            rows = rng.integers(0, runs[0].shape[0], runs[0].shape[0])
            a = [runs[i][rows] for i in a_index]
            b = [runs[i][rows] for i in b_index]
            entry["seed_level"].append(seed_level_test(a, b, score, names, names, n_samples,
                                                       seed + trial).p_value)
            entry["pooled_sentences"].append(paired_bootstrap(a, b, score, n_samples,
                                                              seed + trial).p_value)
            trial += 1
        for test in rejected:
            rejected[test] += sum(p < alpha for p in entry[test])
        splits.append(entry)
    nulls = len(splits) * test_sets
    return {"distinct_splits": len(splits), "test_sets": test_sets, "nulls": nulls,
            "rejection_rate": {test: count / nulls for test, count in rejected.items()},
            "splits": splits}
