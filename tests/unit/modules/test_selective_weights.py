"""ssan_plugin/modules/selective_weights.py: selective_softmax against a direct float64
implementation of the SSAN formula; SSAN's attention (the gumbel selector) inside fairseq's
encoder layer (attention weights, straight-through, eval, soft selection, statistics, autocast)."""

import pytest
import torch
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase
from helpers.ssan_layer import B, C, H, T, config, inputs, ssan_layer

from ssan_plugin.modules import binary_entropy_from_logits, sample_selection
from ssan_plugin.modules.selective_weights import selective_softmax


def naive_selective_attention(logits, select, pad):
    """ATT_ij = A_ij exp(E_ij) / sum_j' A_ij' exp(E_ij'), pads excluded, empty rows zero.

    Straight from the formula, in float64 with no stabilisation (moderate logits only).
    """
    keep = (~pad).view(pad.size(0), 1, 1, -1).to(logits.dtype)
    weights = select * torch.exp(logits) * keep
    denom = weights.sum(-1, keepdim=True)
    out = weights / torch.where(denom > 0, denom, torch.ones_like(denom))
    return out


def spy_statistics(attn):
    """What the selector's next forwards give the record (``policy_logits``: E_p; ``select``:
    the selection A the rate term reads), recorded in the returned dict. On the evaluation-mask
    path E_p is 0 at pad keys (K_p zeroed there), which the record never reads."""
    captured = {}
    selector = attn.selector
    forward, mask = selector.forward, selector.evaluation_mask

    def spy_forward(*args, **kwargs):
        selection = forward(*args, **kwargs)
        captured.update(policy_logits=selection.decision_logits, select=selection.keep)
        return selection

    def spy_mask(*args, **kwargs):
        masked = mask(*args, **kwargs)
        if masked is not None:
            captured.update(policy_logits=masked[1], select=None)
        return masked

    selector.forward, selector.evaluation_mask = spy_forward, spy_mask
    return captured


def at_keys(t, pad):
    """``t`` (B, h, T, S) with pad keys zeroed (what a record reads of it)."""
    return t.masked_fill(pad.view(pad.size(0), 1, 1, -1), 0.0)


def random_case(seed, B=3, H=2, T=6, scale=1.0, p_select=0.6, empty_rows=True):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, H, T, T, generator=g, dtype=torch.float64) * scale
    select = (torch.rand(B, H, T, T, generator=g) < p_select).to(torch.float64)
    if empty_rows:
        select[0, 1, 2] = 0.0  # an empty selection row
        select[2, 0, 0] = 0.0
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, -2:] = True  # two pads in sentence 1
    pad[2, -1:] = True
    select[1, 0, 3, : T - 2] = 0.0  # a row whose only selected keys are pads -> empty
    select[1, 0, 3, T - 2:] = 1.0
    return logits, select, pad


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_values_and_gradients_match_the_formula(seed):
    logits, select, pad = random_case(seed)
    upstream = torch.randn(logits.shape, generator=torch.Generator().manual_seed(100 + seed),
                           dtype=torch.float64)

    e1, a1 = logits.clone().requires_grad_(), select.clone().requires_grad_()
    ours = selective_softmax(e1.float(), a1.float(), pad)
    (ours.double() * upstream).sum().backward()

    e2, a2 = logits.clone().requires_grad_(), select.clone().requires_grad_()
    ref = naive_selective_attention(e2, a2, pad)
    (ref * upstream).sum().backward()

    torch.testing.assert_close(ours.double(), ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-4, atol=1e-6)
    # d/dA of an empty row is a convention (ours: shift by the row max, bounded); compare
    # the selection gradient on rows with a selection, and pad keys never get any.
    keep = (~pad).view(pad.size(0), 1, 1, -1)
    nonempty = ((select > 0) & keep).any(-1, keepdim=True)
    torch.testing.assert_close(a1.grad * nonempty * keep, a2.grad * nonempty * keep,
                               rtol=1e-4, atol=1e-6)
    assert torch.all(a1.grad.masked_select(~keep.expand_as(a1.grad)) == 0)


