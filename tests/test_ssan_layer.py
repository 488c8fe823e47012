"""The SSAN encoder layer: equivalence with fairseq's layer, sampling, statistics."""

import math

import pytest
import torch
from fairseq.models.transformer import TransformerConfig
from fairseq.models.transformer.transformer_config import EncDecBaseConfig
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

from ssan_plugin.models.ssan_transformer import build_selective_attention
from ssan_plugin.modules import AttentionVariantEncoderLayer, sample_selection
from ssan_plugin.modules.selective_attention import binary_entropy_from_logits

C, H, T, B = 32, 4, 7, 3


def config(dropout=0.0):
    cfg = TransformerConfig()
    cfg.encoder = EncDecBaseConfig()  # the dataclass default instance is shared between configs
    cfg.encoder.embed_dim, cfg.encoder.ffn_embed_dim, cfg.encoder.attention_heads = C, 64, H
    cfg.dropout = cfg.attention_dropout = cfg.activation_dropout = dropout
    return cfg


def ssan_layer(cfg, tau=0.5, selection="hard"):
    build = lambda d, c: build_selective_attention(d, c, tau, selection, False)  # noqa: E731
    return AttentionVariantEncoderLayer(cfg, build)


def force_select_all(layer):
    """Policy logits E_p = (q_p . k_p) = 40^2 * d: every pair selected whatever the noise."""
    with torch.no_grad():
        layer.self_attn.policy_proj.weight.zero_()
        layer.self_attn.policy_proj.bias.fill_(40.0)


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, C, generator=g)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, -3:] = True
    pad[2, -1:] = True
    return x, pad


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("normalize_before", [False, True])
def test_select_all_reproduces_fairseq_layer(train, normalize_before):
    torch.manual_seed(0)
    cfg = config()
    cfg.encoder.normalize_before = normalize_before
    ours, theirs = ssan_layer(cfg), TransformerEncoderLayerBase(cfg)
    missing, unexpected = ours.load_state_dict(theirs.state_dict(), strict=False)
    assert sorted(missing) == ["self_attn.policy_proj.bias", "self_attn.policy_proj.weight"]
    assert not unexpected
    force_select_all(ours)
    ours.train(train), theirs.train(train)
    x, pad = inputs()
    for mask in (pad, None):
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        y1, y2 = ours(x1, mask), theirs(x2, mask)
        torch.testing.assert_close(y1, y2, rtol=1e-5, atol=1e-5)
        g = torch.randn_like(y1)
        (y1 * g).sum().backward(), (y2 * g).sum().backward()
        torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-4, atol=1e-5)
    assert ours.self_attn.selection_stats["selected"] == ours.self_attn.selection_stats["pairs"]


def test_attention_weights_returned_like_fairseq():
    torch.manual_seed(0)
    cfg = config()
    ours, theirs = ssan_layer(cfg).self_attn, TransformerEncoderLayerBase(cfg).self_attn
    ours.load_state_dict(theirs.state_dict(), strict=False)
    with torch.no_grad():
        ours.policy_proj.weight.zero_()
        ours.policy_proj.bias.fill_(40.0)
    ours.eval(), theirs.eval()
    x, pad = inputs(1)
    _, w1 = ours(x, x, x, key_padding_mask=pad, need_weights=True)
    _, w2 = theirs(x, x, x, key_padding_mask=pad, need_weights=True)
    torch.testing.assert_close(w1, w2, rtol=1e-5, atol=1e-6)
    _, w1 = ours(x, x, x, key_padding_mask=pad, need_weights=True, need_head_weights=True)
    _, w2 = theirs(x, x, x, key_padding_mask=pad, need_weights=True, need_head_weights=True)
    assert w1.shape == (H, B, T, T)
    torch.testing.assert_close(w1.mean(0), w2, rtol=1e-5, atol=1e-6)


def test_straight_through_is_binary_and_trains_the_policy():
    torch.manual_seed(1)
    layer = ssan_layer(config())
    layer.train()
    x, pad = inputs(2)
    captured = {}
    attn = layer.self_attn
    original = attn._statistics

    def spy(policy_logits, select, key_padding_mask):
        captured["select"] = select
        return original(policy_logits, select, key_padding_mask)

    attn._statistics = spy
    out = layer(x, pad)
    select = captured["select"]
    assert select.requires_grad
    assert torch.all((select == 0) | (select == 1)), "forward values must be exactly 0/1"
    assert 0 < select.mean() < 1
    out.pow(2).sum().backward()
    grad = attn.policy_proj.weight.grad
    assert grad is not None and grad.abs().sum() > 0


