"""ssan_plugin/modules/disan.py: DiSA against a direct loop implementation of its equations
(values and gradients), rows without keys, first/last tokens and pads."""

import pytest
import torch

import ssan_plugin  # noqa: F401  (registrations)
from helpers.attention_reference import assert_same, direct_disa, direct_disa_weights, make_input
from ssan_plugin.modules.disan import DiSANAttention, DirectionalSelfAttention
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


def test_attention_maps_are_the_feature_mean_of_the_direct_weights():
    """DiSANAttention.attention_maps: (B, 2, T, T), forward then backward, each the mean over
    features of P from the direct loop; strictly lower (fw) / upper (bw) triangular, zero at
    pad keys, rows summing to 1 where a key is allowed and to 0 where none is."""
    torch.manual_seed(0)
    attention = DiSANAttention(6).double()
    x, pad = make_input(length=7)
    maps = attention.attention_maps(x.detach(), pad)
    assert maps.shape == (3, 2, 7, 7)
    for k, block in enumerate((attention.fw, attention.bw)):
        torch.testing.assert_close(maps[:, k], direct_disa_weights(block, x.detach(), pad))
    assert torch.equal(maps[:, 0], maps[:, 0].tril(-1)) and torch.equal(maps[:, 1], maps[:, 1].triu(1))
    assert maps[1, :, :, 4:].abs().max() == 0  # pad keys of the right-padded row
    sums = maps[0].sum(-1)
    torch.testing.assert_close(sums[0, 1:], torch.ones(6, dtype=sums.dtype))
    assert sums[0, 0] == 0 and sums[1, -1] == 0  # first token forward, last token backward
