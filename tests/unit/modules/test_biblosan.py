"""ssan_plugin/modules/biblosan.py: mBloSA against a direct loop implementation with explicit
blocks (values and gradients), the default block length, and left-padded batches."""

import math

import pytest
import torch

import ssan_plugin  # noqa: F401  (registrations)
from helpers.attention_reference import assert_same, direct_mblosa, make_input
from ssan_plugin.modules.biblosan import BiBloSANAttention, MaskedBlockSelfAttention, default_block_length


@pytest.mark.parametrize("direction", ["fw", "bw"])
@pytest.mark.parametrize("block_length", [0, 3, 1, 10])
def test_mblosa_matches_direct(direction, block_length):
    torch.manual_seed(0)
    m = MaskedBlockSelfAttention(6, 4, direction, block_length=block_length).double()
    x, pad = make_input(length=8)  # 8 is not a multiple of 3 nor of the default r = 3
    r = block_length or default_block_length(8)
    assert_same(lambda: m(x, pad), lambda: direct_mblosa(m, x, pad, r), [x] + list(m.parameters()))


def test_default_block_length():
    assert [default_block_length(n) for n in (1, 4, 13, 32, 108, 256, 384)] == [
        math.ceil((2 * n) ** (1 / 3) - 1e-9) for n in (1, 4, 13, 32, 108, 256, 384)]
    assert default_block_length(4) == 2 and default_block_length(32) == 4 and default_block_length(108) == 6


def test_biblosan_left_padded_sentence_equals_the_sentence_alone():
    torch.manual_seed(0)
    attention = BiBloSANAttention(16, block_length=3).eval()
    x = torch.randn(7, 3, 16)  # T x B x C
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[0, :2] = True  # left-padded (fairseq's translation sources)
    pad[1, 5:] = True  # right-padded
    x = x.masked_fill(pad.t().unsqueeze(-1), 0.0)
    out, _ = attention(x, x, x, key_padding_mask=pad)
    for row, (start, end) in enumerate([(2, 7), (0, 5), (0, 7)]):
        alone = x[start:end, row:row + 1].clone()
        expected, _ = attention(alone, alone, alone, key_padding_mask=None)
        torch.testing.assert_close(out[start:end, row], expected[:, 0], rtol=1e-5, atol=1e-6)
    assert out[:2, 0].abs().max() == 0 and out[5:, 1].abs().max() == 0
