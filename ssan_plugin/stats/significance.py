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
``calibration`` (and ``scripts/calibrate_significance.py``) measures how often each test
rejects at 0.05 when there is no true difference.

Seeds pooled (``paired_bootstrap`` with several statistics arrays per side): each resample
draws one multiset of sentence ids, scores every seed's system on it, and compares the
seed-averaged corpus scores of the two groups (groups may have different numbers of seeds).
This holds the seeds fixed: it describes these seeds on resampled sentences, and says nothing
about another training run. Its p is a sentence-level p, never a verdict on a system.

Seed level (``seed_level_test``, the verdict for groups): the seed is the unit of evidence.
The seed-mean difference Δ varies with two kinds of chance, and its variance has one part each:

- seeds (training randomness): the sample variance of the per-seed deltas over n (paired by
  seed), or ``s_sys²/n_sys + s_base²/n_base`` (unpaired, Welch), from the observed scores;
- sentences (test-set sampling): from the paired bootstrap's resamples (one sentence multiset
  per resample, shared by every seed of both groups), the part every seed shares: the mean
  covariance over resamples between two different seeds' deltas (unpaired:
  ``C_sys,sys + C_base,base - 2 C_sys,base``). Each seed's own sentence-level noise is
  already in the seed part; counting it again, as the variance of a two-level bootstrap
  (seeds and sentences both resampled) does, made the same t-test conservative: 0.4-2.8 %
  rejections of a true null at 3 seeds on the simulated nulls of
  ``calibration.hierarchical_null`` (measured while choosing the design; the tests and the
  archived calibration check the chosen one).

``t = Δ / se`` against Student's t on the seeds' degrees of freedom (``n - 1`` paired; Welch-
Satterthwaite over the two seed parts unpaired); the 95 % interval is ``Δ ± t_0.975 · se`` and p
is two-sided. The sentence part adds variance but no degrees of freedom: letting it add some
(Satterthwaite over all parts) rejected a true null 6-10 % of the time at 3 seeds on the same
nulls, while on the project's translation runs the sentence part is a fraction of the seed
part (standard errors 0.00-0.15 against 0.23-0.50 BLEU), so the conservative choice costs
little there. A bootstrap's own percentiles are not used: over 3 seeds they can never reach
beyond the per-seed deltas. Identical outputs give Δ = 0 and p = 1.

