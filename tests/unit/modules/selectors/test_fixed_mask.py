"""modules/selectors/fixed_mask.py: one learnt mask over position pairs, the same for every
sentence: evaluation against A = 1[M > 0] at each sentence's own positions (left or right
padding alike), training against the Gumbel-sigmoid sample with the same noise, the
straight-through gradient to the mask, the record, and the length limit."""

import pytest
import torch
from helpers.selectors import (H, MAX_POSITIONS, attend_by_hand, build, call, inputs,
                               logits_by_hand, softmax_over)

from ssan_plugin.errors import OptionError
from ssan_plugin.modules.selection import logistic_noise_like
from ssan_plugin.modules.selectors.fixed_mask import MAX_MASK_ELEMENTS, FixedMaskSelector


def real_rows(weights, pad):
    """``weights`` (B, h, T, S) with the rows of pad queries zeroed (those are never read)."""
    return weights * (~pad).view(pad.size(0), 1, -1, 1).to(weights.dtype)


def mask_by_hand(attn, pad):
    """(B, h, T, T): M[h, p_i, p_j] with p the position of the token in its own sentence."""
    bsz, length = pad.shape
    out = torch.full((bsz, H, length, length), -1e9, dtype=attn.selector.mask_logits.dtype)
    for b in range(bsz):
        tokens = [t for t in range(length) if not pad[b, t]]
        for p, i in enumerate(tokens):
            for q, j in enumerate(tokens):
                out[b, :, i, j] = attn.selector.mask_logits[:, p, q]
    return out


@pytest.mark.parametrize("left_pad", [False, True])
def test_evaluation_against_the_formula(left_pad):
    attn = build("fixed_mask").eval()
    x, pad = inputs(seed=1, left_pad=left_pad)
    keep = mask_by_hand(attn, pad) > 0
    expected = softmax_over(logits_by_hand(attn, x), keep, pad)
    out, weights = call(attn, x, pad, need_head_weights=True)
    torch.testing.assert_close(real_rows(weights.transpose(0, 1).double(), pad), real_rows(expected, pad),
                               rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out, attend_by_hand(attn, x, weights.transpose(0, 1)), rtol=1e-7, atol=1e-8)
    attn.keep_selection = True
    call(attn, x, pad)
    valid = ~pad.view(pad.size(0), 1, 1, -1) & ~pad.view(pad.size(0), 1, -1, 1)
    assert torch.equal(attn.pop_selection().selection, keep & valid & (expected > 0))


def test_the_same_mask_for_every_sentence_whatever_the_padding():
    attn = build("fixed_mask").eval()
    attn.keep_selection = True
    x, pad = inputs(seed=2)
    call(attn, x, pad)
    right = attn.pop_selection().selection
    x_left, pad_left = inputs(seed=2, left_pad=True)
    call(attn, x_left, pad_left)
    left = attn.pop_selection().selection
    for b in range(pad.size(0)):
        n = int((~pad[b]).sum())
        block = right[b, :, :n, :n]
        assert torch.equal(block, left[b, :, -n:, -n:])  # the same pairs, wherever the pads are
        assert torch.equal(block, (attn.selector.mask_logits[:, :n, :n] > 0) & block.new_ones(()))


def test_training_sample_against_the_formula_with_the_same_noise():
    attn = build("fixed_mask", fixed_mask_kernel="torch", fixed_mask_tau=0.7).train()
    x, pad = inputs(seed=3, left_pad=True)
    mask = mask_by_hand(attn, pad).detach()
    torch.manual_seed(11)
    noise = logistic_noise_like(torch.empty(mask.shape))
    keep = (mask.float() + noise) > 0
    torch.manual_seed(11)
    out, weights = call(attn, x, pad, need_head_weights=True)
    expected = softmax_over(logits_by_hand(attn, x), keep, pad)
    torch.testing.assert_close(real_rows(weights.transpose(0, 1).double(), pad), real_rows(expected, pad),
                               rtol=1e-5, atol=1e-6)
    # the straight-through gradient reaches the mask at the pairs of real positions only
    record = attn.pop_selection()
    (grad,) = torch.autograd.grad(out.sum() + record.pair_rate, attn.selector.mask_logits)
    longest = int((~pad).sum(-1).max())
    assert grad[:, :longest, :longest].abs().sum() > 0
    assert torch.all(grad[:, longest:] == 0) and torch.all(grad[:, :, longest:] == 0)


