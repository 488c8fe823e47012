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


def entropy_reference(x: torch.Tensor) -> torch.Tensor:
    """-q log q - (1 - q) log(1 - q) in float64, straight from the definition, with q the smaller
    of p and 1 - p (H is symmetric), which float64 holds to full relative accuracy."""
    q = torch.sigmoid(-x.double().abs())
    return -(torch.xlogy(q, q) + (1 - q) * torch.log1p(-q))


def test_binary_entropy_keeps_float32_accuracy_where_the_policy_is_sure():
    """|x| from 8 to 30 (entropies 1e-12 to 3e-3), both signs: float32 relative accuracy in
    every element and in the sum. softplus(x) - x sigmoid(x) loses about half of the digits
    for x >> 0 (relative errors up to 1e-1 per element, 1e-4 in the sum, measured)."""
    gen = torch.Generator().manual_seed(4)
    magnitude = torch.rand(4000, generator=gen) * 22 + 8
    for x in (magnitude, -magnitude):
        got = binary_entropy_from_logits(x)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), entropy_reference(x), rtol=2e-6, atol=0)
        torch.testing.assert_close(got.double().sum(), entropy_reference(x).sum(), rtol=2e-6, atol=0)


def test_binary_entropy_gradient_is_the_analytic_one_and_keeps_only_the_input():
    """dH/dx = -x sigmoid(x) sigmoid(-x): float32 against the float64 formula over |x| <= 30,
    gradcheck in float64, and autograd keeps one tensor (the input) for backward."""
    gen = torch.Generator().manual_seed(5)
    x = ((torch.rand(3000, generator=gen) - 0.5) * 60).requires_grad_()
    weight = torch.randn(3000, generator=gen)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        entropy = binary_entropy_from_logits(x)
    assert len(saved) == 1 and saved[0] is x
    (entropy * weight).sum().backward()
    xd = x.detach().double()
    expected = -xd * torch.sigmoid(xd) * torch.sigmoid(-xd) * weight.double()
    torch.testing.assert_close(x.grad.double(), expected, rtol=1e-5, atol=1e-12)
    small = torch.randn(20, dtype=torch.float64, generator=gen).mul(5).requires_grad_()
    assert torch.autograd.gradcheck(binary_entropy_from_logits, (small,))


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
