"""SSAN's fast paths (ssan_plugin/modules/selective_weights.py, the gumbel selector) against the
plain ones: training's fused sample + selective softmax (values and gradients equal autograd's chain on a
float64 reference with the same noise; less kept for backward), eval's boolean-mask attention
(equal to the explicit selective softmax, empty rows and pads included), and decoding without
selection records."""

import pytest
import torch
from helpers.ssan_layer import (B, C, H, T, build_selective_attention, config, inputs,
                                ssan_layer)

from ssan_plugin.modules.selection import no_selection_statistics
from ssan_plugin.modules.selective_weights import (
    sampled_selective_softmax, selective_softmax,
)
from ssan_plugin.modules.selectors.gumbel import GumbelSelector


def reference(logits, policy_logits, noise, pad, tau):
    """Straight from the formulas, float64, autograd: y = sigmoid((E_p + L) / tau), A = 1[y > 0.5]
    forward with the gradient of y (straight-through), ATT = A exp(E) / sum A exp(E), pads
    excluded, empty rows zero."""
    y = torch.sigmoid((policy_logits + noise) / tau)
    select = (y > 0.5).to(y.dtype) - y.detach() + y
    keep = (~pad).view(pad.size(0), 1, 1, -1).to(logits.dtype)
    weights = select * torch.exp(logits) * keep
    denom = weights.sum(-1, keepdim=True)
    return weights / torch.where(denom > 0, denom, torch.ones_like(denom)), select


def case(seed):
    g = torch.Generator().manual_seed(seed)
    shape = (3, 2, 6, 6)
    logits = torch.randn(shape, generator=g, dtype=torch.float64)
    policy = torch.randn(shape, generator=g, dtype=torch.float64)
    noise = torch.logit(torch.rand(shape, generator=g, dtype=torch.float64))
    policy[0, 1, 2] = -50.0  # an empty row
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[1, -2:] = True
    pad[2, -1:] = True
    upstream = torch.randn(shape, generator=g, dtype=torch.float64)
    rate_weights = torch.randn(shape, generator=g, dtype=torch.float64)
    return logits, policy, noise, pad, upstream, rate_weights


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("select_grad", [True, False])
def test_fused_sample_and_softmax_match_the_formula(seed, select_grad):
    logits, policy, noise, pad, upstream, rate_weights = case(seed)
    tau = 0.5
    e1, p1 = logits.clone().requires_grad_(), policy.clone().requires_grad_()
    out, select = sampled_selective_softmax(e1.float(), p1.float(), tau, pad, select_grad=select_grad,
                                            noise=noise.float())
    loss = (out.double() * upstream).sum()
    if select_grad:  # a regulariser-like use of A: its straight-through gradient must add up
        loss = loss + (select.double() * rate_weights).sum()
    loss.backward()

    e2, p2 = logits.clone().requires_grad_(), policy.clone().requires_grad_()
    ref, ref_select = reference(e2, p2, noise, pad, tau)
    ref_loss = (ref * upstream).sum()
    if select_grad:
        ref_loss = ref_loss + (ref_select * rate_weights).sum()
    ref_loss.backward()

    keys = (~pad).view(3, 1, 1, -1)
    assert torch.equal(select.bool(), (ref_select > 0.5) & keys)  # A, pad keys zeroed
    assert select.requires_grad == select_grad
    assert select.dtype == (torch.float32 if select_grad else torch.bool)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-4, atol=1e-6)
    # the policy gradient of an empty row is a convention (bounded); compare the other rows
    nonempty = ((ref_select > 0.5) & (~pad).view(3, 1, 1, -1)).any(-1, keepdim=True)
    torch.testing.assert_close(p1.grad * nonempty, p2.grad * nonempty, rtol=1e-4, atol=1e-6)
    assert torch.isfinite(p1.grad).all()


