"""The registry of encoder variants: name -> the VariantTransformerModel that declares it.

Encoder-only models (the SRL tagger) offer every entry as a choice of their own
(``--srl-encoder``), with the variant's own option declarations and layer builder.
"""

from typing import Dict, Optional

from .biblosan_transformer import BiBloSANTransformerModel
from .disan_transformer import DiSANTransformerModel
from .resa_transformer import ReSATransformerModel
from .ssan_transformer import SSANTransformerModel

# "san" is fairseq's own self-attention (no variant layer)
ENCODER_VARIANTS: Dict[str, Optional[type]] = {
    "san": None,
    "ssan": SSANTransformerModel,
    "disan": DiSANTransformerModel,
    "biblosan": BiBloSANTransformerModel,
    "resa": ReSATransformerModel,
}