Holm's step-down correction (``holm``) adjusts the p of every comparison one table reports.
"""

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

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


def check_same_sentences(arrays: Sequence[np.ndarray]):
    """Raise ValueError unless every (N, k) array has one shape and N > 0: the statistics of
    one test set, paired sentence by sentence."""
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
    check_same_sentences(base + sys_)
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
    check_same_sentences([base, sys_])
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


# --------------------------------------------------------------------------- seed level
@dataclass
class SeedLevelResult:
    """A group of seeds against the baseline group, with seeds as the unit of evidence."""

    score: float  # the group's seed-mean corpus score (over the seeds compared)
    baseline: float  # the baseline group's seed-mean corpus score (over the seeds compared)
    delta: float  # score - baseline
    paired: bool  # paired by seed (the system's seeds all among the baseline's)
    seeds: List[str]  # the system's seeds compared (paired: also the baseline's)
    baseline_seeds: List[str]
    per_seed: Optional[List[float]]  # paired only: per-seed deltas, in ``seeds`` order
    same_sign: Optional[int]  # paired only: per-seed deltas with the sign of ``delta``
    se: float  # standard error of delta: sqrt(seed part + sentence part)
    se_seed: float  # seed part (sqrt)
    se_sentence: float  # sentence part (sqrt)
    df: float  # the seeds' degrees of freedom (n - 1 paired, Welch-Satterthwaite unpaired)
    ci: tuple  # 95% interval of delta (low, high)
    p_value: float  # two-sided
    identical: bool  # every seed's statistics equal to its partner's (then p == 1)
    n_samples: int
    test: str = "seed level: seed variance + shared sentence-bootstrap variance, Student t"
    aso: Optional[float] = field(default=None)  # deepsig ASO eps_min, if asked for
    # Monte Carlo standard error of the sentence part's variance (se_sentence² before it is
    # clipped at 0): the error of a bootstrap of ``n_samples`` resamples, about what another
    # bootstrap seed moves it by; it moves the p little when the seed part dominates, and a
    # power calculation much (``experiments.tables.verdicts.power_table``)
    var_sentence_mc: Optional[float] = field(default=None)

    def interval(self, level: float = 0.95) -> Tuple[float, float]:
        """The interval of ``delta`` at ``level`` from the same t (``df``) and ``se`` as ``ci``
        (``ci`` is the 0.95 one); at 1 - 0.05 / m, the m tests of a table hold together
        (Bonferroni). A point where ``se`` is 0 (identical outputs, no variance)."""
        if not 0 < level < 1:
            raise ValueError(f"level {level} is not between 0 and 1")
        if self.se == 0:
            return (self.delta, self.delta)
        from scipy.stats import t as student

        half = float(student.ppf((1 + level) / 2, self.df)) * self.se
        return (self.delta - half, self.delta + half)

    def to_json(self) -> dict:
        """The result for a report: ``delta``, ``ci``, ``p``, ``p_holm`` (None: set by whoever
        knows the table's family of comparisons), ``paired``, seeds, ``per_seed``,
        ``same_sign``, ``se`` and its parts, ``df``, ``identical``, ``samples``."""
        return {"delta": self.delta, "ci": list(self.ci), "p": self.p_value, "p_holm": None,
                "paired": self.paired, "seeds": self.seeds,
                "baseline_seeds": self.baseline_seeds, "per_seed": self.per_seed,
                "same_sign": self.same_sign, "se": self.se, "se_seed": self.se_seed,
                "se_sentence": self.se_sentence, "df": self.df, "identical": self.identical,
                "samples": self.n_samples}


def _group_scores(arrays: List[np.ndarray], score: ScoreFn, n_samples: int, seed: int):
    """Observed per-seed scores (S,) and per-resample per-seed scores (n_samples, S), every
    seed scored on the same sentence multisets (``bootstrap_weights(.., seed)``)."""
    observed = np.array([score(a.sum(0)) for a in arrays], dtype=np.float64)
    chunks = [np.stack([_scores(score, w @ a) for a in arrays], axis=1)
              for w in bootstrap_weights(arrays[0].shape[0], n_samples, seed)]
    return observed, np.concatenate(chunks)


def _covariance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(Sa, Sb) covariances over resamples between the columns of a (R, Sa) and b (R, Sb)."""
    a = a - a.mean(0)
    b = b - b.mean(0)
    return a.T @ b / (a.shape[0] - 1)


def _shared_terms(res: np.ndarray) -> np.ndarray:
    """Per resample, the term whose mean over resamples is :func:`_shared_covariance` (R,):
    the mean product of two different seeds' centred scores, times R / (R - 1)."""
    y = res - res.mean(0)
    r, s = y.shape
    return ((y.sum(1) ** 2 - (y * y).sum(1)) / (s * (s - 1))) * (r / (r - 1))


def _cross_terms(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per resample, the term whose mean over resamples is the mean of ``_covariance(a, b)``
    (R,)."""
    ya, yb = a - a.mean(0), b - b.mean(0)
    r = ya.shape[0]
    return ya.mean(1) * yb.mean(1) * (r / (r - 1))


def _monte_carlo_error(terms: np.ndarray) -> float:
    """Standard error of the mean of per-resample terms: the bootstrap's own error."""
    return float(np.std(terms, ddof=1) / np.sqrt(len(terms))) if len(terms) > 1 else 0.0


def _shared_covariance(res: np.ndarray) -> float:
    """Mean covariance over resamples between two different seeds' scores (R, S), S >= 2: the
    part of the sentence-resampling variance every seed shares (the test set's own effect);
    what differs from seed to seed is already in the seed part."""
    cov = _covariance(res, res)
    s = cov.shape[0]
    return float((cov.sum() - np.trace(cov)) / (s * (s - 1)))


def seed_level_test(baseline: Sequence[np.ndarray], system: Sequence[np.ndarray],
                    score: ScoreFn, baseline_seeds: Sequence[str], system_seeds: Sequence[str],
                    n_samples: int = DEFAULT_BOOTSTRAP_SAMPLES, seed: int = DEFAULT_SEED,
                    alpha: float = 0.05) -> SeedLevelResult:
    """The seed-level test of a group of seeds against the baseline group (module docstring).

    ``baseline`` / ``system``: one (N, k) statistics array per seed, named by
    ``baseline_seeds`` / ``system_seeds``. Paired by seed when every system seed is also a
    baseline seed (Δ then compares the baseline's same seeds); otherwise unpaired. Each group
    needs at least two seeds."""
    from scipy.stats import t as student

    base = [as_stats(a) for a in baseline]
    sys_ = [as_stats(a) for a in system]
    base_seeds, sys_seeds = [str(s) for s in baseline_seeds], [str(s) for s in system_seeds]
    if len(base) != len(base_seeds) or len(sys_) != len(sys_seeds):
        raise ValueError("one seed name per statistics array")
    if len(set(base_seeds)) != len(base_seeds) or len(set(sys_seeds)) != len(sys_seeds):
        raise ValueError("a seed appears twice in a group")
    if len(base) < 2 or len(sys_) < 2:
        raise ValueError(f"a seed-level test needs at least 2 seeds per group, got "
                         f"{len(base)} (baseline) and {len(sys_)} (system)")
    if n_samples < 2:
        raise ValueError(f"n_samples must be >= 2, got {n_samples}")
    check_same_sentences(base + sys_)
    paired = set(sys_seeds) <= set(base_seeds)
    if paired:  # the baseline's seeds the system has, in the system's order
        index = {s: i for i, s in enumerate(base_seeds)}
        base = [base[index[s]] for s in sys_seeds]
        base_seeds = list(sys_seeds)
    obs_b, res_b = _group_scores(base, score, n_samples, seed)
    obs_s, res_s = _group_scores(sys_, score, n_samples, seed)  # same sentence multisets
    delta = float(obs_s.mean() - obs_b.mean())
    if paired:
        n = len(sys_)
        per_seed = [float(x) for x in obs_s - obs_b]
        seed_parts = [(float(np.var(per_seed, ddof=1)) / n, n - 1)]
        var_sentence = _shared_covariance(res_s - res_b)
        mc = _monte_carlo_error(_shared_terms(res_s - res_b))
        same_sign = int(np.sum(np.sign(per_seed) == np.sign(delta))) if delta != 0 else 0
    else:
        seed_parts = [(float(np.var(obs, ddof=1)) / len(obs), len(obs) - 1)
                      for obs in (obs_s, obs_b)]
        per_seed, same_sign = None, None
        var_sentence = (_shared_covariance(res_s) + _shared_covariance(res_b)
                        - 2 * float(np.mean(_covariance(res_s, res_b))))
        mc = _monte_carlo_error(_shared_terms(res_s) + _shared_terms(res_b)
                                - 2 * _cross_terms(res_s, res_b))
    var_seed = float(sum(v for v, _ in seed_parts))
    var_sentence = max(0.0, float(var_sentence))
    var = var_seed + var_sentence
    identical = paired and all(np.array_equal(a, b) for a, b in zip(base, sys_))
    if identical or var <= 0:
        df = float(min(d for _, d in seed_parts))
        se, p, ci = 0.0, 1.0 if delta == 0 else 0.0, (delta, delta)
    else:
        # the seeds' degrees of freedom (Welch-Satterthwaite over the seed parts when
        # unpaired); the sentence part adds variance but no degrees of freedom (module docstring)
        denominator = sum(v * v / d for v, d in seed_parts)
        df = (float(var_seed * var_seed / denominator) if denominator > 0
              else float(min(d for _, d in seed_parts)))
        se = float(np.sqrt(var))
        p = 1.0 if delta == 0 else float(2 * student.sf(abs(delta) / se, df))
        half = float(student.ppf(1 - alpha / 2, df)) * se
        ci = (delta - half, delta + half)
    return SeedLevelResult(score=float(obs_s.mean()), baseline=float(obs_b.mean()), delta=delta,
                           paired=paired, seeds=sys_seeds, baseline_seeds=base_seeds,
                           per_seed=per_seed, same_sign=same_sign, se=se,
                           se_seed=float(np.sqrt(var_seed)),
                           se_sentence=float(np.sqrt(var_sentence)), df=df,
                           ci=(float(ci[0]), float(ci[1])), p_value=float(p),
                           identical=identical, n_samples=n_samples, var_sentence_mc=mc)


def almost_stochastic_order(baseline_scores: Sequence[float], system_scores: Sequence[float],
                            seed: int = DEFAULT_SEED) -> float:
    """deepsig's Almost Stochastic Order over seed scores (Dror et al. 2019; del Barrio et al.
    2018): ``eps_min`` in [0, 1] for "the system is stochastically larger than the baseline";
    below 0.5 leans to the system, 0 is strict dominance (deepsig's reading: < 0.2)."""
    from deepsig import aso

    return float(aso(list(map(float, system_scores)), list(map(float, baseline_scores)),
                     seed=seed, show_progress=False, num_jobs=1))


def paired_ratio_interval(baseline: Sequence[float], system: Sequence[float], rng,
                          level: float = 0.95, draws: int = 2000) -> Tuple[float, float, float]:
    """How many times faster the system is, from paired timings (item k of both timed on the
    same batch): sum(baseline) / sum(system) and its bootstrap percentile interval at
    ``level``, the batches resampled with replacement, the pairs kept (``rng``: a numpy
    Generator, drawn from in order)."""
    base, other = np.asarray(baseline, dtype=np.float64), np.asarray(system, dtype=np.float64)
    if base.shape != other.shape or base.ndim != 1 or not len(base):
        raise ValueError(f"paired timings need the same number of items, got {base.shape} and "
                         f"{other.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level {level} is not between 0 and 1")
    point = base.sum() / other.sum()
    idx = rng.integers(0, len(base), size=(draws, len(base)))
    boot = base[idx].sum(1) / other[idx].sum(1)
    tail = round(100 * (1 - level) / 2, 12)  # 2.5 for 0.95, not 2.5000000000000022
    low, high = np.percentile(boot, [tail, 100 - tail])
    return float(point), float(low), float(high)


def sd_ratio_interval(system_scores: Sequence[float], baseline_scores: Sequence[float],
                      level: float = 0.95) -> Tuple[float, float, float]:
    """How much more one system's seeds spread than the baseline's: (r, low, high) with
    r = sd(system) / sd(baseline) (sample standard deviations over seeds) and its ``level``
    interval for the true ratio, assuming each system's seed scores are normal and the two
    groups independent: (s1^2 / sigma1^2) / (s2^2 / sigma2^2) is F(n1 - 1, n2 - 1), so the
    interval is r / sqrt(F quantiles). Needs two seeds a side and a baseline that varies."""
    from scipy.stats import f

    a = np.asarray(system_scores, dtype=np.float64)
    b = np.asarray(baseline_scores, dtype=np.float64)
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"a spread needs two seeds a side, got {len(a)} and {len(b)}")
    if not 0 < level < 1:
        raise ValueError(f"level {level} is not between 0 and 1")
    sd_a, sd_b = float(np.std(a, ddof=1)), float(np.std(b, ddof=1))
    if sd_b == 0:
        raise ValueError("the baseline's seeds all score the same: no ratio to its spread")
    r = sd_a / sd_b
    tail = (1 - level) / 2
    upper_q, lower_q = f.ppf(1 - tail, len(a) - 1, len(b) - 1), f.ppf(tail, len(a) - 1, len(b) - 1)
    return r, r / float(np.sqrt(upper_q)), r / float(np.sqrt(lower_q))


def seeds_to_place_sd_ratio(ratio: float, goal: float, level: float = 0.95, power: float = 0.8,
                            most: int = 1000) -> Optional[int]:
    """Fewest seeds a side (n each, n >= 2) for which :func:`sd_ratio_interval`'s ``level``
    interval lies wholly on ``ratio``'s side of ``goal`` with probability ``power``, when the
    true ratio of the spreads is ``ratio`` (normal seed scores): with d = n - 1 and F ~ F(d, d)
    the ratio of the two sample variances over their true values, the interval clears the goal
    from above when ratio² F > goal² F_q(d, d), q = 1 - (1 - level) / 2 (from below alike with
    the lower quantile). None when ``ratio == goal`` or more than ``most`` seeds are needed."""
    from scipy.stats import f

    if ratio <= 0 or goal <= 0:
        raise ValueError(f"ratio and goal must be positive, got {ratio} and {goal}")
    if ratio == goal:
        return None
    tail = (1 - level) / 2
    shift = (goal / ratio) ** 2
    for n in range(2, most + 1):
        d = n - 1
        if ratio > goal:
            chance = f.sf(f.ppf(1 - tail, d, d) * shift, d, d)
        else:
            chance = f.cdf(f.ppf(tail, d, d) * shift, d, d)
        if chance >= power:
            return n
    return None


def holm(p_values: Sequence[float]) -> List[float]:
    """Holm's step-down adjusted p-values, in the input order (family-wise error at alpha when
    an adjusted p < alpha is called significant)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return [float(x) for x in adjusted]