def test_eval_is_deterministic_and_thresholds_pi():
    torch.manual_seed(2)
    layer = ssan_layer(config(dropout=0.1)).eval()
    x, pad = inputs(3)
    y1, y2 = layer(x, pad), layer(x, pad)
    assert torch.equal(y1, y2)
    logits = torch.randn(2, 3, 4, 4)
    assert torch.equal(sample_selection(logits, 0.5, "hard", training=False),
                       (torch.sigmoid(logits) > 0.5).float())


@pytest.mark.parametrize("tau", [0.5, 2.0])
def test_gumbel_selection_frequency_matches_sigmoid(tau):
    """P(1[sigmoid((E_p + G' - G'') / tau) > 0.5]) = sigmoid(E_p), for any tau."""
    torch.manual_seed(1234)
    logits = torch.tensor([-3.0, -1.0, -0.2, 0.0, 0.5, 2.0, 4.0])
    n = 40000
    draws = sample_selection(logits.expand(n, -1).contiguous(), tau, "hard", training=True)
    freq = draws.mean(0)
    p = torch.sigmoid(logits)
    sigma = torch.sqrt(p * (1 - p) / n)
    assert torch.all((freq - p).abs() < 5 * sigma + 1e-4), (freq, p)


def test_soft_selection_has_no_noise():
    torch.manual_seed(3)
    layer = ssan_layer(config(), selection="soft").train()
    x, pad = inputs(4)
    assert torch.equal(layer(x, pad), layer(x, pad))
    logits = torch.randn(5, 5)
    assert torch.equal(sample_selection(logits, 0.5, "soft", training=True), torch.sigmoid(logits))


def test_statistics_match_direct_count():
    torch.manual_seed(4)
    layer = ssan_layer(config()).eval()
    x, pad = inputs(5)
    attn = layer.self_attn
    captured = {}
    original = attn._statistics

    def spy(policy_logits, select, key_padding_mask):
        captured["policy_logits"] = policy_logits
        return original(policy_logits, select, key_padding_mask)

    attn._statistics = spy
    layer(x, pad)
    stats = attn.selection_stats
    # the policy logits by hand, then the statistics by hand from the module's own logits
    qk = attn.policy_proj(x)  # T x B x 2C
    qp, kp = qk[..., :C], qk[..., C:]
    qp = qp.reshape(T, B, H, C // H).permute(1, 2, 0, 3)
    kp = kp.reshape(T, B, H, C // H).permute(1, 2, 0, 3)
    ep = qp @ kp.transpose(-1, -2)  # B, H, T, T
    torch.testing.assert_close(captured["policy_logits"], ep, rtol=1e-5, atol=1e-5)
    ep = captured["policy_logits"]
    sel = (ep > 0).float()
    selected = pairs = ent = 0.0
    rate_sum = count_sum = 0.0
    for b in range(B):
        n = int((~pad[b]).sum())
        block = sel[b, :, :n, :n]
        selected += block.sum().item()
        pairs += H * n * n
        ent += binary_entropy_from_logits(ep[b, :, :n, :n]).sum().item()
        rate_sum += (block.sum(-1) / n).sum().item()  # sum over heads and queries
        count_sum += block.sum().item()
    n_queries = int((~pad).sum())
    assert stats["selected"].item() == pytest.approx(selected)
    assert stats["pairs"].item() == pytest.approx(pairs)
    assert stats["entropy_sum"].item() == pytest.approx(ent, rel=1e-5)
    assert stats["select_rate"].item() == pytest.approx(rate_sum / n_queries, rel=1e-5)
    assert stats["select_count"].item() == pytest.approx(count_sum / n_queries, rel=1e-5)
    assert stats["neg_entropy"].item() == pytest.approx(-ent / pairs, rel=1e-5)


def test_binary_entropy_stable():
    x = torch.tensor([-1e4, -30.0, -1.0, 0.0, 2.0, 1e4])
    p = torch.sigmoid(x.double())
    ref = -(p * torch.log(p) + (1 - p) * torch.log1p(-p))
    ref = torch.nan_to_num(ref, nan=0.0)
    torch.testing.assert_close(binary_entropy_from_logits(x).double(), ref, atol=1e-7, rtol=1e-5)
    assert binary_entropy_from_logits(torch.tensor(0.0)).item() == pytest.approx(math.log(2))


@pytest.mark.parametrize("dtype", [torch.bfloat16])
def test_layer_under_autocast_is_finite(dtype):
    torch.manual_seed(5)
    layer = ssan_layer(config()).train()
    x, pad = inputs(6)
    x = (x * 1e3).requires_grad_()
    with torch.autocast("cpu", dtype=dtype):
        y = layer(x, pad)
    y.float().sum().backward()
    assert torch.isfinite(y).all() and torch.isfinite(x.grad).all()
