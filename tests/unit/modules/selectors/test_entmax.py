"""modules/selectors/entmax.py: alpha-entmax against a bisection written out here and
sparsemax against its sorting formula; rows sum to 1 with exact zeros, pads exactly 0;
sparsemax = entmax at alpha 2; the learnt alpha per head and its gradient."""

import itertools
import math

import pytest
import torch
from helpers.selectors import (H, attend_by_hand, build, call, inputs, logits_by_hand)

from ssan_plugin.errors import OptionError
from ssan_plugin.modules.selectors.entmax import EntmaxSelector


def entmax_by_bisection(z, alpha, steps=200):
    """p_j = [(alpha - 1) z_j - tau]_+ ^ (1 / (alpha - 1)) with tau bisected so that sum p = 1,
    one row at a time over the finite entries (float64)."""
    out = torch.zeros_like(z)
    for index in itertools.product(*map(range, z.shape[:-1])):
        row = z[index]
        a = float(alpha[index[1]]) if torch.is_tensor(alpha) and alpha.dim() else float(alpha)
        keys = torch.isfinite(row)
        x = (a - 1) * row[keys]
        lo, hi = float(x.max()) - 1, float(x.max())
        for _ in range(steps):
            mid = (lo + hi) / 2
            total = (x - mid).clamp_min(0).pow(1 / (a - 1)).sum()
            lo, hi = (mid, hi) if total >= 1 else (lo, mid)
        p = (x - lo).clamp_min(0).pow(1 / (a - 1))
        out[index][keys] = p / p.sum()
    return out


def sparsemax_by_sorting(z):
    """Martins & Astudillo (2016): sort descending, k = max{k: 1 + k z_(k) > sum_{j<=k} z_(j)},
    tau = (sum_{j<=k} z_(j) - 1) / k, p = max(z - tau, 0); -inf entries get 0."""
    out = torch.zeros_like(z)
    for index in itertools.product(*map(range, z.shape[:-1])):
        row = z[index]
        values = sorted((float(v) for v in row if math.isfinite(v)), reverse=True)
        k = max(k for k in range(1, len(values) + 1) if 1 + k * values[k - 1] > sum(values[:k]))
        tau = (sum(values[:k]) - 1) / k
        out[index] = (row - tau).clamp_min(0)
    return out


def masked(logits, pad):
    return logits.masked_fill(pad.view(pad.size(0), 1, 1, -1), float("-inf"))


def check_rows(weights, pad):
    keep = ~pad.view(pad.size(0), 1, 1, -1)
    assert torch.all(weights.masked_select(~keep.expand_as(weights)) == 0)  # pads exactly 0
    torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))
    assert (weights == 0).logical_and(keep).any()  # a sparse map: exact zeros among real keys
    assert torch.all(weights >= 0)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 1.25])
