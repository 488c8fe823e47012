"""ssan_plugin/analysis/alignments.py's rules on hand-made maps: argmax links (first maximum on
ties), majority links of a selection map (possibly none), pieces to words with </s> dropped,
the fixed layer rule, fairseq's two shapes of cross attention weights. The model-level
extraction (against fairseq's own --print-alignment): tests/e2e/test_align.py."""

import torch

from ssan_plugin.analysis.alignments import head_mean, piece_links, rule_layer, word_links_of
from ssan_plugin.analysis.inputs import Encoded


def test_argmax_links_every_target_piece_to_its_first_largest_source_piece():
    matrix = torch.tensor([[0.1, 0.7, 0.2],
                           [0.4, 0.2, 0.4],   # a tie: the lower source index
                           [0.0, 0.0, 1.0]])
    assert piece_links(matrix, "weights") == {(1, 0), (0, 1), (2, 2)}
    assert piece_links(torch.zeros(0, 3), "weights") == set()


def test_selection_links_what_more_than_half_the_heads_select():
    shares = torch.tensor([[0.75, 0.5, 0.0],
                           [0.25, 0.25, 0.25],  # no majority: no link
                           [1.0, 0.0, 1.0]])
    assert piece_links(shares, "selection") == {(0, 0), (0, 2), (2, 2)}


def test_pieces_become_words_and_eos_is_dropped():
    source = Encoded(torch.tensor([5, 6, 7, 2]), ["▁a", "b", "▁c", "</s>"], [0, 0, 1, -1])
    target = Encoded(torch.tensor([8, 9, 2]), ["▁x", "▁y", "</s>"], [0, 1, -1])
    matrix = torch.tensor([[0.1, 0.6, 0.2, 0.1],   # x -> piece b (word 0)
                           [0.1, 0.1, 0.3, 0.5],   # y -> </s> is dropped: argmax over c
                           [0.0, 0.0, 0.0, 1.0]])  # the </s> row is dropped
    assert word_links_of(matrix, source, target, "weights") == {(0, 0), (1, 1)}


def test_the_layer_rule_is_the_penultimate_layer():
    assert [rule_layer(n) for n in (1, 2, 3, 6)] == [0, 0, 1, 4]


def test_head_mean_reads_both_of_fairseqs_shapes():
    heads = torch.rand(4, 2, 3, 5)  # (h, B, T, S): the alignment layer's head weights
    torch.testing.assert_close(head_mean(heads), heads.mean(0)[0])
    averaged = torch.rand(2, 3, 5)  # (B, T, S)
    assert torch.equal(head_mean(averaged), averaged[0])
