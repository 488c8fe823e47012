"""modules/selectors/soft.py: the registry's ``soft`` is SSAN's soft layer, and its forward
(training and evaluation alike, no noise) against ATT = sigmoid(E_p) e^E / sum, pads out."""

import pytest
import torch
from helpers.selectors import (H, attend_by_hand, build, call, inputs, logits_by_hand,
                               policy_logits_by_hand, ssan_model_attention)

from ssan_plugin.modules.selectors import SelectorMultiheadAttention
from ssan_plugin.modules.selectors.soft import SoftSelector


def soft_attention_by_hand(logits, select, pad):
    keep = (~pad).view(pad.size(0), 1, 1, -1).to(logits.dtype)
    w = select * torch.exp(logits - logits.amax(-1, keepdim=True)) * keep
    return w / w.sum(-1, keepdim=True)


def test_is_ssan_soft_layer():
    """Wiring: the registry's soft is ssan_transformer's soft layer (one builder); the maths is
    held by the formula and record tests below."""
    ours, theirs = build("soft"), ssan_model_attention(selection="soft")
    assert type(ours) is type(theirs) is SelectorMultiheadAttention
    assert type(ours.selector) is type(theirs.selector) is SoftSelector and ours.selector.selection == "soft"
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x, pad = inputs(seed=1)
    assert torch.equal(call(ours.eval(), x, pad)[0], call(theirs.eval(), x, pad)[0])


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_forward_against_the_formula(mode):
    attn = getattr(build("soft"), mode)()
    x, pad = inputs(seed=2, left_pad=True)
    select = torch.sigmoid(policy_logits_by_hand(attn, x))
    expected = soft_attention_by_hand(logits_by_hand(attn, x), select, pad)
    out, weights = call(attn, x, pad, need_head_weights=True)
    torch.testing.assert_close(weights.transpose(0, 1).double(), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out, attend_by_hand(attn, x, expected), rtol=1e-5, atol=1e-6)
    if mode == "train":  # the rate term is sum_j sigmoid(E_p), differentiable
        record = attn.pop_selection()
        record.pair_rate.backward()
        assert attn.selector.policy_proj.weight.grad.abs().sum() > 0


def test_record_counts_pairs_past_one_half_and_penalises_the_weights():
    """The record: a pair counts as selected when sigmoid(E_p) > 0.5 (every weight is nonzero,
    so the zero-weight rule would give a rate of 1); the rate term is, per head, the mean over
    non-pad queries of sum_j sigmoid(E_p) / n_keys, summed over heads (count: without the
    division); one decision per non-pad pair, its entropy that of sigmoid(E_p)."""
    attn = build("soft").train()
    x, pad = inputs(seed=4)
    call(attn, x, pad)
    record = attn.pop_selection()
    e_p = policy_logits_by_hand(attn, x)  # (B, h, T, T)
    valid = (~pad).double()
    pairs = valid.view(-1, 1, x.size(0), 1) * valid.view(-1, 1, 1, x.size(0))  # (B, 1, T, T)
    n_keys = valid.sum(-1).view(-1, 1, 1)
    pi = torch.sigmoid(e_p)
    assert 0 < float(record.pairs_selected) < float(record.pairs_possible)
    assert float(record.pairs_selected) == float(((e_p > 0) * pairs).sum())
    assert float(record.pairs_possible) == H * float((valid.sum(-1) ** 2).sum())
    per_query = (pi * pairs).sum(-1)  # (B, h, T)
    n_queries = valid.sum()
    torch.testing.assert_close(record.pair_rate, (per_query / n_keys).sum() / n_queries)
    torch.testing.assert_close(record.pair_count, per_query.sum() / n_queries)
    entropy = -(pi * pi.log() + (1 - pi) * (1 - pi).log())
    assert float(record.decisions) == float(pairs.sum()) * H
    torch.testing.assert_close(record.entropy_sum, (entropy * pairs).sum())
