"""ssan_plugin/analysis/maps.py: batching and unpadding (either padding side); per-head selection
and attention maps of real (untrained) SAN, SSAN and ReSA encoders equal what the model itself
computes; word-level pooling; the heat-map panel and the PNG grid."""

import pytest
import torch
from helpers.analysis_maps import maps_and_inputs
from helpers.fairseq_setup import build

from ssan_plugin.analysis.maps import (batch_maps, collate, grid_size_inches, heat_panel,
                                       layer_kinds, maps_json, padded_batches, plot_grid,
                                       recording_attention, resa_pair_selection, run_encoder,
                                       sentence_maps, sentence_positions, to_words, unpad)
from ssan_plugin.analysis.selection import selection_maps

CRITERION = ["--criterion", "label_smoothed_cross_entropy"]


@pytest.fixture(scope="module")
def ssan(tiny_bin):
    torch.manual_seed(0)
    task, model, _ = build(tiny_bin, ["--arch", "ssan_transformer", *CRITERION])
    return task, model.eval()


@pytest.fixture(scope="module")
def san(tiny_bin):
    torch.manual_seed(0)
    task, model, _ = build(tiny_bin, ["--arch", "transformer", *CRITERION])
    return task, model.eval()


def sentences(task, lengths=(5, 8, 3)):
    d = task.source_dictionary
    g = torch.Generator().manual_seed(1)
    return [torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g),
                       torch.tensor([d.eos()])]) for n in lengths]


