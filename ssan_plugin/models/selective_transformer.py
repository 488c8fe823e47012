"""``selective_transformer``: fairseq's Transformer whose encoder self-attention uses a selector
from the registry (``--encoder-selector NAME``, modules/selectors; docs/selectors.md).

Options: the family's own (:class:`SelectiveOptions`: ``--selector-layers``,
``--encoder-selector``) and every selector's, each declared once in its selector's module (SSAN's
``--ssan-...`` for ``gumbel`` and ``soft``, ``--topk``, ``--entmax-...``, ``--gate-...``,
``--fixed-mask-...``); a selector reads only its own. Architectures: ``selective_transformer``
plus every shape suffix of models.architectures, as for ``ssan_transformer``.

``ssan_transformer`` is this family with the selector fixed to ``gumbel`` (``soft`` with
``--ssan-selection soft``): both build SSAN's layer through the same function with the same
options, so they have the same parameters under the same names and compute the same thing.

(``--encoder-selector`` starts with ``encoder_``, which fairseq's TransformerConfig files under
``cfg.encoder``; the option is read from the model's args, where both spellings reach it.)
"""

from dataclasses import dataclass, field
from typing import List

from fairseq.dataclass import FairseqDataclass
from fairseq.models import register_model

from ..modules.selectors import SELECTORS, selector_class, selector_options
from .architectures import FAIRSEQ_SHAPES, LARGE_SHAPES
from .variant_transformer import VariantTransformerModel, register_variant_architectures


@dataclass
class SelectiveOptions(FairseqDataclass):
    selector_layers: str = field(
        default="all", metadata={"help": "encoder layers (0-based) that use the selector: all or "
                                         "I,J,..."}
    )
    encoder_selector: str = field(
        default="gumbel",
        metadata={"help": "how the encoder's self-attention selects keys: a registered selector "
                          "(docs/selectors.md); gumbel is SSAN"},
    )


@register_model("selective_transformer")
class SelectiveTransformerModel(VariantTransformerModel):
    """Transformer whose encoder self-attention selects with ``--encoder-selector``."""

    options = SelectiveOptions
    layers_option = "selector_layers"

    @classmethod
    def option_dataclasses(cls) -> List[type]:
        return [SelectiveOptions, *selector_options()]

    @classmethod
    def add_variant_args(cls, parser) -> None:
        """The family's options and every registered selector's; ``--encoder-selector``'s
        choices are the registry's when the parser is made (a selector registered by a user dir
        included)."""
        super().add_variant_args(parser)
        parser._option_string_actions["--encoder-selector"].choices = list(SELECTORS)

    @classmethod
    def build_variant_attention(cls, args, embed_dim, cfg):
        return selector_class(args.encoder_selector).build_attention(
            args,
            embed_dim,
            cfg.encoder.attention_heads,
            dropout=cfg.attention_dropout,
            q_noise=cfg.quant_noise.pq,
            qn_block_size=cfg.quant_noise.pq_block_size,
        )


register_variant_architectures(
    "selective_transformer", SelectiveTransformerModel, {**FAIRSEQ_SHAPES, **LARGE_SHAPES}
)
