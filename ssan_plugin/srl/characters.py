"""Characters of every word of an SRL instance, as the ``chars`` input of ``--srl-char-dim``.

The ``S.chars`` dataset (``datadir``) stores an instance as one flat sequence: each word's
character ids followed by EOS. :class:`WordCharactersDataset` turns an item into a
(words, characters) matrix, right-padded with the character dictionary's pad, each word cut to
its first ``max_chars`` characters; its collater pads a batch to (B, T, L) with T the longest
instance (as ``RightPadDataset`` pads the words) and L the longest word kept. A row of pads is
a padding word.
"""

from typing import Sequence

import numpy as np
import torch
from fairseq.data import BaseWrapperDataset

#: characters kept per word (EWT's longest are URLs of 100+ characters)
MAX_WORD_CHARS = 20


class WordCharactersDataset(BaseWrapperDataset):
    def __init__(self, chars, word_sizes: np.ndarray, eos: int, pad: int,
                 max_chars: int = MAX_WORD_CHARS, split: str = "?"):
        """``chars``: the flat ``S.chars`` dataset; ``word_sizes``: the words per instance, which
        every item must match (ValueError naming the split and the instance otherwise)."""
        super().__init__(chars)
        if len(chars) != len(word_sizes):
            raise ValueError(f"SRL split {split!r}: {len(chars)} character items for "
                             f"{len(word_sizes)} instances (prepare the data again)")
        self.word_sizes = word_sizes
        self.eos, self.pad, self.max_chars, self.split = eos, pad, max_chars, split

    def __getitem__(self, index) -> torch.Tensor:
        """(words, characters) long tensor of instance ``index`` (numpy inside: an item is
        small, and this runs once per instance per epoch in the training loop)."""
        flat = self.dataset[index].numpy().astype(np.int64)
        is_end = flat == self.eos
        ends = np.flatnonzero(is_end)
        if len(ends) != self.word_sizes[index] or (len(ends) and ends[-1] != len(flat) - 1):
            raise ValueError(f"SRL split {self.split!r}, instance {index}: {len(ends)} words in "
                             f"the characters, {self.word_sizes[index]} in the words dataset "
                             "(prepare the data again)")
        word = np.cumsum(is_end) - is_end  # the word of every position, EOS included
        starts = np.concatenate([[0], ends[:-1] + 1])
        position = np.arange(len(flat)) - starts[word]
        keep = ~is_end & (position < self.max_chars)
        lengths = np.minimum(ends - starts, self.max_chars)
        out = np.full((len(ends), max(int(lengths.max(initial=0)), 1)), self.pad, dtype=np.int64)
        out[word[keep], position[keep]] = flat[keep]
        return torch.from_numpy(out)

    def collater(self, samples: Sequence[torch.Tensor]) -> torch.Tensor:
        """Right-pad (words, characters) matrices to (B, T, L)."""
        if len(samples) == 0:
            return torch.empty(0, 0, 0, dtype=torch.long)
        words = max(s.size(0) for s in samples)
        width = max(s.size(1) for s in samples)
        out = samples[0].new_full((len(samples), words, width), self.pad)
        for b, s in enumerate(samples):
            out[b, :s.size(0), :s.size(1)] = s
        return out
