"""Adversarial inputs and checks (float32 and bfloat16 under torch.autocast on CPU), shared by
tests/unit/modules/test_selective_weights_numerics.py and test_variant_self_attention.py."""

import torch

from ssan_plugin.modules.biblosan import BiBloSANAttention
from ssan_plugin.modules.disan import DiSANAttention
from ssan_plugin.modules.resa import ReSAAttention


C, H = 16, 4


DTYPES = [torch.float32, torch.bfloat16]


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
