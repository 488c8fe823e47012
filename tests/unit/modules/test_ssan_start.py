"""How SSAN starts: --ssan-policy-init-bias (the policy logits begin near B) and
--ssan-dense-warmup (every pair attends for the first N updates), against direct formulas and
fairseq's own attention."""

import math

import pytest
import torch
from fairseq.modules import MultiheadAttention

from ssan_plugin.modules.selectors import SelectorMultiheadAttention
from ssan_plugin.modules.selectors.gumbel import GumbelSelector

C, H, T, B = 32, 4, 6, 3


def layer(**kw):
    """SSAN's attention module; its selector is ``.selector``."""
    torch.manual_seed(0)
    return SelectorMultiheadAttention(C, H, GumbelSelector(C, H, kernel="torch", **kw))


def policy_logits(attn, x):
    """E_p by the formula: (x W_q^T + b_q) . (x W_k^T + b_k) per head, (B, h, T, T)."""
    proj = x @ attn.selector.policy_proj.weight.T + attn.selector.policy_proj.bias  # T x B x 2P
    q, k = proj.split(attn.selector.policy_dim, -1)
    q = q.reshape(T, B, H, -1).permute(1, 2, 0, 3)
    k = k.reshape(T, B, H, -1).permute(1, 2, 0, 3)
    return (q @ k.transpose(-1, -2)) * attn.selector.policy_scaling


@pytest.mark.parametrize("bias,scaled", [(2.0, False), (3.0, True), (-1.5, False)])
def test_the_constant_term_of_every_head_is_the_init_bias(bias, scaled):
    attn = layer(policy_init_bias=bias, scale_policy_logits=scaled)
    x = torch.randn(T, B, C)
    with torch.no_grad():
        attn.selector.policy_proj.weight.zero_()  # only the biases' term b_q . b_k is left
        assert torch.allclose(policy_logits(attn, x), torch.full((B, H, T, T), bias), atol=1e-5)


def test_the_paper_initialisation_by_default():
    attn = layer()
    assert attn.selector.policy_init_bias == 0 and torch.count_nonzero(attn.selector.policy_proj.bias) == 0
    assert attn.selector.dense_warmup == 0 and "num_updates" not in attn.state_dict()
    # the same weights whatever the bias: only the biases differ
    assert torch.equal(layer(policy_init_bias=2.0).selector.policy_proj.weight, attn.selector.policy_proj.weight)


def test_a_positive_bias_selects_most_pairs_at_the_start():
    x = torch.randn(T, B, C)
    rates = {}
    for bias in (0.0, 3.0):
        attn = layer(policy_init_bias=bias).eval()
        with torch.no_grad():
            rates[bias] = float((policy_logits(attn, x) > 0).float().mean())
    assert rates[3.0] > 0.9 and 0.2 < rates[0.0] < 0.8


def test_dense_warmup_is_fairseqs_attention_then_selects():
    attn = layer(dense_warmup=3).train()
    plain = MultiheadAttention(C, H, self_attention=True)
    plain.load_state_dict({k: v for k, v in attn.state_dict().items()
                           if not k.startswith("selector")})  # the policy and the selector's name
    with torch.no_grad():  # a policy that discards most pairs, to make selection visible
        attn.selector.policy_proj.bias[:attn.selector.policy_dim].fill_(-3.0)
        attn.selector.policy_proj.bias[attn.selector.policy_dim:].fill_(3.0)
    x = torch.randn(T, B, C, requires_grad=True)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, -2:] = True
    expected, _ = plain(x, x, x, key_padding_mask=pad)
    for update in (0, 2):
        attn.selector.set_num_updates(update)
        assert attn.selector.in_dense_warmup
        out, _ = attn(x, x, x, key_padding_mask=pad)
        assert torch.allclose(out, expected, atol=1e-6)
        out.sum().backward()
        assert attn.selector.policy_proj.weight.grad is None or not attn.selector.policy_proj.weight.grad.any()
    attn.selector.set_num_updates(3)
    assert not attn.selector.in_dense_warmup
    out, _ = attn(x, x, x, key_padding_mask=pad)
    assert not torch.allclose(out, expected, atol=1e-3)
    # validation inside the warm-up attends densely too (what the model trained with)
    attn.selector.set_num_updates(1)
    attn.eval()
    with torch.no_grad():
        assert torch.allclose(attn(x, x, x, key_padding_mask=pad)[0], expected, atol=1e-6)


def test_the_update_number_travels_with_the_checkpoint():
    attn = layer(dense_warmup=5)
    attn.selector.set_num_updates(7)
    fresh = layer(dense_warmup=5)
    assert fresh.selector.in_dense_warmup
    fresh.load_state_dict(attn.state_dict())
    assert int(fresh.selector.num_updates) == 7 and not fresh.selector.in_dense_warmup
    # warm start from a plain transformer: the counter starts with the policy, fresh
    state = {k: v for k, v in attn.state_dict().items()
             if not k.startswith("selector.")}
    new = layer(dense_warmup=5)
    new.upgrade_state_dict_named(state, "")
    assert int(state["selector.num_updates"]) == 0 and "selector.policy_proj.bias" in state
    new.load_state_dict(state)


@pytest.mark.parametrize("kw,match", [({"dense_warmup": -1}, "--ssan-dense-warmup"),
                                      ({"policy_init_bias": math.inf}, "--ssan-policy-init-bias")])
def test_bad_values(kw, match):
    with pytest.raises(ValueError, match=match):
        layer(**kw)


def test_the_dense_warmup_record_counts_every_pair_of_every_head():
    """Inside the warm-up every non-pad pair of every head attends: the record says so (the
    selection is one broadcast value; the count is over heads and pairs)."""
    attn = layer(dense_warmup=3).eval()
    attn.report_statistics, attn.keep_selection = True, True
    x = torch.randn(T, B, C)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, -2:] = True
    with torch.no_grad():
        attn(x, x, x, key_padding_mask=pad)
    record = attn.pop_selection()
    n = (~pad).sum(-1)
    assert float(record.pairs_selected) == float(record.pairs_possible) == H * float((n * n).sum())
    assert float(record.pair_rate) == H and record.selection.shape == (B, H, T, T)
