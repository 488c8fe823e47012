"""modules/selectors/gate.py: each head's output times sigmoid(x W_g + b_g) against the layer
written out by hand; gates of 1 give fairseq's attention; the record (every pair selected, the
rate term the mean gate, one decision per head and query); gradients."""

import pytest
import torch
from helpers.selectors import (H, attend_by_hand, build, call, fairseq_attention, inputs,
                               logits_by_hand, softmax_over)

from ssan_plugin.errors import OptionError
from ssan_plugin.modules.selectors.gate import GateSelector


def gates_by_hand(attn, x):
    """(B, h, T): sigmoid of the gate projection of each token's input."""
    return torch.sigmoid(x @ attn.selector.gate_proj.weight.T + attn.selector.gate_proj.bias).permute(1, 2, 0)


@pytest.mark.parametrize("left_pad", [False, True])
def test_forward_against_the_formula(left_pad):
    attn = build("gate", gate_init_bias=0.3).eval()
    x, pad = inputs(seed=1, left_pad=left_pad)
    softmax = softmax_over(logits_by_hand(attn, x), torch.ones(1, dtype=torch.bool), pad)
    gates = gates_by_hand(attn, x)
    out, weights = call(attn, x, pad, need_head_weights=True)
    torch.testing.assert_close(out, attend_by_hand(attn, x, softmax, head_scale=gates))
    torch.testing.assert_close(weights.transpose(0, 1), softmax * gates.unsqueeze(-1))


def test_gates_of_one_are_fairseq_attention():
    attn = build("gate").eval()
    with torch.no_grad():
        attn.selector.gate_proj.weight.zero_()
        attn.selector.gate_proj.bias.fill_(100.0)  # sigmoid(100) == 1 exactly
    theirs = fairseq_attention(attn)
    for left_pad in (False, True):
        x, pad = inputs(seed=2, left_pad=left_pad)
        ours, our_weights = call(attn, x, pad, need_weights=True)
        ref, ref_weights = call(theirs, x, pad, need_weights=True)
        torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(our_weights, ref_weights, rtol=1e-12, atol=1e-12)
    x, pad = inputs(seed=2)  # and without pads
    torch.testing.assert_close(call(attn, x, None)[0], call(theirs, x, None)[0], rtol=1e-12, atol=1e-12)


def test_record_and_gradients():
    attn = build("gate", gate_init_bias=-0.5).train()
    x, pad = inputs(seed=3)
    out, _ = call(attn, x, pad)
    record = attn.pop_selection()
    valid = (~pad).double()
    gates = gates_by_hand(attn, x)  # (B, h, T)
    n_queries = valid.sum()
    # every non-pad pair keeps a nonzero weight: selected
    assert float(record.pairs_selected) == float(record.pairs_possible) == H * float((valid.sum(-1) ** 2).sum())
    # rate term: per head the mean gate over non-pad queries, summed over heads
    torch.testing.assert_close(record.pair_rate, (gates * valid.unsqueeze(1)).sum() / n_queries)
    torch.testing.assert_close(record.pair_count,
                               (gates * valid.unsqueeze(1) * valid.sum(-1).view(-1, 1, 1)).sum() / n_queries)
    # one decision per head and non-pad query, entropy of sigmoid(gate logit)
    entropy = -(gates * gates.log() + (1 - gates) * (1 - gates).log())
    assert float(record.decisions) == H * float(n_queries)
    torch.testing.assert_close(record.entropy_sum, (entropy * valid.unsqueeze(1)).sum())
    torch.testing.assert_close(record.neg_entropy, -record.entropy_sum / record.decisions)
    # both terms carry a gradient to the gate, and so does the output
    (grad_rate,) = torch.autograd.grad(record.pair_rate, attn.selector.gate_proj.bias, retain_graph=True)
    (grad_ent,) = torch.autograd.grad(record.neg_entropy, attn.selector.gate_proj.bias, retain_graph=True)
    assert torch.all(grad_rate > 0) and grad_ent.abs().sum() > 0
    out.sum().backward()
    assert attn.selector.gate_proj.weight.grad.abs().sum() > 0 and attn.q_proj.weight.grad.abs().sum() > 0
    attn.rate_gradient = attn.entropy_gradient = True  # the criterion may weight both


def test_bad_bias_refused():
    with pytest.raises(OptionError, match="--gate-init-bias must be finite"):
        GateSelector(8, 2, float("inf"))


def test_the_gates_start_at_the_bias_given():
    """--gate-init-bias B: every gate starts at sigmoid(x W_g + B) with W_g Xavier-uniform, so
    the gate biases are B and a zero input gates every head by sigmoid(B)."""
    for bias in (0.0, -1.5, 2.0):
        attn = build("gate", gate_init_bias=bias)
        assert torch.equal(attn.selector.gate_proj.bias, torch.full((H,), bias, dtype=torch.float64))
        limit = (6 / (attn.selector.gate_proj.in_features + H)) ** 0.5  # Xavier-uniform's bound
        assert attn.selector.gate_proj.weight.abs().max() <= limit
        zero = torch.zeros(1, 1, attn.selector.gate_proj.in_features, dtype=torch.float64)
        torch.testing.assert_close(gates_by_hand(attn, zero), torch.full((1, H, 1), bias).sigmoid().double())