@pytest.mark.parametrize("left_pad", [False, True])
def test_fixed_alpha_against_the_formula(alpha, left_pad):
    attn = build("entmax", entmax_alpha=alpha, entmax_fixed_alpha=True).eval()
    x, pad = inputs(seed=int(alpha * 10), left_pad=left_pad)
    x = 3 * x  # spread logits: sparse rows
    logits = logits_by_hand(attn, x)
    expected = entmax_by_bisection(masked(logits, pad), alpha)
    if alpha == 2.0:
        torch.testing.assert_close(expected, sparsemax_by_sorting(masked(logits, pad)))
    out, weights = call(attn, x, pad, need_head_weights=True)
    weights = weights.transpose(0, 1)
    check_rows(weights, pad)
    torch.testing.assert_close(weights, expected, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(out, attend_by_hand(attn, x, expected), rtol=1e-7, atol=1e-8)
    # a pair is selected exactly where its weight is nonzero
    attn.keep_selection = True
    call(attn, x, pad)
    record = attn.pop_selection()
    valid = ~pad.view(pad.size(0), 1, 1, -1) & ~pad.view(pad.size(0), 1, -1, 1)
    assert torch.equal(record.selection, (expected > 0) & valid)
    assert float(record.pairs_selected) == float(((expected > 0) & valid).sum())


def test_sparsemax_is_entmax_at_alpha_two():
    x, pad = inputs(seed=4)
    exact = build("entmax", entmax_alpha=2.0, entmax_fixed_alpha=True).eval()
    logits = 3 * torch.randn(pad.size(0), H, pad.size(1), pad.size(1), dtype=torch.float64)
    ref = entmax_by_bisection(masked(logits, pad), 2.0)
    torch.testing.assert_close(exact.selector(logits, pad, x).probs, ref)


def test_learnt_alpha_per_head_and_its_gradient():
    attn = build("entmax").train()  # alpha learnt, every head from 1.5
    assert attn.selector.alpha_logit.shape == (H,)
    torch.testing.assert_close(attn.selector.head_alpha(), torch.full((H,), 1.5, dtype=torch.float64))
    with torch.no_grad():
        attn.selector.alpha_logit.copy_(torch.tensor([-1.0, 0.0, 0.5, 2.0]))
    x, pad = inputs(seed=6)
    logits = logits_by_hand(attn, x).detach()
    alpha = attn.selector.head_alpha().detach()
    probs = attn.selector(logits, pad, x).probs
    torch.testing.assert_close(probs, entmax_by_bisection(masked(logits, pad), alpha),
                               rtol=1e-6, atol=1e-7)
    # d/d(alpha logit) of a weighted sum: autograd against central differences
    upstream = torch.randn(probs.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)

    def loss():
        return (attn.selector(logits, pad, x).probs * upstream).sum()

    (grad,) = torch.autograd.grad(loss(), attn.selector.alpha_logit)
    assert torch.all(grad != 0)
    eps = 1e-3  # the 30 bisection steps leave ~1e-9 of noise in each value
    numeric = torch.empty(H, dtype=torch.float64)
    with torch.no_grad():
        for h in range(H):
            attn.selector.alpha_logit[h] += eps
            up = loss()
            attn.selector.alpha_logit[h] -= 2 * eps
            down = loss()
            attn.selector.alpha_logit[h] += eps
            numeric[h] = (up - down) / (2 * eps)
    torch.testing.assert_close(grad, numeric, rtol=1e-3, atol=1e-6)
    out, _ = call(attn, x, pad)
    out.sum().backward()
    assert attn.selector.alpha_logit.grad is not None and attn.q_proj.weight.grad.abs().sum() > 0


def test_learnt_alpha_at_one_and_a_half_is_entmax15():
    learnt, fixed = build("entmax").eval(), build("entmax", entmax_fixed_alpha=True).eval()
    x, pad = inputs(seed=9, left_pad=True)
    logits = 3 * torch.randn(pad.size(0), H, pad.size(1), pad.size(1), dtype=torch.float64)
    torch.testing.assert_close(learnt.selector(logits, pad, x).probs,
                               fixed.selector(logits, pad, x).probs, rtol=1e-7, atol=1e-8)


def test_float32_rows():
    selector = EntmaxSelector(H, 1.5, learn_alpha=True)
    x, pad = inputs(seed=2, dtype=torch.float32)
    logits = 4 * torch.randn(pad.size(0), H, pad.size(1), pad.size(1))
    check_rows(selector(logits, pad, x).probs, pad)


def test_no_rate_gradient_and_options_checked():
    attn = build("entmax")
    with pytest.raises(OptionError, match="entmax selector's rate has no gradient"):
        attn.rate_gradient = True
    with pytest.raises(OptionError, match=r"learnt alpha .* starts in \(1, 2\)"):
        EntmaxSelector(H, 2.0, learn_alpha=True)
    for bad in (1.0, 2.5, float("nan")):
        with pytest.raises(OptionError, match=r"--entmax-alpha must lie in \(1, 2\]"):
            EntmaxSelector(H, bad, learn_alpha=False)
