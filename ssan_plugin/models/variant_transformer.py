"""Base classes shared by every encoder variant (SSAN, DiSAN, Bi-BloSAN, ReSA).

A variant model is fairseq's legacy ``TransformerModel`` whose encoder layers listed by
``variant_layers(args)`` get another self-attention sublayer (``build_variant_attention``);
everything else (decoder, embeddings, shapes, the other layers) is fairseq's. The model's
forward adds ``extra["selection_stats"]``: one dict per variant layer that reports statistics
(its attention module's ``selection_stats``, plus ``layer``: the 0-based encoder layer index).
"""

from abc import ABCMeta, abstractmethod
from typing import Dict, List, Optional

from fairseq.models.transformer import TransformerConfig
from fairseq.models.transformer.transformer_encoder import TransformerEncoder
from fairseq.models.transformer.transformer_legacy import TransformerModel

from ..modules import AttentionVariantEncoderLayer


def parse_layer_list(spec, num_layers: int, option: str) -> List[int]:
    """``"all"`` or comma-separated 0-based layer indices -> sorted unique list."""
    if spec is None or str(spec).strip().lower() == "all":
        return list(range(num_layers))
    try:
        layers = sorted({int(tok) for tok in str(spec).split(",")})
    except ValueError:
        raise ValueError(
            f"{option} must be 'all' or comma-separated layer indices, got {spec!r}"
        ) from None
    bad = [i for i in layers if not 0 <= i < num_layers]
    if bad or not layers:
        raise ValueError(
            f"{option} {spec!r}: indices must lie in [0, {num_layers - 1}] "
            f"(the encoder has {num_layers} layers)"
        )
    return layers


class VariantTransformerEncoder(TransformerEncoder):
    """TransformerEncoder whose layers in ``variant_layers`` use ``build_attention``.

    Args: args (namespace), dictionary, embed_tokens as fairseq's; variant_layers: 0-based
    indices; build_attention(embed_dim, cfg) -> attention module (see modules.encoder_layer).
    """

    def __init__(self, args, dictionary, embed_tokens, variant_layers, build_attention):
        self.variant_layers = list(variant_layers)
        self.build_attention = build_attention
        self._layers_built = 0  # build_encoder_layer is called once per layer, in order
        super().__init__(args, dictionary, embed_tokens)

    def build_encoder_layer(self, args):
        index = self._layers_built
        self._layers_built += 1
        if index not in self.variant_layers:
            return super().build_encoder_layer(args)
        cfg = TransformerConfig.from_namespace(args)
        return AttentionVariantEncoderLayer(cfg, self.build_attention, return_fc=self.return_fc)

    def forward(self, src_tokens, src_lengths=None, return_all_hiddens=False, token_embeddings=None):
        out = super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings)
        stats = []
        for index, layer in enumerate(self.layers):
            layer_stats = getattr(layer.self_attn, "selection_stats", None)
            if layer_stats is not None:
                stats.append(dict(layer_stats, layer=index))
                layer.self_attn.selection_stats = None  # the output owns them (and their graph)
        out["selection_stats"] = stats
        return out


class VariantTransformerModel(TransformerModel, metaclass=ABCMeta):
    """Subclasses set ``variant_defaults`` and implement ``variant_layers(args)`` and
    ``build_variant_attention(args)`` (both validate their options and raise ValueError)."""

    #: option name -> default; filled in where args lack them (also args of older checkpoints)
    variant_defaults: Dict[str, object] = {}

    @classmethod
    def fill_defaults(cls, args) -> None:
        for name, default in cls.variant_defaults.items():
            if getattr(args, name, None) is None:
                setattr(args, name, default)

    @classmethod
    def build_model(cls, args, task):
        cls.fill_defaults(args)
        cls.variant_layers(args)  # validate every option before anything is built
        cls.build_variant_attention(args)
        return super().build_model(args, task)

    @classmethod
    @abstractmethod
    def variant_layers(cls, args) -> List[int]:
        """0-based encoder layers that get the variant attention (validated)."""

    @classmethod
    @abstractmethod
    def build_variant_attention(cls, args):
        """-> build_attention(embed_dim, cfg) for the variant layers (options validated)."""

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return VariantTransformerEncoder(
            args, src_dict, embed_tokens, cls.variant_layers(args), cls.build_variant_attention(args)
        )

    def forward(
        self,
        src_tokens,
        src_lengths,
        prev_output_tokens,
        return_all_hiddens: bool = True,
        features_only: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
    ):
        encoder_out = self.encoder(
            src_tokens, src_lengths=src_lengths, return_all_hiddens=return_all_hiddens
        )
        x, extra = self.decoder(
            prev_output_tokens,
            encoder_out=encoder_out,
            features_only=features_only,
            alignment_layer=alignment_layer,
            alignment_heads=alignment_heads,
            src_lengths=src_lengths,
            return_all_hiddens=return_all_hiddens,
        )
        extra["selection_stats"] = encoder_out["selection_stats"]
        return x, extra
