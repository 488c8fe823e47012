"""modules/selectors/topk.py: the pattern against its definition (exactly min(k, n) keys a
query, by sorting; fractions; pads never; ties to the lower index), the layer against the
formula written out, k >= length equal to fairseq's attention, gradients. The native kernel
(float32 on the CPU, csrc/topk_keep.c) against sorting and torch's argsort path on ties, pads,
causal masks, -inf logits, both of its passes (k up to 32 and beyond), any thread count."""

import math
import shutil

import pytest
import torch
from helpers.selectors import (H, T, attend_by_hand, build, call, fairseq_attention, inputs,
                               logits_by_hand, softmax_over)

from ssan_plugin.errors import OptionError
from ssan_plugin.modules import native
from ssan_plugin.modules.selective_weights import hidden_keys
from ssan_plugin.modules.selectors.topk import TopKSelector, keys_per_query, topk_pattern

needs_compiler = pytest.mark.skipif(shutil.which(native._compiler()) is None,
                                    reason="no C compiler (the native kernel is optional)")


def pattern_by_sorting(logits, pad, k):
    """Per query: the non-pad keys sorted by (logit descending, index ascending), the first
    min(k, n) kept (k a fraction: ceil(k n), at least 1)."""
    bsz, heads, length, _ = logits.shape
    keep = torch.zeros(logits.shape, dtype=torch.bool)
    for b in range(bsz):
        keys = [j for j in range(length) if not pad[b, j]]
        n = len(keys)
        count = min(int(k), n) if k >= 1 else min(max(1, math.ceil(k * n)), n)
        for h in range(heads):
            for i in range(length):
                ranked = sorted(keys, key=lambda j: (-float(logits[b, h, i, j]), j))
                keep[b, h, i, ranked[:count]] = True
    return keep


@pytest.mark.parametrize("k", [1, 2, 4, 0.5, 0.2])
@pytest.mark.parametrize("left_pad", [False, True])
def test_pattern_and_forward_against_sorting(k, left_pad):
    attn = build("topk", topk=k).eval()
    x, pad = inputs(seed=int(10 * k), left_pad=left_pad)
    logits = logits_by_hand(attn, x)
    keep = pattern_by_sorting(logits, pad, k)
    attn.keep_selection = True
    out, weights = call(attn, x, pad, need_head_weights=True)
    record = attn.pop_selection()
    assert torch.equal(record.selection, keep & ~pad.view(pad.size(0), 1, 1, -1) & ~pad.view(pad.size(0), 1, -1, 1))
    expected = softmax_over(logits, keep, pad)
    torch.testing.assert_close(weights.transpose(0, 1), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out, attend_by_hand(attn, x, expected), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("k", [1, 3, 0.34])
def test_keeps_exactly_min_k_valid_keys_never_a_pad(k):
    selector = TopKSelector(k)
    x, pad = inputs(seed=3, left_pad=True)
    logits = torch.randn(pad.size(0), H, T, T, dtype=torch.float64)
    keep = selector(logits, pad, x).keep.expand(logits.shape)
    n = (~pad).sum(-1)
    want = n.clamp(max=int(k)) if k >= 1 else torch.ceil(k * n).long().clamp(1).minimum(n)
    assert torch.equal(keep.sum(-1), want.view(-1, 1, 1).expand(-1, H, T))
    assert not keep[pad.view(pad.size(0), 1, 1, -1).expand_as(keep)].any()


def test_ties_keep_the_lower_index():
    logits = torch.zeros(1, 1, 2, 5)
    logits[0, 0, 1] = torch.tensor([1.0, 2.0, 2.0, 2.0, 0.0])
    keep = TopKSelector(2)(logits, None, torch.zeros(2, 1, 4)).keep
    assert keep[0, 0, 0].tolist() == [True, True, False, False, False]  # all equal: first two
    assert keep[0, 0, 1].tolist() == [False, True, True, False, False]
    again = TopKSelector(2)(logits, None, torch.zeros(2, 1, 4)).keep
    assert torch.equal(keep, again)


@pytest.mark.parametrize("k", [T, 100])
def test_k_at_least_the_length_is_fairseq_attention(k):
    attn = build("topk", topk=k).eval()
    theirs = fairseq_attention(attn)
    for left_pad in (False, True):
        x, pad = inputs(seed=5, left_pad=left_pad)
        ours, our_weights = call(attn, x, pad, need_weights=True)
        ref, ref_weights = call(theirs, x, pad, need_weights=True)
        torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(our_weights, ref_weights, rtol=1e-12, atol=1e-12)


def test_gradients_reach_kept_keys_only():
    attn = build("topk", topk=2).train()
    x, pad = inputs(seed=7)
    logits = logits_by_hand(attn, x).detach().requires_grad_()
    sel = attn.selector(logits, pad, x)
    (sel.probs * torch.randn_like(sel.probs)).sum().backward()
    kept = sel.keep
    assert logits.grad[kept].abs().sum() > 0
    assert torch.all(logits.grad[~kept] == 0)
    out, _ = call(attn, x, pad)
    out.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for n, p in attn.named_parameters())


def test_record_rate_is_the_kept_fraction_without_gradient():
    attn = build("topk", topk=2).train()
    x, pad = inputs(seed=8)
    call(attn, x, pad)
    record = attn.pop_selection()
    n = (~pad).sum(-1).double()
    per_query = torch.minimum(n, torch.tensor(2.0)) / n
    expected = H * (per_query * n).sum() / n.sum()  # mean over non-pad queries, summed over heads
    torch.testing.assert_close(record.pair_rate.double(), expected)
    assert not record.pair_rate.requires_grad and float(record.decisions) == 0
    assert float(record.pairs_selected) == H * float((torch.minimum(n, torch.tensor(2.0)) * n).sum())
    with pytest.raises(OptionError, match="--select-scale .* topk selector's rate has no gradient"):
        attn.rate_gradient = True
    with pytest.raises(OptionError, match="--nce-scale"):
        attn.entropy_gradient = True
    attn.rate_gradient = attn.entropy_gradient = False  # what the criterion sets with weights 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, 2.5, float("inf"), float("nan")])
