"""fairseq's Transformer encoder layer with a different self-attention sublayer.

Only the ``build_self_attention`` hook changes: residual, layer norm and FFN are fairseq's
own. The attention module must accept fairseq's self-attention call
``attn(query=x, key=x, value=x, key_padding_mask=pad, need_weights=False, attn_mask=mask)``
with x: T x B x C, pad: B x T (True at pads) or None, and return ``(T x B x C, weights|None)``.
A module that selects also derives from ``selection.SelectionReporter``: its forward reports a
``SelectionStats`` record, which the encoder takes (models.variant_transformer).
"""

from typing import Callable

import torch.nn as nn
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase


def check_encoder_self_attention_call(module, query, key, value, incremental_state, static_kv,
                                      before_softmax) -> None:
    """Refuse what fairseq's MultiheadAttention accepts but an encoder sublayer cannot do."""
    name = type(module).__name__
    if incremental_state is not None or static_kv or before_softmax:
        raise ValueError(f"{name} is encoder self-attention only")
    for other in (key, value):
        if other is not None and other is not query:
            raise ValueError(f"{name} requires key is value is query")


# build_attention(embed_dim, cfg) -> attention module; cfg is fairseq's TransformerConfig.
AttentionBuilder = Callable[[int, object], nn.Module]


class AttentionVariantEncoderLayer(TransformerEncoderLayerBase):
    """fairseq's encoder layer whose ``build_self_attention`` hook calls ``build_attention``."""

    def __init__(self, cfg, build_attention: AttentionBuilder, return_fc: bool = False):
        # a plain attribute may be set before nn.Module.__init__; the base __init__ calls the hook
        self.build_attention = build_attention
        super().__init__(cfg, return_fc=return_fc)

    def build_self_attention(self, embed_dim, cfg):
        return self.build_attention(embed_dim, cfg)
