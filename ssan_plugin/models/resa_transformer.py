"""``resa_transformer``: fairseq's Transformer whose encoder self-attention is ReSA.

Each selected encoder layer's self-attention sublayer is ReSA (modules.resa): two RSS modules
pick head and dependent tokens, masked multi-dim attention among them, mean context for
unselected heads, fusion gate, output projection C -> C. Train the RSS by REINFORCE with
``--criterion resa_label_smoothed_cross_entropy`` (the log-probabilities reach the RSS only
through that criterion's policy loss), or with ``--resa-estimator gumbel`` (straight-through).
The model receives the update number through fairseq's ``set_num_updates`` for the warm-up
(kept in the checkpoint, so generation after training selects with the policy).
"""

import math
from functools import partial

from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_wmt_en_de,
)

from ..modules.resa import ESTIMATORS, RESA_DIRECTIONS, ReSAAttention
from .disan_transformer import check_even_width
from .variant_transformer import VariantTransformerModel, parse_layer_list

RESA_DEFAULTS = dict(
    resa_layers="all",
    resa_estimator="reinforce",
    resa_warmup_updates=0,
    resa_tau=0.5,
    resa_direction="none",
    resa_rss_hidden=0,
    resa_query_block=0,
    resa_sample_at_inference=False,
)


def build_resa_attention(embed_dim, cfg, **options):
    return ReSAAttention(embed_dim, **options)


@register_model("resa_transformer")
class ReSATransformerModel(VariantTransformerModel):
    """Transformer with reinforced self-attention (ReSA) in the encoder."""

    variant_defaults = RESA_DEFAULTS

    @staticmethod
    def add_args(parser):
        VariantTransformerModel.add_args(parser)
        group = parser.add_argument_group("reinforced self-attention (ReSA)")
        group.add_argument("--resa-layers", type=str, metavar="all|I,J,...",
                           help="encoder layers (0-based) using ReSA; default: all")
        group.add_argument("--resa-estimator", choices=list(ESTIMATORS),
                           help="reinforce: Bernoulli samples, trained by the criterion's "
                                "policy gradient (default); gumbel: straight-through "
                                "Gumbel-sigmoid, trained by backprop")
        group.add_argument("--resa-warmup-updates", type=int, metavar="N",
                           help="select every token (RSS not trained) for the first N >= 0 "
                                "updates (default 0)")
        group.add_argument("--resa-tau", type=float, metavar="T",
                           help="Gumbel-sigmoid temperature, > 0 (gumbel only; default 0.5)")
        group.add_argument("--resa-sample-at-inference", action="store_true",
                           help="sample the selection at inference too (the reference's "
                                "behaviour); default: deterministic p > 0.5")
        group.add_argument("--resa-direction", choices=list(RESA_DIRECTIONS),
                           help="none: one block of width C, i != j only (default); bi: "
                                "forward and backward blocks of C/2")
        group.add_argument("--resa-rss-hidden", type=int, metavar="H",
                           help="hidden width of each RSS, >= 0; 0 = embed dim (default)")
        group.add_argument("--resa-query-block", type=int, metavar="N",
                           help="queries per block of the attention, >= 0; 0 = automatic")

    @classmethod
    def variant_layers(cls, args):
        return parse_layer_list(args.resa_layers, args.encoder_layers, "--resa-layers")

    @classmethod
    def build_variant_attention(cls, args):
        if args.resa_estimator not in ESTIMATORS:
            raise ValueError(f"--resa-estimator must be one of {ESTIMATORS}, got {args.resa_estimator!r}")
        if args.resa_direction not in RESA_DIRECTIONS:
            raise ValueError(f"--resa-direction must be one of {RESA_DIRECTIONS}, got {args.resa_direction!r}")
        for option, value in (("--resa-warmup-updates", args.resa_warmup_updates),
                              ("--resa-rss-hidden", args.resa_rss_hidden),
                              ("--resa-query-block", args.resa_query_block)):
            if value < 0:
                raise ValueError(f"{option} must be >= 0, got {value}")
        if not 0 < args.resa_tau < math.inf:
            raise ValueError(f"--resa-tau must be finite and > 0, got {args.resa_tau}")
        if args.resa_direction == "bi":
            check_even_width(args, "resa_transformer --resa-direction bi")
        return partial(
            build_resa_attention,
            estimator=args.resa_estimator,
            warmup_updates=args.resa_warmup_updates,
            tau=args.resa_tau,
            sample_at_inference=bool(args.resa_sample_at_inference),
            direction=args.resa_direction,
            rss_hidden=args.resa_rss_hidden,
            query_block=args.resa_query_block,
        )


@register_model_architecture("resa_transformer", "resa_transformer")
def resa_transformer(args):
    ReSATransformerModel.fill_defaults(args)
    base_architecture(args)


@register_model_architecture("resa_transformer", "resa_transformer_iwslt_de_en")
def resa_transformer_iwslt_de_en(args):
    ReSATransformerModel.fill_defaults(args)
    transformer_iwslt_de_en(args)


@register_model_architecture("resa_transformer", "resa_transformer_wmt_en_de")
def resa_transformer_wmt_en_de(args):
    ReSATransformerModel.fill_defaults(args)
    transformer_wmt_en_de(args)
