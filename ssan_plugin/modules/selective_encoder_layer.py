"""A fairseq Transformer encoder layer whose self-attention is selective (SSAN).

Only the ``build_self_attention`` hook changes: residual, layer norm and FFN are fairseq's own.
"""

from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

from .selective_attention import SelectiveMultiheadAttention


class SelectiveTransformerEncoderLayer(TransformerEncoderLayerBase):
    """Args: cfg (fairseq TransformerConfig); tau, selection ('hard'|'soft'),
    scale_policy_logits: the selector options (see SelectiveMultiheadAttention)."""

    def __init__(self, cfg, tau: float, selection: str, scale_policy_logits: bool, return_fc=False):
        # plain attributes may be set before nn.Module.__init__; build_self_attention needs them
        self.selector_options = dict(
            tau=tau, selection=selection, scale_policy_logits=scale_policy_logits
        )
        super().__init__(cfg, return_fc=return_fc)

    def build_self_attention(self, embed_dim, cfg):
        return SelectiveMultiheadAttention(
            embed_dim,
            cfg.encoder.attention_heads,
            dropout=cfg.attention_dropout,
            q_noise=self.quant_noise,
            qn_block_size=self.quant_noise_block_size,
            **self.selector_options,
        )
