"""The registry of encoder variants: name -> the VariantTransformerModel that declares it.

Encoder-only models (the SRL tagger) offer every entry as a choice of their own
(``--srl-encoder``), with the variant's own option declarations and layer builder.
"""

from typing import Dict, Optional

from fairseq.models.transformer.transformer_legacy import TransformerModel

from .biblosan_transformer import BiBloSANTransformerModel
from .disan_transformer import DiSANTransformerModel
from .resa_transformer import ReSATransformerModel
from .selective_transformer import SelectiveTransformerModel
from .ssan_transformer import SSANTransformerModel

# "san" is fairseq's own self-attention (no variant layer); "selective" takes its selector from
# --encoder-selector. It comes after "ssan": both offer SSAN's options, and the one parser of an
# encoder-only model gets them from the first (VariantTransformerModel.add_variant_args).
ENCODER_VARIANTS: Dict[str, Optional[type]] = {
    "san": None,
    "ssan": SSANTransformerModel,
    "disan": DiSANTransformerModel,
    "biblosan": BiBloSANTransformerModel,
    "resa": ReSATransformerModel,
    "selective": SelectiveTransformerModel,
}


def add_encoder_args(parser, option: str):
    """Options of an encoder-only model built on the registry: fairseq's Transformer options
    (encoder shape, dropout, positions; the decoder's go unused), every variant's own options,
    and ``option`` (e.g. ``--srl-encoder``) choosing the variant (default san)."""
    TransformerModel.add_args(parser)
    for variant in ENCODER_VARIANTS.values():
        if variant is not None:
            variant.add_variant_args(parser)
    parser.add_argument(option, choices=sorted(ENCODER_VARIANTS),
                        help="self-attention of the encoder layers: san = fairseq's own, "
                             "or an encoder variant; default san")
