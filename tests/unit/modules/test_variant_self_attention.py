"""ssan_plugin/modules/variant_self_attention.py: fairseq's self-attention call signature around
DiSAN, Bi-BloSAN and ReSA (shapes, pads, refused attn_mask, selection records), finite values and
gradients in bf16 autocast, with 1e4 inputs and with a sentence of padding only."""

import pytest
import torch

import ssan_plugin  # noqa: F401  (registrations)
from helpers.attention_reference import make_input
from helpers.numerics import DTYPES, VARIANTS, adversarial_inputs, run_checked
from ssan_plugin.modules.biblosan import BiBloSANAttention
from ssan_plugin.modules.disan import DiSANAttention
from ssan_plugin.modules.resa import ReSAAttention
from ssan_plugin.modules.selection import SelectionReporter, SelectionStats


def test_fairseq_call_signature_and_pads():
    torch.manual_seed(0)
    x, pad = make_input(length=5)
    xt = x.detach().float().transpose(0, 1).contiguous()
    for attn in (DiSANAttention(6), DiSANAttention(6, implementation="naive"), BiBloSANAttention(6),
                 ReSAAttention(6), ReSAAttention(6, estimator="gumbel", direction="bi")):
        out, weights = attn(query=xt, key=xt, value=xt, key_padding_mask=pad, need_weights=False, attn_mask=None)
        assert weights is None and out.shape == xt.shape and torch.isfinite(out).all()
        assert out.transpose(0, 1)[pad].abs().max() == 0
        short = xt[:2, :1]
        out_nopad, _ = attn(query=short, key=short, value=short, key_padding_mask=None)
        assert out_nopad.shape == (2, 1, 6)
        with pytest.raises(ValueError, match="attn_mask"):
            attn(query=xt, key=xt, value=xt, attn_mask=torch.zeros(5, 5))
        # only the selector reports a selection record
        assert isinstance(attn, SelectionReporter) == isinstance(attn, ReSAAttention)
        if isinstance(attn, ReSAAttention):
            assert isinstance(attn.pop_selection(), SelectionStats)


@pytest.mark.parametrize("make", [
    lambda: DiSANAttention(8), lambda: DiSANAttention(8, implementation="naive"), lambda: BiBloSANAttention(8),
    lambda: ReSAAttention(8), lambda: ReSAAttention(8, estimator="gumbel", direction="bi"),
])
@pytest.mark.parametrize("length", [1, 9])
def test_finite_in_bf16_autocast_and_with_1e4_inputs(make, length):
    torch.manual_seed(0)
    attn = make()
    pad = torch.zeros(2, length, dtype=torch.bool)
    pad[1, length // 2 + 1:] = True
    x = torch.randn(length, 2, 8) * 1e4
    x[0, 0] = 1e4
    x[-1, 0] = -1e4
    x.requires_grad_()
    for autocast in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out, _ = attn(x, x, x, key_padding_mask=pad)
        out.float().pow(2).mean().backward()
        assert torch.isfinite(out).all(), autocast
        assert torch.isfinite(x.grad).all() and all(
            p.grad is None or torch.isfinite(p.grad).all() for p in attn.parameters())
        x.grad = None
        attn.zero_grad()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length", [1, 7])
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_with_pad_only_sentence(name, length, dtype):
    torch.manual_seed(2)
    attn = VARIANTS[name]().train()
    x, pad = adversarial_inputs(length, 1e4, all_pad_row=True)
    out = run_checked(lambda x, pad: attn(x, x, x, key_padding_mask=pad)[0], x, pad, dtype, attn.named_parameters())
    assert out.transpose(0, 1)[pad].abs().max() == 0  # pads (here: a whole sentence) output zero
    if "all_off" in name:
        stats = attn.pop_selection()
        assert float(stats.queries_selected) == 0.0 and float(stats.keys_selected) == 0.0
    attn.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is torch.bfloat16):
        assert torch.isfinite(attn(x, x, x, key_padding_mask=pad)[0].float()).all()
