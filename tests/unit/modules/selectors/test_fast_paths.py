"""Every fast path of every registered selector against the selector's reference, on the same
noise: values, the selection, the record's statistics and every gradient (training paths,
``Selector.fast_paths``), and the evaluation-mask path through torch's fused attention
(``Selector.evaluation_mask``) against the reference's output and record. A selector added to
the registry is checked here with no line of its own."""

import pytest
import torch
from helpers.selectors import C, H, build, call, inputs

from ssan_plugin.modules import native
from ssan_plugin.modules.selection import logistic_noise_like
from ssan_plugin.modules.selectors import SELECTORS, Selector
from ssan_plugin.modules.selectors.base import SiteContext, selection_record

TRAINING = [(name, path) for name, cls in SELECTORS.items() for path in cls.fast_paths]
MASKED = [name for name, cls in SELECTORS.items()
          if cls.evaluation_mask is not Selector.evaluation_mask]
RECORD_FIELDS = ("pairs_selected", "pairs_possible", "decisions", "entropy_sum", "pair_rate",
                 "pair_count", "neg_entropy")


def test_the_registry_has_fast_paths_to_check():
    assert ("gumbel", "torch") in TRAINING and ("gumbel", "native") in TRAINING
    assert "gumbel" in MASKED and "fixed_mask" in MASKED


def run(selector, path, logits, pad, query, noise, rate_gradient, site=None):
    """(Selection, record, gradients) of one training forward by ``path`` (None: the
    reference) at ``site`` (None: encoder self-attention); the loss weighs the weights, the
    rate and the entropy terms."""
    logits = logits.detach().clone().requires_grad_()
    query = query.detach().clone().requires_grad_()
    selector.zero_grad()
    if path is None:
        selection = selector.reference(logits, pad, query, rate_gradient, noise=noise, site=site)
    else:
        selection = selector.fast_path(path, logits, pad, query, rate_gradient, noise=noise,
                                       row_entropy=not rate_gradient, site=site)
    record = selection_record(selection, pad, tuple(logits.shape), rate_gradient, rate_gradient,
                              keep_selection=True)
    g = torch.Generator().manual_seed(7)
    loss = (selection.probs * torch.randn(selection.probs.shape, generator=g)).sum()
    if rate_gradient:
        loss = loss + 0.3 * record.pair_rate + 0.2 * record.neg_entropy
    loss.backward()
    grads = {"logits": logits.grad, "query": query.grad}
    grads.update({name: p.grad for name, p in selector.named_parameters()})
    return selection, record, grads


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("rate_gradient", [True, False])
@pytest.mark.parametrize("name,path", TRAINING)
def test_training_fast_path_is_the_reference(name, path, rate_gradient, causal):
    """``causal``: the decoder site's mask, (B, 1, T, T) pads or each query's future, with the
    future's logits -inf as fairseq's attn_mask makes them (left pads: a sentence's first
    queries see pads alone, empty rows)."""
    if path == "native" and not native.available():
        pytest.skip("the native kernel does not build here (no C compiler)")
    selector = build(name, double=False).selector.train()
    x, pad = inputs(seed=3, dtype=torch.float32, left_pad=True)
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(x.size(1), H, x.size(0), x.size(0), generator=g) * 2
    site = None
    if causal:
        future = torch.ones(x.size(0), x.size(0), dtype=torch.bool).triu(1).view(1, 1, *logits.shape[2:])
        pad = pad.view(pad.size(0), 1, 1, -1) | future
        logits = logits.masked_fill(future, float("-inf"))
        positions = torch.arange(x.size(0)).unsqueeze(0)
        site = SiteContext("decoder", x, positions, positions)
    noise = logistic_noise_like(logits)
    ref, ref_record, ref_grads = run(selector, None, logits, pad, x, noise, rate_gradient, site)
    fast, record, grads = run(selector, path, logits, pad, x, noise, rate_gradient, site)

    torch.testing.assert_close(fast.probs, ref.probs, rtol=1e-5, atol=1e-6)
    assert torch.equal(record.selection, ref_record.selection)  # the same sample, exactly
    assert torch.equal(fast.keep.detach().float(), ref.keep.detach().float())
    assert fast.keep.requires_grad == ref.keep.requires_grad == rate_gradient
    for field in RECORD_FIELDS:
        torch.testing.assert_close(getattr(record, field).detach(), getattr(ref_record, field).detach(),
                                   rtol=1e-5, atol=1e-5, msg=field)
    assert set(grads) == set(ref_grads) and ref_grads["logits"] is not None
    for key, grad in ref_grads.items():  # (the query's is None where the selector never reads it)
        if grad is None:
            assert grads[key] is None, key
        else:
            torch.testing.assert_close(grads[key], grad, rtol=1e-4, atol=1e-5, msg=key)


@pytest.mark.parametrize("left_pad", [False, True])
@pytest.mark.parametrize("name", MASKED)
def test_evaluation_mask_is_the_reference(name, left_pad):
    attn = build(name, double=False).eval()
    x, pad = inputs(seed=4, dtype=torch.float32, left_pad=left_pad)
    if attn.selector.evaluation_mask(pad, x, keep_logits=False) is None:
        pytest.skip(f"{name} computes its evaluation weights from the logits (no mask path)")
    attn.report_statistics, attn.keep_selection = True, True
    with torch.no_grad():
        fast, _ = call(attn, x, pad)  # no weights asked: the mask path
        fast_record = attn.pop_selection()
        ref, _ = call(attn, x, pad, need_weights=True)  # the reference
        ref_record = attn.pop_selection()
    queries = (~pad).T.unsqueeze(-1)  # pad queries' rows are never read
    torch.testing.assert_close(fast * queries, ref * queries, rtol=1e-5, atol=1e-6)
    assert torch.equal(fast_record.selection, ref_record.selection)
    for field in RECORD_FIELDS:
        torch.testing.assert_close(getattr(fast_record, field), getattr(ref_record, field),
                                   rtol=1e-5, atol=1e-5, msg=field)
    assert x.size(-1) == C
