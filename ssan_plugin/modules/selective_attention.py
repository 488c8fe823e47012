"""Selective self-attention (SSAN); the maths are in docs/design.md.

Shapes follow fairseq: the layer input is T x B x C; attention tensors are (B, h, T, S) with
T queries and S keys (S == T for self-attention); ``key_padding_mask`` is (B, S), True at pads
(or None when the batch has no pads).
"""

import logging
import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import Tensor

from .encoder_layer import check_encoder_self_attention_call
from .sampled_backward import save_sampled_for_backward
from .selection import (
    SelectionReporter,
    SelectionStats,
    binary_entropy_from_logits,
    binary_entropy_value,
    gumbel_sigmoid_straight_through,
    logistic_noise_like,
)
from ..cli.errors import OptionError

logger = logging.getLogger(__name__)

# Straight-through gradients reach the selection of a *discarded* key through exp(E_ij - m),
# m the row maximum over selected keys. When E_ij exceeds m by a lot, that linearisation is
# astronomically large (and overflows); its exponent is capped (default here, or
# --ssan-straight-through-cap). Values never depend on it.
STRAIGHT_THROUGH_EXP_CAP = 10.0

#: implementations of the training attention (sampled_selective_softmax): torch operations in an
#: autograd Function, the fused C kernel of native.py, or ``auto`` (resolve_kernel)
KERNELS = ("auto", "torch", "native")


