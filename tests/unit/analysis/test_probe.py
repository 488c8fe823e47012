"""ssan_plugin/analysis/probe.py: Wilson interval, majority baseline, pooling, probes that learn
a planted signal and not noise."""

import numpy as np
import pytest
import torch

from ssan_plugin.analysis.probe import (majority_baseline, pooled_layer_features, run_probe,
                                        wilson_interval)


def test_wilson_interval_known_values():
    # textbook example: 81 of 263 -> (0.2553, 0.3662)
    lo, hi = wilson_interval(81, 263)
    assert lo == pytest.approx(0.2553, abs=1e-4) and hi == pytest.approx(0.3662, abs=1e-4)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-4)
    assert all(np.isnan(wilson_interval(0, 0)))


def test_majority():
    assert majority_baseline(["a", "b", "a", "c"]) == 0.5


def test_pooling_excludes_eos():
    s = torch.arange(2 * 3 * 1, dtype=torch.float).view(2, 3, 1)  # 2 layers, 3 pieces
    f = pooled_layer_features([s, torch.ones(2, 2, 1)])
    assert f.shape == (2, 2, 1)
    assert f[0, 0, 0] == pytest.approx(0.5) and f[1, 0, 0] == pytest.approx(3.5)
    assert f[1, 1, 0] == 1.0


@pytest.mark.parametrize("classifier", ["logreg", "mlp"])
def test_probe_learns_a_planted_layer_and_not_noise(classifier):
    rng = np.random.default_rng(0)
    n = 300
    labels = np.array(["A", "B"])[rng.integers(0, 2, n)]
    noise = rng.normal(size=(n, 8))
    signal = noise.copy()
    signal[:, 0] += np.where(labels == "A", 3.0, -3.0)
    features = np.stack([noise, signal])
    splits = np.array(["tr"] * 240 + ["va"] * 30 + ["te"] * 30)
    out = run_probe(features, splits, labels, "toy", classifier, seed=3)
    assert out["n_test"] == 30 and out["task"] == "toy"
    assert out["majority"] == majority_baseline(labels[-30:].tolist())
    noise_acc, signal_acc = (l["accuracy"] for l in out["layers"])
    assert signal_acc >= 0.9 and noise_acc <= 0.8
    lo, hi = out["layers"][1]["ci95"]
    assert lo <= signal_acc <= hi
    assert run_probe(features, splits, labels, "toy", classifier, seed=3) == out  # seeded
    with pytest.raises(ValueError, match="no example in split 'va'"):
        run_probe(features, np.array(["tr"] * 270 + ["te"] * 30), labels, "toy", classifier)
