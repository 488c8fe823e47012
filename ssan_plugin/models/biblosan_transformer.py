"""``biblosan_transformer``: fairseq's Transformer whose encoder self-attention is Bi-BloSA.

Each variant layer's self-attention sublayer is [mBloSA_fw; mBloSA_bw] (C/2 each, see
modules.biblosan) followed by an output projection C -> C; residual, layer norm and FFN are
fairseq's. Options (``--biblosan-``) are declared once in :class:`BiBloSANOptions`.
"""

from dataclasses import dataclass, field

from fairseq.dataclass import FairseqDataclass
from fairseq.models import register_model

from ..modules.biblosan import BiBloSANAttention
from .architectures import FAIRSEQ_SHAPES
from .variant_transformer import VariantTransformerModel, register_variant_architectures


@dataclass
class BiBloSANOptions(FairseqDataclass):
    biblosan_layers: str = field(
        default="all", metadata={"help": "encoder layers (0-based) using Bi-BloSA: all or I,J,..."}
    )
    biblosan_block_length: int = field(
        default=0, metadata={"help": "block length r >= 0; 0 = ceil((2n)^(1/3)) per sentence "
                                     "of n tokens"}
    )


@register_model("biblosan_transformer")
class BiBloSANTransformerModel(VariantTransformerModel):
    """Transformer with bi-directional block self-attention (Bi-BloSAN) in the encoder."""

    options = BiBloSANOptions
    layers_option = "biblosan_layers"

    @classmethod
    def build_variant_attention(cls, args, embed_dim, cfg):
        return BiBloSANAttention(embed_dim, block_length=args.biblosan_block_length)


register_variant_architectures("biblosan_transformer", BiBloSANTransformerModel, FAIRSEQ_SHAPES)
