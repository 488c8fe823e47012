"""``ssan_transformer``: fairseq's Transformer whose encoder layers select what they attend to.

Only the encoder-layer hook changes; the decoder, embeddings and every shape are fairseq's.
The model's forward adds ``extra["selection_stats"]``: one dict per selective encoder layer
(see SelectiveMultiheadAttention._statistics), read by the criterion.
"""

import logging
from typing import List, Optional

from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig
from fairseq.models.transformer.transformer_encoder import TransformerEncoder
from fairseq.models.transformer.transformer_legacy import (
    TransformerModel,
    base_architecture,
    transformer_iwslt_de_en,
    transformer_vaswani_wmt_en_de_big,
    transformer_wmt_en_de,
)

from ..modules import SelectiveTransformerEncoderLayer

logger = logging.getLogger(__name__)


def parse_selective_layers(spec: str, num_layers: int) -> List[int]:
    """``"all"`` or comma-separated 0-based layer indices -> sorted unique list."""
    if spec is None or str(spec).strip().lower() == "all":
        return list(range(num_layers))
    try:
        layers = sorted({int(tok) for tok in str(spec).split(",")})
    except ValueError:
        raise ValueError(
            f"--ssan-layers must be 'all' or comma-separated layer indices, got {spec!r}"
        ) from None
    bad = [i for i in layers if not 0 <= i < num_layers]
    if bad or not layers:
        raise ValueError(
            f"--ssan-layers {spec!r}: indices must lie in [0, {num_layers - 1}] "
            f"(the encoder has {num_layers} layers)"
        )
    return layers


def validate_ssan_args(args) -> List[int]:
    if not args.ssan_tau > 0:
        raise ValueError(f"--ssan-tau must be > 0, got {args.ssan_tau}")
    if args.ssan_selection not in ("hard", "soft"):
        raise ValueError(f"--ssan-selection must be 'hard' or 'soft', got {args.ssan_selection!r}")
    return parse_selective_layers(args.ssan_layers, args.encoder_layers)


class SSANTransformerEncoder(TransformerEncoder):
    """TransformerEncoder whose layers listed in ``args.ssan_layers`` are selective."""

    def __init__(self, args, dictionary, embed_tokens, return_fc=False):
        self.selective_layers = validate_ssan_args(args)
        self._layers_built = 0  # build_encoder_layer is called once per layer, in order
        super().__init__(args, dictionary, embed_tokens, return_fc=return_fc)

    def build_encoder_layer(self, args):
        index = self._layers_built
        self._layers_built += 1
        if index not in self.selective_layers:
            return super().build_encoder_layer(args)
        cfg = TransformerConfig.from_namespace(args)
        return SelectiveTransformerEncoderLayer(
            cfg,
            tau=self.args.ssan_tau,
            selection=self.args.ssan_selection,
            scale_policy_logits=self.args.ssan_scale_policy_logits,
            return_fc=self.return_fc,
        )

    def forward(self, src_tokens, src_lengths=None, return_all_hiddens=False, token_embeddings=None):
        out = super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings)
        out["selection_stats"] = [
            dict(layer.self_attn.selection_stats, layer=index)
            for index, layer in enumerate(self.layers)
            if isinstance(layer, SelectiveTransformerEncoderLayer)
        ]
        return out


@register_model("ssan_transformer")
class SSANTransformerModel(TransformerModel):
    """Transformer with selective self-attention in the encoder (SSAN)."""

    @staticmethod
    def add_args(parser):
        TransformerModel.add_args(parser)
        group = parser.add_argument_group("selective self-attention (SSAN)")
        group.add_argument("--ssan-layers", type=str, metavar="all|I,J,...",
                           help="encoder layers (0-based) that select; default: all")
        group.add_argument("--ssan-tau", type=float, metavar="T",
                           help="Gumbel-sigmoid temperature, > 0 (default 0.5)")
        group.add_argument("--ssan-selection", choices=["hard", "soft"],
                           help="hard: straight-through 0/1 samples in training, 1[pi > 0.5] "
                                "in eval; soft: A = pi (default hard)")
        group.add_argument("--ssan-scale-policy-logits", action="store_true",
                           help="divide the policy logits Q_p K_p^T by sqrt(head dim) "
                                "(the reference does not)")

    @classmethod
    def build_model(cls, args, task):
        ssan_transformer(args)  # fill ssan defaults for checkpoints of older versions
        validate_ssan_args(args)
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return SSANTransformerEncoder(args, src_dict, embed_tokens)

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


SSAN_DEFAULTS = dict(
    ssan_layers="all", ssan_tau=0.5, ssan_selection="hard", ssan_scale_policy_logits=False
)


def ssan_defaults(args):
    for name, default in SSAN_DEFAULTS.items():
        if getattr(args, name, None) is None:
            setattr(args, name, default)


@register_model_architecture("ssan_transformer", "ssan_transformer")
def ssan_transformer(args):
    ssan_defaults(args)
    base_architecture(args)


@register_model_architecture("ssan_transformer", "ssan_transformer_iwslt_de_en")
def ssan_transformer_iwslt_de_en(args):
    ssan_defaults(args)
    transformer_iwslt_de_en(args)


@register_model_architecture("ssan_transformer", "ssan_transformer_wmt_en_de")
def ssan_transformer_wmt_en_de(args):
    ssan_defaults(args)
    transformer_wmt_en_de(args)


@register_model_architecture("ssan_transformer", "ssan_transformer_vaswani_wmt_en_de_big")
def ssan_transformer_vaswani_wmt_en_de_big(args):
    ssan_defaults(args)
    transformer_vaswani_wmt_en_de_big(args)
