"""ssan_plugin/analysis/alignments.py's rules on hand-made maps: argmax links (first maximum on
ties), majority links of a selection map (possibly none), pieces to words with </s> dropped in
both readings (the shifted one reads the next query's row), the fixed layer rule, the held-apart
choice against a brute force over folds, fairseq's two shapes of cross attention weights. The model-level
extraction (against fairseq's own --print-alignment): tests/e2e/test_align.py."""

import itertools
import random

import pytest
import torch

from ssan_plugin.analysis.alignments import (READINGS, held_apart_choice, head_mean, piece_links,
                                             rule_layer, unlinked_pieces, word_links_of)
from ssan_plugin.analysis.inputs import Encoded
from ssan_plugin.errors import PipelineError
from ssan_plugin.translation.alignment import GoldAlignment


def test_argmax_links_every_target_piece_to_its_first_largest_source_piece():
    matrix = torch.tensor([[0.1, 0.7, 0.2],
                           [0.4, 0.2, 0.4],   # a tie: the lower source index
                           [0.0, 0.0, 1.0]])
    assert piece_links(matrix, "weights") == {(1, 0), (0, 1), (2, 2)}
    assert piece_links(torch.zeros(0, 3), "weights") == set()
    # an all-zero row (sparse attention that kept nothing but the dropped </s>): no link, where
    # fairseq's argmax would invent one to the first source piece
    sparse = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.3, 0.0]])
    assert piece_links(sparse, "weights") == {(1, 1)}
    assert unlinked_pieces(torch.cat([torch.cat([sparse, torch.ones(2, 1)], 1), torch.zeros(1, 4)]),
                           "weights") == 1  # the </s> row and column are not read


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
                           [0.2, 0.0, 0.0, 0.8]])  # the </s> row is dropped
    assert word_links_of(matrix, source, target, "weights") == {(0, 0), (1, 1)}
    # shifted: x is read on the row whose input is x (the second), y on the </s> row
    assert word_links_of(matrix, source, target, "weights", "shifted") == {(1, 0), (0, 1)}
    assert unlinked_pieces(matrix, "weights", "shifted") == 0
    # all of the </s> row's weight on the source </s>: y is left unlinked when read there
    matrix[2] = torch.tensor([0.0, 0.0, 0.0, 1.0])
    assert word_links_of(matrix, source, target, "weights", "shifted") == {(1, 0)}
    assert unlinked_pieces(matrix, "weights", "shifted") == 1
    assert unlinked_pieces(matrix, "weights") == 0
    # with one row a piece later, the shifted reading is the predicted one
    later = torch.cat([torch.zeros(1, 4), matrix[:-1]])
    assert word_links_of(later, source, target, "weights", "shifted") == \
        word_links_of(matrix, source, target, "weights")
    with pytest.raises(ValueError, match="reading must be one of predicted, shifted"):
        word_links_of(matrix, source, target, "weights", "backward")


def test_the_layer_rule_is_the_penultimate_layer():
    assert [rule_layer(n) for n in (1, 2, 3, 6)] == [0, 0, 1, 4]


def test_head_mean_reads_both_of_fairseqs_shapes():
    heads = torch.rand(4, 2, 3, 5)  # (h, B, T, S): the alignment layer's head weights
    torch.testing.assert_close(head_mean(heads), heads.mean(0)[0])
    averaged = torch.rand(2, 3, 5)  # (B, T, S)
    assert torch.equal(head_mean(averaged), averaged[0])


def _aer(links, gold):
    """AER from its definition, pooled over the sentences given (sure links only here)."""
    a = sum(len(x) for x in links)
    s = sum(len(g.sure) for g in gold)
    hit = sum(len(set(x) & g.sure) for x, g in zip(links, gold))
    return 1 - 2 * hit / (a + s)


def test_the_held_apart_choice_aligns_each_fold_with_the_best_candidate_on_the_other():
    rng = random.Random(0)
    n, layers = 9, 3
    gold = []
    for _ in range(n):
        sure = frozenset((i, i) for i in range(rng.randint(1, 4)))
        gold.append(GoldAlignment(sure, sure))
    links = {reading: [[{(i, (i + shift) % 4) for i in range(rng.randint(1, 4))} for _ in range(n)]
                       for shift in ([0, 1, 2] if reading == "predicted" else [1, 2, 3])]
             for reading in ("predicted", "shifted")}
    links["shifted"][2] = [set(g.sure) for g in gold]  # perfect on every pair
    choice = held_apart_choice(links, gold, ("predicted", 1))
    for fold in (0, 1):
        other = [k for k in range(n) if k % 2 != fold]
        brute = min(itertools.product(("predicted", "shifted"), range(layers)),
                    key=lambda c: _aer([links[c[0]][c[1]][k] for k in other], [gold[k] for k in other]))
        assert choice.choices[fold] == brute == ("shifted", 2)
        assert choice.chosen_on_aer[fold] == pytest.approx(0.0)
    assert choice.links == links["shifted"][2]


def test_the_held_apart_choice_uses_only_the_other_fold_and_prefers_the_rule_on_ties():
    sure = [frozenset({(0, 0)}), frozenset({(1, 1)}), frozenset({(0, 0)}), frozenset({(1, 1)})]
    gold = [GoldAlignment(s, s) for s in sure]
    right, wrong = [{(0, 0)}, {(1, 1)}] * 2, [{(1, 1)}, {(0, 0)}] * 2
    # layer 1 is right on fold 1 only (odd pairs), layer 0 on fold 0 only (even pairs):
    # each fold gets the layer that is right on the other one, i.e. wrong on itself
    links = {"predicted": [[right[0], wrong[1], right[2], wrong[3]],
                           [wrong[0], right[1], wrong[2], right[3]]],
             "shifted": [[wrong[k] for k in range(4)], [wrong[k] for k in range(4)]]}
    choice = held_apart_choice(links, gold, ("predicted", 1))
    assert choice.choices == [("predicted", 1), ("predicted", 0)]
    assert choice.links == wrong
    # equal everywhere: the rule wins every fold
    same = {"predicted": [right, right], "shifted": [right, right]}
    assert held_apart_choice(same, gold, ("predicted", 1)).choices == [("predicted", 1)] * 2
    # a tie among the others, the rule worse: readings in READINGS order, then the lower layer
    worse = [wrong[k] for k in range(4)]
    tied = {"predicted": [worse, worse, right], "shifted": [right, worse, right]}
    assert READINGS.index("predicted") < READINGS.index("shifted")
    assert held_apart_choice(tied, gold, ("predicted", 1)).choices == [("predicted", 2)] * 2
    tied["predicted"][2] = worse
    assert held_apart_choice(tied, gold, ("predicted", 1)).choices == [("shifted", 0)] * 2
    with pytest.raises(PipelineError, match="needs at least 2 sentence pairs, got 1"):
        held_apart_choice({"predicted": [[right[0]]], "shifted": [[right[0]]]}, gold[:1], ("predicted", 0))
