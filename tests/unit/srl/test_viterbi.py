"""Constrained Viterbi: only valid BIO sequences, and the best one (brute force on small cases)."""

import itertools

import numpy as np
import pytest
import torch

from ssan_plugin.srl.viterbi import BIOConstraints, viterbi_decode

LABELS = ["<s>", "<pad>", "</s>", "<unk>", "O", "B-A0", "I-A0", "B-V", "I-V", "B-C-V",
          "B-R-A0"]
TAGS = list(range(4, len(LABELS)))  # the BIO tags; specials must never be emitted


def valid(seq, predicate):
    """Independent oracle, on tag strings: I-X only after B-X/I-X; the predicate word V."""
    tags = [LABELS[i] for i in seq]
    for k, tag in enumerate(tags):
        if tag.startswith("I-"):
            prev = tags[k - 1] if k else "O"
            if prev[2:] != tag[2:] or prev[:2] not in ("B-", "I-"):
                return False
    return tags[predicate] in ("B-V", "I-V", "B-C-V", "I-C-V")


def brute_force(scores, predicate):
    length = scores.shape[0]
    seqs = np.array([s for s in itertools.product(TAGS, repeat=length) if valid(s, predicate)])
    totals = scores[np.arange(length), seqs].sum(axis=1)
    best = int(totals.argmax())
    return seqs[best].tolist(), float(totals[best])


def test_equals_brute_force_and_is_valid():
    gen = torch.Generator().manual_seed(0)
    constraints = BIOConstraints(LABELS)
    for _ in range(6):
        bsz, tlen = 5, 5
        scores = torch.randn(bsz, tlen, len(LABELS), generator=gen, dtype=torch.float64) * 3
        scores[:, :, 1] += 10  # a tempting special symbol (pad)
        lengths = torch.randint(1, tlen + 1, (bsz,), generator=gen)
        predicates = torch.tensor([int(torch.randint(0, int(n), (1,), generator=gen)) for n in lengths])
        paths = viterbi_decode(torch.log_softmax(scores, -1), lengths, predicates, constraints)
        for b in range(bsz):
            n, p = int(lengths[b]), int(predicates[b])
            s = torch.log_softmax(scores, -1)[b, :n].numpy()
            assert len(paths[b]) == n
            assert valid(paths[b], p) and constraints.is_valid(paths[b], p)
            want, best = brute_force(s, p)
            assert paths[b] == want
            assert float(s[np.arange(n), paths[b]].sum()) == pytest.approx(best)
            # padding rows do not change a row's decoding
            alone = viterbi_decode(torch.log_softmax(scores, -1)[b : b + 1, :n], lengths[b : b + 1],
                                   predicates[b : b + 1], constraints)
            assert alone[0] == paths[b]


def test_argmax_invalid_but_decoded_valid():
    constraints = BIOConstraints(LABELS)
    idx = {t: i for i, t in enumerate(LABELS)}
    scores = torch.full((1, 3, len(LABELS)), -5.0)
    scores[0, 0, idx["I-A0"]] = 0.0  # I- first: invalid
    scores[0, 0, idx["B-A0"]] = -1.0
    scores[0, 1, idx["I-A0"]] = 0.0
    scores[0, 2, idx["O"]] = 0.0  # the predicate word must be V
    scores[0, 2, idx["B-V"]] = -2.0
    (path,) = viterbi_decode(scores, torch.tensor([3]), torch.tensor([2]), constraints)
    assert [LABELS[i] for i in path] == ["B-A0", "I-A0", "B-V"]


def test_constraint_masks_and_errors():
    c = BIOConstraints(LABELS)
    idx = {t: i for i, t in enumerate(LABELS)}
    assert not c.transitions[idx["O"], idx["I-A0"]] and c.transitions[idx["B-A0"], idx["I-A0"]]
    assert not c.transitions[idx["B-V"], idx["I-A0"]] and c.transitions[idx["I-V"], idx["O"]]
    assert not c.start[idx["I-V"]] and not c.usable[idx["<unk>"]]
    with pytest.raises(ValueError, match="no B-V"):
        BIOConstraints(["O", "B-A0", "I-A0"])
    with pytest.raises(ValueError, match="predicate position"):
        viterbi_decode(torch.zeros(1, 2, len(LABELS)), torch.tensor([2]), torch.tensor([2]), c)
