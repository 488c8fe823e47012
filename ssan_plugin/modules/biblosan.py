"""Bi-BloSA: masked block self-attention, forward and backward (maths: docs/design.md).

Batch first: x (B, T, C), pad (B, T) bool True at pads or None. One direction (mBloSA):

    x' = elu(W x + b)                                   (B, T, D), the direction's own FC layer
    blocks of r tokens (r = ceil((2T)^(1/3)) by default, or fixed), the last one padded
    h   = masked multi-dim attention of each block over itself (direction mask, pad keys)
    v_l = source2token over block l (one linear layer, pads excluded; all-pad block -> 0)
    o   = masked multi-dim attention over the block vectors (direction mask, empty blocks)
    G = sigmoid(W_g1 o + W_g2 v + b);  e = G * o + (1 - G) * v;  E = e_l repeated over block l
    F = elu(W_f [x'; h; E] + b_f);  G' = sigmoid(W_g' [x'; h; E] + b');  u = G' * F + (1 - G') * x'
    u = 0 at pads.

Blocks are cut from each sentence's first token (leading pads are moved behind the tokens first).
The multi-dim attentions hold (B, T/r, r, r, D) and (B, T/r, T/r, D) tensors: peak memory
grows like T r + (T / r)^2, close to linearly. ``BiBloSANAttention`` concatenates forward and
backward (C/2 each) and applies the output projection C -> C.
"""

import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .disan import valid_weight
from .multidim_attention import ATTENTION_IMPLEMENTATIONS, Source2Token
from .variant_self_attention import VariantSelfAttention


def default_block_length(length: int) -> int:
    """ceil((2n)^(1/3)), the memory-optimal block length of the Bi-BloSAN paper (appendix A)."""
    r = math.ceil((2 * length) ** (1.0 / 3.0) - 1e-9)
    return max(1, r)


class MaskedAttention(nn.Module):
    """g^m: s_i = sum_j softmax_j(c tanh((W1 x_j + W2 x_i + b) / c)) * x_j, masked."""

    def __init__(self, dim: int, direction: str, c: float = 5.0, implementation: str = "naive"):
        super().__init__()
        self.direction, self.c = direction, float(c)
        self.attend = ATTENTION_IMPLEMENTATIONS[implementation]
        self.key_proj = nn.Linear(dim, dim, bias=False)
        self.query_proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor, key_weight: Tensor) -> Tensor:
        return self.attend(self.key_proj(x), self.query_proj(x), x, key_weight, self.direction, self.c)


class MaskedBlockSelfAttention(nn.Module):
    """mBloSA of one direction: (B, T, C_in) -> (B, T, D)."""

    def __init__(self, in_dim: int, dim: int, direction: str, block_length: int = 0, c: float = 5.0,
                 implementation: str = "naive"):
        super().__init__()
        if direction not in ("fw", "bw"):
            raise ValueError(f"Bi-BloSA direction must be 'fw' or 'bw', got {direction!r}")
        if block_length < 0:
            raise ValueError(f"block_length must be >= 0 (0 = ceil((2T)^(1/3))), got {block_length}")
        self.block_length = int(block_length)
        self.fc = nn.Linear(in_dim, dim)
        self.intra = MaskedAttention(dim, direction, c, implementation)
        self.source2token = Source2Token(dim, hidden=0)
        self.inter = MaskedAttention(dim, direction, c, implementation)
        self.block_gate = nn.Linear(2 * dim, dim)  # on [o; v]
        self.fusion = nn.Linear(3 * dim, dim)  # F on [x'; h; E]
        self.fusion_gate = nn.Linear(3 * dim, dim)  # G' on [x'; h; E]

    def forward(self, x: Tensor, pad: Optional[Tensor] = None) -> Tensor:
        bsz, length, _ = x.shape
        xd = F.elu(self.fc(x))
        dim = xd.size(-1)
        r = self.block_length or default_block_length(length)
        m = -(-length // r)
        extra = m * r - length
        valid = valid_weight(x, pad)  # (B, T)
        xb = F.pad(xd, (0, 0, 0, extra)).view(bsz * m, r, dim)
        vb = F.pad(valid, (0, extra)).view(bsz * m, r)

        h = self.intra(xb, vb) * vb.unsqueeze(-1).to(xd.dtype)  # (B m, r, D), 0 at pads
        v = self.source2token(h, vb == 0).view(bsz, m, dim)
        block_valid = (vb.sum(-1) > 0).to(vb.dtype).view(bsz, m)
        o = self.inter(v, block_valid)
        g = torch.sigmoid(self.block_gate(torch.cat([o, v], dim=-1)))
        e = g * o + (1.0 - g) * v  # (B, m, D)
        big_e = e.repeat_interleave(r, dim=1)[:, :length]
        h = h.view(bsz, m * r, dim)[:, :length]

        cat = torch.cat([xd, h, big_e], dim=-1)
        fused = F.elu(self.fusion(cat))
        gate = torch.sigmoid(self.fusion_gate(cat))
        u = gate * fused + (1.0 - gate) * xd
        return u if pad is None else u.masked_fill(pad.unsqueeze(-1), 0.0)


class BiBloSANAttention(VariantSelfAttention):
    """Bi-BloSAN as an encoder self-attention sublayer: [mBloSA_fw; mBloSA_bw] (C/2 each) -> W_O."""

    def __init__(self, embed_dim: int, block_length: int = 0, c: float = 5.0, implementation: str = "naive"):
        super().__init__(embed_dim)
        if embed_dim % 2:
            raise ValueError(f"Bi-BloSAN: --encoder-embed-dim must be even (two directions of C/2), got {embed_dim}")
        if block_length < 0:
            raise ValueError(f"--biblosan-block-length must be >= 0 (0 = ceil((2T)^(1/3))), got {block_length}")
        half = embed_dim // 2
        self.fw = MaskedBlockSelfAttention(embed_dim, half, "fw", block_length, c, implementation)
        self.bw = MaskedBlockSelfAttention(embed_dim, half, "bw", block_length, c, implementation)

    def encode(self, x: Tensor, pad: Optional[Tensor]) -> Tensor:
        """Blocks start at each sentence's first token: a batch with leading pads (fairseq's
        translation task pads sources on the left) is computed with its tokens moved to the
        front, in order, and moved back, so a sentence's blocks do not depend on its pads."""
        if pad is None or not bool(pad[:, 0].any()):
            return torch.cat([self.fw(x, pad), self.bw(x, pad)], dim=-1)
        order = torch.argsort(pad.to(torch.uint8), dim=1, stable=True)  # tokens first, in order
        index = order.unsqueeze(-1)
        x_front, pad_front = x.gather(1, index.expand_as(x)), pad.gather(1, order)
        out = torch.cat([self.fw(x_front, pad_front), self.bw(x_front, pad_front)], dim=-1)
        return torch.empty_like(out).scatter_(1, index.expand_as(out), out)