def policy_selection(attn, x):
    """SSAN's eval-mode selection recomputed from the layer input: 1[Q_p K_p^T > 0] per head."""
    q_p, k_p = attn.selector.policy_proj(x).chunk(2, dim=-1)  # T x B x C
    t, b, c = x.shape
    h = attn.num_heads

    def heads(y):
        return y.reshape(t, b, h, c // h).permute(1, 2, 0, 3)

    return (heads(q_p) @ heads(k_p).transpose(-1, -2) * attn.selector.policy_scaling) > 0


def test_collate_and_unpad_either_padding_side():
    pad = 1
    sents = [torch.tensor([5, 6, 2]), torch.tensor([7, 2])]
    left, lengths = collate(sents, pad, left_pad=True)
    assert left.tolist() == [[5, 6, 2], [1, 7, 2]] and lengths.tolist() == [3, 2]
    right, _ = collate(sents, pad, left_pad=False)
    assert right.tolist() == [[5, 6, 2], [7, 2, 1]]
    assert [p.tolist() for p in sentence_positions(left, pad)] == [[0, 1, 2], [1, 2]]
    assert [p.tolist() for p in sentence_positions(right, pad)] == [[0, 1, 2], [0, 1]]
    for tokens in (left, right):
        # selection: key s selected iff its token is even, whatever the query
        sel = (tokens % 2 == 0)[:, None, None, :].expand(2, 1, 3, 3)
        one, two = (unpad(sel[row], idx)
                    for row, idx in enumerate(sentence_positions(tokens, pad)))
        assert one.shape == (1, 3, 3) and two.shape == (1, 2, 2)
        assert two[0, 0].tolist() == [False, True]  # keys 7, 2 (the pad column gone)


def test_padded_batches_cut_a_stream_in_order():
    stream = (torch.tensor([4] * n + [2]) for n in (1, 3, 2, 4, 1))  # read as it comes
    batches = list(padded_batches(stream, 1, batch_size=2))
    assert [tuple(t.shape) for t, _ in batches] == [(2, 4), (2, 5), (1, 2)]
    assert [l.tolist() for _, l in batches] == [[2, 4], [3, 5], [2]]
    assert batches[0][0].tolist() == [[1, 1, 4, 2], [4, 4, 4, 2]]  # left padded by default


def test_layer_kinds(ssan, san):
    assert set(layer_kinds(ssan[1]).values()) == {"ssan"}
    assert set(layer_kinds(san[1]).values()) == {"san"}


def test_ssan_maps_equal_the_models_own_selection_and_attention(ssan):
    task, model = ssan
    sents = sentences(task)
    maps, inputs, keep = maps_and_inputs(task, model, sents)
    layers = model.encoder.layers
    for layer in range(len(layers)):
        attn = layers[layer].self_attn
        with torch.no_grad():
            expected = policy_selection(attn, inputs[layer])  # (B, h, T, T) padded
        for row, m in enumerate(maps):
            idx = keep[row].nonzero().squeeze(-1)
            sel, att = m.selection[layer], m.attention[layer]
            n = len(sents[row])
            assert sel.shape == att.shape == (attn.num_heads, n, n)
            assert torch.equal(sel, expected[row][:, idx][:, :, idx])
            # attention: a distribution over the selected keys only (empty rows stay zero)
            assert torch.all(att[~sel] == 0)
            sums = att.sum(-1)
            has = sel.any(-1)
            assert torch.allclose(sums[has], torch.ones_like(sums[has]), atol=1e-5)
            assert torch.all(sums[~has] == 0)
        # the same as the selection alone, one sentence at a time
        for row, s in enumerate(sents):
            assert torch.equal(selection_maps(model, s)[layer], maps[row].selection[layer])


def test_san_per_head_attention_averages_to_fairseqs_fused_path(san):
    task, model = san
    pad = task.source_dictionary.pad()
    sents = sentences(task)
    tokens, lengths = collate(sents, pad)
    maps = batch_maps(model, tokens, lengths, pad)
    assert all(m.selection == {} for m in maps)
    # fairseq's fused path, asked for head-averaged weights directly
    fused = {}

    def make(i):
        def pre(module, args, kwargs):
            return args, {**kwargs, "need_weights": True}

        def post(module, args, kwargs, out):
            fused[i] = out[1]
        return pre, post

    handles = []
    for i, layer in enumerate(model.encoder.layers):
        pre, post = make(i)
        handles += [layer.self_attn.register_forward_pre_hook(pre, with_kwargs=True),
                    layer.self_attn.register_forward_hook(post, with_kwargs=True)]
    try:
        run_encoder(model, tokens, lengths)
    finally:
        for h in handles:
            h.remove()
    keep = tokens.ne(pad)
    for layer, avg in fused.items():
        assert avg.dim() == 3  # the fused path returns (B, T, S): heads averaged
        for row, m in enumerate(maps):
            idx = keep[row].nonzero().squeeze(-1)
            heads = m.attention[layer]
            assert heads.shape[0] == model.encoder.layers[layer].self_attn.num_heads
            assert not torch.allclose(heads[0], heads[1])  # really per head
            assert torch.allclose(heads.mean(0), avg[row][idx][:, idx], atol=1e-5)
    # the hooks and the flag are gone afterwards
    assert all(not l.self_attn.skip_embed_dim_check for l in model.encoder.layers)
    assert all(not l.self_attn._forward_hooks for l in model.encoder.layers)


def test_batching_and_padding_do_not_change_the_maps(ssan):
    task, model = ssan
    pad = task.source_dictionary.pad()
    sents = sentences(task, (4, 9, 6, 2))
    together = list(sentence_maps(model, sents, pad, batch_size=4, states=True))
    alone = [next(sentence_maps(model, [s], pad, states=True)) for s in sents]
    for a, b in zip(together, alone):
        for layer in a.attention:
            assert torch.allclose(a.attention[layer], b.attention[layer], atol=1e-5)
            assert torch.equal(a.selection[layer], b.selection[layer])
        assert a.states.shape == (len(model.encoder.layers) + 1, a.selection[0].size(-1), 32)
        assert torch.allclose(a.states, b.states, atol=1e-4)


def test_resa_token_selection_becomes_a_pair_map(tiny_bin):
    torch.manual_seed(0)
    task, model, _ = build(tiny_bin, ["--arch", "resa_transformer", *CRITERION])
    model.eval()
    pad = task.source_dictionary.pad()
    sents = sentences(task)
    maps = list(sentence_maps(model, sents, pad, attention=True))
    assert set(layer_kinds(model).values()) == {"resa"}
    for m, s in zip(maps, sents):
        for layer, tok in m.token_selection.items():
            assert tok.shape == (2, len(s))
            assert torch.equal(m.selection[layer], resa_pair_selection(tok))
        assert m.attention == {}
    hand = torch.tensor([[1, 0, 1], [1, 1, 0]], dtype=torch.bool)
    assert resa_pair_selection(hand)[0].int().tolist() == [[0, 1, 0], [0, 0, 0], [1, 1, 0]]


@pytest.mark.parametrize("arch,heads", [("disan_transformer", 2), ("biblosan_transformer", 4)])
def test_multidim_maps_equal_the_layers_own_weights(tiny_bin, arch, heads):
    """DiSAN / Bi-BloSAN: per layer the module's feature-mean weights of that layer's input
    (the sentence alone, batch 1, recorded by a hook here), whatever the batch and padding;
    the "heads" are named in maps_json; layer outputs are still available."""
    torch.manual_seed(0)
    task, model, _ = build(tiny_bin, ["--arch", arch, *CRITERION])
    model.eval()
    pad = task.source_dictionary.pad()
    sents = sentences(task)
    together = list(sentence_maps(model, sents, pad, batch_size=3, states=True))
    kind = arch.split("_")[0]
    assert set(layer_kinds(model).values()) == {kind}
    for s, m in zip(sents, together):
        inputs = {}

        def grab(index):
            def hook(module, args, kwargs):
                inputs[index] = kwargs["query"].detach()
            return hook

        handles = [layer.self_attn.register_forward_pre_hook(grab(i), with_kwargs=True)
                   for i, layer in enumerate(model.encoder.layers)]
        try:
            tokens, lengths = collate([s], pad, left_pad=True)
            run_encoder(model, tokens, lengths)
        finally:
            for h in handles:
                h.remove()
        for i, layer in enumerate(model.encoder.layers):
            expected = layer.self_attn.attention_maps(inputs[i].transpose(0, 1), None)[0]
            assert m.attention[i].shape == (heads, len(s), len(s))
            torch.testing.assert_close(m.attention[i], expected.float(), atol=1e-5, rtol=1e-4)
        assert m.states is not None and m.selection == {}
    js = maps_json([str(i) for i in range(len(sents[0]))], together[0], layer_kinds(model))
    names = [h["name"] for h in js["layers"][0]["heads"]]
    assert names[:2] == (["forward", "backward"] if kind == "disan" else
                         ["forward intra-block", "forward inter-block"])


def test_to_words_sums_keys_and_averages_queries():
    # pieces: w0 w0 w1 </s>
    m = torch.tensor([[0.1, 0.2, 0.3, 0.4],
                      [0.5, 0.1, 0.2, 0.2],
                      [0.0, 0.6, 0.4, 0.0],
                      [1.0, 0.0, 0.0, 0.0]])
    w = to_words(m, [0, 0, 1, -1])
    expected = torch.tensor([[(0.1 + 0.2 + 0.5 + 0.1) / 2, (0.3 + 0.2) / 2],
                             [0.0 + 0.6, 0.4]])
    assert torch.allclose(w, expected)


def test_recording_attention_leaves_no_hooks(san):
    model = san[1]
    with recording_attention(model) as rec:
        assert all(l.self_attn.skip_embed_dim_check for l in model.encoder.layers)
    assert rec == {}
    assert all(not l.self_attn._forward_pre_hooks for l in model.encoder.layers)


def test_heat_panel_labels_both_axes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        image = heat_panel(ax, torch.eye(3), ["a", "b", "</s>"], vmax=2.0, fontsize=7)
        for ticks in (ax.get_xticklabels(), ax.get_yticklabels()):
            assert [t.get_text() for t in ticks] == ["a", "b", "</s>"]
            assert ticks[0].get_fontsize() == 7
        assert ax.get_xticklabels()[0].get_rotation() == 90
        assert image.get_clim() == (0, 2.0)
        assert image.get_array().tolist() == torch.eye(3).tolist()  # rows queries, columns keys
    finally:
        plt.close(fig)


def test_plot_grid_is_a_readable_image_of_the_grid(tmp_path, ssan):
    from PIL import Image

    task, model = ssan
    s = sentences(task, (6,))[0]
    m = next(sentence_maps(model, [s], task.source_dictionary.pad()))
    pieces = [task.source_dictionary[i] for i in s]
    path = tmp_path / "sel.png"
    rows, cols = plot_grid(m.selection, pieces, path, "selection")
    assert (rows, cols) == (2, 4)  # TINY_MODEL: 2 encoder layers, 4 heads
    width, height = grid_size_inches(rows, cols, len(pieces))
    with Image.open(path) as img:
        img.load()
        assert img.size == (round(width * 100), round(height * 100))
        pixels = torch.tensor(list(img.convert("L").getdata()), dtype=torch.float)
    assert pixels.std() > 10  # not a blank page
    js = maps_json(pieces, m, layer_kinds(model), "x")
    assert [l["layer"] for l in js["layers"]] == [0, 1]
    head = js["layers"][1]["heads"][3]
    assert head["selection"] == m.selection[1][3].int().tolist()
    assert head["pieces"] == pieces and len(head["attention"]) == len(pieces)
    with pytest.raises(ValueError, match="no selection maps"):
        plot_grid({}, pieces, path, "selection")
