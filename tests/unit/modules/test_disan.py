"""ssan_plugin/modules/disan.py: DiSA against a direct loop implementation of its equations
(values and gradients), rows without keys, first/last tokens and pads."""

import pytest
import torch

import ssan_plugin  # noqa: F401  (registrations)
from helpers.attention_reference import assert_same, direct_disa, make_input
from ssan_plugin.modules.disan import DirectionalSelfAttention
from ssan_plugin.modules.multidim_attention import multidim_attention


@pytest.mark.parametrize("direction", ["fw", "bw", "none"])
@pytest.mark.parametrize("implementation", ["blocked", "naive"])
def test_disa_matches_direct_equations(direction, implementation):
    torch.manual_seed(0)
    block = DirectionalSelfAttention(6, 4, direction, implementation=implementation, query_block=3).double()
    x, pad = make_input()
    params = [x] + list(block.parameters())
    assert_same(lambda: block(x, pad), lambda: direct_disa(block, x, pad), params)


def test_rows_without_key_are_zero_and_first_last_tokens():
    x, pad = make_input()
    for direction, empty_index in (("fw", 0), ("bw", -1)):
        block = DirectionalSelfAttention(6, 4, direction).double()
        h = block.features(x)
        s = block.context(h, (~pad).double())
        assert s[0, empty_index].abs().max() == 0  # first (fw) / last (bw) token: no key
        assert s[2, 0].abs().max() == 0  # one-token sentence: its token has no key at all
        assert s[0, 3].abs().max() > 0
        u = block(x, pad)
        assert torch.isfinite(u).all() and u[1, -3:].abs().max() == 0  # zero at pads
    # with only pads as candidate keys nothing leaks from pads
    a = torch.randn(1, 3, 2, dtype=torch.float64)
    v = torch.full((1, 3, 2), 1e6, dtype=torch.float64)
    out = multidim_attention(a, torch.randn(1, 3, 2, dtype=torch.float64), v,
                             torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64), "fw")
    assert out[0, 0].abs().max() == 0 and torch.allclose(out[0, 1:], v[0, :1].expand(2, 2))
