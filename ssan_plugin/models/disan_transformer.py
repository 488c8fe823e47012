"""``disan_transformer``: fairseq's Transformer whose encoder self-attention is DiSA.

Each variant layer's self-attention sublayer is [DiSA_fw; DiSA_bw] (C/2 each, see
modules.disan) followed by an output projection C -> C; residual, layer norm and FFN are
fairseq's. Options (``--disan-``) are declared once in :class:`DiSANOptions`.
"""

from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import register_model

from ..modules.disan import DiSANAttention
from .architectures import FAIRSEQ_SHAPES
from .variant_transformer import VariantTransformerModel, register_variant_architectures


@dataclass
class DiSANOptions(FairseqDataclass):
    disan_layers: str = field(
        default="all", metadata={"help": "encoder layers (0-based) using DiSA: all or I,J,..."}
    )
    disan_impl: ChoiceEnum(["blocked", "naive"]) = field(
        default="blocked",
        metadata={"help": "blocked: query blocks recomputed in backward, never the whole "
                          "B x T x T x C tensor; naive: the reference form"},
    )
    disan_query_block: int = field(
        default=0,
        metadata={"help": "queries per block of the blocked form, >= 0; 0 = automatic (about "
                          "4M elements per block tensor)"},
    )


@register_model("disan_transformer")
class DiSANTransformerModel(VariantTransformerModel):
    """Transformer with directional multi-dimensional self-attention (DiSAN) in the encoder."""

    options = DiSANOptions
    layers_option = "disan_layers"

    @classmethod
    def build_variant_attention(cls, args, embed_dim, cfg):
        return DiSANAttention(
            embed_dim, implementation=args.disan_impl, query_block=args.disan_query_block
        )


register_variant_architectures("disan_transformer", DiSANTransformerModel, FAIRSEQ_SHAPES)
