"""Calibration of the project's tests: how often each one calls two systems different when
they are not (a calibrated test at level alpha rejects about alpha of such nulls).

Three sources of nulls, each a function here and a mode of ``scripts/calibrate_significance.py``:

- ``null_rejection_rate``: two real outputs of one test set, swapped sentence by sentence at
  random (the sentence-level paired bootstrap and approximate randomisation);
- ``seed_level_null_rates``: one system's real seeds split into two disjoint groups on a
  resampled test set (the seed-level test, and the pooled bootstrap on the same nulls);
- ``simulated_null_rates``: synthetic comparisons where seeds AND test sentences are random
  (``hierarchical_null``; the scenarios of ``SCENARIOS``), with a t-test over the per-seed
  deltas alone as a third contender.

Statistics arrays and score functions follow ``significance``: ``(N, k)`` per-sentence
statistics, ``score`` from summed statistics ``(k,)`` to the corpus score.
"""

import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .significance import (DEFAULT_SEED, ScoreFn, as_stats, check_same_sentences,
                           paired_bootstrap, paired_randomization, seed_level_test)

#: name -> hierarchical_null's spreads (probability units): ``seed_sd`` each system's own
#: training effect per seed, ``shared_sd`` the effect both systems of a seed share (same data
#: order), ``interaction_sd`` how much easier a sentence is for one system than the other
#: (mean 0 over sentences). "seeds dominate" resembles the project's translation runs (the
#: sentence part of the seed-level variance a fifth of the seed part); "sentences dominate"
#: has systems that differ strongly sentence by sentence but not on average.
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


def simulated_null_rates(n_seeds: int, scenario: str = "seeds dominate", n_nulls: int = 400,
                         n_samples: int = 200, n_sentences: int = SIMULATED_SENTENCES,
                         alpha: float = 0.05, seed: int = 0) -> Dict[str, float]:
    """Share of ``n_nulls`` simulated null comparisons (``hierarchical_null`` with the spreads
    of ``SCENARIOS[scenario]``, ``n_seeds`` paired seeds a side) with p < ``alpha`` for:
    ``seed_level`` (``seed_level_test``), ``pooled_sentences`` (the pooled paired bootstrap,
    seeds held fixed) and ``seeds_only`` (Student's t over the per-seed deltas, test set held
    fixed). Deterministic in ``seed``."""
    from scipy.stats import ttest_1samp

    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {sorted(SCENARIOS)}, got {scenario!r}")
    if n_seeds < 2:
        raise ValueError(f"n_seeds must be >= 2, got {n_seeds}")
    rng = np.random.default_rng(seed)
    names = [str(s) for s in range(1, n_seeds + 1)]
    rejected = {"seed_level": 0, "pooled_sentences": 0, "seeds_only": 0}
    for k in range(n_nulls):
        base, sys_ = hierarchical_null(rng, n_seeds, n_sentences, **SCENARIOS[scenario])
        rejected["seed_level"] += seed_level_test(base, sys_, mean_score, names, names,
                                                  n_samples, seed + k).p_value < alpha
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




def seed_level_null_rates(seeds_stats: Sequence, score: ScoreFn, group_size: Optional[int] = None,
                          n_nulls: int = 200, n_samples: int = 200, alpha: float = 0.05,
                          seed: int = DEFAULT_SEED) -> dict:
    """Calibration at seed level from one system's real seeds (k statistics arrays, k >= 4):
    each null draws a test set (the sentences resampled with replacement) and two disjoint
    groups of ``group_size`` seeds (default k // 2), paired in the order drawn, so that both
    groups come from the same system. Returns the share of nulls with p < ``alpha`` for the
    seed-level test and for the pooled sentence-level bootstrap."""
    runs = [as_stats(s) for s in seeds_stats]
    check_same_sentences(runs)
    k = len(runs)
    n = group_size or k // 2
    if n < 2 or 2 * n > k:
        raise ValueError(f"{k} seeds cannot make two disjoint groups of {n} >= 2 seeds "
                         f"(give at least 4 seeds)")
    rng = np.random.default_rng(seed)
    names = [str(i) for i in range(1, n + 1)]
    rejected = {"seed_level": 0, "pooled_sentences": 0}
    for trial in range(n_nulls):
        rows = rng.integers(0, runs[0].shape[0], runs[0].shape[0])
        order = rng.permutation(k)
        a = [runs[i][rows] for i in order[:n]]
        b = [runs[i][rows] for i in order[n:2 * n]]
        rejected["seed_level"] += seed_level_test(a, b, score, names, names, n_samples,
                                                  seed + trial).p_value < alpha
        rejected["pooled_sentences"] += paired_bootstrap(a, b, score, n_samples,
                                                         seed + trial).p_value < alpha
    return {name: count / n_nulls for name, count in rejected.items()}
