"""``topk``: each query keeps its k largest attention logits (Zhao et al. 2019, Explicit Sparse
Transformer), the softmax runs over those keys only.

k is ``--topk K``: an integer K >= 1 (a query that sees n < K keys keeps all n), or a fraction
0 < K < 1 of the keys each query sees, k = ceil(K n) (at least one). Pads are never kept, and
at the decoder site n counts only a query's visible keys (itself and those before it), which
alone are ranked. Ties are
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

from .. import native
from ..selective_weights import hidden_keys, selective_softmax
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
    """How many keys a query that sees n keys keeps (any shape, long): min(k, n), or for a
    fraction k, ceil(k n) (at least 1, at most n)."""
    if k >= 1:  # (a k beyond any sentence keeps every key)
        return n.clamp(max=min(int(k), torch.iinfo(torch.long).max))
    return torch.minimum(torch.ceil(k * n.double()).long().clamp_min(1), n)


def topk_pattern(logits: Tensor, key_padding_mask: Optional[Tensor], keys: Tensor) -> Tensor:
    """bool (B, h, T, S): per query, its ``keys`` (broadcastable to (B, 1, T, 1)) largest logits
    among the visible keys; among equal logits the lower key index first; hidden keys never.
    On the CPU in float32 the native kernel ranks (native.py, :func:`~..native.topk_keep`),
    elsewhere (or without a C compiler) torch's stable argsort: the same pattern."""
    src_len = logits.size(-1)
    hidden = hidden_keys(key_padding_mask)
    # -inf logits (an additive attn_mask) still rank ahead of the hidden keys, which go last
    ranked = logits.detach().nan_to_num(neginf=torch.finfo(logits.dtype).min)
    if hidden is not None:
        ranked = ranked.masked_fill(hidden, float("-inf"))
    if ranked.device.type == "cpu" and ranked.dtype == torch.float32 and native.available():
        keep = native.topk_keep(ranked, keys)
    else:
        order = ranked.argsort(dim=-1, descending=True, stable=True)
        positions = torch.arange(src_len, device=logits.device).expand_as(order)
        rank = torch.empty_like(order).scatter_(-1, order, positions)
        keep = rank < keys
    if hidden is not None:
        keep &= ~hidden
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

    def reference(self, logits, key_padding_mask, query, rate_gradient=True, noise=None, site=None):
        src_len = logits.size(-1)
        hidden = hidden_keys(key_padding_mask)
        if hidden is None:
            valid = logits.new_ones((1, 1, 1, src_len), dtype=torch.bool)
        else:
            valid = ~hidden
        n = valid.sum(-1, keepdim=True)  # keys each query sees, (B or 1, 1, T or 1, 1)
        keys = keys_per_query(n, self.k)
        if bool((keys == n).all()):  # every non-pad key is kept: fairseq's softmax itself
            return Selection(masked_softmax(logits, key_padding_mask), keep=valid)
        keep = topk_pattern(logits, key_padding_mask, keys)
        return Selection(selective_softmax(logits, keep.to(torch.float32), key_padding_mask),
                         keep=keep)
