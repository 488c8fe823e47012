"""``biblosan_transformer``: fairseq's Transformer whose encoder self-attention is Bi-BloSA.

Each selected encoder layer's self-attention sublayer is [mBloSA_fw; mBloSA_bw] (C/2 each, see
modules.biblosan) followed by an output projection C -> C; residual, layer norm and FFN are
fairseq's. Options are prefixed ``--biblosan-``. Architectures mirror fairseq's shapes.
"""

from functools import partial

from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_iwslt_de_en,
    transformer_wmt_en_de,
)

from ..modules.biblosan import BiBloSANAttention
from .disan_transformer import check_even_width
from .variant_transformer import VariantTransformerModel, parse_layer_list

BIBLOSAN_DEFAULTS = dict(biblosan_layers="all", biblosan_block_length=0)


def build_biblosan_attention(embed_dim, cfg, block_length):
    return BiBloSANAttention(embed_dim, block_length=block_length)


@register_model("biblosan_transformer")
class BiBloSANTransformerModel(VariantTransformerModel):
    """Transformer with bi-directional block self-attention (Bi-BloSAN) in the encoder."""

    variant_defaults = BIBLOSAN_DEFAULTS

    @staticmethod
    def add_args(parser):
        VariantTransformerModel.add_args(parser)
        group = parser.add_argument_group("bi-directional block self-attention (Bi-BloSAN)")
        group.add_argument("--biblosan-layers", type=str, metavar="all|I,J,...",
                           help="encoder layers (0-based) using Bi-BloSA; default: all")
        group.add_argument("--biblosan-block-length", type=int, metavar="R",
                           help="block length r >= 0; 0 = ceil((2T)^(1/3)) per batch (default)")

    @classmethod
    def variant_layers(cls, args):
        return parse_layer_list(args.biblosan_layers, args.encoder_layers, "--biblosan-layers")

    @classmethod
    def build_variant_attention(cls, args):
        if args.biblosan_block_length < 0:
            raise ValueError(
                f"--biblosan-block-length must be >= 0 (0 = ceil((2T)^(1/3))), got {args.biblosan_block_length}"
            )
        check_even_width(args, "biblosan_transformer")
        return partial(build_biblosan_attention, block_length=args.biblosan_block_length)


@register_model_architecture("biblosan_transformer", "biblosan_transformer")
def biblosan_transformer(args):
    BiBloSANTransformerModel.fill_defaults(args)
    base_architecture(args)


@register_model_architecture("biblosan_transformer", "biblosan_transformer_iwslt_de_en")
def biblosan_transformer_iwslt_de_en(args):
    BiBloSANTransformerModel.fill_defaults(args)
    transformer_iwslt_de_en(args)


@register_model_architecture("biblosan_transformer", "biblosan_transformer_wmt_en_de")
def biblosan_transformer_wmt_en_de(args):
    BiBloSANTransformerModel.fill_defaults(args)
    transformer_wmt_en_de(args)
