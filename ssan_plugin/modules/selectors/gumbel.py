"""``gumbel``: SSAN (docs/design.md, section 1), the selector of ``ssan_transformer``.

A policy network of its own (``policy_proj``: C -> 2P, P = ``--ssan-policy-dim``, default C as
in the paper) gives Q_p (from the queries), K_p (from the keys' input: the tokens themselves in
self-attention, the encoder output at the cross site; the selector's ``key_state``, kept while
decoding) and per-head logits E_p = Q_p K_p^T over P / h dimensions a head (optionally
/ sqrt(P / h)). Reference (``reference``): training samples A = 1[E_p + L > 0] (L
logistic noise: a hard Gumbel-sigmoid sample) with the straight-through gradient of
sigmoid((E_p + L) / tau); evaluation uses A = 1[E_p > 0]; the weights are the selective softmax
over the selected non-pad keys (``selective_softmax``), an empty row zero. The first
``--ssan-dense-warmup`` updates attend to every pair instead (the policy idle).

Fast paths, each checked against the reference: ``torch`` and ``native``, the sample and the
weighting of hard training in one autograd Function or one C kernel (``--ssan-kernel``;
``sampled_selective_softmax``); and the evaluation mask 1[E_p > 0] for torch's fused attention
(``evaluation_mask``). The record counts A as the selected pairs (the weights are nonzero exactly
there) and the entropies of sigmoid(E_p) over the non-pad pairs.
"""

import math
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from torch import Tensor

from ..selective_weights import (
    KERNELS,
    check_cap,
    check_kernel,
    hidden_keys,
    resolve_kernel,
    sample_selection,
    sampled_selective_softmax,
    selective_softmax,
)
from .base import Selection, Selector, SiteContext, normalisation_dtype
from ...errors import OptionError


@dataclass
class SSANSelectorOptions(FairseqDataclass):
    """SSAN's options (``gumbel`` and ``soft``; ``ssan_transformer`` adds ``--ssan-layers`` and
    ``--ssan-selection``)."""

    ssan_tau: float = field(default=0.5, metadata={"help": "Gumbel-sigmoid temperature, > 0"})
    ssan_policy_dim: int = field(
        default=0,
        metadata={"help": "width P of the policy's Q_p and K_p (a multiple of the heads); "
                          "0: the embed dim, as in the paper. A narrower policy is cheaper "
                          "(docs/design.md, section 1.4)"},
    )
    ssan_straight_through_cap: float = field(
        default=0.0,
        metadata={"help": "the straight-through gradient of a discarded key whose attention "
                          "logit exceeds the row maximum m of the selected keys uses "
                          "exp(min(E - m, CAP)); lower caps bound the policy's gradient "
                          "(0, the default: as if the key were at the maximum; the paper's "
                          "plain straight-through estimator is a large cap such as 10, the "
                          "default before the seed study of examples/stability). Values never "
                          "depend on it (docs/design.md, sections 1.4 and 1.8)"},
    )
    ssan_kernel: ChoiceEnum(KERNELS) = field(
        default="auto",
        metadata={"help": "training attention: torch (autograd Function of torch operations, "
                          "runs everywhere), native (a fused C kernel compiled on first use "
                          "for this CPU; needs a C compiler; same values and gradients, its own "
                          "noise draws), auto (native on the CPU where it builds, else "
                          "torch) or reference (the plain definition, slowest). docs/design.md, "
                          "section 1.4"},
    )
    ssan_policy_init_bias: float = field(
        default=0.0,
        metadata={"help": "start every head's policy logits near B (the policy projection's "
                          "biases set so that b_q . b_k = B per head): sigmoid(B) of the pairs "
                          "selected at the first update instead of half; 0: the paper's "
                          "initialisation (docs/design.md, section 1.8)"},
    )
    ssan_dense_warmup: int = field(
        default=0,
        metadata={"help": "attend to every pair (no selection, the policy idle) for the first "
                          "N >= 0 updates, then select; 0: select from the first update, as in "
                          "the paper (docs/design.md, section 1.8)"},
    )
    ssan_scale_policy_logits: bool = field(
        default=False,
        metadata={"help": "divide the policy logits Q_p K_p^T by sqrt(head dim) (the "
                          "reference does not)"},
    )




