"""Pair metrics against direct computations; the paired tests."""

import numpy as np
import pytest

from ssan_plugin.pairs.corpus import LABELS
from ssan_plugin.pairs.metrics import (
    TESTED,
    accuracy_score,
    accuracy_stats,
    compare,
    compare_groups,
    entailment_metrics,
    relatedness_metrics,
)

RNG = np.random.default_rng(0)
GOLD = list(RNG.choice(LABELS, size=60))
PRED = [g if RNG.random() < 0.6 else str(RNG.choice(LABELS)) for g in GOLD]
Y = RNG.uniform(1, 5, size=60)
X = Y + RNG.normal(0, 0.8, size=60)  # no ties: the ranks below need none


def test_entailment_metrics_match_direct_counts():
    m = entailment_metrics(GOLD, PRED)
    assert m["accuracy"] == pytest.approx(100 * np.mean([g == p for g, p in zip(GOLD, PRED)]))
    matrix = np.array(m["confusion"]["matrix"])
    assert m["confusion"]["labels"] == list(LABELS) and matrix.sum() == 60
    for i, gi in enumerate(LABELS):
        for j, pj in enumerate(LABELS):
            assert matrix[i, j] == sum(g == gi and p == pj for g, p in zip(GOLD, PRED))
    for label in LABELS:
        tp = sum(g == p == label for g, p in zip(GOLD, PRED))
        precision = tp / sum(p == label for p in PRED)
        recall = tp / sum(g == label for g in GOLD)
        c = m["per_class"][label]
        assert c["precision"] == pytest.approx(100 * precision)
        assert c["recall"] == pytest.approx(100 * recall)
        assert c["f1"] == pytest.approx(100 * 2 * precision * recall / (precision + recall))
        assert c["support"] == sum(g == label for g in GOLD)
    assert m["macro_f1"] == pytest.approx(np.mean([m["per_class"][x]["f1"] for x in LABELS]))


def test_entailment_class_never_predicted_has_zero_f1():
    m = entailment_metrics(["entailment", "neutral"], ["neutral", "neutral"])
    assert m["per_class"]["entailment"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert m["accuracy"] == 50.0


def test_relatedness_metrics_match_direct_formulas():
    m = relatedness_metrics(list(Y), list(X))
    xc, yc = X - X.mean(), Y - Y.mean()
    assert m["pearson"] == pytest.approx((xc @ yc) / np.sqrt((xc @ xc) * (yc @ yc)))
    rx, ry = np.argsort(np.argsort(X)), np.argsort(np.argsort(Y))  # no ties in random floats
    rxc, ryc = rx - rx.mean(), ry - ry.mean()
    assert m["spearman"] == pytest.approx((rxc @ ryc) / np.sqrt((rxc @ rxc) * (ryc @ ryc)))
    assert m["mse"] == pytest.approx(np.mean((X - Y) ** 2))
    assert np.isnan(relatedness_metrics([1.0, 2.0], [3.0, 3.0])["pearson"])


def test_paired_statistics_reproduce_the_metrics():
    """Each test's per-pair statistics, summed, give exactly the reported metric."""
    for metric, (head, stats, score) in TESTED.items():
        gold, pred = (GOLD, PRED) if head == "label" else (Y, X)
        expected = (entailment_metrics(gold, pred)["accuracy"] if metric == "accuracy"
                    else relatedness_metrics(gold, pred)[metric])
        assert score(stats(gold, pred).sum(0)) == pytest.approx(expected)


def test_compare_identical_p_one_and_clear_difference_small_p():
    gold = {"label": GOLD, "score": list(Y)}
    system = {"label": PRED, "score": list(X)}
    same = compare(gold, system, dict(system), n_samples=200)
    assert set(same) == {"accuracy", "pearson", "mse"}
    for result in same.values():
        assert result["delta"] == 0 and result["p_value"] == 1.0 and result["identical"]
    perfect = {"label": GOLD, "score": list(Y)}
    better = compare(gold, system, perfect, n_samples=200)
    assert better["accuracy"]["delta"] == pytest.approx(100 - entailment_metrics(GOLD, PRED)["accuracy"])
    assert better["accuracy"]["p_value"] < 0.05 and better["mse"]["p_value"] < 0.05
    # a head one system lacks is not compared
    assert set(compare(gold, {"label": PRED, "score": None}, system, n_samples=50)) == {"accuracy"}


def test_compare_groups_pools_seeds_with_the_same_resamples():
    """Two seeds a side: the delta is the difference of the seed-mean metrics, the p-value the
    project's pooled bootstrap on the per-seed statistics; one member a side is compare()."""
    from ssan_plugin.stats.significance import paired_bootstrap

    gold = {"label": GOLD, "score": list(Y)}
    rng = np.random.default_rng(1)
    members = [{"label": [g if rng.random() < p else str(rng.choice(LABELS)) for g in GOLD],
                "score": list(Y + rng.normal(0, s, size=60))}
               for p, s in ((0.5, 1.0), (0.55, 0.9), (0.8, 0.5), (0.85, 0.4))]
    base, system = members[:2], members[2:]
    result = compare_groups(gold, base, system, n_samples=300, seed=7)
    mean = lambda group: np.mean([entailment_metrics(GOLD, m["label"])["accuracy"] for m in group])
    assert result["accuracy"]["delta"] == pytest.approx(mean(system) - mean(base))
    direct = paired_bootstrap([accuracy_stats(GOLD, m["label"]) for m in base],
                              [accuracy_stats(GOLD, m["label"]) for m in system],
                              accuracy_score, n_samples=300, seed=7)
    assert result["accuracy"]["p_value"] == direct.p_value < 0.05
    pearson = lambda group: np.mean([relatedness_metrics(Y, m["score"])["pearson"] for m in group])
    assert result["pearson"]["delta"] == pytest.approx(pearson(system) - pearson(base))
    assert compare_groups(gold, base[:1], system[:1], 300, 7) == compare(gold, base[0], system[0], 300, 7)


def test_seed_groups_from_names():
    from ssan_plugin.pairs.evaluate import seed_groups
    from ssan_plugin.stats.seed_groups import SeedGroupError

    assert seed_groups(["san", "ssan"]) == {}
    assert seed_groups(["san@1", "ssan@1", "san@2", "disan"]) == {
        "san": ["san@1", "san@2"], "ssan": ["ssan@1"], "disan": ["disan"]}
    with pytest.raises(SeedGroupError, match="expected GROUP@SEED"):
        seed_groups(["san@1", "@2"])
    with pytest.raises(SeedGroupError, match="has seed 1 twice"):
        seed_groups(["san@1", "san@1"])
