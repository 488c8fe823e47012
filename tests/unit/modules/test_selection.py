"""Selection helpers (ssan_plugin/modules/selection.py): binary entropy from logits, and the
straight-through Gumbel sampling of sample_selection (its selection frequency), and the
logistic noise it draws (its distribution)."""

import math

import pytest
import torch

from ssan_plugin.modules import binary_entropy_from_logits, logistic_noise_like, sample_selection


@pytest.mark.parametrize("tau", [0.5, 2.0])
def test_gumbel_selection_frequency_matches_sigmoid(tau):
    """P(1[sigmoid((E_p + G' - G'') / tau) > 0.5]) = sigmoid(E_p), for any tau."""
    torch.manual_seed(1234)
    logits = torch.tensor([-3.0, -1.0, -0.2, 0.0, 0.5, 2.0, 4.0])
    n = 40000
    draws = sample_selection(logits.expand(n, -1).contiguous(), tau, "hard", training=True)
    freq = draws.mean(0)
    p = torch.sigmoid(logits)
    sigma = torch.sqrt(p * (1 - p) / n)
    assert torch.all((freq - p).abs() < 5 * sigma + 1e-4), (freq, p)


def test_binary_entropy_stable():
    x = torch.tensor([-1e4, -30.0, -1.0, 0.0, 2.0, 1e4])
    p = torch.sigmoid(x.double())
    ref = -(p * torch.log(p) + (1 - p) * torch.log1p(-p))
    ref = torch.nan_to_num(ref, nan=0.0)
    torch.testing.assert_close(binary_entropy_from_logits(x).double(), ref, atol=1e-7, rtol=1e-5)
    assert binary_entropy_from_logits(torch.tensor(0.0)).item() == pytest.approx(math.log(2))


def test_logistic_noise_has_the_logistic_distribution():
    """G' - G'' ~ Logistic(0, 1): P(L <= x) = sigmoid(x) at every x, every draw finite, float32
    whatever the dtype it is shaped like."""
    torch.manual_seed(5)
    n = 200_000
    noise = logistic_noise_like(torch.empty(n, dtype=torch.float64))
    assert noise.dtype == torch.float32 and noise.shape == (n,)
    assert torch.isfinite(noise).all()
    for x in (-6.0, -2.0, -0.5, 0.0, 0.5, 2.0, 6.0):
        p = 1 / (1 + math.exp(-x))
        freq = (noise <= x).double().mean().item()
        assert abs(freq - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-5, (x, freq, p)