def test_fused_equals_the_unfused_chain_of_the_module():
    """Same noise: the fused Function and selective_softmax of the straight-through sample give
    the same values and float32 gradients."""
    logits, policy, noise, pad, upstream, _ = case(5)
    tau = 0.7
    e1, p1 = logits.float().requires_grad_(), policy.float().requires_grad_()
    out, _ = sampled_selective_softmax(e1, p1, tau, pad, select_grad=False, noise=noise.float())
    (out * upstream.float()).sum().backward()
    e2, p2 = logits.float().requires_grad_(), policy.float().requires_grad_()
    y = torch.sigmoid((p2 + noise.float()) / tau)
    select = (y > 0.5).float() - y.detach() + y
    (selective_softmax(e2, select, pad) * upstream.float()).sum().backward()
    torch.testing.assert_close(out, selective_softmax(e2.detach(), (y > 0.5).float(), pad))
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(p1.grad, p2.grad, rtol=1e-5, atol=1e-6)


def saved_attention_sized(layer, x, pad):
    """Distinct (B, h, T, T) tensors that autograd keeps for backward during one training
    forward of ``layer``."""
    kept = {}

    def pack(t):
        if tuple(t.shape) == (B, H, T, T):
            kept[t.data_ptr()] = t.dtype
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x.requires_grad_(), pad)
    return list(kept.values())


def test_training_keeps_two_attention_sized_tensors():
    torch.manual_seed(0)
    layer = ssan_layer(config()).train()
    x, pad = inputs(1)
    attn = layer.self_attn
    attn.rate_gradient = attn.entropy_gradient = False  # what the criterion sets without regularisers
    assert len(saved_attention_sized(layer, x, pad)) == 2  # out and w
    attn.rate_gradient = attn.entropy_gradient = True  # both regularisers: the slope, and E_p
    assert len(saved_attention_sized(layer, x.detach(), pad)) == 4


def test_entropy_and_rate_carry_gradients_only_when_asked():
    torch.manual_seed(0)
    layer = ssan_layer(config()).train()
    x, pad = inputs(2)
    attn = layer.self_attn
    layer(x, pad)
    stats = attn.pop_selection()
    assert stats.neg_entropy.requires_grad and stats.pair_rate.requires_grad
    attn.rate_gradient = attn.entropy_gradient = False
    layer(x, pad)
    stats = attn.pop_selection()
    assert not stats.neg_entropy.requires_grad and not stats.pair_rate.requires_grad


@pytest.mark.parametrize("rate_gradient", [True, False])
def test_pad_positions_get_no_gradient_from_the_statistics(rate_gradient):
    """The selection rate and the entropy are over non-pad pairs: backpropagated alone, they
    leave every pad position's input gradient exactly 0 (a pad key is zero in the sample, but
    its straight-through slope is not: the rate must weight it out, not just sum the sample).
    The counts equal a direct count of the training sample over non-pad pairs (without a
    gradient, the module counts the boolean sample as it comes from the Function)."""
    torch.manual_seed(4)
    layer = ssan_layer(config()).train()
    attn = layer.self_attn
    attn.rate_gradient = attn.entropy_gradient = rate_gradient
    attn.keep_selection = True
    x, pad = inputs(4)
    x.requires_grad_()
    attn(x, x, x, key_padding_mask=pad)
    stats = attn.pop_selection()
    keep = ~pad
    pairs = stats.selection & keep.view(B, 1, 1, T) & keep.view(B, 1, T, 1)  # (B, h, T, S)
    n_keys = keep.sum(-1).view(B, 1, 1).double()
    assert stats.pairs_selected.item() == pairs.sum().item()
    assert stats.pair_count.item() == pytest.approx(pairs.sum().item() / keep.sum().item())
    rate = (pairs.sum(-1).double() / n_keys).sum().item() / keep.sum().item()
    assert stats.pair_rate.item() == pytest.approx(rate)
    terms = stats.pair_rate + stats.pair_count + stats.neg_entropy
    if not rate_gradient:
        assert not terms.requires_grad
        return
    terms.backward()
    at_pads = pad.t().unsqueeze(-1).expand_as(x)
    assert x.grad[at_pads].abs().max() == 0
    assert x.grad[~at_pads].abs().min() > 0


