"""ssan_plugin/analysis/maps.py on the selectors of selective_transformer (modules/selectors):
real (untrained) tiny models, the selection read from each layer's own record (a pair is
selected when its final weight is nonzero) and the final weights per head, checked against each
selector's definition: top-k keeps exactly k keys per query (the k largest logits), entmax's
pattern is its nonzero weights, the gate selects every pair, the fixed mask is 1[M > 0] at the
sentence's own positions whatever the padding."""

import math

import pytest
import torch
from helpers.analysis_maps import maps_and_inputs
from helpers.fairseq_setup import build

from ssan_plugin.analysis.maps import (collate, layer_kinds, learnt_selector_values, maps_json,
                                       selective_layers, sentence_maps, to_words)
from ssan_plugin.analysis.selection import batch_selection
from ssan_plugin.analysis.word_classes import WordClassStats

CRITERION = ["--criterion", "label_smoothed_cross_entropy"]
K = 3
LENGTHS = (5, 8, 2)  # shorter and longer than K; batched with left padding
SELECTORS = {
    "topk": ["--topk", str(K)],
    "entmax": [],  # alpha learnt per head (bisection)
    "sparsemax": ["--entmax-fixed-alpha", "--entmax-alpha", "2"],
    "gate": [],
    "fixed_mask": ["--max-source-positions", "16"],
}


def selector_name(case):
    return "entmax" if case == "sparsemax" else case


@pytest.fixture(scope="module")
def models(tiny_bin):
    out = {}
    for case, flags in SELECTORS.items():
        torch.manual_seed(0)
        task, model, _ = build(tiny_bin, ["--arch", "selective_transformer", "--encoder-selector",
                                          selector_name(case), *flags, *CRITERION])
        out[case] = (task, model.eval())
    return out


def sentences(task, lengths=LENGTHS):
    d = task.source_dictionary
    g = torch.Generator().manual_seed(1)
    return [torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g),
                       torch.tensor([d.eos()])]) for n in lengths]


