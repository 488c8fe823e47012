"""Selection helpers (ssan_plugin/modules/selection.py): binary entropy from logits, and the
straight-through Gumbel sampling of sample_selection (its selection frequency)."""

import math

import pytest
import torch

from ssan_plugin.modules import binary_entropy_from_logits, sample_selection


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
