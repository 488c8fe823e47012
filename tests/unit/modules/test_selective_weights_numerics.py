"""Adversarial numerics of selective attention, in float32 and bfloat16 (torch.autocast on CPU).

Already covered elsewhere (not repeated): selective_softmax with +-1e4 logits in fp32/bf16 and
partially empty rows, and the SSAN layer under bf16 autocast with 1e3-scaled inputs
(test_selective_weights.py); DiSAN/Bi-BloSAN/ReSA with 1e4 inputs at lengths 1 and 9, fp32 and
bf16 autocast, and with a sentence of padding only (test_variant_self_attention.py). Here: a
sentence that is padding only, every selection off (SSAN's policy selects nothing), the SSAN
layer at length 1 and with +-1e4 inputs in fp32, eval mode, and the gradients in each case.
"""

import pytest
import torch
from fairseq.models.transformer import TransformerConfig
from fairseq.models.transformer.transformer_config import EncDecBaseConfig
from helpers.numerics import C, DTYPES, H, adversarial_inputs, run_checked
from helpers.ssan_layer import build_selective_attention

from ssan_plugin.modules import AttentionVariantEncoderLayer, selective_softmax


def ssan_layer(selection="hard", policy_bias=None):
    cfg = TransformerConfig()
    cfg.encoder = EncDecBaseConfig()
    cfg.encoder.embed_dim, cfg.encoder.ffn_embed_dim, cfg.encoder.attention_heads = C, 32, H
    cfg.dropout = cfg.attention_dropout = cfg.activation_dropout = 0.0
    layer = AttentionVariantEncoderLayer(cfg, lambda d, c: build_selective_attention(d, c, 0.5, selection))
    if policy_bias is not None:  # W = 0: policy logits = (q bias) . (k bias) = policy_bias * 40 * head dim
        with torch.no_grad():
            layer.self_attn.selector.policy_proj.weight.zero_()
            bias = layer.self_attn.selector.policy_proj.bias
            bias[:C].fill_(policy_bias)
            bias[C:].fill_(40.0)
    return layer


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length", [1, 7])
@pytest.mark.parametrize("scale", [1.0, 1e4])
@pytest.mark.parametrize("selection", ["hard", "soft"])
@pytest.mark.parametrize("policy", ["learned", "all_off"])
def test_ssan_layer_adversarial(dtype, length, scale, selection, policy):
    torch.manual_seed(1)
    layer = ssan_layer(selection, policy_bias=-40.0 if policy == "all_off" else None).train()
    x, pad = adversarial_inputs(length, scale, all_pad_row=True)
    run_checked(lambda x, pad: layer(x, pad), x, pad, dtype, layer.named_parameters())
    stats = layer.self_attn.pop_selection()
    # pair_rate: see test_ssan_select_rate_with_pad_only_sentence
    for name in ("pairs_selected", "pairs_possible", "decisions", "entropy_sum", "pair_count", "neg_entropy"):
        assert torch.isfinite(getattr(stats, name).float()).all(), name
    if policy == "all_off" and selection == "hard":
        assert float(stats.pairs_selected) == 0.0
    layer.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is torch.bfloat16):
        assert torch.isfinite(layer(x, pad).float()).all()


def test_ssan_select_rate_with_pad_only_sentence():
    """pair_rate enters the loss with --select-scale > 0 (--select-penalty-form rate)."""
    layer = ssan_layer("hard").train()
    x, pad = adversarial_inputs(7, 1.0, all_pad_row=True)
    layer(x, pad)
    rate = layer.self_attn.pop_selection().pair_rate
    assert torch.isfinite(rate)


def test_ssan_every_selection_off_is_residual_only():
    """Nothing selected: the attention rows are all zero, the sublayer adds only out_proj's bias."""
    layer = ssan_layer("hard", policy_bias=-40.0).eval()
    x, pad = adversarial_inputs(5, 1.0, all_pad_row=False)
    with torch.no_grad():
        attn, weights = layer.self_attn(x, x, x, key_padding_mask=pad, need_weights=True, need_head_weights=True)
    assert torch.count_nonzero(weights) == 0
    torch.testing.assert_close(attn, layer.self_attn.out_proj.bias.expand_as(attn))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length", [1, 6])
def test_selective_softmax_all_pad_and_all_off(dtype, length):
    g = torch.Generator().manual_seed(3)
    logits = (torch.randn(2, 2, length, length, generator=g) * 1e4).to(dtype).requires_grad_()
    select = torch.zeros(2, 2, length, length, dtype=dtype, requires_grad=True)  # every selection off
    pad = torch.zeros(2, length, dtype=torch.bool)
    pad[1] = True  # a sentence of padding only
    out = selective_softmax(logits, select, pad)
    (out * torch.randn(out.shape, generator=g)).sum().backward()
    assert torch.count_nonzero(out) == 0
    assert torch.isfinite(logits.grad).all() and torch.isfinite(select.grad).all()
    # all selected, still a pad-only sentence: its rows are zero, the other sentence sums to 1
    out = selective_softmax(logits.detach(), torch.ones_like(select), pad)
    assert torch.count_nonzero(out[1]) == 0 and torch.isfinite(out).all()
    torch.testing.assert_close(out[0].sum(-1), torch.ones(2, length))
