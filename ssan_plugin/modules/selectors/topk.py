"""``topk``: each query keeps its k largest attention logits (Zhao et al. 2019, Explicit Sparse
Transformer), the softmax runs over those keys only.

k is ``--topk K``: an integer K >= 1 (a sentence of n < K tokens keeps all n), or a fraction
0 < K < 1 of each sentence's keys, k = ceil(K n) (at least one). Pads are never kept. Ties are
broken deterministically: among equal logits the key of lower index is kept (a stable sort).
Training and evaluation compute the same thing; the logits get the softmax's gradient on the
kept keys, the choice itself none, so ``--select-scale`` / ``--nce-scale`` have nothing to train
(refused by name).
"""

import math
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq.dataclass import FairseqDataclass
from torch import Tensor

from ..selective_weights import selective_softmax
from .base import Selection, Selector, masked_softmax
from ...errors import OptionError


@dataclass
class TopKOptions(FairseqDataclass):
    topk: float = field(
        default=8.0,
        metadata={"help": "topk selector: keys each query keeps, an integer K >= 1 (the K "
                          "largest attention logits; all keys of a shorter sentence) or a "
                          "fraction 0 < K < 1 of the sentence's keys (rounded up, at least one)"},
    )


def check_topk(k: float) -> float:
    """``k`` if it is a valid ``--topk`` (an integer >= 1 or a fraction in (0, 1))."""
    if not (0 < k < 1 or (k >= 1 and math.isfinite(k) and float(k).is_integer())):
        raise OptionError(f"--topk must be an integer >= 1 or a fraction in (0, 1), got {k}")
    return float(k)


def keys_per_query(n: Tensor, k: float) -> Tensor:
    """(B,) long: how many keys each query of a sentence of n non-pad keys keeps: min(k, n), or
    for a fraction k, ceil(k n) (at least 1, at most n)."""
    if k >= 1:  # (a k beyond any sentence keeps every key)
        return n.clamp(max=min(int(k), torch.iinfo(torch.long).max))
    return torch.minimum(torch.ceil(k * n.double()).long().clamp_min(1), n)


def topk_pattern(logits: Tensor, key_padding_mask: Optional[Tensor], keys: Tensor) -> Tensor:
    """bool (B, h, T, S): per query of sentence b, its ``keys[b]`` largest logits among the
    non-pad keys; among equal logits the lower key index first; pads never."""
    bsz, heads, tgt_len, src_len = logits.shape
    # -inf logits (an additive attn_mask) still rank ahead of the pads, which go last
    ranked = logits.nan_to_num(neginf=torch.finfo(logits.dtype).min)
    if key_padding_mask is not None:
        ranked = ranked.masked_fill(key_padding_mask.view(bsz, 1, 1, src_len), float("-inf"))
    order = ranked.argsort(dim=-1, descending=True, stable=True)
    positions = torch.arange(src_len, device=logits.device).expand_as(order)
    rank = torch.empty_like(order).scatter_(-1, order, positions)
    keep = rank < keys.view(bsz, 1, 1, 1)
    if key_padding_mask is not None:
        keep &= ~key_padding_mask.view(bsz, 1, 1, src_len)
    return keep


class TopKSelector(Selector):
    name = "topk"
    options = TopKOptions
    tiny_flags = ("--topk", "3")

    def __init__(self, k: float = 8.0):
        super().__init__()
        self.k = check_topk(k)

    @classmethod
    def from_args(cls, args, embed_dim, num_heads):
        return cls(args.topk)

    def extra_repr(self) -> str:
        return f"k={self.k:g}"

    def reference(self, logits, key_padding_mask, query, rate_gradient=True, noise=None):
        bsz, _, _, src_len = logits.shape
        if key_padding_mask is None:
            n = torch.full((bsz,), src_len, dtype=torch.long, device=logits.device)
            valid = logits.new_ones((bsz, 1, 1, src_len), dtype=torch.bool)
        else:
            n = (~key_padding_mask).sum(-1)
            valid = ~key_padding_mask.view(bsz, 1, 1, src_len)
        keys = keys_per_query(n, self.k)
        if bool((keys == n).all()):  # every non-pad key is kept: fairseq's softmax itself
            return Selection(masked_softmax(logits, key_padding_mask), keep=valid)
        keep = topk_pattern(logits, key_padding_mask, keys)
        return Selection(selective_softmax(logits, keep.to(torch.float32), key_padding_mask),
                         keep=keep)
