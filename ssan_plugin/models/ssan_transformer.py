"""``ssan_transformer``: fairseq's Transformer whose encoder layers select what they attend to.

Options (all prefixed ``--ssan-``, so that fairseq's TransformerConfig leaves them alone):
which layers select, the Gumbel-sigmoid temperature, hard/soft selection, policy logit
scaling. Architectures mirror fairseq's ``transformer*`` shapes exactly.
"""

import math
from functools import partial

from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_vaswani_wmt_en_de_big,
    transformer_wmt_en_de,
)

from ..modules import SelectiveMultiheadAttention
from .variant_transformer import VariantTransformerModel, parse_layer_list

SSAN_DEFAULTS = dict(
    ssan_layers="all", ssan_tau=0.5, ssan_selection="hard", ssan_scale_policy_logits=False
)


def build_selective_attention(embed_dim, cfg, tau, selection, scale_policy_logits):
    return SelectiveMultiheadAttention(
        embed_dim,
        cfg.encoder.attention_heads,
        dropout=cfg.attention_dropout,
        tau=tau,
        selection=selection,
        scale_policy_logits=scale_policy_logits,
        q_noise=cfg.quant_noise.pq,
        qn_block_size=cfg.quant_noise.pq_block_size,
    )


@register_model("ssan_transformer")
class SSANTransformerModel(VariantTransformerModel):
    """Transformer with selective self-attention in the encoder (SSAN)."""

    variant_defaults = SSAN_DEFAULTS

    @staticmethod
    def add_args(parser):
        VariantTransformerModel.add_args(parser)
        group = parser.add_argument_group("selective self-attention (SSAN)")
        group.add_argument("--ssan-layers", type=str, metavar="all|I,J,...",
                           help="encoder layers (0-based) that select; default: all")
        group.add_argument("--ssan-tau", type=float, metavar="T",
                           help="Gumbel-sigmoid temperature, > 0 (default 0.5)")
        group.add_argument("--ssan-selection", choices=["hard", "soft"],
                           help="hard: straight-through 0/1 samples in training, 1[pi > 0.5] "
                                "in eval; soft: A = pi (default hard)")
        group.add_argument("--ssan-scale-policy-logits", action="store_true",
                           help="divide the policy logits Q_p K_p^T by sqrt(head dim) "
                                "(the reference does not)")

    @classmethod
    def variant_layers(cls, args):
        return parse_layer_list(args.ssan_layers, args.encoder_layers, "--ssan-layers")

    @classmethod
    def build_variant_attention(cls, args):
        if not 0 < args.ssan_tau < math.inf:
            raise ValueError(f"--ssan-tau must be finite and > 0, got {args.ssan_tau}")
        if args.ssan_selection not in ("hard", "soft"):
            raise ValueError(f"--ssan-selection must be 'hard' or 'soft', got {args.ssan_selection!r}")
        return partial(
            build_selective_attention,
            tau=args.ssan_tau,
            selection=args.ssan_selection,
            scale_policy_logits=args.ssan_scale_policy_logits,
        )


@register_model_architecture("ssan_transformer", "ssan_transformer")
def ssan_transformer(args):
    SSANTransformerModel.fill_defaults(args)
    base_architecture(args)


@register_model_architecture("ssan_transformer", "ssan_transformer_iwslt_de_en")
def ssan_transformer_iwslt_de_en(args):
    SSANTransformerModel.fill_defaults(args)
    transformer_iwslt_de_en(args)


@register_model_architecture("ssan_transformer", "ssan_transformer_wmt_en_de")
def ssan_transformer_wmt_en_de(args):
    SSANTransformerModel.fill_defaults(args)
    transformer_wmt_en_de(args)


@register_model_architecture("ssan_transformer", "ssan_transformer_vaswani_wmt_en_de_big")
def ssan_transformer_vaswani_wmt_en_de_big(args):
    SSANTransformerModel.fill_defaults(args)
    transformer_vaswani_wmt_en_de_big(args)