def test_record():
    attn = build("fixed_mask").eval()
    x, pad = inputs(seed=4)
    with torch.no_grad():
        call(attn, x, pad)
    attn.report_statistics = True
    call(attn, x, pad)
    record = attn.pop_selection()
    mask = mask_by_hand(attn, pad)
    valid = (~pad).double()
    pair_w = valid.view(-1, 1, 1, pad.size(1)) * valid.view(-1, 1, pad.size(1), 1)
    keep = (mask > 0).double() * pair_w
    n = valid.sum(-1).view(-1, 1, 1)
    torch.testing.assert_close(record.pair_rate.double(), (keep.sum(-1) / n).sum() / valid.sum())
    p = torch.sigmoid(mask)
    entropy = -(torch.special.xlogy(p, p) + torch.special.xlogy(1 - p, 1 - p))
    assert float(record.decisions) == float(pair_w.sum()) * H
    torch.testing.assert_close(record.entropy_sum.double(), (entropy * pair_w).sum(), rtol=1e-5, atol=1e-5)
    assert record.neg_entropy.requires_grad  # --nce-scale can train the mask


def test_length_limit_and_options():
    selector = FixedMaskSelector(H, 4)
    x, pad = inputs(seed=5)
    logits = torch.zeros(pad.size(0), H, pad.size(1), pad.size(1))
    for mask in (pad, None):  # with pads, and a batch of whole sentences
        with pytest.raises(OptionError, match="a sentence of 6 tokens, longer than the 4 positions"):
            selector(logits, mask, x)
        with pytest.raises(OptionError, match="a sentence of 6 tokens"):
            selector.eval().evaluation_mask(mask, x, keep_logits=False)
        selector.train()
    short = pad.clone()
    short[0, 4:] = True  # now at most 4 real tokens: fine, whatever the padded length
    selector(logits, short, x)
    assert MAX_POSITIONS >= pad.size(1)
    with pytest.raises(OptionError, match="--fixed-mask-tau must be finite and > 0"):
        FixedMaskSelector(H, 4, tau=0.0)
    with pytest.raises(OptionError, match="--ssan-kernel must be one of"):
        FixedMaskSelector(H, 4, kernel="cuda")


def test_a_mask_too_large_is_refused_before_it_is_allocated():
    with pytest.raises(OptionError, match=r"--max-source-positions 100000 makes a mask of 4 x "
                                          r"100000 x 100000 = 40,000,000,000 logits"):
        FixedMaskSelector(4, 100000)
    assert FixedMaskSelector(16, 2048).mask_logits.numel() == MAX_MASK_ELEMENTS  # the bound itself


def test_a_checkpoint_of_another_size_is_refused_in_one_line():
    """Decoding with another --max-source-positions than training: the mask cannot be another
    size; the refusal names both."""
    trained = build("fixed_mask", double=False, max_source_positions=8)
    state = {"layers.0.self_attn." + k: v for k, v in trained.state_dict().items()}
    other = build("fixed_mask", double=False, max_source_positions=12)
    with pytest.raises(OptionError, match=r"the checkpoint's mask covers 8 positions, this model was "
                                          r"built for 12 \(--max-source-positions\); use "
                                          r"--max-source-positions 8"):
        other.selector.upgrade_state_dict_named(state, "layers.0.self_attn.selector")


def test_the_mask_logits_start_around_the_bias_given():
    """--fixed-mask-init-bias B: the mask logits start as draws of N(B, 1), so a fraction of
    about Phi(B) (the standard normal distribution function) of the pairs starts above 0."""
    torch.manual_seed(0)
    for bias in (0.0, 1.0, -2.0):
        logits = FixedMaskSelector(H, 64, init_bias=bias).mask_logits.detach()
        assert logits.numel() > 10000
        assert abs(float(logits.mean()) - bias) < 0.03 and abs(float(logits.std()) - 1.0) < 0.03
        share = float((logits > 0).double().mean())
        assert abs(share - float(torch.distributions.Normal(0.0, 1.0).cdf(torch.tensor(bias)))) < 0.02
