"""ssan_plugin/modules/biblosan.py: mBloSA against a direct loop implementation with explicit
blocks (values and gradients), the default block length, and left-padded batches."""

import math

import pytest
import torch

import ssan_plugin  # noqa: F401  (registrations)
from helpers.attention_reference import assert_same, direct_mblosa, direct_mblosa_weights, make_input
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


@pytest.mark.parametrize("direction", ["fw", "bw"])
@pytest.mark.parametrize("block_length", [0, 3])
def test_mblosa_attention_maps_match_direct(direction, block_length):
    torch.manual_seed(0)
    m = MaskedBlockSelfAttention(6, 4, direction, block_length=block_length).double()
    x, pad = make_input(length=8)
    r = block_length or default_block_length(8)
    maps = m.attention_maps(x.detach(), pad)
    assert maps.shape == (3, 2, 8, 8)
    torch.testing.assert_close(maps, direct_mblosa_weights(m, x.detach(), pad, r))
    same_block = torch.tensor([[i // r == j // r for j in range(8)] for i in range(8)])
    assert maps[:, 0][:, ~same_block].abs().max() == 0  # intra-block: within the block only
    assert maps[:, 1][:, same_block].abs().max() == 0  # inter-block: other blocks only
    # each full row of the first sentence: intra rows sum to 1 unless first (fw) / last (bw)
    # of its block; inter rows sum to 1 unless the block has no block before (fw) / after (bw)
    first_block = (torch.arange(8) // r == 0) if direction == "fw" else (torch.arange(8) // r == 7 // r)
    torch.testing.assert_close(maps[0, 1].sum(-1)[~first_block], torch.ones(int((~first_block).sum()), dtype=maps.dtype))


def test_biblosan_maps_of_a_left_padded_sentence_equal_the_sentence_alone():
    torch.manual_seed(0)
    attention = BiBloSANAttention(16, block_length=3).eval()
    x = torch.randn(3, 7, 16)  # B x T x C
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[0, :2] = True
    pad[1, 5:] = True
    maps = attention.attention_maps(x, pad)
    assert maps.shape == (3, 4, 7, 7)
    for row, (start, end) in enumerate([(2, 7), (0, 5), (0, 7)]):
        alone = attention.attention_maps(x[row:row + 1, start:end], None)[0]
        torch.testing.assert_close(maps[row][:, start:end, start:end], alone, rtol=1e-5, atol=1e-6)
    assert maps[0][:, :, :2].abs().max() == 0  # pad keys get no weight


def test_default_block_length_is_each_sentences_own():
    """With the default block length, a sentence of 3 tokens (r = 2) batched with one of 14
    (r = 4 for the batch length) is encoded exactly as alone, left- or right-padded; its
    attention maps too. With a fixed block length the batch goes through in one group."""
    torch.manual_seed(0)
    attention = BiBloSANAttention(16).eval()
    x = torch.randn(14, 3, 16)  # T x B x C
    pad = torch.zeros(3, 14, dtype=torch.bool)
    pad[0, :11] = True  # 3 tokens, left-padded
    pad[1, 5:] = True  # 5 tokens, right-padded
    x = x.masked_fill(pad.t().unsqueeze(-1), 0.0)
    out, _ = attention(x, x, x, key_padding_mask=pad)
    maps = attention.attention_maps(x.transpose(0, 1), pad)
    for row, (start, end) in enumerate([(11, 14), (0, 5), (0, 14)]):
        alone = x[start:end, row:row + 1].clone()
        expected, _ = attention(alone, alone, alone, key_padding_mask=None)
        torch.testing.assert_close(out[start:end, row], expected[:, 0], rtol=1e-5, atol=1e-6)
        alone_maps = attention.attention_maps(alone.transpose(0, 1), None)[0]
        torch.testing.assert_close(maps[row][:, start:end, start:end], alone_maps, rtol=1e-5, atol=1e-6)
    assert default_block_length(3) != default_block_length(14)
    groups = list(attention._sentence_groups(pad.sort(dim=1, stable=True).values, 14))
    assert [(r, rows.tolist(), n) for r, rows, n in groups] == [(2, [0], 3), (3, [1], 5), (4, [2], 14)]
    fixed = BiBloSANAttention(16, block_length=3)
    assert list(fixed._sentence_groups(pad, 14)) == [(0, None, 14)]
