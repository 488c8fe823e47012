"""DiSA: directional multi-dimensional self-attention with fusion gate (maths: docs/design.md).

Batch first: x (B, T, C_in), pad (B, T) bool True at pads or None. One direction:

    h = elu(W_h x + b_h)                                  (B, T, D)
    f_ij = c tanh((W_1 h_j + W_2 h_i + b) / c)            keys j allowed by the direction
    s_i = sum_j softmax_j(f_ij) * h_j                     (values are h, no value projection)
    F = sigmoid(W_f1 s + W_f2 h + b_f);  u = F * h + (1 - F) * s;  u = 0 at pads

``DiSANAttention`` (an encoder self-attention sublayer) concatenates a forward and a backward
DiSA of width C/2 each (output 2 x C/2 = C, C must be even), then the output projection C -> C
of ``VariantSelfAttention``. No attention dropout (the blocked form never stores P).
"""

from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .multidim_attention import ATTENTION_IMPLEMENTATIONS, DIRECTIONS, multidim_attention_probs
from .variant_self_attention import VariantSelfAttention
from ..errors import OptionError


def valid_weight(x: Tensor, pad: Optional[Tensor]) -> Tensor:
    """(B, T) float: 1 at tokens, 0 at pads."""
    if pad is None:
        return x.new_ones(x.shape[:2], dtype=torch.float32)
    return (~pad).float()


class DirectionalSelfAttention(nn.Module):
    """One DiSA block (see module doc). ``implementation``: 'blocked' (memory-efficient) or 'naive'."""

    def __init__(
        self,
        in_dim: int,
        dim: int,
        direction: str,
        c: float = 5.0,
        implementation: str = "blocked",
        query_block: int = 0,
        option_names: Tuple[str, str] = ("implementation", "query_block"),
    ):
        """``option_names``: how errors name ``implementation`` and ``query_block`` (the
        command-line options of the sublayer that builds this block)."""
        super().__init__()
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        if implementation not in ATTENTION_IMPLEMENTATIONS:
            raise ValueError(
                f"{option_names[0]} must be one of {sorted(ATTENTION_IMPLEMENTATIONS)}, got {implementation!r}"
            )
        if query_block < 0:
            raise ValueError(f"{option_names[1]} must be >= 0 (0 = automatic), got {query_block}")
        self.direction, self.c, self.query_block = direction, float(c), int(query_block)
        self.implementation = implementation
        self.fc_h = nn.Linear(in_dim, dim)
        self.key_proj = nn.Linear(dim, dim, bias=False)  # W_1
        self.query_proj = nn.Linear(dim, dim)  # W_2, b
        self.gate = nn.Linear(2 * dim, dim)  # [W_f1 W_f2], b_f on [s; h]

    def features(self, x: Tensor) -> Tensor:
        return F.elu(self.fc_h(x))

    def context(
        self,
        h: Tensor,
        key_weight: Tensor,
        query_ok: Optional[Tensor] = None,
        q_pos: Optional[Tensor] = None,
        k_pos: Optional[Tensor] = None,
        queries: Optional[Tensor] = None,
    ) -> Tensor:
        """s for queries ``queries`` (default h itself) over keys h: (N, T, D)."""
        queries = h if queries is None else queries
        attend = ATTENTION_IMPLEMENTATIONS[self.implementation]
        return attend(
            self.key_proj(h), self.query_proj(queries), h, key_weight, self.direction, self.c,
            q_pos=q_pos, k_pos=k_pos, query_ok=query_ok, query_block=self.query_block,
        )

    def attention_map(self, x: Tensor, pad: Optional[Tensor] = None) -> Tensor:
        """(B, T, T): the token2token weights P_ij averaged over the features (analysis; rows
        of queries with no allowed key and columns of pads are zero)."""
        h = self.features(x)
        return multidim_attention_probs(self.key_proj(h), self.query_proj(h), valid_weight(x, pad),
                                        self.direction, self.c).mean(-1)

    def fuse(self, h: Tensor, s: Tensor) -> Tensor:
        gate = torch.sigmoid(self.gate(torch.cat([s, h], dim=-1)))
        return gate * h + (1.0 - gate) * s

    def forward(self, x: Tensor, pad: Optional[Tensor] = None) -> Tensor:
        h = self.features(x)
        u = self.fuse(h, self.context(h, valid_weight(x, pad)))
        return u if pad is None else u.masked_fill(pad.unsqueeze(-1), 0.0)


class DiSANAttention(VariantSelfAttention):
    """DiSAN as an encoder self-attention sublayer: [DiSA_fw; DiSA_bw] (C/2 each) -> W_O."""

    def __init__(self, embed_dim: int, implementation: str = "blocked", query_block: int = 0, c: float = 5.0):
        super().__init__(embed_dim)
        if embed_dim % 2:
            raise OptionError(f"DiSAN: --encoder-embed-dim must be even (two directions of C/2), got {embed_dim}")
        half, names = embed_dim // 2, ("--disan-impl", "--disan-query-block")
        self.fw = DirectionalSelfAttention(embed_dim, half, "fw", c, implementation, query_block, names)
        self.bw = DirectionalSelfAttention(embed_dim, half, "bw", c, implementation, query_block, names)

    map_names = ("forward", "backward")

    def encode(self, x: Tensor, pad: Optional[Tensor]) -> Tensor:
        return torch.cat([self.fw(x, pad), self.bw(x, pad)], dim=-1)

    def attention_maps(self, x: Tensor, pad: Optional[Tensor]) -> Tensor:
        """(B, 2, T, T): the forward and the backward DiSA's weights, averaged over features."""
        return torch.stack([self.fw.attention_map(x, pad), self.bw.attention_map(x, pad)], dim=1)