def set_head0_policy(layer, q_p: float, k_p: float):
    """Head 0's policy made constant (q_p and k_p filled with the given values, so
    E_p = d q_p k_p for every pair); the other heads keep their random policy."""
    with torch.no_grad():
        w = layer.self_attn.selector.policy_proj.weight
        b = layer.self_attn.selector.policy_proj.bias
        d = C // H
        w[:d].zero_()
        b[:d].fill_(q_p)
        w[C:C + d].zero_()
        b[C:C + d].fill_(k_p)


def policy_with_empty_rows(layer):
    """Head 0 selects nothing: E_p = -d for every pair."""
    set_head0_policy(layer, -1.0, 1.0)


def policy_selecting_everything(layer):
    """Head 0 selects every pair, pad keys included as far as E_p goes (E_p = d > 0): only the
    evaluation path's pad handling (K_p = 0 at pads) keeps pads out."""
    set_head0_policy(layer, 1.0, 1.0)


@pytest.mark.parametrize("policy", ["random", "empty_head", "full_head"])
def test_eval_mask_path_equals_the_explicit_selective_softmax(policy):
    torch.manual_seed(3)
    layer = ssan_layer(config(dropout=0.1)).eval()
    empty_head = policy == "empty_head"
    if empty_head:
        policy_with_empty_rows(layer)
    elif policy == "full_head":
        policy_selecting_everything(layer)
    x, pad = inputs(3)
    attn = layer.self_attn
    attn.report_statistics = True  # an evaluation forward reports only when asked
    fast, _ = attn(x, x, x, key_padding_mask=pad)  # the boolean-mask path
    fast_stats = attn.pop_selection()
    explicit, _ = attn(x, x, x, key_padding_mask=pad, need_weights=True)  # selective_softmax
    explicit_stats = attn.pop_selection()
    torch.testing.assert_close(fast, explicit, rtol=1e-5, atol=1e-6)
    # eval default: no record, no key counts, the mask made in place in E_p with the pads out
    # through K_p = 0 (the only thing that keeps them out of the full head); the same output
    attn.report_statistics = None
    assert torch.equal(attn(x, x, x, key_padding_mask=pad)[0], fast)
    assert attn.pop_selection() is None
    for field in ("pairs_selected", "pairs_possible", "entropy_sum", "pair_rate", "pair_count"):
        torch.testing.assert_close(getattr(fast_stats, field), getattr(explicit_stats, field))
    if empty_head:
        assert fast_stats.pairs_selected < fast_stats.pairs_possible
    assert torch.isfinite(fast).all()


def test_records_only_where_something_reads_them(tiny_bin):
    """Default: a record per selective layer in training forwards only (teacher-forced scoring
    and other eval forwards skip the statistics); the selective criterion switches them on for
    validation; keep_selection (analysis) asks for them; decoding never makes any; the
    encoder output is the same either way."""
    from helpers.fairseq_setup import build

    from ssan_plugin.modules.selection import SelectionReporter, selection_statistics

    torch.manual_seed(0)
    _, model, _ = build(tiny_bin, ["--arch", "ssan_transformer", "--criterion", "label_smoothed_cross_entropy"])
    reporters = [m for m in model.modules() if isinstance(m, SelectionReporter)]
    assert reporters and all(m.report_statistics is None for m in reporters)
    tokens = torch.randint(4, 20, (2, 5))
    lengths = torch.tensor([5, 5])
    model.train()
    assert len(model.encoder(tokens, src_lengths=lengths)["selection_stats"]) == len(model.encoder.layers)
    model.eval()
    plain = model.encoder(tokens, src_lengths=lengths)
    assert plain["selection_stats"] == []
    with selection_statistics(model):
        asked = model.encoder(tokens, src_lengths=lengths)
    assert len(asked["selection_stats"]) == len(model.encoder.layers)
    assert torch.equal(plain["encoder_out"][0], asked["encoder_out"][0])
    assert all(m.report_statistics is None for m in reporters)  # restored
    for m in reporters:
        m.keep_selection = True
    kept = model.encoder(tokens, src_lengths=lengths)["selection_stats"]
    assert len(kept) == len(model.encoder.layers) and kept[0].selection is not None
    decoding = model.encoder.forward_torchscript({"src_tokens": tokens, "src_lengths": lengths})
    assert decoding["selection_stats"] == []
    assert torch.equal(plain["encoder_out"][0], decoding["encoder_out"][0])
    with no_selection_statistics(model):
        model.train()
        assert model.encoder(tokens, src_lengths=lengths)["selection_stats"] == []


