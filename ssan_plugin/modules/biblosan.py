"""Bi-BloSA: masked block self-attention, forward and backward (maths: docs/design.md).

Batch first: x (B, T, C), pad (B, T) bool True at pads or None. One direction (mBloSA):

    x' = elu(W x + b)                                   (B, T, D), the direction's own FC layer
    blocks of r tokens (r fixed, or ceil((2n)^(1/3)) for a sentence of n tokens), the last padded
    h   = masked multi-dim attention of each block over itself (direction mask, pad keys)
    v_l = source2token over block l (one linear layer, pads excluded; all-pad block -> 0)
    o   = masked multi-dim attention over the block vectors (direction mask, empty blocks)
    G = sigmoid(W_g1 o + W_g2 v + b);  e = G * o + (1 - G) * v;  E = e_l repeated over block l
    F = elu(W_f [x'; h; E] + b_f);  G' = sigmoid(W_g' [x'; h; E] + b');  u = G' * F + (1 - G') * x'
    u = 0 at pads.

``BiBloSANAttention`` cuts blocks from each sentence's first token (leading pads are moved
behind the tokens first) and, by default, with each sentence's own r (sentences grouped by r),
so that a sentence's output does not depend on its batch-mates.
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
from .multidim_attention import ATTENTION_IMPLEMENTATIONS, Source2Token, multidim_attention_probs
from .variant_self_attention import VariantSelfAttention
from ..errors import OptionError


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

    def _blocks(self, x: Tensor, pad: Optional[Tensor], block_length: int):
        """x' (B, T, D); its blocks (B m, r, D) and their token weights (B m, r), 1 at tokens;
        the block length r (``block_length``, else the module's, else from T) and the number
        of blocks m."""
        bsz, length, _ = x.shape
        xd = F.elu(self.fc(x))
        r = block_length or self.block_length or default_block_length(length)
        m = -(-length // r)
        extra = m * r - length
        valid = valid_weight(x, pad)  # (B, T)
        xb = F.pad(xd, (0, 0, 0, extra)).view(bsz * m, r, xd.size(-1))
        vb = F.pad(valid, (0, extra)).view(bsz * m, r)
        return xd, xb, vb, r, m

    def forward(self, x: Tensor, pad: Optional[Tensor] = None, block_length: int = 0) -> Tensor:
        bsz, length, _ = x.shape
        xd, xb, vb, r, m = self._blocks(x, pad, block_length)
        dim = xd.size(-1)
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

    @torch.no_grad()
    def attention_maps(self, x: Tensor, pad: Optional[Tensor] = None, block_length: int = 0) -> Tensor:
        """(B, 2, T, T), [intra-block, inter-block], averaged over the features (analysis):
        intra[i, j] = P^intra_ij, nonzero only for j in i's block on the direction's side;
        inter[i, j] = mean_d P^inter_(l(i), l(j), d) * P^s2t_(j, d), the weight of token j in
        the block context o of i's block l(i), through the vector of j's block l(j)."""
        bsz, length, _ = x.shape
        xd, xb, vb, r, m = self._blocks(x, pad, block_length)
        dim = xd.size(-1)
        intra = self.intra
        p_intra = multidim_attention_probs(intra.key_proj(xb), intra.query_proj(xb), vb,
                                           intra.direction, intra.c).mean(-1)  # (B m, r, r)
        h = self.intra(xb, vb) * vb.unsqueeze(-1).to(xd.dtype)
        p_s2t = self.source2token.weights(h, vb == 0).view(bsz, m, r, dim)
        v = self.source2token(h, vb == 0).view(bsz, m, dim)
        block_valid = (vb.sum(-1) > 0).to(vb.dtype).view(bsz, m)
        inter = self.inter
        p_inter = multidim_attention_probs(inter.key_proj(v), inter.query_proj(v), block_valid,
                                           inter.direction, inter.c)  # (B, m, m, D)
        through = torch.einsum("blkd,bkjd->blkj", p_inter, p_s2t.to(p_inter.dtype)) / dim
        through = through.unsqueeze(2).expand(bsz, m, r, m, r).reshape(bsz, m * r, m * r)
        blockwise = p_intra.new_zeros(bsz, m, r, m, r)
        blockwise.diagonal(dim1=1, dim2=3).copy_(p_intra.view(bsz, m, r, r).permute(0, 2, 3, 1))
        blockwise = blockwise.view(bsz, m * r, m * r)
        return torch.stack([blockwise, through], dim=1)[:, :, :length, :length]


class BiBloSANAttention(VariantSelfAttention):
    """Bi-BloSAN as an encoder self-attention sublayer: [mBloSA_fw; mBloSA_bw] (C/2 each) -> W_O."""

    def __init__(self, embed_dim: int, block_length: int = 0, c: float = 5.0, implementation: str = "naive"):
        super().__init__(embed_dim)
        if embed_dim % 2:
            raise OptionError(f"Bi-BloSAN: --encoder-embed-dim must be even (two directions of C/2), got {embed_dim}")
        if block_length < 0:
            raise OptionError(f"--biblosan-block-length must be >= 0 (0 = ceil((2T)^(1/3))), got {block_length}")
        half = embed_dim // 2
        self.fw = MaskedBlockSelfAttention(embed_dim, half, "fw", block_length, c, implementation)
        self.bw = MaskedBlockSelfAttention(embed_dim, half, "bw", block_length, c, implementation)

    def encode(self, x: Tensor, pad: Optional[Tensor]) -> Tensor:
        """Each sentence is cut into blocks from its own first token and, unless the block
        length is fixed, with its own default block length ceil((2n)^(1/3)), n its number of
        tokens: a sentence's encoding does not depend on its batch-mates or its padding side
        (fairseq's translation task pads sources on the left)."""
        order = tokens_first_order(pad)
        if order is not None:
            x, pad = x.gather(1, order.unsqueeze(-1).expand_as(x)), pad.gather(1, order)
        out = None
        for r, rows, n in self._sentence_groups(pad, x.size(1)):
            xs, ps = (x, pad) if rows is None else (x[rows, :n], pad[rows, :n])
            both = torch.cat([self.fw(xs, ps, r), self.bw(xs, ps, r)], dim=-1)
            if rows is None:
                out = both
                break
            out = x.new_zeros(x.shape[:2] + both.shape[-1:]) if out is None else out
            out[rows, :n] = both.to(out.dtype)
        if order is not None:
            index = order.unsqueeze(-1).expand_as(out)
            out = torch.empty_like(out).scatter_(1, index, out)
        return out

    def _sentence_groups(self, pad: Optional[Tensor], length: int):
        """(r, rows, n): the rows (LongTensor) whose sentences share the block length r, their
        longest sentence n; one group (0, None, length), the whole batch, when the block length
        is fixed or nothing is padded. ``pad`` has every row's tokens first."""
        if self.fw.block_length or pad is None or not bool(pad.any()):
            yield 0, None, length
            return
        lengths = (~pad).sum(1)
        r_rows = torch.tensor([default_block_length(int(n)) for n in lengths.tolist()],
                              device=pad.device)
        for r in sorted(set(r_rows.tolist())):
            rows = (r_rows == r).nonzero().squeeze(1)
            n = int(lengths[rows].max())
            if n > 0:
                yield r, rows, n

    map_names = ("forward intra-block", "forward inter-block", "backward intra-block",
                 "backward inter-block")

    def attention_maps(self, x: Tensor, pad: Optional[Tensor]) -> Tensor:
        """(B, 4, T, T): each direction's intra-block and inter-block weights (see
        ``MaskedBlockSelfAttention.attention_maps``), blocks cut as in ``encode``; zero at pads."""
        bsz, length, _ = x.shape
        order = tokens_first_order(pad)
        if order is not None:
            x, pad = x.gather(1, order.unsqueeze(-1).expand_as(x)), pad.gather(1, order)
        out = torch.zeros(bsz, 4, length, length, device=x.device)
        for r, rows, n in self._sentence_groups(pad, length):
            xs, ps = (x, pad) if rows is None else (x[rows, :n], pad[rows, :n])
            maps = torch.cat([self.fw.attention_maps(xs, ps, r), self.bw.attention_maps(xs, ps, r)], 1)
            if rows is None:
                out = maps.float()
            else:
                out[rows, :, :n, :n] = maps.float()
        if order is None:
            return out
        where = torch.argsort(order, dim=1)  # original position -> position in the front order
        batch = torch.arange(bsz, device=x.device)[:, None, None]
        back = out.permute(0, 2, 3, 1)[batch, where[:, :, None], where[:, None, :]]
        return back.permute(0, 3, 1, 2)


def tokens_first_order(pad: Optional[Tensor]) -> Optional[Tensor]:
    """(B, T) long: each row's tokens in order, then its pads; None when no row starts with a
    pad (nothing to move)."""
    if pad is None or not bool(pad[:, 0].any()):
        return None
    return torch.argsort(pad.to(torch.uint8), dim=1, stable=True)
