"""Paired significance tests on corpus-level metrics, with one convention for the whole project.

Every test here compares a system with a baseline on the same sentences, from per-sentence
sufficient statistics (a ``(N, k)`` array: BLEU's n-gram matches and lengths from sacrebleu's
``_extract_corpus_statistics``, the SRL scorer's correct / excess / missed counts, ...) and a
``score`` function that turns summed statistics ``(k,)`` into the corpus score (for BLEU,
sacrebleu's own ``_compute_score_from_stats``). Nothing re-implements a metric.

Convention (README, "Significance"): **two-sided, ties counted, add-one**. With ``d`` the
observed difference (system - baseline) and ``d*`` its value on a resample or a shuffle,

- paired bootstrap (Koehn 2004; resample sentence ids with replacement, the same ids for both
  systems and, with seeds pooled, for every seed): ``p = (#{|d* - d| >= |d|} + 1) / (n + 1)``,
  i.e. the bootstrap distribution shifted to the null hypothesis of no difference;
- paired approximate randomisation (Noreen 1989; swap the two systems' outputs of each
  sentence with probability 1/2): ``p = (#{|d*| >= |d|} + 1) / (n + 1)``.

Identical outputs therefore get p = 1 (every resampled difference ties the observed 0), unlike
sacrebleu's MultEval convention (``>`` only), which gives identical systems p = 1/(n+1).
``scripts/calibrate_significance.py`` measures how often each test rejects at 0.05 when there
is no true difference.

Seeds pooled (``paired_bootstrap`` with several statistics arrays per side): each resample
draws one multiset of sentence ids, scores every seed's system on it, and compares the
seed-averaged corpus scores of the two groups (groups may have different numbers of seeds).
"""

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

import numpy as np

#: summed statistics (k,) -> corpus score
ScoreFn = Callable[[np.ndarray], float]

DEFAULT_BOOTSTRAP_SAMPLES = 1000
DEFAULT_RANDOMIZATION_TRIALS = 10000
DEFAULT_SEED = 12345
_CHUNK_ELEMENTS = 20_000_000  # (samples x sentences) per chunk of resampling weights


@dataclass
class PairedResult:
    """One system (or group of seeds) against the baseline."""

    score: float  # the system's observed corpus score (seed mean for groups)
    baseline: float  # the baseline's observed corpus score (seed mean for groups)
    delta: float  # score - baseline
    p_value: float  # two-sided, ties counted, add-one (module docstring)
    test: str  # "bootstrap" | "randomization"
    n_samples: int
    identical: bool  # every statistic of every sentence equal (then p_value == 1)
    ci: Optional[float] = None  # half-width of the system's 95% bootstrap interval


def as_stats(stats) -> np.ndarray:
    """Per-sentence statistics as a float64 (N, k) array (sums of integers stay exact)."""
    array = np.asarray(stats, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"per-sentence statistics must be a 2-d (sentences, k) array, got "
                         f"shape {array.shape}")
    return array


def _check_same_sentences(arrays: Sequence[np.ndarray]):
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"paired test on different sentence sets: statistics shapes {sorted(shapes)}")
    if arrays[0].shape[0] == 0:
        raise ValueError("paired test on zero sentences")


def _scores(score: ScoreFn, sums: np.ndarray) -> np.ndarray:
    return np.array([score(row) for row in sums], dtype=np.float64)


