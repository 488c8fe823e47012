"""Multi-dimensional (feature-wise) token2token and source2token attention (maths: docs/design.md).

Conventions (batch first, N sequences, T queries, S keys, D features):

- ``a``: (N, S, D) key term W1 h_j; ``q``: (N, T, D) query term W2 h_i + b; ``v``: (N, S, D).
- f_ij = c * tanh((a_j + q_i) / c), one score per feature; P_ij = softmax over keys j, per
  feature, of f_ij restricted to the allowed keys; s_i = sum_j P_ij * v_j.
- A key j is allowed for query i when ``key_weight[n, j] > 0`` (0 at pads and unselected keys),
  ``query_ok[n, i]`` (if given) and the position mask holds: ``fw`` k_pos < q_pos, ``bw``
  k_pos > q_pos, ``none`` k_pos != q_pos. The diagonal is never allowed.
- Weights enter multiplicatively: P_ij = w_j exp(f_ij) / sum_j' w_j' exp(f_ij'), so a
  straight-through 0/1 ``key_weight`` gets a gradient. Since |f| < c, exp(f) lies in
  [e^-c, e^c]: no max subtraction is needed and nothing overflows in any dtype.
- A query without an allowed key gets s_i = 0 (never NaN): its denominator is taken as 1.

``multidim_attention`` computes this on blocks of queries with a custom autograd Function that
keeps only its inputs and the (N, T, D) output/denominator, and recomputes each block in
backward: the (N, T, S, D) tensor never exists, peak memory grows with the block. The
reference form ``multidim_attention_naive`` builds the whole tensor with plain autograd
(tests, benchmark). Both compute in float32 (float64 if the inputs are float64), autocast off,
and return the dtype of ``v``.
"""

from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

DIRECTIONS = ("fw", "bw", "none")
# default query block: about this many elements in one (N, block, S, D) tensor (16 MB fp32)
BLOCK_ELEMENTS = 1 << 22


def position_mask(q_pos: Tensor, k_pos: Tensor, direction: str) -> Tensor:
    """Allowed (query, key) pairs by position: (..., Tq, 1) vs (..., 1, S) -> bool (..., Tq, S)."""
    qp, kp = q_pos.unsqueeze(-1), k_pos.unsqueeze(-2)
    if direction == "fw":
        return kp < qp
    if direction == "bw":
        return kp > qp
    if direction == "none":
        return kp != qp
    raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")


def _allowed(q_pos, k_pos, direction, key_weight, query_ok, t0, t1):
    """(N, t1 - t0, S) float: key_weight_j * 1[position ok] * 1[query ok] for queries t0:t1."""
    qp = q_pos[..., t0:t1]
    pos = position_mask(qp, k_pos, direction)  # (Tb, S) or (N, Tb, S)
    w = key_weight.unsqueeze(1) * pos.to(key_weight.dtype)
    if query_ok is not None:
        w = w * query_ok[:, t0:t1].unsqueeze(-1).to(w.dtype)
    return w


