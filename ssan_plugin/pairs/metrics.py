"""Sentence-pair metrics: entailment accuracy, per-class F1, confusion matrix; relatedness
Pearson r, Spearman rho (scipy) and MSE; paired tests. Tai et al.'s target distribution lives
with the rest of the relatedness maths in ``relatedness`` (re-exported here).

Paired tests (``compare``) use ``ssan_plugin.stats.significance.paired_bootstrap`` (two-sided, ties
counted, add-one: identical predictions give p = 1) on per-pair sufficient statistics:
accuracy from (correct, 1), Pearson r from (x, y, x^2, y^2, xy, 1), MSE from ((x - y)^2, 1).
Spearman's rho is not a sum of per-pair statistics (ranks are global) and gets no test. The
call to the test is :func:`paired_test`, the one place to swap it.
"""

from typing import Dict, List, Optional, Sequence

import numpy as np

from .corpus import LABELS
from .relatedness import relatedness_distribution  # noqa: F401  (its former home; a public name)


def entailment_metrics(gold: Sequence[str], predicted: Sequence[str]) -> dict:
    """Accuracy (percent), per-class precision / recall / F1 (percent) and support, macro F1,
    confusion matrix (rows gold, columns predicted, in ``LABELS`` order)."""
    if len(gold) != len(predicted) or not gold:
        raise ValueError(f"{len(gold)} gold labels vs {len(predicted)} predictions")
    index = {label: i for i, label in enumerate(LABELS)}
    confusion = np.zeros((len(LABELS), len(LABELS)), dtype=np.int64)
    for g, p in zip(gold, predicted):
        confusion[index[g], index[p]] += 1
    per_class = {}
    for i, label in enumerate(LABELS):
        tp = int(confusion[i, i])
        predicted_n, gold_n = int(confusion[:, i].sum()), int(confusion[i, :].sum())
        precision = 100.0 * tp / predicted_n if predicted_n else 0.0
        recall = 100.0 * tp / gold_n if gold_n else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class[label] = {"precision": precision, "recall": recall, "f1": f1, "support": gold_n}
    return {
        "accuracy": 100.0 * float(np.trace(confusion)) / len(gold),
        "macro_f1": float(np.mean([c["f1"] for c in per_class.values()])),
        "per_class": per_class,
        "confusion": {"labels": list(LABELS), "rows": "gold", "columns": "predicted",
                      "matrix": confusion.tolist()},
        "pairs": len(gold),
    }