def bootstrap_weights(n_sentences: int, n_samples: int, seed: int):
    """Yield chunks of (samples, N) resampling weights: how often each sentence is drawn."""
    rng = np.random.default_rng(seed)
    per_chunk = max(1, _CHUNK_ELEMENTS // max(1, n_sentences))
    uniform = np.full(n_sentences, 1.0 / n_sentences)
    done = 0
    while done < n_samples:
        size = min(per_chunk, n_samples - done)
        yield rng.multinomial(n_sentences, uniform, size=size).astype(np.float64)
        done += size


def _p_value(exceed: int, n: int) -> float:
    return (exceed + 1) / (n + 1)


def _half_width(scores: np.ndarray) -> float:
    low, high = np.percentile(scores, [2.5, 97.5])
    return float(high - low) / 2


def paired_bootstrap(baseline: Sequence, system: Sequence, score: ScoreFn,
                     n_samples: int = DEFAULT_BOOTSTRAP_SAMPLES,
                     seed: int = DEFAULT_SEED) -> PairedResult:
    """Paired bootstrap of ``system`` against ``baseline``.

    ``baseline`` and ``system``: one (N, k) statistics array each, or a list of arrays (one per
    seed: the group's score is the mean over its seeds). Returns the observed seed-mean scores,
    the delta, the two-sided p-value and the system's 95% interval half-width."""
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    base = _seeds(baseline)
    sys_ = _seeds(system)
    _check_same_sentences(base + sys_)
    observed_base = float(np.mean([score(a.sum(0)) for a in base]))
    observed_sys = float(np.mean([score(a.sum(0)) for a in sys_]))
    delta = observed_sys - observed_base
    resampled_base, resampled_sys = [], []
    for weights in bootstrap_weights(base[0].shape[0], n_samples, seed):
        resampled_base.append(np.mean([_scores(score, weights @ a) for a in base], axis=0))
        resampled_sys.append(np.mean([_scores(score, weights @ a) for a in sys_], axis=0))
    resampled_base = np.concatenate(resampled_base)
    resampled_sys = np.concatenate(resampled_sys)
    deltas = resampled_sys - resampled_base
    exceed = int(np.sum(np.abs(deltas - delta) >= abs(delta) - _tolerance(delta)))
    return PairedResult(score=observed_sys, baseline=observed_base, delta=delta,
                        p_value=_p_value(exceed, n_samples), test="bootstrap",
                        n_samples=n_samples, identical=_identical(base, sys_),
                        ci=_half_width(resampled_sys))


def paired_randomization(baseline, system, score: ScoreFn,
                         n_trials: int = DEFAULT_RANDOMIZATION_TRIALS,
                         seed: int = DEFAULT_SEED) -> PairedResult:
    """Paired approximate randomisation of one system against one baseline (one seed each):
    each trial swaps the two outputs of every sentence with probability 1/2."""
    if n_trials < 1:
        raise ValueError(f"n_trials must be >= 1, got {n_trials}")
    base, sys_ = as_stats(baseline), as_stats(system)
    _check_same_sentences([base, sys_])
    base_sum, sys_sum = base.sum(0), sys_.sum(0)
    observed_base, observed_sys = float(score(base_sum)), float(score(sys_sum))
    delta = observed_sys - observed_base
    diff = sys_ - base  # swapping sentence i moves diff[i] from the system to the baseline
    rng = np.random.default_rng(seed)
    n = base.shape[0]
    per_chunk = max(1, _CHUNK_ELEMENTS // n)
    exceed, done = 0, 0
    while done < n_trials:
        size = min(per_chunk, n_trials - done)
        swaps = (rng.random((size, n)) < 0.5).astype(np.float64)
        moved = swaps @ diff
        shuffled = _scores(score, sys_sum - moved) - _scores(score, base_sum + moved)
        exceed += int(np.sum(np.abs(shuffled) >= abs(delta) - _tolerance(delta)))
        done += size
    return PairedResult(score=observed_sys, baseline=observed_base, delta=delta,
                        p_value=_p_value(exceed, n_trials), test="randomization",
                        n_samples=n_trials, identical=_identical([base], [sys_]))


def _seeds(stats) -> List[np.ndarray]:
    if isinstance(stats, np.ndarray) and stats.ndim == 2:
        return [as_stats(stats)]
    if isinstance(stats, (list, tuple)) and stats and not np.isscalar(stats[0]) and \
            np.asarray(stats[0]).ndim == 2:
        return [as_stats(s) for s in stats]
    return [as_stats(stats)]


def _identical(base: List[np.ndarray], sys_: List[np.ndarray]) -> bool:
    return len(base) == len(sys_) and all(np.array_equal(a, b) for a, b in zip(base, sys_))


def _tolerance(delta: float) -> float:
    """Float slack for 'ties': a resampled difference equal to the observed one up to
    rounding counts as a tie (so identical systems, and exact ties, are never 'significant')."""
    return 1e-9 * max(1.0, abs(delta))


def sacrebleu_score_fn(metric) -> ScoreFn:
    """Summed sacrebleu statistics -> the metric's corpus score (e.g. BLEU in 0-100)."""
    return lambda sums: float(metric._compute_score_from_stats(sums).score)


def sacrebleu_stats(metric, hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """sacrebleu's per-sentence sufficient statistics of ``hypotheses`` (one reference each)."""
    return as_stats(metric._extract_corpus_statistics(list(hypotheses), [list(references)]))


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
    _check_same_sentences([a, b])
    rng = np.random.default_rng(seed)
    rejected = 0
    for k in range(n_nulls):
        swap = (rng.random(a.shape[0]) < 0.5)[:, None]
        x, y = np.where(swap, b, a), np.where(swap, a, b)
        run = paired_bootstrap if test == "bootstrap" else paired_randomization
        rejected += run(x, y, score, n_samples, seed + 1 + k).p_value < alpha
    return rejected / n_nulls