def logits_of(attn, x):
    """E = (q / sqrt(d)) k^T per head from the layer input, (B, h, T, S)."""
    t, b, c = x.shape
    h = attn.num_heads

    def heads(y):
        return y.reshape(t, b, h, c // h).permute(1, 2, 0, 3)

    return heads(attn.q_proj(x)) * attn.scaling @ heads(attn.k_proj(x)).transpose(-1, -2)


def test_layer_kinds_name_the_selector(models, tiny_bin):
    for case, (_, model) in models.items():
        name = selector_name(case)
        assert layer_kinds(model) == {0: name, 1: name}
        assert selective_layers(model) == {0: name, 1: name}
    torch.manual_seed(0)
    _, one, _ = build(tiny_bin, ["--arch", "selective_transformer", "--encoder-selector", "gate",
                                 "--selector-layers", "1", *CRITERION])
    assert layer_kinds(one) == {0: "san", 1: "gate"} and selective_layers(one) == {1: "gate"}
    _, ssan, _ = build(tiny_bin, ["--arch", "selective_transformer", *CRITERION])  # gumbel
    assert layer_kinds(ssan) == selective_layers(ssan) == {0: "ssan", 1: "ssan"}
    _, san, _ = build(tiny_bin, ["--arch", "transformer", *CRITERION])
    assert selective_layers(san) == {}


def test_learnt_values_are_each_heads_alpha(models, tiny_bin):
    """Only entmax with alpha learnt reports a value per head: 1 + sigmoid(a) of each layer's
    own parameter; the fixed-alpha, top-k, gate, fixed-mask and SSAN layers report nothing."""
    _, model = models["entmax"]
    logits = {0: [-1.0, 0.0, 0.5, 2.0], 1: [3.0, -2.0, 0.25, 1.0]}
    saved = [model.encoder.layers[k].self_attn.selector.alpha_logit.detach().clone()
             for k in logits]
    try:
        with torch.no_grad():
            for k, values in logits.items():
                model.encoder.layers[k].self_attn.selector.alpha_logit.copy_(torch.tensor(values))
        got = learnt_selector_values(model)
    finally:
        with torch.no_grad():
            for k, before in zip(logits, saved):
                model.encoder.layers[k].self_attn.selector.alpha_logit.copy_(before)
    assert set(got) == {0, 1} and all(set(v) == {"alpha"} for v in got.values())
    for k, values in logits.items():
        expected = [1 + 1 / (1 + math.exp(-a)) for a in values]
        assert got[k]["alpha"] == pytest.approx(expected, rel=1e-6)
    for case in ("sparsemax", "topk", "gate", "fixed_mask"):
        assert learnt_selector_values(models[case][1]) == {}
    _, ssan, _ = build(tiny_bin, ["--arch", "selective_transformer", *CRITERION])  # gumbel
    assert learnt_selector_values(ssan) == {}


@pytest.mark.parametrize("case", list(SELECTORS))
def test_selection_is_the_nonzero_final_weights(models, case):
    """Every selector: a selection and per-head weights for every layer; the selection is
    exactly where the weights are nonzero; each row sums to 1 over its sentence's keys (times
    the head's gate for the gate selector)."""
    task, model = models[case]
    sents = sentences(task)
    maps, _, _ = maps_and_inputs(task, model, sents)
    heads = model.encoder.layers[0].self_attn.num_heads
    for s, m in zip(sents, maps):
        n = len(s)
        assert sorted(m.selection) == sorted(m.attention) == [0, 1]
        for layer in (0, 1):
            sel, att = m.selection[layer], m.attention[layer]
            assert sel.dtype == torch.bool and sel.shape == att.shape == (heads, n, n)
            assert torch.equal(sel, att > 0)
            sums = att.sum(-1)
            if case == "gate":
                assert torch.all((sums > 0) & (sums < 1))
            else:
                has = sel.any(-1)
                torch.testing.assert_close(sums[has], torch.ones_like(sums[has]))
                assert torch.all(sums[~has] == 0)
    # what the word-class statistics and the tree induction read
    stats = WordClassStats()
    stats.add(maps[0].selection, list(range(len(sents[0]) - 1)) + [-1], ["NN"] * (len(sents[0]) - 1))
    assert [layer["layer"] for layer in stats.as_dict()["layers"]] == [0, 1]
    words = to_words(maps[0].attention[0].mean(0), list(range(len(sents[0]) - 1)) + [-1])
    assert words.shape == (len(sents[0]) - 1,) * 2
    js = maps_json([str(i) for i in range(len(sents[0]))], maps[0], layer_kinds(model))
    assert {layer["kind"] for layer in js["layers"]} == {selector_name(case)}
    assert js["layers"][1]["heads"][0]["selection"] == maps[0].selection[1][0].int().tolist()


def test_topk_keeps_exactly_k_keys_the_largest_logits(models):
    task, model = models["topk"]
    sents = sentences(task)
    maps, inputs, keep = maps_and_inputs(task, model, sents)
    for layer in (0, 1):
        attn = model.encoder.layers[layer].self_attn
        with torch.no_grad():
            logits = logits_of(attn, inputs[layer])
        for row, (s, m) in enumerate(zip(sents, maps)):
            n = len(s)
            sel = m.selection[layer]
            assert torch.all(sel.sum(-1) == min(K, n))  # every head, every query
            idx = keep[row].nonzero().squeeze(-1)
            own = logits[row][:, idx][:, :, idx]  # (h, n, n)
            expected = torch.zeros_like(sel)
            expected.scatter_(-1, own.topk(min(K, n), dim=-1).indices, True)
            assert torch.equal(sel, expected)
    # the same maps one sentence at a time (padding and batching change nothing)
    pad = task.source_dictionary.pad()
    for s, m in zip(sents, maps):
        alone = next(sentence_maps(model, [s], pad))
        for layer in (0, 1):
            assert torch.equal(alone.selection[layer], m.selection[layer])
            torch.testing.assert_close(alone.attention[layer], m.attention[layer])


def test_entmax_pattern_has_exact_zeros(models):
    """sparsemax's weights of an untrained model already leave keys out; the selection follows
    them (the equality itself: test_selection_is_the_nonzero_final_weights)."""
    task, model = models["sparsemax"]
    maps, _, _ = maps_and_inputs(task, model, sentences(task))
    long = maps[LENGTHS.index(max(LENGTHS))]
    assert not all(bool(sel.all()) for sel in long.selection.values())
    assert all(bool(sel.any(-1).all()) for sel in long.selection.values())  # never an empty row


def test_gate_selects_every_pair(models):
    task, model = models["gate"]
    sents = sentences(task)
    maps, _, _ = maps_and_inputs(task, model, sents)
    for s, m in zip(sents, maps):
        for sel in m.selection.values():
            assert bool(sel.all())
    # pads are neither queries nor keys of the padded batch's own maps
    pad = task.source_dictionary.pad()
    tokens, lengths = collate(sents, pad)
    for layer, sel in batch_selection(model, tokens, lengths).items():
        valid = tokens.ne(pad)
        pair = valid[:, None, :, None] & valid[:, None, None, :]
        assert torch.equal(sel, pair.expand_as(sel))


def test_fixed_mask_is_the_positive_mask_at_the_sentences_own_positions(models):
    task, model = models["fixed_mask"]
    sents = sentences(task)
    maps, _, _ = maps_and_inputs(task, model, sents)  # left padded: positions count from the first token
    for s, m in zip(sents, maps):
        n = len(s)
        for layer, sel in m.selection.items():
            mask = model.encoder.layers[layer].self_attn.selector.mask_logits.detach()
            assert torch.equal(sel, mask[:, :n, :n] > 0)
