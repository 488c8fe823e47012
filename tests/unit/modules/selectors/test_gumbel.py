"""modules/selectors/gumbel.py: the registry's ``gumbel`` is SSAN's own layer (the module, its
parameters and names, its outputs in training and evaluation, its options), and its
evaluation forward against the formula A = 1[Q_p K_p^T > 0], softmax over the selected keys."""

import pytest
import torch
from helpers.selectors import (attend_by_hand, build, call, inputs, logits_by_hand,
                               policy_logits_by_hand, softmax_over, ssan_model_attention)

from ssan_plugin.modules.selectors import SelectorMultiheadAttention
from ssan_plugin.modules.selectors.gumbel import GumbelSelector


@pytest.mark.parametrize("options", [{}, {"ssan_policy_dim": 8, "ssan_tau": 0.3,
                                          "ssan_straight_through_cap": 10.0, "ssan_kernel": "torch"}])
def test_is_ssan_own_layer(options):
    """The registry's gumbel and ssan_transformer's layer are built by one function: this holds
    the wiring (the options given reach the selector, the same parameters, initialisation and
    outputs); the maths is held by the formula tests below."""
    ours = build("gumbel", **options)
    theirs = ssan_model_attention(**options)
    assert type(ours) is type(theirs) is SelectorMultiheadAttention
    assert type(ours.selector) is type(theirs.selector) is GumbelSelector
    ours, theirs = ours.selector, theirs.selector
    assert ours.selection == "hard"
    assert (ours.tau, ours.policy_dim, ours.straight_through_cap, ours.kernel) == (
        theirs.tau, theirs.policy_dim, theirs.straight_through_cap, theirs.kernel)
    given = (options.get("ssan_tau", 0.5), options.get("ssan_policy_dim", 0) or ours.policy_dim,
             options.get("ssan_straight_through_cap", 0.0), options.get("ssan_kernel", ours.kernel))
    assert (ours.tau, ours.policy_dim, ours.straight_through_cap, ours.kernel) == given
    ours, theirs = build("gumbel", **options), ssan_model_attention(**options)
    mine, yours = ours.state_dict(), theirs.state_dict()
    assert list(mine) == list(yours)  # same parameters under the same names
    assert all(torch.equal(mine[k], yours[k]) for k in mine)  # same initialisation
    x, pad = inputs(seed=1, dtype=torch.float64)
    for mode in ("train", "eval"):
        getattr(ours, mode)(), getattr(theirs, mode)()
        torch.manual_seed(5)
        a, _ = call(ours, x, pad)
        torch.manual_seed(5)
        b, _ = call(theirs, x, pad)
        assert torch.equal(a, b), mode


@pytest.mark.parametrize("left_pad", [False, True])
def test_evaluation_against_the_formula(left_pad):
    attn = build("gumbel").eval()
    x, pad = inputs(seed=2, left_pad=left_pad)
    keep = policy_logits_by_hand(attn, x) > 0
    expected = softmax_over(logits_by_hand(attn, x), keep, pad)
    out, weights = call(attn, x, pad, need_head_weights=True)
    torch.testing.assert_close(weights.transpose(0, 1).double(), expected, rtol=1e-5, atol=1e-6)
    out_fused, _ = call(attn, x, pad)  # the fused evaluation path (no weights asked)
    torch.testing.assert_close(out_fused, attend_by_hand(attn, x, expected), rtol=1e-5, atol=1e-6)


def test_training_gives_the_policy_a_gradient():
    attn = build("gumbel", ssan_kernel="torch").train()
    x, pad = inputs(seed=3)
    out, _ = call(attn, x, pad)
    record = attn.pop_selection()
    (out.sum() + record.pair_rate).backward()
    assert attn.selector.policy_proj.weight.grad.abs().sum() > 0
    assert record.pair_rate.requires_grad and float(record.decisions) > 0
