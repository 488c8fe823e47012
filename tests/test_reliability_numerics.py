"""Adversarial numerics not covered elsewhere, in float32 and bfloat16 (torch.autocast on CPU).

Already covered (not repeated): selective_softmax with +-1e4 logits in fp32/bf16 and partially
empty rows (test_selective_softmax.py); the SSAN layer under bf16 autocast with 1e3-scaled
inputs (test_ssan_layer.py); DiSAN/Bi-BloSAN/ReSA with 1e4 inputs at lengths 1 and 9, fp32 and
bf16 autocast (test_variants_mechanisms.py). Added here: a sentence that is padding only, every
selection off (SSAN's policy and ReSA's RSS select nothing), the SSAN layer at length 1 and
with +-1e4 inputs in fp32, eval mode, and the gradients in each case.
"""

import pytest
import torch
from fairseq.models.transformer import TransformerConfig
from fairseq.models.transformer.transformer_config import EncDecBaseConfig

from ssan_plugin.models.ssan_transformer import build_selective_attention
from ssan_plugin.modules import AttentionVariantEncoderLayer, selective_softmax
from ssan_plugin.modules.biblosan import BiBloSANAttention
from ssan_plugin.modules.disan import DiSANAttention
from ssan_plugin.modules.resa import ReSAAttention

C, H = 16, 4
DTYPES = [torch.float32, torch.bfloat16]


def ssan_layer(selection="hard", policy_bias=None):
    cfg = TransformerConfig()
    cfg.encoder = EncDecBaseConfig()
    cfg.encoder.embed_dim, cfg.encoder.ffn_embed_dim, cfg.encoder.attention_heads = C, 32, H
    cfg.dropout = cfg.attention_dropout = cfg.activation_dropout = 0.0
    layer = AttentionVariantEncoderLayer(cfg, lambda d, c: build_selective_attention(d, c, 0.5, selection, False))
    if policy_bias is not None:  # W = 0: policy logits = (q bias) . (k bias) = policy_bias * 40 * head dim
        with torch.no_grad():
            layer.self_attn.policy_proj.weight.zero_()
            bias = layer.self_attn.policy_proj.bias
            bias[:C].fill_(policy_bias)
            bias[C:].fill_(40.0)
    return layer


def adversarial_inputs(length, scale, all_pad_row, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(length, 3, C, generator=g) * scale
    if scale >= 1e4:
        x[:, 0] = 1e4 * torch.sign(x[:, 0])  # exactly +-1e4
    pad = torch.zeros(3, length, dtype=torch.bool)
    if length > 1:
        pad[2, length // 2:] = True
    if all_pad_row:
        pad[1, :] = True
    return x, pad


def run_checked(forward, x, pad, dtype, params):
    x = x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is torch.bfloat16):
        out = forward(x, pad)
    out.float().pow(2).mean().backward()
    assert torch.isfinite(out.float()).all(), "non-finite output"
    assert torch.isfinite(x.grad).all(), "non-finite input gradient"
    for name, p in params:
        assert p.grad is None or torch.isfinite(p.grad).all(), f"non-finite gradient of {name}"
    return out.detach().float()


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
    stats = layer.self_attn.selection_stats
    # select_rate: see test_ssan_select_rate_with_pad_only_sentence
    assert all(torch.isfinite(v.float()).all() for k, v in stats.items() if k != "select_rate")
    if policy == "all_off" and selection == "hard":
        assert float(stats["selected"]) == 0.0
    layer.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is torch.bfloat16):
        assert torch.isfinite(layer(x, pad).float()).all()


def test_ssan_select_rate_with_pad_only_sentence():
    """select_rate enters the loss with --select-scale > 0 (--select-penalty-form rate)."""
    layer = ssan_layer("hard").train()
    x, pad = adversarial_inputs(7, 1.0, all_pad_row=True)
    layer(x, pad)
    rate = layer.self_attn.selection_stats["select_rate"]
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


def resa_all_off(**kw):
    attn = ReSAAttention(C, **kw)
    with torch.no_grad():
        for rss in (attn.head_rss, attn.dep_rss):
            rss.out.weight.zero_()
            rss.out.bias.fill_(-50.0)  # p(select) = sigmoid(-50): nothing selected
    return attn


VARIANTS = {
    "disan_blocked": lambda: DiSANAttention(C),
    "disan_naive": lambda: DiSANAttention(C, implementation="naive"),
    "biblosan": lambda: BiBloSANAttention(C),
    "biblosan_r2": lambda: BiBloSANAttention(C, block_length=2),
    "resa": lambda: ReSAAttention(C),
    "resa_gumbel_bi": lambda: ReSAAttention(C, estimator="gumbel", direction="bi"),
    "resa_all_off": lambda: resa_all_off(),
    "resa_gumbel_all_off": lambda: resa_all_off(estimator="gumbel", direction="bi"),
}


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
        stats = attn.selection_stats
        assert float(stats["head_selected"]) == 0.0 and float(stats["dep_selected"]) == 0.0
    attn.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is torch.bfloat16):
        assert torch.isfinite(attn(x, x, x, key_padding_mask=pad)[0].float()).all()