def relatedness_metrics(gold: Sequence[float], predicted: Sequence[float]) -> dict:
    from scipy import stats

    x, y = np.asarray(predicted, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if x.shape != y.shape or not x.size:
        raise ValueError(f"{y.size} gold scores vs {x.size} predictions")
    constant = np.ptp(x) == 0 or np.ptp(y) == 0  # correlation undefined
    return {
        "pearson": float("nan") if constant else float(stats.pearsonr(x, y)[0]),
        "spearman": float("nan") if constant else float(stats.spearmanr(x, y)[0]),
        "mse": float(np.mean((x - y) ** 2)),
        "pairs": int(x.size),
    }


# ---------------------------------------------------------------- paired tests

def accuracy_stats(gold, predicted) -> np.ndarray:
    """(N, 2) per-pair statistics of N labels: [correct, 1] (``significance.ScoreFn``'s input)."""
    return np.array([[float(g == p), 1.0] for g, p in zip(gold, predicted)])


def accuracy_score(sums) -> float:
    """Accuracy in percent from the summed :func:`accuracy_stats` (2,)."""
    return 100.0 * sums[0] / sums[1]


def pearson_stats(gold, predicted) -> np.ndarray:
    """(N, 6) per-pair statistics of N scores, x predicted and y gold: [x, y, x², y², xy, 1]."""
    x, y = np.asarray(predicted, np.float64), np.asarray(gold, np.float64)
    return np.stack([x, y, x * x, y * y, x * y, np.ones_like(x)], axis=1)


def pearson_score(sums) -> float:
    """Pearson r from the summed :func:`pearson_stats` (6,); 0 when either side is constant."""
    sx, sy, sxx, syy, sxy, n = sums
    cov = sxy - sx * sy / n
    var = (sxx - sx * sx / n) * (syy - sy * sy / n)
    return float(cov / np.sqrt(var)) if var > 0 else 0.0


def mse_stats(gold, predicted) -> np.ndarray:
    """(N, 2) per-pair statistics of N scores: [(predicted - gold)², 1]."""
    x, y = np.asarray(predicted, np.float64), np.asarray(gold, np.float64)
    return np.stack([(x - y) ** 2, np.ones_like(x)], axis=1)


def mse_score(sums) -> float:
    """Mean squared error from the summed :func:`mse_stats` (2,)."""
    return float(sums[0] / sums[1])


TESTED = {  # metric -> (head, per-pair statistics, score of the summed statistics)
    "accuracy": ("label", accuracy_stats, accuracy_score),
    "pearson": ("score", pearson_stats, pearson_score),
    "mse": ("score", mse_stats, mse_score),
}


def paired_test(baseline_stats, system_stats, score, n_samples: int, seed: int) -> dict:
    """The project's paired bootstrap (ssan_plugin.stats.significance); the one place to swap it.
    Each side: one (N, k) statistics array, or a list of them (seeds pooled)."""
    from ..stats.significance import paired_bootstrap

    result = paired_bootstrap(baseline_stats, system_stats, score, n_samples=n_samples, seed=seed)
    return {"delta": result.delta, "p_value": result.p_value, "test": result.test,
            "samples": result.n_samples, "identical": result.identical}


def compare_groups(gold: Dict[str, list], baseline: List[Dict[str, list]],
                   system: List[Dict[str, list]], n_samples: int = 1000,
                   seed: int = 12345, baseline_seeds: Optional[Sequence[str]] = None,
                   system_seeds: Optional[Sequence[str]] = None) -> Dict[str, dict]:
    """{metric: test result} for each metric every member has: the seed-averaged metric of
    the ``system`` group against the ``baseline`` group's, each resample drawing the same
    pairs for every seed (``significance.paired_bootstrap`` with seeds pooled: a
    sentence-level p, seeds held fixed). With the seed names of both groups and two seeds or
    more a side, each result also has ``seed_level``: the seed-level test
    (``significance.seed_level_test``; ``p_holm`` is left to the caller, who knows the
    table). Members map ``label`` and ``score`` to per-pair lists (None when a model has no
    such head)."""
    from ..stats.significance import seed_level_test

    out = {}
    for metric, (head, stats, score) in TESTED.items():
        if any(member.get(head) is None for member in baseline + system):
            continue
        base_stats = [stats(gold[head], m[head]) for m in baseline]
        sys_stats = [stats(gold[head], m[head]) for m in system]
        out[metric] = paired_test(base_stats, sys_stats, score, n_samples, seed)
        if baseline_seeds is not None and min(len(baseline), len(system)) >= 2:
            out[metric]["seed_level"] = seed_level_test(
                base_stats, sys_stats, score, baseline_seeds, system_seeds, n_samples,
                seed).to_json()
    return out


def compare(gold: Dict[str, list], baseline: Dict[str, list], system: Dict[str, list],
            n_samples: int = 1000, seed: int = 12345) -> Dict[str, dict]:
    """:func:`compare_groups` of one system against one baseline."""
    return compare_groups(gold, [baseline], [system], n_samples, seed)


def system_metrics(gold: Dict[str, list], predicted: Dict[str, Optional[List]]) -> dict:
    out = {}
    if predicted.get("label") is not None:
        out["entailment"] = entailment_metrics(gold["label"], predicted["label"])
    if predicted.get("score") is not None:
        out["relatedness"] = relatedness_metrics(gold["score"], predicted["score"])
    return out
