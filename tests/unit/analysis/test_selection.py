"""ssan_plugin/analysis/selection.py: selection maps of a real SSAN (one sentence alone equals
it in a padded batch: maps.py's batching and unpadding), pieces back to words, rates by key label
(hand-made cases; token selectors left out), the heat map."""

import math

import pytest
import torch
from helpers.fairseq_setup import build

from ssan_plugin.analysis.maps import selective_modules
from ssan_plugin.analysis.selection import (SelectionRates, batch_selection, piece_labels,
                                            piece_word_index, plot_selection_heatmap,
                                            read_word_labels, selection_maps,
                                            sentence_selections, word_label_rates)
from ssan_plugin.modules.selection import SelectionReporter, SelectionStats

W = "\u2581"


# --- pieces and words ----------------------------------------------------------------------

def test_piece_word_index_follows_the_word_start_marker():
    pieces = [f"{W}ka", "lo", f"{W}mi", W, "tu", "ra", f"{W}ne", "</s>"]
    assert piece_word_index(pieces) == [0, 0, 1, 2, 2, 2, 3, -1]
    assert piece_word_index(["ka", f"{W}lo"]) == [0, 1]  # a first piece without marker: word 0


def test_piece_labels_maps_word_labels_onto_pieces_and_checks_the_count():
    pieces = [f"{W}ka", "lo", f"{W}mi", f"{W}ne", "</s>"]
    assert piece_labels(pieces, ["noun", "filler", "verb"]) == ["noun", "noun", "filler", "verb", None]
    with pytest.raises(ValueError, match="spell 3 words, but 2 labels"):
        piece_labels(pieces, ["noun", "verb"])


def test_read_word_labels(tmp_path):
    (tmp_path / "x.labels").write_text("noun filler verb\nfiller noun\n")
    assert read_word_labels(tmp_path / "x.labels") == [["noun", "filler", "verb"], ["filler", "noun"]]


# --- rates by label on hand-made maps ------------------------------------------------------

def test_selection_rates_by_key_label_hand_made():
    # 2 heads, 3 positions: keys 0 (content), 1 (filler), 2 (EOS: not counted)
    sel0 = torch.tensor([[[1, 0, 1], [1, 1, 0], [0, 0, 1]],
                         [[1, 0, 0], [0, 0, 0], [1, 1, 1]]], dtype=torch.bool)
    sel1 = torch.ones(2, 3, 3, dtype=torch.bool)
    rates = SelectionRates()
    rates.add({0: sel0, 1: sel1}, ["content", "filler", None])
    # layer 0, key 0 selected by (head 0: q0, q1), (head 1: q0, q2) = 4 of 6
    assert rates.rate("content", 0) == pytest.approx(4 / 6)
    # key 1: (head 0: q1), (head 1: q2) = 2 of 6
    assert rates.rate("filler", 0) == pytest.approx(2 / 6)
    assert rates.rate("content", 1) == 1.0
    assert rates.rate("filler") == pytest.approx((2 + 6) / 12)  # pooled over layers
    assert rates.labels() == ["content", "filler"] and rates.layers() == [0, 1]
    # a second sentence accumulates
    rates.add({0: torch.zeros(2, 2, 2, dtype=torch.bool)}, ["filler", "content"])
    assert rates.rate("filler", 0) == pytest.approx(2 / 10)
    assert rates.as_dict()["layers"]["0"]["content"] == pytest.approx(4 / 10)
    assert math.isnan(SelectionRates().rate("content"))


def test_selection_rates_query_mask():
    sel = torch.tensor([[[1, 0], [1, 1]]], dtype=torch.bool)
    rates = SelectionRates()
    rates.add({0: sel}, ["a", "b"], query_mask=[False, True])
    assert rates.rate("a") == 1.0 and rates.rate("b") == 1.0


# --- a stub selector: the whole chain from tokens to rates --------------------------------

class _StubSelector(torch.nn.Module, SelectionReporter):
    pass


class _StubEncoder(torch.nn.Module):
    """Selects key s for every query iff its token id is even (layer 0) / always (layer 2);
    layer 1 is a token selector (every token a head and a dependent), which rates leave out."""

    padding_idx = 1

    def __init__(self):
        super().__init__()
        self.attn = _StubSelector()
        self.seen_training = None

    def forward(self, src_tokens, src_lengths=None):
        self.seen_training = self.training
        bsz, n = src_tokens.shape
        zero = torch.zeros(())
        records = []
        for layer, sel in ((0, (src_tokens % 2 == 0)[:, None, None, :].expand(bsz, 2, n, n)),
                           (1, torch.ones(bsz, 2, n, dtype=torch.bool)),
                           (2, torch.ones(bsz, 2, n, n, dtype=torch.bool))):
            records.append(SelectionStats(zero, zero, zero, zero, zero, zero, zero, layer=layer,
                                          selection=sel if self.attn.keep_selection else None))
        return {"selection_stats": records}