def check_kernel(kernel: str) -> str:
    """``kernel`` if it is one of KERNELS, else a ValueError naming them."""
    if kernel not in KERNELS:
        raise OptionError(f"--ssan-kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    return kernel


def resolve_kernel(kernel: str, device: torch.device) -> str:
    """The kernel that trains: ``auto`` is the native one on the CPU where it builds and loads
    (asked once a process; a warning names the reason when it does not), else torch's."""
    if check_kernel(kernel) != "auto":
        return kernel
    if device.type != "cpu":
        return "torch"
    from .native import available

    return "native" if available() else "torch"


def _check_cap(cap: float) -> float:
    if not 0 <= cap < math.inf:
        raise OptionError(f"--ssan-straight-through-cap must be finite and >= 0 (a negative cap "
                         f"would change the selected keys' values), got {cap}")
    return float(cap)


def _row_max(logits: Tensor, chosen: Tensor) -> Tensor:
    """(B, h, T, 1): the row maximum of ``logits`` over the ``chosen`` keys; for a row with none
    chosen, over all finite keys (0 if none is finite)."""
    row_max = torch.where(chosen, logits, float("-inf")).amax(-1, keepdim=True)
    empty = row_max == float("-inf")
    if bool(empty.any()):
        finite = logits.masked_fill(~torch.isfinite(logits), float("-inf"))
        row_max_all = finite.amax(-1, keepdim=True).nan_to_num(0.0, 0.0, 0.0)
        row_max = torch.where(empty, row_max_all, row_max)
    return row_max


def _selective_exponentials(logits: Tensor, select: Tensor, chosen: Tensor, pad: Optional[Tensor],
                            cap: float = STRAIGHT_THROUGH_EXP_CAP):
    """The forward pass of selective_softmax, float32 (B, h, T, S).

    ``chosen``: bool, selected and not a pad. Returns (out, unnorm, denom): unnorm = exp(E - m)
    with m the row maximum over chosen keys (over all finite keys for a row with none chosen),
    the exponent capped at ``cap``, pads 0; out = A unnorm / denom with
    denom = sum_j A_j unnorm_j (1 for an empty row), (B, h, T, 1).
    """
    unnorm = (logits - _row_max(logits, chosen)).clamp_(max=cap).exp_()
    if pad is not None:
        unnorm.masked_fill_(pad, 0.0)
    out = select * unnorm
    denom = out.sum(-1, keepdim=True)
    denom.masked_fill_(denom == 0, 1.0)
    out.div_(denom)
    return out, unnorm, denom


class _SelectiveSoftmax(torch.autograd.Function):
    """Forward and analytic backward of selective_softmax (float32 in, float32 out).

    Saves only the output and the shifted exponentials, and runs a handful of fused passes
    over the (B, h, T, S) tensors instead of autograd's chain of a dozen.
    With out = A u / Z (u = exp(E - m), Z = sum_j A_j u_j, m detached) and s = sum_j out_j g_j:
        dL/dE_ij = out_ij (g_ij - s_i),    dL/dA_ij = u_ij / Z_i (g_ij - s_i).
    """

    @staticmethod
    def forward(ctx, logits: Tensor, select: Tensor, pad: Optional[Tensor], cap: float):
        chosen = select > 0
        if pad is not None:
            chosen &= ~pad
        out, unnorm, denom = _selective_exponentials(logits, select, chosen, pad, cap)
        ctx.save_for_backward(out, unnorm, denom)
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        out, unnorm, denom = ctx.saved_tensors
        centred = grad_out - (out * grad_out).sum(-1, keepdim=True)
        grad_logits = out * centred if ctx.needs_input_grad[0] else None
        grad_select = unnorm / denom * centred if ctx.needs_input_grad[1] else None
        return grad_logits, grad_select, None, None


def selective_softmax(
    logits: Tensor,
    select: Tensor,
    key_padding_mask: Optional[Tensor] = None,
    straight_through_cap: float = STRAIGHT_THROUGH_EXP_CAP,
) -> Tensor:
    """ATT_ij = A_ij exp(E_ij) / sum_j' A_ij' exp(E_ij'), pads never counted.

    Args:
        logits: E, (B, h, T, S), any float dtype (computed in float32).
        select: A, (B, h, T, S), values in [0, 1]; may carry gradients (straight-through or
            soft selection). A key with A_ij == 0 is discarded.
        key_padding_mask: (B, S) bool, True at pads, or None.
        straight_through_cap: the gradient reaching A_ij of a discarded key uses
            exp(min(E_ij - m_i, cap)) (docs/design.md 1.4); values never depend on it.

    Returns:
        float32 (B, h, T, S). Exponentials are taken relative to the row maximum over the
        selected non-pad keys, so nothing overflows in any dtype and a full selection is exactly
        softmax. A row whose selection is empty is all zero (never NaN); its denominator is
        taken as 1 (with the shift at the row maximum over all keys), which keeps the
        straight-through gradient of its selection bounded.
    """
    pad = None
    if key_padding_mask is not None:
        pad = key_padding_mask.view(key_padding_mask.size(0), 1, 1, -1).to(torch.bool)
    return _SelectiveSoftmax.apply(logits.float(), select.float(), pad,
                                   _check_cap(straight_through_cap))


class _SampledSelectiveSoftmax(torch.autograd.Function):
    """Training with hard selection: the Gumbel-sigmoid straight-through sample of A and the
    selective softmax in one Function (float32 (B, h, T, S) in and out).

    Forward: z = E_p + L (L logistic noise, i.e. G' - G''), A = 1[z > 0], which is
    1[sigmoid(z / tau) > 0.5] for any tau > 0, then out = selective_softmax(E, A).
    Backward, with s = sigmoid(z / tau) (the straight-through slope dA/dE_p = s (1 - s) / tau)
    and c = g - <out, g> per row:
        dL/dE = out c,    dL/dE_p = (u / Z c + g_A) s (1 - s) / tau
    where g_A is the gradient reaching the returned A from elsewhere (the selection
    regulariser). Saved for backward: out and w = u / Z s (1 - s) / tau, two (B, h, T, S)
    tensors (autograd's chain of sample, straight-through and softmax keeps five), plus the
    slope itself only when ``select_grad``. The returned A has pad keys zeroed: float and
    differentiable with ``select_grad``, otherwise a bool constant. ``noise`` is overwritten;
    the forward works in place in the noise and exponential buffers.
    """

    @staticmethod
    def forward(ctx, logits: Tensor, policy_logits: Tensor, noise: Tensor, pad: Optional[Tensor],
                tau: float, select_grad: bool, cap: float):
        # Buffers of attention size: the inputs, noise -> z -> slope -> w, A (bool), u -> ATT.
        ctx.set_materialize_grads(False)
        z = noise.add_(policy_logits)  # E_p + L
        chosen = z > 0  # A = 1[y > 0.5]
        if pad is not None:
            chosen &= ~pad
        unnorm = (logits - _row_max(logits, chosen)).clamp_(max=cap).exp_()
        if pad is not None:
            unnorm.masked_fill_(pad, 0.0)
        slope = z.div_(tau).sigmoid_()
        slope.addcmul_(slope, slope, value=-1.0)  # s (1 - s); the 1 / tau joins the row scale
        kept_slope = slope.div(tau) if select_grad else None
        weight = slope.mul_(unnorm)  # u s (1 - s)
        out = unnorm.masked_fill_(~chosen, 0.0)  # A u
        denom = out.sum(-1, keepdim=True)
        denom.masked_fill_(denom == 0, 1.0)
        out.div_(denom)
        weight.div_(denom.mul(tau))  # u / Z s (1 - s) / tau
        return out, save_sampled_for_backward(ctx, out, weight, chosen, kept_slope)

    @staticmethod
    def backward(ctx, grad_out: Optional[Tensor], grad_select: Optional[Tensor]):
        out, weight, *slope = ctx.saved_tensors
        grad_logits = grad_policy = None
        if grad_out is not None:
            # s_i = sum_j out_ij g_ij as a batched dot product (no product tensor)
            row = torch.matmul(out.unsqueeze(-2), grad_out.unsqueeze(-1)).squeeze(-1)
            centred = grad_out - row
            if ctx.needs_input_grad[0]:
                grad_logits = out * centred
            if ctx.needs_input_grad[1]:
                grad_policy = centred.mul_(weight)
        if grad_select is not None and slope and ctx.needs_input_grad[1]:
            extra = grad_select * slope[0]
            grad_policy = extra if grad_policy is None else grad_policy.add_(extra)
        return grad_logits, grad_policy, None, None, None, None, None


def sampled_selective_softmax(logits: Tensor, policy_logits: Tensor, tau: float,
                              key_padding_mask: Optional[Tensor] = None, select_grad: bool = True,
                              noise: Optional[Tensor] = None,
                              straight_through_cap: float = STRAIGHT_THROUGH_EXP_CAP,
                              kernel: str = "torch", row_entropy: bool = False):
    """Training, hard selection: (ATT, A) with A the straight-through Gumbel-sigmoid sample of
    the policy logits and ATT = selective_softmax(logits, A), both float32 (B, h, T, S); the
    same values and gradients as ``selective_softmax(logits, sample_selection(...))`` with the
    same noise, in fewer passes and with less kept for backward (see _SampledSelectiveSoftmax).

    ``select_grad``: whether A carries the straight-through gradient (the selection
    regulariser needs it); ``noise``: logistic noise to use (tests), drawn when None;
    ``straight_through_cap``: as in ``selective_softmax``; ``kernel``: one of KERNELS (the
    native kernel draws its own noise, same distribution, other draws; see resolve_kernel).
    ``row_entropy``: also return, third, each row's policy entropy summed over non-pad keys,
    (B, h, T) float32 without gradient, where the kernel computes it on the way (native), else
    None.
    """
    kernel = resolve_kernel(kernel, logits.device)
    if kernel == "native":
        from .native import NativeSampledSelectiveSoftmax

        out, select, entropy = NativeSampledSelectiveSoftmax.apply(
            logits.float(), policy_logits.float(), noise, key_padding_mask, float(tau),
            bool(select_grad), _check_cap(straight_through_cap), bool(row_entropy))
        return (out, select, entropy) if row_entropy else (out, select)
    pad = None
    if key_padding_mask is not None:
        pad = key_padding_mask.view(key_padding_mask.size(0), 1, 1, -1).to(torch.bool)
    policy_logits = policy_logits.float()
    noise = logistic_noise_like(policy_logits) if noise is None else noise.float().clone()
    out, select = _SampledSelectiveSoftmax.apply(logits.float(), policy_logits, noise, pad,
                                                 float(tau), bool(select_grad),
                                                 _check_cap(straight_through_cap))
    return (out, select, None) if row_entropy else (out, select)


def sample_selection(policy_logits: Tensor, tau: float, mode: str, training: bool) -> Tensor:
    """The selection A from the policy logits E_p, (B, h, T, S) float32.

    - ``hard`` + training: Gumbel-sigmoid y = sigmoid((E_p + G' - G'') / tau); A = 1[y > 0.5]
      in the forward pass (exactly 0/1), gradient of y in the backward pass.
    - ``hard`` + eval: A = 1[sigmoid(E_p) > 0.5], deterministic.
    - ``soft``: A = sigmoid(E_p), no noise, train and eval.
    """
    if mode == "soft":
        return torch.sigmoid(policy_logits)
    if not training:
        return (policy_logits > 0).to(policy_logits.dtype)
    return gumbel_sigmoid_straight_through(policy_logits, tau)


#: elements of (B, h, T, S) per chunk of sentences in entropy_sum_no_grad (4 MB of float32; its
#: three temporaries of a chunk add to the peak of a training step, which holds the forward)
ENTROPY_CHUNK_ELEMENTS = 1 << 20


@torch.no_grad()
def entropy_sum_no_grad(policy_logits: Tensor, pair_w: Tensor) -> Tensor:
    """sum of H(sigmoid(E_p)) * pair_w, no graph: (B, h, T, S) logits, (B, 1, T, S) weights.
    H in its accurate form (binary_entropy_value); the weighted sum is one batched product
    over heads (no product tensor). Chunks of sentences keep the temporaries small at
    any length."""
    bsz, heads, tgt_len, src_len = policy_logits.shape
    per_sentence = max(1, policy_logits[:1].numel())
    step = max(1, ENTROPY_CHUNK_ELEMENTS // per_sentence)
    total = policy_logits.new_zeros((), dtype=torch.float32)
    for b in range(0, bsz, step):
        entropy = binary_entropy_value(policy_logits[b:b + step].float())  # (b, h, T, S)
        weight = pair_w[b:b + step].to(entropy.dtype).reshape(-1, tgt_len * src_len, 1)
        total += torch.bmm(entropy.reshape(-1, heads, tgt_len * src_len), weight).sum()
    return total


class SelectiveMultiheadAttention(SelectionReporter, MultiheadAttention):
    """fairseq's MultiheadAttention with a selector: only selected (query, key) pairs attend.

    Same parameters as fairseq's self-attention (q/k/v/out projections, same names, so a plain
    transformer checkpoint loads into it) plus a policy network ``policy_proj`` giving
    Q_p, K_p (C -> 2P, P = ``policy_dim``, default C as in the paper) and per-head logits
    E_p = Q_p K_p^T over P / h dimensions a head (optionally / sqrt(P / h)). A narrower policy
    (P < C) costs less: the fused input projection makes 3C + 2P outputs instead of 5C, and
    the policy product is P / C of the attention's.

    A forward that wants statistics (``wants_statistics()``: training, ``keep_selection``, or a
    selective criterion switched them on) reports a
    :class:`~ssan_plugin.modules.selection.SelectionStats` record (see :meth:`_statistics`),
    which the encoder takes with ``pop_selection()``.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        tau: float = 0.5,
        selection: str = "hard",
        scale_policy_logits: bool = False,
        q_noise: float = 0.0,
        qn_block_size: int = 8,
        policy_dim: Optional[int] = None,
        straight_through_cap: float = STRAIGHT_THROUGH_EXP_CAP,
        kernel: str = "auto",
        policy_init_bias: float = 0.0,
        dense_warmup: int = 0,
    ):
        super().__init__(
            embed_dim,
            num_heads,
            dropout=dropout,
            self_attention=True,
            q_noise=q_noise,
            qn_block_size=qn_block_size,
        )
        if not 0 < tau < math.inf:
            raise OptionError(f"--ssan-tau must be finite and > 0, got {tau}")
        if selection not in ("hard", "soft"):
            raise OptionError(f"--ssan-selection must be 'hard' or 'soft', got {selection!r}")
        policy_dim = embed_dim if not policy_dim else int(policy_dim)
        if policy_dim < 0 or policy_dim % num_heads:
            raise OptionError(f"--ssan-policy-dim must be a positive multiple of the {num_heads} "
                             f"attention heads (0: the embed dim), got {policy_dim}")
        self.kernel = check_kernel(kernel)  # the native one is built at its first training forward (decoding
        # and the hub never need it, so a model trained with it loads where no compiler is)
        self.tau = float(tau)
        self.straight_through_cap = _check_cap(straight_through_cap)
        self.selection = selection
        self.policy_dim = policy_dim
        self.policy_head_dim = policy_dim // num_heads
        self.policy_scaling = self.policy_head_dim**-0.5 if scale_policy_logits else 1.0
        if not math.isfinite(policy_init_bias):
            raise OptionError(f"--ssan-policy-init-bias must be finite, got {policy_init_bias}")
        if dense_warmup < 0:
            raise OptionError(f"--ssan-dense-warmup must be >= 0, got {dense_warmup}")
        self.policy_init_bias = float(policy_init_bias)
        self.policy_proj = nn.Linear(embed_dim, 2 * policy_dim)
        self.reset_policy()
        self.dense_warmup = int(dense_warmup)
        if self.dense_warmup:  # the update number travels with the checkpoint (resume, decoding)
            self.register_buffer("num_updates", torch.zeros((), dtype=torch.long))

    def reset_policy(self):
        """The policy's initialisation: Xavier weights; biases 0, or with
        ``policy_init_bias`` B the same value v in every dimension of b_q and b_k (the sign of
        B on b_q) so that each head's constant term b_q . b_k (times the policy scaling) is B."""
        nn.init.xavier_uniform_(self.policy_proj.weight, gain=1 / math.sqrt(2))
        nn.init.zeros_(self.policy_proj.bias)
        if self.policy_init_bias:
            b = self.policy_init_bias
            v = math.sqrt(abs(b) / (self.policy_head_dim * self.policy_scaling))
            with torch.no_grad():
                self.policy_proj.bias[:self.policy_dim].fill_(math.copysign(v, b))
                self.policy_proj.bias[self.policy_dim:].fill_(v)

    def set_num_updates(self, num_updates: int) -> None:
        """fairseq passes the update number to every module at each training step."""
        if self.dense_warmup:
            self.num_updates.fill_(int(num_updates))

    @property
    def in_dense_warmup(self) -> bool:
        """Whether this forward attends to every pair (the first ``dense_warmup`` updates)."""
        return bool(self.dense_warmup) and int(self.num_updates) < self.dense_warmup

    def fused_in_projection(self, x: Tensor) -> Tensor:
        """q, k, v, q_p, k_p in one matmul: (..., C) -> (..., 3C + 2P)."""
        weight = torch.cat(
            [self.q_proj.weight, self.k_proj.weight, self.v_proj.weight, self.policy_proj.weight]
        )
        bias = torch.cat(
            [self.q_proj.bias, self.k_proj.bias, self.v_proj.bias, self.policy_proj.bias]
        )
        return F.linear(x, weight, bias)

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
        """Self-attention of ``query`` (T x B x C) over itself. Returns (T x B x C, weights).

        ``attn_mask`` (T x T, additive, as fairseq's encoder layer passes it) is added to E.
        ``weights`` is None unless ``need_weights``: then (B, T, S) averaged over heads, or
        (h, B, T, S) with ``need_head_weights``.
        """
        check_encoder_self_attention_call(
            self, query, key, value, incremental_state, static_kv, before_softmax
        )
        tgt_len, bsz, embed_dim = query.shape
        h, d = self.num_heads, self.head_dim

        def heads(t: Tensor, dim: int = d) -> Tensor:  # T x B x (h dim) -> (B, h, T, dim)
            return t.reshape(tgt_len, bsz, h, dim).permute(1, 2, 0, 3)

        q, k, v, q_p, k_p = self.fused_in_projection(query).split(
            [embed_dim] * 3 + [self.policy_dim] * 2, dim=-1)
        q, k, v = heads(q), heads(k), heads(v)  # q unscaled: the eval path scales it inside
        q_p, k_p = heads(q_p, self.policy_head_dim), heads(k_p, self.policy_head_dim)
        want_weights = need_weights or need_head_weights
        dense = self.in_dense_warmup
        fused_eval = (self.selection == "hard" and not self.training and not want_weights
                      and attn_mask is None and not dense)
        record = self.wants_statistics()
        pads_in_policy = fused_eval and not record and key_padding_mask is not None
        if pads_in_policy:
            # decoding and scoring (no record reads E_p): K_p = 0 at pad keys, so E_p = 0 there,
            # which the eval mask discards (A = 1[E_p > 0]); the pads cost a pass over
            # (B, h, S, P / h) instead of one over (B, h, T, S) (a product: five times faster
            # than masked_fill on this strided view)
            keep = ~key_padding_mask.view(bsz, 1, -1, 1).to(torch.bool)
            k_p = k_p * keep.to(k_p.dtype)

        policy_logits = torch.matmul(q_p, k_p.transpose(-1, -2)).float()  # (B, h, T, S)
        if self.policy_scaling != 1.0:
            policy_logits.mul_(self.policy_scaling)
        probs_float: Optional[Tensor] = None
        row_count: Optional[Tensor] = None
        row_entropy: Optional[Tensor] = None
        if fused_eval:
            # eval: A = 1[E_p > 0], an additive 0 / -inf mask for torch's fused attention, made
            # in place in E_p when no record reads E_p afterwards
            select = policy_logits > 0 if self.keep_selection else None  # analysis only
            out, row_count = self._masked_attention(
                q, k, v, policy_logits, self.scaling,
                None if pads_in_policy else key_padding_mask, count=record, in_place=not record)
        else:
            logits = torch.matmul(q * self.scaling, k.transpose(-1, -2))  # (B, h, T, S)
            if attn_mask is not None:
                logits = logits + attn_mask
            if dense:  # dense warm-up: every pair attends (softmax), the policy gets no gradient
                select = torch.ones_like(policy_logits)
                probs_float = selective_softmax(logits, select, key_padding_mask,
                                                self.straight_through_cap)
            elif self.selection == "hard" and self.training:
                # the native kernel sums the policy entropy on the way, when a record wants it
                # without a gradient (torch's kernel returns None: _statistics makes its own pass)
                want_entropy = self.wants_statistics() and not self.entropy_gradient
                probs_float, select, *fused = sampled_selective_softmax(
                    logits, policy_logits, self.tau, key_padding_mask, select_grad=self.rate_gradient,
                    straight_through_cap=self.straight_through_cap, kernel=self.kernel,
                    row_entropy=want_entropy)
                row_entropy = fused[0] if fused else None
                if select.dtype == torch.bool and self.wants_statistics():
                    # no gradient wanted and pads already out of the sample: count it as is
                    # (a float sample is weighted by the key mask in _statistics, so that pad
                    # keys get no gradient)
                    row_count = select.sum(-1, dtype=torch.float32)
            else:
                select = sample_selection(policy_logits, self.tau, self.selection, self.training)
                probs_float = selective_softmax(logits, select, key_padding_mask,
                                                self.straight_through_cap)
            del logits  # attention-sized: free it before the statistics
            probs = self.dropout_module(probs_float.type_as(v))
            out = torch.matmul(probs, v)  # (B, h, T, d)
        out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, embed_dim)
        out = self.out_proj(out)

        if self.wants_statistics():
            self.report_selection(self._statistics(policy_logits, select, key_padding_mask, row_count,
                                                   row_entropy))

        weights: Optional[Tensor] = None
        if want_weights:
            weights = probs_float.type_as(out)
            weights = weights.transpose(0, 1) if need_head_weights else weights.mean(dim=1)
        return out, weights

    @staticmethod
    def _masked_attention(q: Tensor, k: Tensor, v: Tensor, policy_logits: Tensor, scaling: float,
                          key_padding_mask: Optional[Tensor], count: bool, in_place: bool = False):
        """Eval-mode selective attention, A = 1[E_p > 0]: softmax of ``scaling`` q k^T over the
        selected non-pad keys, times v; a query with no key left gets a zero row, as
        selective_softmax gives. q, k, v (B, h, T, d) unscaled (strided views are fine);
        policy_logits (B, h, T, S), overwritten when ``in_place``; ``key_padding_mask`` (B, S),
        or None when there are no pads or E_p <= 0 at every pad key already (the caller zeroed
        K_p there). Returns the output (B, h, T, d) and, if ``count``, the number of keys each
        query attends, (B, h, T) float32 (else None).

        The selection becomes an additive float mask, E_p where E_p > 0 and -inf elsewhere,
        clamped to 0 from above: two passes, where a boolean mask would cost a comparison here
        and a conversion to an additive mask inside ``scaled_dot_product_attention``. The fused
        attention then never materialises the logits or the probabilities."""
        threshold = F.threshold_ if in_place else F.threshold
        mask = threshold(policy_logits, 0.0, float("-inf")).clamp_(max=0.0)
        if key_padding_mask is not None:
            bsz, src_len = key_padding_mask.shape
            mask.masked_fill_(key_padding_mask.view(bsz, 1, 1, src_len).to(torch.bool),
                              float("-inf"))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype), scale=scaling)
        row_count = (mask == 0).sum(-1, dtype=torch.float32) if count else None
        if not out.is_cpu:  # torch's CPU kernel gives a fully masked row zeros (tests check);
            out = torch.nan_to_num(out, nan=0.0)  # other devices' kernels may give NaN
        return out, row_count

    def _statistics(
        self, policy_logits: Tensor, select: Optional[Tensor], key_padding_mask: Optional[Tensor],
        row_count: Optional[Tensor] = None, row_entropy: Optional[Tensor] = None,
    ) -> SelectionStats:
        """This forward's record over non-pad (query, key) pairs, all heads (see SelectionStats).

        ``row_count``: selected non-pad keys per query, (B, h, T), when the caller has it
        (eval); ``select`` may then be None (or the boolean selection, kept for analysis).
        ``row_entropy``: each query's policy entropy summed over non-pad keys, (B, h, T), when
        the native kernel computed it (used unless the entropy needs a gradient).
        A sentence made only of pads contributes nothing (its denominators are clamped).
        """
        bsz, h, tgt_len, src_len = policy_logits.shape
        dtype = policy_logits.dtype
        if key_padding_mask is None:
            valid = policy_logits.new_ones(bsz, src_len)
        else:
            valid = (~key_padding_mask.to(torch.bool)).to(dtype)
        # self-attention: queries and keys are the same positions
        n_keys = valid.sum(-1).clamp_min(1.0)  # (B,)
        n_queries = valid.sum().clamp_min(1.0)
        key_w = valid.view(bsz, 1, 1, src_len)
        query_w = valid.view(bsz, 1, tgt_len)

        if row_count is None:  # (B, h, T): selected keys per query (eval: counted while masking)
            if select.dtype == torch.bool:  # no gradient: counts straight from the mask
                row_count = (select & (key_w > 0)).sum(-1, dtype=dtype)
            else:
                row_count = (select * key_w).sum(-1)
        pair_count = (row_count * query_w).sum() / n_queries
        pair_rate = (row_count / n_keys.view(bsz, 1, 1) * query_w).sum() / n_queries

        pair_w = key_w * query_w.unsqueeze(-1)  # (B, 1, T, S)
        n_pairs = pair_w.sum() * h
        if torch.is_grad_enabled() and self.entropy_gradient:
            entropy_sum = (binary_entropy_from_logits(policy_logits) * pair_w).sum()
        elif row_entropy is not None:  # summed over non-pad keys by the kernel
            entropy_sum = (row_entropy * query_w).sum()
        else:
            entropy_sum = entropy_sum_no_grad(policy_logits, pair_w)
        with torch.no_grad():
            if select is None or select.dtype == torch.bool or self.selection == "hard":
                selected = (row_count.detach() * query_w).sum()  # 0/1: the row counts
            else:  # soft: a pair counts as selected when pi > 0.5
                selected = ((select > 0.5).to(dtype) * pair_w).sum()
        return SelectionStats(
            pairs_selected=selected,
            pairs_possible=n_pairs.detach(),
            decisions=n_pairs.detach(),
            entropy_sum=entropy_sum.detach(),
            pair_rate=pair_rate,
            pair_count=pair_count,
            neg_entropy=-entropy_sum / n_pairs.clamp_min(1.0),
            selection=(None if not self.keep_selection else
                       select if select.dtype == torch.bool else select > 0.5),
        )

    def upgrade_state_dict_named(self, state_dict, name):
        """Warm start: a plain fairseq self-attention has no policy network; keep ours fresh."""
        super().upgrade_state_dict_named(state_dict, name)
        prefix = name + "." if name != "" else ""
        if prefix + "q_proj.weight" in state_dict and prefix + "policy_proj.weight" not in state_dict:
            for pname, param in self.policy_proj.state_dict().items():
                state_dict[prefix + "policy_proj." + pname] = param.detach().clone()
            if self.dense_warmup:
                state_dict[prefix + "num_updates"] = self.num_updates.detach().clone()
            logger.info(
                "%spolicy_proj: not in the checkpoint (a plain transformer), initialised fresh",
                prefix,
            )