class GumbelSelector(Selector):
    """SSAN with hard selection; ``selection = "soft"`` is the ``soft`` selector."""

    name = "gumbel"
    options = SSANSelectorOptions
    rate_has_gradient = True
    entropy_has_gradient = True
    fast_paths = ("torch", "native")
    kind = "ssan"  # the analysis tools' name of SSAN's layers, as in ssan_transformer
    # checkpoints of SSAN's own attention module before the selector contract
    legacy_state = {"policy_proj.weight": "policy_proj.weight",
                    "policy_proj.bias": "policy_proj.bias", "num_updates": "num_updates"}
    selection = "hard"
    tiny_flags = ("--ssan-kernel", "torch")
    samples = True

    def __init__(self, embed_dim: int, num_heads: int, tau: float = 0.5, policy_dim: int = 0,
                 straight_through_cap: float = 0.0, kernel: str = "auto",
                 policy_init_bias: float = 0.0, dense_warmup: int = 0,
                 scale_policy_logits: bool = False):
        super().__init__()
        if not 0 < tau < math.inf:
            raise OptionError(f"--ssan-tau must be finite and > 0, got {tau}")
        policy_dim = embed_dim if not policy_dim else int(policy_dim)
        if policy_dim < 0 or policy_dim % num_heads:
            raise OptionError(f"--ssan-policy-dim must be a positive multiple of the {num_heads} "
                              f"attention heads (0: the embed dim), got {policy_dim}")
        if not math.isfinite(policy_init_bias):
            raise OptionError(f"--ssan-policy-init-bias must be finite, got {policy_init_bias}")
        if dense_warmup < 0:
            raise OptionError(f"--ssan-dense-warmup must be >= 0, got {dense_warmup}")
        self.num_heads = num_heads
        self.tau = float(tau)
        self.straight_through_cap = check_cap(straight_through_cap)
        # the native kernel is built at its first training forward (decoding and the hub never
        # need it, so a model trained with it loads where no compiler is)
        self.kernel = check_kernel(kernel)
        self.policy_dim = policy_dim
        self.policy_head_dim = policy_dim // num_heads
        self.policy_scaling = self.policy_head_dim**-0.5 if scale_policy_logits else 1.0
        self.policy_init_bias = float(policy_init_bias)
        self.policy_proj = nn.Linear(embed_dim, 2 * policy_dim)
        self.reset_policy()
        self.dense_warmup = int(dense_warmup)
        if self.dense_warmup:  # the update number travels with the checkpoint (resume, decoding)
            self.register_buffer("num_updates", torch.zeros((), dtype=torch.long))

    @classmethod
    def from_args(cls, args, embed_dim, num_heads):
        return cls(embed_dim, num_heads, tau=args.ssan_tau, policy_dim=args.ssan_policy_dim,
                   straight_through_cap=args.ssan_straight_through_cap, kernel=args.ssan_kernel,
                   policy_init_bias=args.ssan_policy_init_bias,
                   dense_warmup=args.ssan_dense_warmup,
                   scale_policy_logits=args.ssan_scale_policy_logits)

    def extra_repr(self) -> str:
        return (f"selection={self.selection}, tau={self.tau:g}, policy_dim={self.policy_dim}, "
                f"kernel={self.kernel}")

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

    def _policy_heads(self, t: Tensor) -> Tensor:
        """L x B x P -> (B, h, L, P / h)."""
        return t.reshape(t.size(0), t.size(1), self.num_heads, self.policy_head_dim).permute(1, 2, 0, 3)

    def key_state(self, key: Tensor) -> Tensor:
        """K_p of every key, (B, h, S, P / h), from the keys' input S x B x C."""
        weight, bias = self.policy_proj.weight[self.policy_dim:], self.policy_proj.bias[self.policy_dim:]
        return self._policy_heads(F.linear(key, weight, bias))

    def policy_logits(self, query: Tensor, zero_pad_keys: Optional[Tensor] = None,
                      site: Optional[SiteContext] = None) -> Tensor:
        """E_p, (B, h, T, S) in float32 (float64 for float64 inputs), from the query T x B x C
        and the site's keys (``site``: None or ``key`` is ``query``: self-attention, Q_p and
        K_p in one matmul). ``zero_pad_keys`` (B, S): E_p = 0 at those keys, by a pass over
        whichever is smaller: K_p (B, h, S, P / h) before the matmul or E_p (B, h, T, S) after
        it (a decoding step's few queries)."""
        if site is None or (site.key_state is None and site.key is query):
            q_p, k_p = (self._policy_heads(t) for t in self.policy_proj(query).split(self.policy_dim, dim=-1))
        else:
            weight, bias = self.policy_proj.weight[:self.policy_dim], self.policy_proj.bias[:self.policy_dim]
            q_p = self._policy_heads(F.linear(query, weight, bias))
            k_p = site.key_state if site.key_state is not None else self.key_state(site.key)
        zero_logits = zero_pad_keys is not None and q_p.size(-2) < k_p.size(-1)
        if zero_pad_keys is not None and not zero_logits:
            k_p = k_p * (~zero_pad_keys).view(k_p.size(0), 1, -1, 1).to(k_p.dtype)
        logits = normalisation_dtype(torch.matmul(q_p, k_p.transpose(-1, -2)))
        if zero_logits:
            logits = logits.masked_fill(zero_pad_keys.view(logits.size(0), 1, 1, -1), 0.0)
        if self.policy_scaling != 1.0:
            logits = logits.mul_(self.policy_scaling)
        return logits

    def _dense(self, logits: Tensor, key_padding_mask: Optional[Tensor], policy: Tensor) -> Selection:
        """Dense warm-up: every pair attends (softmax), the policy gets no gradient."""
        every = torch.ones((1, 1, 1, 1), dtype=logits.dtype, device=logits.device)
        probs = selective_softmax(logits, every.expand_as(logits), key_padding_mask,
                                  self.straight_through_cap)
        return Selection(probs, keep=every, decision_logits=policy, selected=every > 0)

    def reference(self, logits, key_padding_mask, query, rate_gradient=True, noise=None, site=None):
        policy = self.policy_logits(query, site=site)
        if self.in_dense_warmup:
            return self._dense(logits, key_padding_mask, policy)
        select = sample_selection(policy, self.tau, self.selection, self.training, noise)
        if key_padding_mask is not None:
            select = select.masked_fill(hidden_keys(key_padding_mask), 0.0)
        probs = selective_softmax(logits, select, key_padding_mask, self.straight_through_cap)
        if self.selection == "soft":  # counted as selected where sigmoid(E_p) > 0.5
            return Selection(probs, keep=select, decision_logits=policy, selected=policy > 0)
        chosen = select.detach() > 0
        return Selection(probs, keep=select if rate_gradient else chosen, decision_logits=policy,
                         selected=chosen)

    def fast_path(self, path, logits, key_padding_mask, query, rate_gradient=True, noise=None,
                  row_entropy=False, site=None):
        if path not in self.fast_paths or self.selection != "hard" or not self.training:
            return super().fast_path(path, logits, key_padding_mask, query, rate_gradient, noise)
        policy = self.policy_logits(query, site=site)
        probs, select, *entropy = sampled_selective_softmax(
            logits, policy, self.tau, key_padding_mask, select_grad=rate_gradient, noise=noise,
            straight_through_cap=self.straight_through_cap, kernel=path, row_entropy=row_entropy)
        chosen = select if select.dtype == torch.bool else select.detach() > 0
        return Selection(probs, keep=select, decision_logits=policy, selected=chosen,
                         row_entropy=entropy[0] if entropy else None)

    def forward(self, logits, key_padding_mask, query, rate_gradient=True, row_entropy=False,
                site=None):
        if self.selection == "hard" and self.training and not self.in_dense_warmup:
            path = resolve_kernel(self.kernel, logits.device)
            if path != "reference":
                return self.fast_path(path, logits, key_padding_mask, query, rate_gradient,
                                      row_entropy=row_entropy, site=site)
        return self.reference(logits, key_padding_mask, query, rate_gradient, site=site)

    def evaluation_mask(self, key_padding_mask, query, keep_logits, site=None):
        if self.selection != "hard" or self.in_dense_warmup:
            return None
        # K_p = 0 at pad keys, so E_p = 0 there, which A = 1[E_p > 0] discards
        policy = self.policy_logits(query, zero_pad_keys=key_padding_mask, site=site)
        # E_p where E_p > 0 and -inf elsewhere, clamped to 0 from above: two passes (in place
        # when no record reads E_p afterwards), where a boolean mask would cost a comparison here
        # and a conversion to an additive mask inside torch's fused attention
        threshold = F.threshold if keep_logits else F.threshold_
        mask = threshold(policy, 0.0, float("-inf")).clamp_(max=0.0)
        return mask, policy if keep_logits else None