def test_selective_criterion_reports_in_validation(tiny_bin):
    """The selective criterion logs the selection of a validation batch (eval mode)."""
    from helpers.fairseq_setup import build

    torch.manual_seed(0)
    task, model, criterion = build(tiny_bin, ["--arch", "ssan_transformer",
                                              "--criterion", "selective_label_smoothed_cross_entropy"])
    from helpers.fairseq_setup import first_batch

    sample = first_batch(task, "valid", max_sentences=2)
    model.eval()
    with torch.no_grad():
        _, _, logs = criterion(model, sample)
    for i in range(len(model.encoder.layers)):
        assert logs[f"sel_pairs_{i}"] > 0 and logs[f"sel_entropy_{i}"] > 0


@pytest.mark.parametrize("chunk", [1 << 22, 50])
def test_entropy_sum_without_graph_equals_the_formula(monkeypatch, chunk):
    """sum H(sigmoid(E_p)) * pair_w without a graph equals the entropy from its definition
    (float64), in one chunk or sentence by sentence (chunk smaller than one sentence)."""
    from ssan_plugin.modules import selective_weights as sa

    monkeypatch.setattr(sa, "ENTROPY_CHUNK_ELEMENTS", chunk)
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(3, 2, 5, 5, generator=gen, dtype=torch.float64) * 6
    valid = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.float64)
    pair_w = (valid.view(3, 1, 1, 5) * valid.view(3, 1, 5, 1))
    p = torch.sigmoid(logits)
    expected = (-(torch.xlogy(p, p) + torch.xlogy(1 - p, 1 - p)) * pair_w).sum()
    got = sa.entropy_sum_no_grad(logits, pair_w)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, rtol=1e-6, atol=1e-6)


def test_entropy_sum_without_graph_is_accurate_where_the_policy_is_sure():
    """float32 logits far from 0 (|E_p| 8-30, entropies 1e-12-3e-3), all positive and all
    negative: the sum keeps float32's relative accuracy on both sides (1e-8 measured). softplus(x)
    minus x sigmoid(x), or torch's logistic loss of x against sigmoid(x), lose about half of the
    digits on the positive side (measured here: relative errors of 1.4e-4 and 2.0e-4)."""
    from ssan_plugin.modules import selective_weights as sa

    gen = torch.Generator().manual_seed(4)
    magnitude = (torch.rand(2, 2, 6, 6, generator=gen) * 22 + 8)
    pair_w = torch.ones(2, 1, 6, 6)
    for logits in (magnitude, -magnitude):
        p = torch.sigmoid(logits.double())
        exact = -(p * torch.log(p) + (1 - p) * torch.log1p(-p)).sum()  # float64 reference
        got = sa.entropy_sum_no_grad(logits, pair_w)
        torch.testing.assert_close(got.double(), exact, rtol=2e-6, atol=0)


