"""``gumbel``: SSAN as it is (docs/design.md, section 1), the selector of ``ssan_transformer``.

A policy network of its own (``policy_proj``) gives per-head logits E_p = Q_p K_p^T; training
samples A = 1[E_p + L > 0] (L logistic noise: a hard Gumbel-sigmoid sample) with the
straight-through gradient of sigmoid((E_p + L) / tau); evaluation uses A = 1[E_p > 0]; the
weights are the softmax over the selected non-pad keys. Everything is
``SelectiveMultiheadAttention`` (``modules/selective_attention.py``): its fused training
Function, the native kernel (``--ssan-kernel``) and the fused evaluation path stay its fast
paths, so this file only declares SSAN's options (once, for ``ssan_transformer`` as well) and
builds that module. The weights are nonzero exactly on the selected pairs, so the logged rates
are the rates of A, as for every selector.
"""

from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum, FairseqDataclass

from ..selective_attention import KERNELS, SelectiveMultiheadAttention
from .base import Selector


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
                          "noise draws) or auto (native on the CPU where it builds, else "
                          "torch). docs/design.md, section 1.4"},
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


def _option(args, name: str):
    """SSAN option ``name`` of ``args``; where args lack it (or hold None), its default as
    :class:`SSANSelectorOptions` declares it. The models' ``fill_defaults`` set every option
    before building; this covers a caller that builds without them, for the options whose
    absence means that default (not ``ssan_straight_through_cap``, whose absence means an older
    checkpoint's value, ``legacy_defaults`` of ``ssan_transformer``)."""
    value = getattr(args, name, None)
    return SSANSelectorOptions.__dataclass_fields__[name].default if value is None else value


def build_ssan_attention(args, embed_dim: int, num_heads: int, selection: str, dropout: float = 0.0,
                         q_noise: float = 0.0, qn_block_size: int = 8) -> SelectiveMultiheadAttention:
    """SSAN's attention module from SSAN's options (``selection``: hard or soft); the one
    place where ``ssan_transformer`` and the selectors ``gumbel`` / ``soft`` build it."""
    return SelectiveMultiheadAttention(
        embed_dim,
        num_heads,
        dropout=dropout,
        tau=args.ssan_tau,
        selection=selection,
        scale_policy_logits=args.ssan_scale_policy_logits,
        policy_dim=args.ssan_policy_dim,
        straight_through_cap=args.ssan_straight_through_cap,
        kernel=args.ssan_kernel,
        policy_init_bias=_option(args, "ssan_policy_init_bias"),
        dense_warmup=_option(args, "ssan_dense_warmup"),
        q_noise=q_noise,
        qn_block_size=qn_block_size,
    )


class GumbelSelector(Selector):
    """Registry entry of SSAN with hard selection (a module selector: never instantiated)."""

    name = "gumbel"
    options = SSANSelectorOptions
    rate_has_gradient = True
    entropy_has_gradient = True
    selection = "hard"  # SelectiveMultiheadAttention's --ssan-selection

    @classmethod
    def build_attention(cls, args, embed_dim, num_heads, dropout=0.0, q_noise=0.0, qn_block_size=8):
        return build_ssan_attention(args, embed_dim, num_heads, cls.selection, dropout=dropout,
                                    q_noise=q_noise, qn_block_size=qn_block_size)
