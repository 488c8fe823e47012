"""ssan_plugin/modules/multidim_attention.py: the blocked multi-dimensional attention against the
naive form (values, gradients, memory) and source2token against its direct equations."""

import pytest
import torch

import ssan_plugin  # noqa: F401  (registrations)
from helpers.attention_reference import assert_same, direct_source2token, make_input
from ssan_plugin.modules.multidim_attention import (
    Source2Token,
    multidim_attention,
    multidim_attention_naive,
    multidim_attention_probs,
)


def test_blocked_equals_naive_values_and_grads_with_weights():
    """Random positive key weights, query mask, uneven last block, positions as (N, T)."""
    gen = torch.Generator().manual_seed(1)
    n, t, s, d = 2, 7, 5, 3
    a = torch.randn(n, s, d, generator=gen, dtype=torch.float64, requires_grad=True)
    q = torch.randn(n, t, d, generator=gen, dtype=torch.float64, requires_grad=True)
    v = torch.randn(n, s, d, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.tensor([[1, 0, 1, 1, 0], [0, 0, 0, 0, 1]], dtype=torch.float64, requires_grad=True)
    q_ok = torch.rand(n, t, generator=gen) > 0.3
    q_pos = torch.tensor([[0, 2, 3, 5, 6, 8, 9], [1, 2, 3, 4, 5, 6, 7]])
    k_pos = torch.tensor([[1, 2, 4, 6, 7], [0, 3, 5, 6, 8]])
    for direction in ("fw", "bw", "none"):
        kw = dict(q_pos=q_pos, k_pos=k_pos, query_ok=q_ok)
        assert_same(lambda: multidim_attention(a, q, v, w, direction, query_block=3, **kw),
                    lambda: multidim_attention_naive(a, q, v, w, direction, **kw), [a, q, v, w])
    # finite differences where the weights are positive (a 0 weight is a kink of the convention)
    wpos = (torch.rand(n, s, generator=gen, dtype=torch.float64) + 0.2).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, q, v, w: multidim_attention(a, q, v, w, "fw", query_block=2, q_pos=q_pos, k_pos=k_pos),
        (a, q, v, wpos))


def test_blocked_never_holds_the_full_pair_tensor(monkeypatch):
    """Every tensor the blocked form materialises has at most block x S x D x N elements."""
    seen = []
    real_exp = torch.exp

    def spy(t, *args, **kwargs):
        seen.append(t.numel())
        return real_exp(t, *args, **kwargs)

    monkeypatch.setattr(torch, "exp", spy)
    n, t, d, block = 2, 24, 4, 3
    a, q, v = (torch.randn(n, t, d, requires_grad=True) for _ in range(3))
    out = multidim_attention(a, q, v, torch.ones(n, t), "fw", query_block=block)
    out.sum().backward()
    assert seen and max(seen) == n * block * t * d < n * t * t * d


@pytest.mark.parametrize("hidden", [0, 5])
def test_source2token_matches_direct(hidden):
    torch.manual_seed(0)
    s2t = Source2Token(6, hidden).double()
    x, pad = make_input()
    pad = torch.cat([pad, torch.ones(1, pad.size(1), dtype=torch.bool)])  # an all-pad row
    x = torch.cat([x, torch.randn(1, *x.shape[1:], dtype=x.dtype)]).detach().requires_grad_()
    assert_same(lambda: s2t(x, pad), lambda: direct_source2token(s2t, x, pad), [x] + list(s2t.parameters()))
    assert s2t(x, pad)[-1].abs().max() == 0


def test_probs_reproduce_the_output_for_any_values():
    """sum_j P[:, i, j] v_j equals the attention output for two different v (0/1 key weights,
    query mask, positions); rows are distributions over the allowed keys or all zero."""
    gen = torch.Generator().manual_seed(2)
    n, t, s, d = 2, 6, 5, 3
    a, q = torch.randn(n, s, d, generator=gen), torch.randn(n, t, d, generator=gen)
    w = torch.tensor([[1, 0, 1, 1, 0], [0, 0, 0, 0, 1]], dtype=torch.float32)
    q_ok = torch.tensor([[1, 1, 0, 1, 1, 1], [1, 1, 1, 1, 1, 0]], dtype=torch.bool)
    for direction in ("fw", "bw", "none"):
        p = multidim_attention_probs(a, q, w, direction, query_ok=q_ok)
        assert p.shape == (n, t, s, d) and not p.requires_grad
        for _ in range(2):
            v = torch.randn(n, s, d, generator=gen)
            torch.testing.assert_close((p * v.unsqueeze(1)).sum(2),
                                       multidim_attention_naive(a, q, v, w, direction, query_ok=q_ok))
        sums = p.sum(2)
        assert torch.all(((sums - 1).abs() < 1e-5) | (sums == 0))
        assert p[~w.bool().unsqueeze(1).expand(n, t, s)].abs().max() == 0
        assert p[~q_ok].abs().max() == 0