def test_empty_rows_are_zero_and_others_sum_to_one():
    logits, select, pad = random_case(3)
    out = selective_softmax(logits.float(), select.float(), pad)
    keep = (~pad).view(pad.size(0), 1, 1, -1)
    nonempty = ((select > 0) & keep).any(-1)
    sums = out.sum(-1)
    assert torch.all(sums[~nonempty] == 0)
    torch.testing.assert_close(sums[nonempty], torch.ones_like(sums[nonempty]))
    assert torch.all(out.masked_select(pad.view(pad.size(0), 1, 1, -1).expand_as(out)) == 0)
    assert torch.all(out[(select == 0)] == 0)


def test_full_selection_is_softmax_exactly():
    logits, _, pad = random_case(4, scale=3.0)
    select = torch.ones_like(logits)
    masked = logits.float().masked_fill(pad.view(pad.size(0), 1, 1, -1), float("-inf"))
    torch.testing.assert_close(
        selective_softmax(logits.float(), select.float(), pad), torch.softmax(masked, -1),
        rtol=1e-6, atol=1e-7,
    )


def test_soft_selection_matches_formula():
    logits, _, pad = random_case(5)
    select = torch.rand(logits.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    torch.testing.assert_close(
        selective_softmax(logits.float(), select.float(), pad).double(),
        naive_selective_attention(logits, select, pad), rtol=1e-5, atol=1e-6,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_extreme_logits_stay_finite(dtype):
    logits, select, pad = random_case(6)
    extreme = torch.where(torch.rand(logits.shape, generator=torch.Generator().manual_seed(8)) < 0.5,
                          torch.full_like(logits, 1e4), torch.full_like(logits, -1e4))
    e = extreme.to(dtype).requires_grad_()
    a = select.to(dtype).requires_grad_()
    out = selective_softmax(e, a, pad)
    (out * torch.randn_like(out)).sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(e.grad).all() and torch.isfinite(a.grad).all()
    keep = (~pad).view(pad.size(0), 1, 1, -1)
    nonempty = ((select > 0) & keep).any(-1)
    torch.testing.assert_close(out.sum(-1)[nonempty], torch.ones(int(nonempty.sum())))
    # each non-empty row puts all its mass on its largest selected logits
    best = extreme.masked_fill(~((select > 0) & keep), float("-inf")).amax(-1, keepdim=True)
    on_best = (out.double() * (extreme == best)).sum(-1)
    torch.testing.assert_close(on_best[nonempty], torch.ones(int(nonempty.sum()), dtype=torch.float64))


def test_large_shift_does_not_change_result():
    """Adding 1e4 to a whole row changes nothing (no overflow, exact shift invariance)."""
    logits, select, pad = random_case(9)
    base = selective_softmax(logits.float(), select.float(), pad)
    shifted = selective_softmax((logits + 1e4).float(), select.float(), pad)
    torch.testing.assert_close(base, shifted, rtol=1e-2, atol=2e-3)


def test_attention_weights_returned_like_fairseq():
    torch.manual_seed(0)
    cfg = config()
    ours, theirs = ssan_layer(cfg).self_attn, TransformerEncoderLayerBase(cfg).self_attn
    ours.load_state_dict(theirs.state_dict(), strict=False)
    with torch.no_grad():
        ours.selector.policy_proj.weight.zero_()
        ours.selector.policy_proj.bias.fill_(40.0)
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
    attn = layer.self_attn
    captured = spy_statistics(attn)
    out = layer(x, pad)
    select = captured["select"]
    assert select.requires_grad
    assert torch.all((select == 0) | (select == 1)), "forward values must be exactly 0/1"
    assert 0 < select.mean() < 1
    out.pow(2).sum().backward()
    grad = attn.selector.policy_proj.weight.grad
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
    attn.report_statistics = True  # an evaluation forward reports only when asked
    captured = spy_statistics(attn)
    layer(x, pad)
    stats = attn.pop_selection()
    # the policy logits by hand, then the statistics by hand from the module's own logits
    qk = attn.selector.policy_proj(x)  # T x B x 2C
    qp, kp = qk[..., :C], qk[..., C:]
    qp = qp.reshape(T, B, H, C // H).permute(1, 2, 0, 3)
    kp = kp.reshape(T, B, H, C // H).permute(1, 2, 0, 3)
    ep = qp @ kp.transpose(-1, -2)  # B, H, T, T
    torch.testing.assert_close(at_keys(captured["policy_logits"], pad), at_keys(ep, pad),
                               rtol=1e-5, atol=1e-5)
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
    assert stats.pairs_selected.item() == pytest.approx(selected)
    assert stats.pairs_possible.item() == pytest.approx(pairs) == stats.decisions.item()
    assert stats.entropy_sum.item() == pytest.approx(ent, rel=1e-5)
    assert stats.pair_rate.item() == pytest.approx(rate_sum / n_queries, rel=1e-5)
    assert stats.pair_count.item() == pytest.approx(count_sum / n_queries, rel=1e-5)
    assert stats.neg_entropy.item() == pytest.approx(-ent / pairs, rel=1e-5)
    assert stats.selection is None and attn.pop_selection() is None  # taken once, kept only on request
    attn.keep_selection = True
    layer.eval()(x, pad)
    valid = ~pad
    pairs_valid = (valid.view(B, 1, 1, T) & valid.view(B, 1, T, 1))  # pad queries and keys out
    assert torch.equal(attn.pop_selection().selection, (ep > 0) & pairs_valid)


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


def test_narrow_policy_logits_and_selection():
    """--ssan-policy-dim P: Q_p, K_p of width P (P / h a head); the policy logits, the eval
    selection and the output equal a computation by hand; train mode runs and trains it."""
    torch.manual_seed(6)
    P = 8
    layer = ssan_layer(config(), policy_dim=P).eval()
    attn = layer.self_attn
    attn.report_statistics = True  # (the spy below reads the policy logits)
    assert attn.selector.policy_proj.weight.shape == (2 * P, C)
    x, pad = inputs(7)
    captured = spy_statistics(attn)
    out, _ = attn(x, x, x, key_padding_mask=pad)

    def heads(y, d):
        return y.reshape(T, B, H, d).permute(1, 2, 0, 3)

    qk = attn.selector.policy_proj(x)
    ep = heads(qk[..., :P], P // H) @ heads(qk[..., P:], P // H).transpose(-1, -2)
    torch.testing.assert_close(at_keys(captured["policy_logits"], pad), at_keys(ep, pad),
                               rtol=1e-5, atol=1e-5)
    q = heads(attn.q_proj(x) * attn.scaling, C // H)
    k, v = heads(attn.k_proj(x), C // H), heads(attn.v_proj(x), C // H)
    select = (ep > 0).double()
    probs = naive_selective_attention((q @ k.transpose(-1, -2)).double(), select, pad)
    expected = attn.out_proj((probs.float() @ v).permute(2, 0, 1, 3).reshape(T, B, C))
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)

    layer.train()
    layer(x, pad).sum().backward()
    assert attn.selector.policy_proj.weight.grad.abs().sum() > 0


def test_narrow_policy_selecting_every_pair_is_fairseqs_attention():
    torch.manual_seed(7)
    cfg = config()
    ours, theirs = ssan_layer(cfg, policy_dim=4).self_attn, TransformerEncoderLayerBase(cfg).self_attn
    ours.load_state_dict(theirs.state_dict(), strict=False)
    with torch.no_grad():
        ours.selector.policy_proj.weight.zero_()
        ours.selector.policy_proj.bias.fill_(40.0)
    x, pad = inputs(8)
    for mode in ("eval", "train"):
        getattr(ours, mode)(), getattr(theirs, mode)()
        torch.testing.assert_close(ours(x, x, x, key_padding_mask=pad)[0],
                                   theirs(x, x, x, key_padding_mask=pad)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", [6, -4])
def test_policy_dim_must_be_a_positive_multiple_of_the_heads(bad):
    with pytest.raises(ValueError, match="--ssan-policy-dim must be a positive multiple"):
        ssan_layer(config(), policy_dim=bad)
