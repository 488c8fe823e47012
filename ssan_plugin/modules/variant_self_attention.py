"""fairseq's self-attention call signature around a batch-first sequence encoder.

``VariantSelfAttention`` subclasses implement ``encode(x, pad) -> (B, T, C)`` with x (B, T, C)
and pad (B, T) bool (True at pads) or None. The wrapper takes fairseq's encoder call
``attn(query=x, key=x, value=x, key_padding_mask=pad, need_weights=False, attn_mask=None)``
with x: T x B x C, applies the output projection ``out_proj`` (C -> C, like fairseq's W_O),
zeroes pads and returns ``(T x B x C, None)``. No attention weights are ever returned: the
multi-dimensional variants have one weight per feature and the blocked form never stores them.
"""

import abc
from typing import Optional

import torch.nn as nn
from torch import Tensor

from .encoder_layer import check_encoder_self_attention_call


class VariantSelfAttention(nn.Module, metaclass=abc.ABCMeta):
    def __init__(self, embed_dim: int):
        super().__init__()
        self.embed_dim = embed_dim
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    @abc.abstractmethod
    def encode(self, x: Tensor, pad: Optional[Tensor]) -> Tensor:
        """(B, T, C) -> (B, T, C); pad (B, T) bool, True at pads, or None."""

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        incremental_state=None,
        need_weights: bool = False,
        static_kv: bool = False,
        attn_mask: Optional[Tensor] = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
    ):
        check_encoder_self_attention_call(
            self, query, key, value, incremental_state, static_kv, before_softmax
        )
        name = type(self).__name__
        if attn_mask is not None:
            raise ValueError(f"{name} does not take an additive attn_mask (its masks are built in)")
        if query.size(-1) != self.embed_dim:
            raise ValueError(f"{name}: input width {query.size(-1)} != embed_dim {self.embed_dim}")
        pad = None if key_padding_mask is None else key_padding_mask.to(query.device).bool()
        x = query.transpose(0, 1)  # B x T x C
        out = self.out_proj(self.encode(x, pad))
        if pad is not None:
            out = out.masked_fill(pad.unsqueeze(-1), 0.0)
        return out.transpose(0, 1), None
