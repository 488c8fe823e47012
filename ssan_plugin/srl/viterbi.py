"""Viterbi decoding of BIO tag sequences under hard constraints.

Constraints: ``I-X`` only right after ``B-X`` or ``I-X`` (so never first); tags outside the
label set (fairseq's special symbols) never; at the predicate position only a tag of the
predicate (``B-V``/``I-V``, or the ``C-V`` continuation of a split predicate). Among the valid
sequences it returns one maximising the sum of the per-token scores (log-probabilities).
"""

from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .corpus import PREDICATE_TYPES


def split_tag(tag: str) -> Tuple[str, str]:
    """``B-ARG0`` -> (``B``, ``ARG0``); ``O`` -> (``O``, ``""``); anything else -> (``""``, tag)."""
    if tag == "O":
        return "O", ""
    prefix, sep, role = tag.partition("-")
    if sep and prefix in ("B", "I") and role:
        return prefix, role
    return "", tag


class BIOConstraints:
    """Masks for a label inventory ``labels`` (index -> tag string, e.g. a fairseq Dictionary's
    symbols; entries that are not BIO tags, such as ``<pad>``, are never emitted).

    - ``transitions[a, b]``: tag b may follow tag a;
    - ``start[b]``: tag b may start a sequence;
    - ``usable[b]``: b is a BIO tag at all;
    - ``predicate[b]``: b may sit at the predicate position.
    """

    def __init__(self, labels: Sequence[str]):
        self.labels = list(labels)
        parts = [split_tag(t) for t in self.labels]
        n = len(parts)
        self.usable = torch.tensor([p in ("B", "I", "O") for p, _ in parts], dtype=torch.bool)
        self.start = torch.tensor([p in ("B", "O") for p, _ in parts], dtype=torch.bool)
        self.predicate = torch.tensor(
            [p in ("B", "I") and r in PREDICATE_TYPES for p, r in parts], dtype=torch.bool
        )
        trans = torch.zeros(n, n, dtype=torch.bool)
        for b, (pb, rb) in enumerate(parts):
            if pb in ("B", "O"):
                trans[:, b] = self.usable
            elif pb == "I":
                for a, (pa, ra) in enumerate(parts):
                    trans[a, b] = pa in ("B", "I") and ra == rb
        self.transitions = trans & self.usable.unsqueeze(1)
        if not bool(self.predicate.any()):
            raise ValueError("the label set has no B-V/I-V tag: cannot mark the predicate")

    def is_valid(self, tags: Sequence[int], predicate: Optional[int] = None) -> bool:
        """Whether a sequence of label indices satisfies every constraint."""
        if any(not self.usable[t] for t in tags):
            return False
        if tags and not self.start[tags[0]]:
            return False
        if any(not self.transitions[a, b] for a, b in zip(tags, tags[1:])):
            return False
        return predicate is None or bool(self.predicate[tags[predicate]])


def viterbi_decode(
    scores: Tensor, lengths: Tensor, predicates: Tensor, constraints: BIOConstraints
) -> List[List[int]]:
    """Best valid label sequence per row.

    Args:
        scores: (B, T, L) float, per-token label scores (log-probabilities); padding ignored.
        lengths: (B,) number of real tokens per row (>= 1).
        predicates: (B,) predicate position per row (< length).
        constraints: masks over the same L labels.

    Returns:
        B lists of label indices, row b of length ``lengths[b]``.
    """
    bsz, tlen, n = scores.shape
    if n != len(constraints.labels):
        raise ValueError(f"scores have {n} labels, the constraints {len(constraints.labels)}")
    neg = torch.tensor(float("-inf"), dtype=torch.float64)
    scores = scores.detach().to(torch.float64).cpu()
    lengths = lengths.cpu().long()
    predicates = predicates.cpu().long()
    if bool((lengths < 1).any()) or bool((predicates >= lengths).any()) or bool((predicates < 0).any()):
        raise ValueError("every row needs a length >= 1 and a predicate position inside it")
    allowed = constraints.usable.view(1, 1, n).expand(bsz, tlen, n).clone()
    rows = torch.arange(bsz)
    allowed[rows, predicates] &= constraints.predicate
    emit = torch.where(allowed, scores, neg)  # (B, T, L)
    trans = torch.where(constraints.transitions, torch.zeros(()), neg).to(torch.float64)  # (L, L)

    delta = torch.where(constraints.start, emit[:, 0], neg)  # (B, L)
    backpointers = []
    for t in range(1, tlen):
        cand = delta.unsqueeze(2) + trans.unsqueeze(0)  # (B, from, to)
        best, arg = cand.max(dim=1)
        new = best + emit[:, t]
        active = (t < lengths).unsqueeze(1)
        delta = torch.where(active, new, delta)
        backpointers.append(torch.where(active, arg, torch.arange(n).expand(bsz, n)))
    paths = []
    for b in range(bsz):
        if not bool(torch.isfinite(delta[b]).any()):
            raise ValueError(f"row {b}: no label sequence satisfies the BIO constraints")
        last = int(delta[b].argmax())
        length = int(lengths[b])
        path = [last]
        for t in range(length - 1, 0, -1):
            last = int(backpointers[t - 1][b, last])
            path.append(last)
        paths.append(path[::-1])
    return paths
