"""fairseq's Transformer decoder layer with other attention sublayers.

Only the ``build_self_attention`` and ``build_encoder_attention`` hooks change: residuals, layer
norms, the FFN and the incremental decoding protocol are fairseq's own. An attention module
given here must accept fairseq's calls of those sublayers (``TransformerDecoderLayerBase
.forward``: ``incremental_state``, ``static_kv`` for the encoder-decoder attention, weights on
request) and keep its own decoding state (modules.selectors.base.SelectorMultiheadAttention).
"""

from typing import Callable, Optional

import torch.nn as nn
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase

from ..errors import OptionError

# build(embed_dim, cfg) -> attention module, or None for fairseq's own
DecoderAttentionBuilder = Optional[Callable[[int, object], nn.Module]]


class AttentionVariantDecoderLayer(TransformerDecoderLayerBase):
    """fairseq's decoder layer whose self-attention is ``build_self`` (causal) and whose
    encoder-decoder attention is ``build_cross``; None keeps fairseq's module at that site."""

    def __init__(self, cfg, build_self: DecoderAttentionBuilder, build_cross: DecoderAttentionBuilder,
                 no_encoder_attn: bool = False):
        # plain attributes may be set before nn.Module.__init__; the base __init__ calls the hooks
        self.build_self = build_self
        self.build_cross = build_cross
        if build_self is not None and cfg.cross_self_attention:
            raise OptionError("--cross-self-attention with a decoder selector: the decoder site "
                              "selects among the target's own keys; drop one of the two")
        super().__init__(cfg, no_encoder_attn=no_encoder_attn)

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        if self.build_self is None:
            return super().build_self_attention(embed_dim, cfg, add_bias_kv, add_zero_attn)
        if add_bias_kv or add_zero_attn:
            raise OptionError("a decoder selector does not take fairseq's add_bias_kv / "
                              "add_zero_attn keys")
        return self.build_self(embed_dim, cfg)

    def build_encoder_attention(self, embed_dim, cfg):
        if self.build_cross is None:
            return super().build_encoder_attention(embed_dim, cfg)
        return self.build_cross(embed_dim, cfg)
