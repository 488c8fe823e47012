"""``ssan_transformer``: fairseq's Transformer whose encoder layers select what they attend to.

Options (prefixed ``--ssan-`` so that fairseq's TransformerConfig leaves them alone) are
declared once, in :class:`SSANOptions`. Architectures: ``ssan_transformer`` plus every shape
suffix of models.architectures (``_small``, ``_iwslt_de_en``, ``_wmt_en_de``,
``_vaswani_wmt_en_de_big``), each exactly fairseq's ``transformer*`` shape.
"""

from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import register_model

from ..modules import SelectiveMultiheadAttention
from ..modules.selective_attention import KERNELS, STRAIGHT_THROUGH_EXP_CAP
from .architectures import FAIRSEQ_SHAPES, LARGE_SHAPES
from .variant_transformer import VariantTransformerModel, register_variant_architectures


@dataclass
class SSANOptions(FairseqDataclass):
    ssan_layers: str = field(
        default="all", metadata={"help": "encoder layers (0-based) that select: all or I,J,..."}
    )
    ssan_tau: float = field(default=0.5, metadata={"help": "Gumbel-sigmoid temperature, > 0"})
    ssan_selection: ChoiceEnum(["hard", "soft"]) = field(
        default="hard",
        metadata={"help": "hard: straight-through 0/1 samples in training, 1[pi > 0.5] in "
                          "eval; soft: A = pi"},
    )
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


@register_model("ssan_transformer")
class SSANTransformerModel(VariantTransformerModel):
    """Transformer with selective self-attention in the encoder (SSAN)."""

    options = SSANOptions
    layers_option = "ssan_layers"
    # options missing from older checkpoints' args: what those checkpoints trained with
    legacy_defaults = {"ssan_straight_through_cap": STRAIGHT_THROUGH_EXP_CAP}

    @classmethod
    def build_variant_attention(cls, args, embed_dim, cfg):
        return SelectiveMultiheadAttention(
            embed_dim,
            cfg.encoder.attention_heads,
            dropout=cfg.attention_dropout,
            tau=args.ssan_tau,
            selection=args.ssan_selection,
            scale_policy_logits=args.ssan_scale_policy_logits,
            policy_dim=args.ssan_policy_dim,
            straight_through_cap=args.ssan_straight_through_cap,
            kernel=args.ssan_kernel,
            policy_init_bias=getattr(args, "ssan_policy_init_bias", 0.0),
            dense_warmup=getattr(args, "ssan_dense_warmup", 0),
            q_noise=cfg.quant_noise.pq,
            qn_block_size=cfg.quant_noise.pq_block_size,
        )


register_variant_architectures(
    "ssan_transformer", SSANTransformerModel, {**FAIRSEQ_SHAPES, **LARGE_SHAPES}
)
