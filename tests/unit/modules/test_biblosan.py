"""ssan_plugin/modules/biblosan.py: mBloSA against a direct loop implementation with explicit
blocks (values and gradients), and the default block length."""

import math

import pytest
import torch

import ssan_plugin  # noqa: F401  (registrations)
from helpers.attention_reference import assert_same, direct_mblosa, make_input
from ssan_plugin.modules.biblosan import MaskedBlockSelfAttention, default_block_length


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
