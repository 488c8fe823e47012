"""ssan_plugin/srl/characters.py: the flat ``chars`` items -> (words, characters) matrices,
cut to MAX chars, padded per batch; an item that disagrees with the words is an error."""

import numpy as np
import pytest
import torch
from fairseq.data import ListDataset

from ssan_plugin.srl.characters import WordCharactersDataset

EOS, PAD = 2, 1


def flat(*words):
    return torch.tensor([c for w in words for c in list(w) + [EOS]])


def test_items_are_word_matrices_and_batches_pad_both_axes():
    items = [flat([5, 6, 7], [8]), flat([9, 10])]
    ds = WordCharactersDataset(ListDataset(items), np.array([2, 1]), EOS, PAD)
    assert ds[0].tolist() == [[5, 6, 7], [8, PAD, PAD]]
    assert ds[1].tolist() == [[9, 10]]
    batch = ds.collater([ds[0], ds[1]])
    assert batch.shape == (2, 2, 3)
    assert batch[1].tolist() == [[9, 10, PAD], [PAD, PAD, PAD]]


def test_long_words_keep_their_first_max_chars():
    ds = WordCharactersDataset(ListDataset([flat(list(range(3, 30)), [4])]), np.array([2]),
                               EOS, PAD, max_chars=5)
    assert ds[0].tolist() == [[3, 4, 5, 6, 7], [4, PAD, PAD, PAD, PAD]]


def test_items_that_disagree_with_the_words_are_refused():
    with pytest.raises(ValueError, match="2 character items for 3 instances"):
        WordCharactersDataset(ListDataset([flat([5]), flat([6])]), np.array([1, 1, 1]), EOS, PAD)
    ds = WordCharactersDataset(ListDataset([flat([5], [6]), torch.tensor([5, EOS, 6])]),
                               np.array([3, 2]), EOS, PAD, split="valid")
    with pytest.raises(ValueError, match="'valid', instance 0: 2 words in the characters, 3"):
        ds[0]
    with pytest.raises(ValueError, match="instance 1: 1 words"):
        ds[1]  # the last word is not closed by EOS
