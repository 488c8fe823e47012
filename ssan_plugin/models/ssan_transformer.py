"""``ssan_transformer``: fairseq's Transformer whose encoder layers select what they attend to.

Options (prefixed ``--ssan-`` so that fairseq's TransformerConfig leaves them alone): the
layer list and selection mode, :class:`SSANOptions`, and SSAN's own, declared once by the
``gumbel`` selector (``SSANSelectorOptions``). Architectures: ``ssan_transformer`` plus every shape
suffix of models.architectures (``_small``, ``_iwslt_de_en``, ``_wmt_en_de``,
``_vaswani_wmt_en_de_big``), each exactly fairseq's ``transformer*`` shape.
"""

from dataclasses import dataclass, field

from typing import List

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import register_model

from ..modules.selective_weights import STRAIGHT_THROUGH_EXP_CAP
from ..modules.selectors import selector_class
from ..modules.selectors.gumbel import SSANSelectorOptions
from .architectures import FAIRSEQ_SHAPES, LARGE_SHAPES
from .variant_transformer import VariantTransformerModel, register_variant_architectures


@dataclass
class SSANOptions(FairseqDataclass):
    """The layer list and the selection mode: ``--ssan-selection hard`` is the selector
    ``gumbel`` of the selective family, ``soft`` its ``soft``."""

    ssan_layers: str = field(
        default="all", metadata={"help": "encoder layers (0-based) that select: all or I,J,..."}
    )
    ssan_selection: ChoiceEnum(["hard", "soft"]) = field(
        default="hard",
        metadata={"help": "hard: straight-through 0/1 samples in training, 1[pi > 0.5] in "
                          "eval; soft: A = pi"},
    )


@register_model("ssan_transformer")
class SSANTransformerModel(VariantTransformerModel):
    """Transformer with selective self-attention in the encoder (SSAN)."""

    options = SSANOptions
    layers_option = "ssan_layers"

    @classmethod
    def option_dataclasses(cls) -> List[type]:
        return [SSANOptions, SSANSelectorOptions]
    # options missing from older checkpoints' args: what those checkpoints trained with
    legacy_defaults = {"ssan_straight_through_cap": STRAIGHT_THROUGH_EXP_CAP}

    @classmethod
    def build_variant_attention(cls, args, embed_dim, cfg):
        selector = "soft" if args.ssan_selection == "soft" else "gumbel"
        return selector_class(selector).build_attention(
            args,
            embed_dim,
            cfg.encoder.attention_heads,
            dropout=cfg.attention_dropout,
            q_noise=cfg.quant_noise.pq,
            qn_block_size=cfg.quant_noise.pq_block_size,
        )


register_variant_architectures(
    "ssan_transformer", SSANTransformerModel, {**FAIRSEQ_SHAPES, **LARGE_SHAPES}
)