def _compute_dtype(*tensors):
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def at_least_float32(t: Tensor) -> Tensor:
    """half/bfloat16 -> float32; float32/float64 unchanged."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


def _positions(pos: Optional[Tensor], length: int, device) -> Tensor:
    return torch.arange(length, device=device) if pos is None else pos


def auto_query_block(n: int, s: int, d: int, budget: int = BLOCK_ELEMENTS) -> int:
    return max(1, budget // max(1, n * s * d))


class _BlockedMultiDimAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, q, v, key_weight, q_pos, k_pos, query_ok, direction, c, block):
        n, t, d = q.shape
        s_out = q.new_empty(n, t, d)
        den_out = q.new_empty(n, t, d)
        for t0 in range(0, t, block):
            t1 = min(t, t0 + block)
            w = _allowed(q_pos, k_pos, direction, key_weight, query_ok, t0, t1)  # (N, Tb, S)
            e = torch.exp(c * torch.tanh((a.unsqueeze(1) + q[:, t0:t1].unsqueeze(2)) / c))
            e = e * w.unsqueeze(-1)
            den = e.sum(2)
            den = torch.where(den > 0, den, torch.ones_like(den))
            s_out[:, t0:t1] = (e * v.unsqueeze(1)).sum(2) / den
            den_out[:, t0:t1] = den
        ctx.save_for_backward(a, q, v, key_weight, q_pos, k_pos, query_ok, s_out, den_out)
        ctx.direction, ctx.c, ctx.block = direction, c, block
        return s_out

    @staticmethod
    def backward(ctx, grad_s):
        a, q, v, key_weight, q_pos, k_pos, query_ok, s_out, den_out = ctx.saved_tensors
        c, block, direction = ctx.c, ctx.block, ctx.direction
        n, t, d = q.shape
        need_a, need_q, need_v, need_w = ctx.needs_input_grad[:4]
        grad_a = torch.zeros_like(a) if need_a else None
        grad_q = torch.zeros_like(q) if need_q else None
        grad_v = torch.zeros_like(v) if need_v else None
        grad_w = torch.zeros_like(key_weight) if need_w else None
        grad_s = grad_s.to(q.dtype)
        for t0 in range(0, t, block):
            t1 = min(t, t0 + block)
            allowed = _allowed(q_pos, k_pos, direction, key_weight, query_ok, t0, t1)
            th = torch.tanh((a.unsqueeze(1) + q[:, t0:t1].unsqueeze(2)) / c)  # (N, Tb, S, D)
            el = torch.exp(c * th)
            g = grad_s[:, t0:t1].unsqueeze(2)  # (N, Tb, 1, D)
            den = den_out[:, t0:t1].unsqueeze(2)
            # r = dL/de_ij = g_i (v_j - s_i) / den_i
            r = g * (v.unsqueeze(1) - s_out[:, t0:t1].unsqueeze(2)) / den
            if need_w:
                pos_ok = _allowed(q_pos, k_pos, direction, torch.ones_like(key_weight), query_ok, t0, t1)
                grad_w += ((r * el).sum(-1) * pos_ok).sum(1)
            e = el * allowed.unsqueeze(-1)
            if need_v:
                grad_v += (e / den * g).sum(1)
            dz = r * e * (1.0 - th * th)  # dL/dl * dl/dz with l = c tanh(z / c)
            if need_q:
                grad_q[:, t0:t1] = dz.sum(2)
            if need_a:
                grad_a += dz.sum(1)
        return grad_a, grad_q, grad_v, grad_w, None, None, None, None, None, None


def _prepare(a, q, v, key_weight, q_pos, k_pos, direction):
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    dtype = _compute_dtype(a, q, v)
    q_pos = _positions(q_pos, q.size(1), q.device)
    k_pos = _positions(k_pos, a.size(1), a.device)
    return a.to(dtype), q.to(dtype), v.to(dtype), key_weight.to(dtype), q_pos, k_pos


def multidim_attention(
    a: Tensor,
    q: Tensor,
    v: Tensor,
    key_weight: Tensor,
    direction: str,
    c: float = 5.0,
    q_pos: Optional[Tensor] = None,
    k_pos: Optional[Tensor] = None,
    query_ok: Optional[Tensor] = None,
    query_block: int = 0,
) -> Tensor:
    """Memory-efficient masked multi-dimensional attention -> s, (N, T, D) (see module doc).

    ``q_pos``/``k_pos``: positions (T,)/(S,) or (N, T)/(N, S) long, default arange;
    ``query_block``: queries per block, 0 = about BLOCK_ELEMENTS elements per block tensor.
    """
    out_dtype = v.dtype
    device_type = q.device.type
    with torch.autocast(device_type=device_type, enabled=False):
        a, q, v, key_weight, q_pos, k_pos = _prepare(a, q, v, key_weight, q_pos, k_pos, direction)
        block = query_block or auto_query_block(a.size(0), a.size(1), a.size(2))
        s = _BlockedMultiDimAttention.apply(
            a, q, v, key_weight, q_pos, k_pos, query_ok, direction, float(c), int(block)
        )
    return s.to(out_dtype)


def _full_probs(a, q, key_weight, direction, c, q_pos, k_pos, query_ok) -> Tensor:
    """P, (N, T, S, D), from prepared inputs, with plain autograd: the whole tensor at once."""
    w = _allowed(q_pos, k_pos, direction, key_weight, query_ok, 0, q.size(1))
    e = torch.exp(c * torch.tanh((a.unsqueeze(1) + q.unsqueeze(2)) / c)) * w.unsqueeze(-1)
    den = e.sum(2, keepdim=True)
    return e / torch.where(den > 0, den, torch.ones_like(den))


def multidim_attention_naive(
    a: Tensor,
    q: Tensor,
    v: Tensor,
    key_weight: Tensor,
    direction: str,
    c: float = 5.0,
    q_pos: Optional[Tensor] = None,
    k_pos: Optional[Tensor] = None,
    query_ok: Optional[Tensor] = None,
    query_block: int = 0,
) -> Tensor:
    """Reference form: the whole (N, T, S, D) tensor with plain autograd. Same result."""
    del query_block
    out_dtype = v.dtype
    with torch.autocast(device_type=q.device.type, enabled=False):
        a, q, v, key_weight, q_pos, k_pos = _prepare(a, q, v, key_weight, q_pos, k_pos, direction)
        s = (_full_probs(a, q, key_weight, direction, c, q_pos, k_pos, query_ok)
             * v.unsqueeze(1)).sum(2)
    return s.to(out_dtype)


ATTENTION_IMPLEMENTATIONS = {"blocked": multidim_attention, "naive": multidim_attention_naive}


@torch.no_grad()
def multidim_attention_probs(
    a: Tensor,
    q: Tensor,
    key_weight: Tensor,
    direction: str,
    c: float = 5.0,
    q_pos: Optional[Tensor] = None,
    k_pos: Optional[Tensor] = None,
    query_ok: Optional[Tensor] = None,
) -> Tensor:
    """The attention weights P, (N, T, S, D) float32/64, no gradient (analysis only: the whole
    tensor at once). ``sum_j P[:, i, j] * v_j`` is the output s_i of :func:`multidim_attention`
    for any v; a row without an allowed key is all zero."""
    with torch.autocast(device_type=q.device.type, enabled=False):
        a, q, _, key_weight, q_pos, k_pos = _prepare(a, q, q, key_weight, q_pos, k_pos, direction)
        return _full_probs(a, q, key_weight, direction, c, q_pos, k_pos, query_ok)


class Source2Token(nn.Module):
    """Multi-dimensional source2token attention: (N, T, D) -> (N, D).

    score_i = W2 elu(W1 x_i + b1) + b2 (``hidden`` > 0, DiSAN) or W x_i + b (``hidden`` = 0,
    Bi-BloSAN's one linear layer), one per feature; softmax over the non-pad tokens i, per
    feature (stable: row maximum subtracted); output sum_i P_i * x_i; all-pad rows give 0.
    """

    def __init__(self, dim: int, hidden: int = 0):
        super().__init__()
        self.hidden = nn.Linear(dim, hidden) if hidden > 0 else None
        self.score = nn.Linear(hidden if hidden > 0 else dim, dim)

    def forward(self, x: Tensor, pad: Optional[Tensor] = None) -> Tensor:
        return (self.weights(x, pad) * at_least_float32(x)).sum(1).to(x.dtype)

    def weights(self, x: Tensor, pad: Optional[Tensor] = None) -> Tensor:
        """P, (N, T, D) in float32 or wider: per feature, a distribution over the non-pad
        tokens (all zero for an all-pad row)."""
        h = F.elu(self.hidden(x)) if self.hidden is not None else x
        scores = at_least_float32(self.score(h))
        if pad is not None:
            scores = scores.masked_fill(pad.unsqueeze(-1), float("-inf"))
        row_max = scores.amax(1, keepdim=True).detach()
        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
        e = torch.exp(scores - row_max)  # exp(-inf) = 0 at pads
        den = e.sum(1, keepdim=True)
        return e / torch.where(den > 0, den, torch.ones_like(den))
