"""``disan_transformer``: fairseq's Transformer whose encoder self-attention is DiSA.

Each selected encoder layer's self-attention sublayer is [DiSA_fw; DiSA_bw] (C/2 each, see
modules.disan) followed by an output projection C -> C; residual, layer norm and FFN are
fairseq's. Options are prefixed ``--disan-``. Architectures mirror fairseq's shapes.
"""

from functools import partial

from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_wmt_en_de,
)

from ..modules.disan import DiSANAttention
from .variant_transformer import VariantTransformerModel, parse_layer_list

DISAN_DEFAULTS = dict(disan_layers="all", disan_impl="blocked", disan_query_block=0)


def check_even_width(args, option_prefix):
    if args.encoder_embed_dim % 2:
        raise ValueError(
            f"{option_prefix}: --encoder-embed-dim must be even (two directions of C/2), "
            f"got {args.encoder_embed_dim}"
        )


def build_disan_attention(embed_dim, cfg, implementation, query_block):
    return DiSANAttention(embed_dim, implementation=implementation, query_block=query_block)


@register_model("disan_transformer")
class DiSANTransformerModel(VariantTransformerModel):
    """Transformer with directional multi-dimensional self-attention (DiSAN) in the encoder."""

    variant_defaults = DISAN_DEFAULTS

    @staticmethod
    def add_args(parser):
        VariantTransformerModel.add_args(parser)
        group = parser.add_argument_group("directional self-attention (DiSAN)")
        group.add_argument("--disan-layers", type=str, metavar="all|I,J,...",
                           help="encoder layers (0-based) using DiSA; default: all")
        group.add_argument("--disan-impl", choices=["blocked", "naive"],
                           help="blocked: query blocks recomputed in backward, never the whole "
                                "B x T x T x C tensor (default); naive: reference form")
        group.add_argument("--disan-query-block", type=int, metavar="N",
                           help="queries per block of the blocked form, >= 0; 0 = automatic "
                                "(about 4M elements per block tensor; default)")

    @classmethod
    def variant_layers(cls, args):
        return parse_layer_list(args.disan_layers, args.encoder_layers, "--disan-layers")

    @classmethod
    def build_variant_attention(cls, args):
        if args.disan_impl not in ("blocked", "naive"):
            raise ValueError(f"--disan-impl must be 'blocked' or 'naive', got {args.disan_impl!r}")
        if args.disan_query_block < 0:
            raise ValueError(f"--disan-query-block must be >= 0 (0 = automatic), got {args.disan_query_block}")
        check_even_width(args, "disan_transformer")
        return partial(
            build_disan_attention, implementation=args.disan_impl, query_block=args.disan_query_block
        )


@register_model_architecture("disan_transformer", "disan_transformer")
def disan_transformer(args):
    DiSANTransformerModel.fill_defaults(args)
    base_architecture(args)


@register_model_architecture("disan_transformer", "disan_transformer_iwslt_de_en")
def disan_transformer_iwslt_de_en(args):
    DiSANTransformerModel.fill_defaults(args)
    transformer_iwslt_de_en(args)


@register_model_architecture("disan_transformer", "disan_transformer_wmt_en_de")
def disan_transformer_wmt_en_de(args):
    DiSANTransformerModel.fill_defaults(args)
    transformer_wmt_en_de(args)