def test_bad_k_refused(bad):
    with pytest.raises(OptionError, match="--topk must be an integer >= 1 or a fraction"):
        TopKSelector(bad)


def test_a_k_beyond_any_length_keeps_every_key():
    """--topk 1e20 is an integer: every key of every sentence, fairseq's attention exactly."""
    attn = build("topk", topk=1e20).eval()
    x, pad = inputs(seed=6)
    out, weights = call(attn, x, pad, need_head_weights=True)
    theirs, their_weights = fairseq_attention(attn)(x, x, x, key_padding_mask=pad,
                                                   need_weights=True, need_head_weights=True)
    queries = (~pad).T.unsqueeze(-1)
    torch.testing.assert_close(out * queries, theirs * queries, rtol=1e-6, atol=1e-9)


def kept_by_stable_sort(ranked, keys):
    """The first ``keys`` of each row in a stable descending sort, computed row by row in
    Python (the definition, independent of both paths)."""
    rows, length = ranked.reshape(-1, ranked.size(-1)), ranked.size(-1)
    counts = keys.expand(*ranked.shape[:-1], 1).reshape(-1)
    keep = torch.zeros(rows.shape, dtype=torch.bool)
    for r in range(rows.size(0)):
        order = sorted(range(length), key=lambda j: (-float(rows[r, j]), j))
        keep[r, order[:int(counts[r])]] = True
    return keep.view(ranked.shape)


def tied_logits(shape, seed):
    """float32 logits with many ties (one decimal), a constant row and -inf entries."""
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(shape, generator=g) * 2).round(decimals=1)
    logits[0, 0, 0] = 0.5  # every key tied
    logits[-1, -1, -1, : shape[-1] // 2] = float("-inf")  # attention-masked keys
    return logits


@needs_compiler
@pytest.mark.parametrize("length,k", [(1, 1), (5, 2), (13, 8), (46, 8), (40, 32), (70, 33),
                                      (70, 0.5), (9, 0.2)])
def test_native_kernel_keeps_the_stable_sorts_first_k(length, k):
    logits = tied_logits((3, 2, 7, length), seed=length)
    pad = torch.zeros(3, length, dtype=torch.bool)
    pad[1, -(length // 3):] = length > 2  # a short sentence
    pad[2, 1:] = True  # a one-key sentence
    hidden = hidden_keys(pad)
    keys = keys_per_query((~hidden).sum(-1, keepdim=True), float(k))
    ranked = logits.nan_to_num(neginf=torch.finfo(torch.float32).min).masked_fill(hidden, float("-inf"))
    expected = kept_by_stable_sort(ranked, keys)
    assert torch.equal(native.topk_keep(ranked, keys), expected)
    assert torch.equal(topk_pattern(logits, pad, keys), expected & ~hidden)
    assert torch.equal(topk_pattern(logits.double(), pad, keys), expected & ~hidden)  # argsort path


@needs_compiler
def test_native_kernel_at_the_decoder_site_and_zero_keys():
    length = 20
    logits = tied_logits((2, 3, length, length), seed=4)
    causal = torch.ones(length, length, dtype=torch.bool).triu(1).view(1, 1, length, length)
    pad = torch.zeros(2, 1, 1, length, dtype=torch.bool)
    pad[1, ..., :4] = True  # left pads
    hidden = causal | pad
    keys = keys_per_query((~hidden).sum(-1, keepdim=True), 8.0)  # 0 where a query sees nothing
    assert int(keys.min()) == 0
    kept = topk_pattern(logits, hidden, keys)
    ranked = logits.nan_to_num(neginf=torch.finfo(torch.float32).min).masked_fill(hidden, float("-inf"))
    assert torch.equal(kept, kept_by_stable_sort(ranked, keys) & ~hidden)
    assert torch.equal(kept.sum(-1, keepdim=True), keys.expand(2, 3, length, 1))


@needs_compiler
def test_native_kernel_gives_the_same_pattern_on_any_thread_count():
    ranked = tied_logits((4, 4, 33, 46), seed=9)
    keys = torch.full((4, 1, 33, 1), 8)
    per_row = keys.expand(4, 4, 33, 1).contiguous()
    lib = native.load()
    results = []
    for threads in (1, 2, 3):
        keep = torch.empty(ranked.shape, dtype=torch.bool)
        ran = lib.ssan_topk_keep(ranked.data_ptr(), per_row.data_ptr(), 46, ranked.numel() // 46,
                                 threads, keep.data_ptr())
        assert ran == threads
        results.append(keep)
    assert torch.equal(results[0], results[1]) and torch.equal(results[0], results[2])
    assert torch.equal(results[0], kept_by_stable_sort(ranked, keys))


def test_without_the_native_kernel_torch_ranks(monkeypatch):
    """No compiler: the same pattern from torch's argsort (and float64 always ranks there)."""
    logits = tied_logits((2, 2, 6, 11), seed=2)
    keys = torch.full((1, 1, 1, 1), 3)
    expected = kept_by_stable_sort(logits.nan_to_num(neginf=torch.finfo(torch.float32).min), keys)
    monkeypatch.setattr(native, "available", lambda: False)
    monkeypatch.setattr(native, "topk_keep", None)  # never called
    assert torch.equal(topk_pattern(logits, None, keys), expected)