class _StubModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = _StubEncoder()


def test_word_label_rates_from_generator_labels_hand_made():
    """The demo's content/filler figure: pieces -> words -> the generator's labels -> rates."""
    model = _StubModel().train()
    # dictionary ids: even ids are selected by layer 0; 2 is EOS (a special, never counted)
    sentences = [torch.tensor([4, 5, 6, 2]), torch.tensor([8, 9, 2])]
    pieces = [[f"{W}ka", "lo", f"{W}mi", "</s>"], [f"{W}tu", f"{W}ra", "</s>"]]
    word_labels = [["noun", "filler"], ["filler", "verb"]]
    rates = word_label_rates(model, sentences, pieces, word_labels, pad_idx=1,
                             classify=lambda l: "filler" if l == "filler" else "content",
                             batch_size=2)
    # sentence 1: content keys 4 (sel), 5 (not); filler key 6 (sel); 4 queries x 2 heads
    # sentence 2: filler key 8 (sel); content key 9 (not); 3 queries x 2 heads
    assert rates.rate("content", 0) == pytest.approx((1 * 8 + 0 * 6) / (2 * 8 + 1 * 6))
    assert rates.rate("filler", 0) == pytest.approx((8 + 6) / (8 + 6))
    assert rates.rate("content", 2) == 1.0
    assert rates.layers() == [0, 2]  # the token selector (layer 1) is left out
    assert sorted(batch_selection(model, torch.tensor([[1, 4, 2]]))) == [0, 2]
    assert model.training and model.encoder.seen_training is False  # eval inside, restored
    assert not model.encoder.attn.keep_selection
    with pytest.raises(ValueError, match="2 sentences, 1 piece lists"):
        word_label_rates(model, sentences, pieces[:1], word_labels, pad_idx=1)


# --- a real SSAN model ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def ssan(tiny_bin):
    torch.manual_seed(0)
    task, model, _ = build(tiny_bin, ["--arch", "ssan_transformer", "--criterion",
                                      "selective_label_smoothed_cross_entropy", "--ssan-layers", "0,1"])
    task.load_dataset("valid")
    return task, model


def test_selection_maps_of_a_real_ssan_match_the_padded_batch(ssan):
    task, model = ssan
    model.train()
    data = task.dataset("valid")
    pad = task.source_dictionary.pad()
    sentences = [data.src[i] for i in range(6)]
    assert len({s.numel() for s in sentences}) > 1  # padding really happens
    alone = [selection_maps(model, s) for s in sentences]
    assert sorted(alone[0]) == [0, 1]
    heads = model.encoder.layers[0].self_attn.num_heads
    n = sentences[0].numel()
    assert alone[0][0].shape == (heads, n, n) and alone[0][0].dtype == torch.bool
    batched = list(sentence_selections(model, sentences, pad, batch_size=4))
    for one, many in zip(alone, batched):
        for layer in (0, 1):
            assert torch.equal(one[layer], many[layer])
    assert model.training  # the mode is restored
    assert not any(m.keep_selection for m in selective_modules(model))
    # the selection is not trivial at initialisation (the policy is random)
    rate = torch.cat([m[0].flatten() for m in alone]).float().mean()
    assert 0.05 < rate < 0.95


def test_batch_selection_of_a_plain_transformer_is_empty(tiny_bin):
    task, model, _ = build(tiny_bin, ["--arch", "transformer", "--criterion", "label_smoothed_cross_entropy"])
    tokens = torch.tensor([[4, 5, 2]])
    assert batch_selection(model, tokens) == {}


def test_heatmap_png(tmp_path):
    maps = {0: torch.rand(2, 4, 4) > 0.5, 2: torch.rand(2, 4, 4) > 0.5}
    path = plot_selection_heatmap(maps, ["ka", "lo", "mi", "</s>"], tmp_path / "h.png",
                                  key_labels=["content", "filler", "content", None], title="t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="3 tokens"):
        plot_selection_heatmap(maps, ["a", "b", "c"], tmp_path / "x.png")
