"""The selective softmax and its training kernels: the weighting every sampling selector uses.

ATT_ij = A_ij exp(E_ij) / sum_j' A_ij' exp(E_ij') over the non-pad keys (docs/design.md,
section 1), for a selection A in [0, 1] (0/1 for hard selection):

- :func:`selective_softmax`: given A (an autograd Function with the analytic backward);
- :func:`sample_selection`: A from decision logits (SSAN's policy logits E_p, a fixed mask's M):
  the straight-through Gumbel-sigmoid sample in training, 1[E_p > 0] in evaluation, sigmoid(E_p)
  for soft selection;
- :func:`sampled_selective_softmax`: the sample and the weighting of hard training in one pass,
  on torch's operations (``kernel="torch"``) or the C kernel of native.py (``"native"``): fast
  paths of ``selective_softmax(E, sample_selection(E_p, ...))``, which a registry-driven test
  checks against it on the same noise (tests/unit/modules/selectors/test_fast_paths.py).

Shapes follow fairseq: attention tensors are (B, h, T, S), T queries and S keys;
``key_padding_mask`` holds the keys each query may not use, True there: fairseq's (B, S) pad
mask, or a mask broadcastable to (B, 1, T, S) (pads, and for decoder self-attention the future:
:func:`hidden_keys`), or None when every key is visible.
"""

import math
from typing import Optional

import torch
from torch import Tensor

from .sampled_backward import save_sampled_for_backward
from .selection import binary_entropy_value, gumbel_sigmoid_straight_through, logistic_noise_like
from ..errors import OptionError

# Straight-through gradients reach the selection of a *discarded* key through exp(E_ij - m),
# m the row maximum over selected keys. When E_ij exceeds m by a lot, that linearisation is
# astronomically large (and overflows); its exponent is capped (default here, or
# --ssan-straight-through-cap). Values never depend on it.
STRAIGHT_THROUGH_EXP_CAP = 10.0

#: implementations of hard training (sampled_selective_softmax): ``reference`` (sample_selection
#: then selective_softmax, autograd through both), ``torch`` (torch operations in one autograd
#: Function), ``native`` (the fused C kernel of native.py), or ``auto`` (resolve_kernel)
KERNELS = ("auto", "reference", "torch", "native")


def hidden_keys(key_padding_mask: Optional[Tensor]) -> Optional[Tensor]:
    """The keys no query may use as a bool mask broadcastable to (B, h, T, S): fairseq's (B, S)
    pad mask viewed (B, 1, 1, S); a 4-D mask ((B or 1, 1, T or 1, S): pads and the future of a
    causal site) as it is; None stays None."""
    if key_padding_mask is None:
        return None
    if key_padding_mask.dim() == 2:
        key_padding_mask = key_padding_mask.view(key_padding_mask.size(0), 1, 1, -1)
    elif key_padding_mask.dim() != 4:
        raise ValueError(f"a key mask is (B, S) or broadcastable to (B, 1, T, S), got shape "
                         f"{tuple(key_padding_mask.shape)}")
    return key_padding_mask.to(torch.bool)


def check_kernel(kernel: str) -> str:
    """``kernel`` if it is one of KERNELS, else a ValueError naming them."""
    if kernel not in KERNELS:
        raise OptionError(f"--ssan-kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    return kernel


def resolve_kernel(kernel: str, device: torch.device) -> str:
    """The kernel that trains: ``auto`` is the native one on the CPU where it builds and loads
    (asked once a process; a warning names the reason when it does not), else torch's; any
    other is itself."""
    if check_kernel(kernel) != "auto":
        return kernel
    if device.type != "cpu":
        return "torch"
    from .native import available

    return "native" if available() else "torch"


def check_cap(cap: float) -> float:
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
        key_padding_mask: bool, True at the keys a query may not use ((B, S) pads, or a mask
            broadcastable to (B, 1, T, S): hidden_keys), or None.
        straight_through_cap: the gradient reaching A_ij of a discarded key uses
            exp(min(E_ij - m_i, cap)) (docs/design.md 1.4); values never depend on it.

    Returns:
        float32 (B, h, T, S). Exponentials are taken relative to the row maximum over the
        selected non-pad keys, so nothing overflows in any dtype and a full selection is exactly
        softmax. A row whose selection is empty is all zero (never NaN); its denominator is
        taken as 1 (with the shift at the row maximum over all keys), which keeps the
        straight-through gradient of its selection bounded.
    """
    return _SelectiveSoftmax.apply(logits.float(), select.float(), hidden_keys(key_padding_mask),
                                   check_cap(straight_through_cap))


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
    ``straight_through_cap``: as in ``selective_softmax``; ``kernel``: one of KERNELS
    (``reference`` is that definition itself; the native kernel, given no noise, draws its own,
    same distribution, other draws; see resolve_kernel).
    ``row_entropy``: also return, third, each row's policy entropy summed over non-pad keys,
    (B, h, T) float32 without gradient, where the kernel computes it on the way (native), else
    None.
    """
    kernel = resolve_kernel(kernel, logits.device)
    if kernel == "reference":  # the definition: the sample, then the weighting, autograd through both
        select = sample_selection(policy_logits.float(), tau, "hard", True, noise)
        if key_padding_mask is not None:
            select = select.masked_fill(hidden_keys(key_padding_mask), 0.0)
        out = selective_softmax(logits, select, key_padding_mask, straight_through_cap)
        if not select_grad:
            select = select.detach() > 0
        return (out, select, None) if row_entropy else (out, select)
    if kernel == "native":
        from .native import NativeSampledSelectiveSoftmax

        out, select, entropy = NativeSampledSelectiveSoftmax.apply(
            logits.float(), policy_logits.float(), noise, key_padding_mask, float(tau),
            bool(select_grad), check_cap(straight_through_cap), bool(row_entropy))
        return (out, select, entropy) if row_entropy else (out, select)
    pad = hidden_keys(key_padding_mask)
    policy_logits = policy_logits.float()
    noise = logistic_noise_like(policy_logits) if noise is None else noise.float().clone()
    out, select = _SampledSelectiveSoftmax.apply(logits.float(), policy_logits, noise, pad,
                                                 float(tau), bool(select_grad),
                                                 check_cap(straight_through_cap))
    return (out, select, None) if row_entropy else (out, select)


def sample_selection(policy_logits: Tensor, tau: float, mode: str, training: bool,
                     noise: Optional[Tensor] = None) -> Tensor:
    """The selection A from the policy logits E_p, (B, h, T, S) float32; ``noise``: the logistic
    noise of the training sample (tests), drawn when None.

    - ``hard`` + training: Gumbel-sigmoid y = sigmoid((E_p + G' - G'') / tau); A = 1[y > 0.5]
      in the forward pass (exactly 0/1), gradient of y in the backward pass.
    - ``hard`` + eval: A = 1[sigmoid(E_p) > 0.5], deterministic.
    - ``soft``: A = sigmoid(E_p), no noise, train and eval.
    """
    if mode == "soft":
        return torch.sigmoid(policy_logits)
    if not training:
        return (policy_logits > 0).to(policy_logits.dtype)
    return gumbel_sigmoid_straight_through(policy_logits, tau, noise)


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