def capped_reference(logits, policy_logits, noise, pad, tau, cap):
    """``reference`` with the straight-through cap: u = exp(min(E - m, cap)), m the detached
    row maximum over the selected non-pad keys. With cap >= 0 the clamp never touches a selected
    key, so the values are the plain formula's; only the gradient reaching a discarded key's A
    changes."""
    y = torch.sigmoid((policy_logits + noise) / tau)
    select = (y > 0.5).to(y.dtype) - y.detach() + y
    keep = (~pad).view(pad.size(0), 1, 1, -1)
    chosen = (y > 0.5) & keep
    m = logits.detach().masked_fill(~chosen, float("-inf")).amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    weights = select * torch.exp((logits - m).clamp(max=cap)) * keep.to(logits.dtype)
    denom = weights.sum(-1, keepdim=True)
    return weights / torch.where(denom > 0, denom, torch.ones_like(denom))


@pytest.mark.parametrize("cap", [0.0, 1.5])
@pytest.mark.parametrize("fused", [True, False])
def test_straight_through_cap_bounds_only_the_discarded_keys_gradient(cap, fused):
    """Logits spread wide (x 6), so that discarded keys exceed the selected maximum by more than
    the cap: values equal the uncapped formula, the policy gradient equals the capped
    reference's (and differs from the uncapped one), on the fused training Function and on
    selective_softmax of the straight-through sample."""
    logits, policy, noise, pad, upstream, _ = case(3)
    logits = logits * 6
    tau = 0.5
    e1, p1 = logits.clone().requires_grad_(), policy.clone().requires_grad_()
    if fused:
        out, _ = sampled_selective_softmax(e1.float(), p1.float(), tau, pad, select_grad=False,
                                           noise=noise.float(), straight_through_cap=cap)
    else:
        y = torch.sigmoid((p1.float() + noise.float()) / tau)
        select = (y > 0.5).float() - y.detach() + y
        out = selective_softmax(e1.float(), select, pad, straight_through_cap=cap)
    (out.double() * upstream).sum().backward()

    e2, p2 = logits.clone().requires_grad_(), policy.clone().requires_grad_()
    ref = capped_reference(e2, p2, noise, pad, tau, cap)
    (ref * upstream).sum().backward()
    p3 = policy.clone().requires_grad_()
    uncapped, _ = reference(logits, p3, noise, pad, tau)
    (uncapped * upstream).sum().backward()

    torch.testing.assert_close(out.double(), uncapped.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(e1.grad, e2.grad, rtol=1e-4, atol=1e-6)
    nonempty = ((torch.sigmoid((policy + noise) / tau) > 0.5) & (~pad).view(3, 1, 1, -1)).any(
        -1, keepdim=True)
    torch.testing.assert_close(p1.grad * nonempty, p2.grad * nonempty, rtol=1e-4, atol=1e-6)
    assert (p2.grad * nonempty).abs().max() < 0.5 * (p3.grad * nonempty).abs().max()


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_straight_through_cap_must_be_finite_and_not_negative(bad):
    with pytest.raises(ValueError, match="--ssan-straight-through-cap must be finite and >= 0"):
        GumbelSelector(8, 2, straight_through_cap=bad)


def test_the_model_option_reaches_the_attention_gradient():
    """--ssan-straight-through-cap through the SSAN model's attention builder: same weights and
    noise, cap 0 against the default 10 in training. The outputs are equal (the cap never
    touches a value) and the policy projection's gradients differ (it reached the Function)."""
    x, pad = inputs(0)
    x = x * 4  # logits spread wide: some discarded keys exceed the selected maximum
    grads, outs = [], []
    for cap in (0.0, 10.0):
        torch.manual_seed(0)
        attn = build_selective_attention(C, config(), straight_through_cap=cap).train()
        assert attn.selector.straight_through_cap == cap
        torch.manual_seed(1)  # the same logistic noise for both
        out, _ = attn(x, x, x, key_padding_mask=pad, need_weights=False)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        outs.append(out.detach())
        grads.append(attn.selector.policy_proj.weight.grad.clone())
    torch.testing.assert_close(outs[0], outs[1])
    assert not torch.allclose(grads[0], grads[1])
