"""``selective_transformer``: fairseq's Transformer whose attention selects with selectors from
the registry (modules/selectors; docs/selectors.md) at up to three sites: encoder
self-attention (``--encoder-selector NAME``, the layers of ``--selector-layers``), decoder
self-attention (``--decoder-selector``, causal) and encoder-decoder attention
(``--cross-selector``), every decoder layer for the last two. ``none`` keeps fairseq's attention
at a site (the default for the decoder sites, so older checkpoints are unchanged).

Options: the family's own (:class:`SelectiveOptions`) and every selector's, shared by the
sites; ``--decoder-selector-args`` / ``--cross-selector-args`` "KEY=VALUE,..." override a
selector's options at that site (e.g. ``--cross-selector-args topk=4``), and each declared once in its selector's module (SSAN's
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
from ..modules.selectors.registry import NO_SELECTOR, site_args
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
                          "(docs/selectors.md; gumbel is SSAN), or none (fairseq's)"},
    )
    decoder_selector: str = field(
        default=NO_SELECTOR,
        metadata={"help": "how every decoder layer's self-attention selects keys (causal: a "
                          "query ranks and uses only itself and earlier tokens): a registered "
                          "selector, or none (fairseq's attention)"},
    )
    cross_selector: str = field(
        default=NO_SELECTOR,
        metadata={"help": "how every decoder layer's encoder-decoder attention selects source "
                          "keys: a registered selector, or none (fairseq's attention)"},
    )
    decoder_selector_args: str = field(
        default="",
        metadata={"help": "the decoder site's own values of its selector's options, KEY=VALUE "
                          "comma-separated (e.g. topk=4); the others are shared"},
    )
    cross_selector_args: str = field(
        default="",
        metadata={"help": "the cross site's own values of its selector's options, as "
                          "--decoder-selector-args"},
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
        for option in ("--encoder-selector", "--decoder-selector", "--cross-selector"):
            if option in parser._option_string_actions:
                parser._option_string_actions[option].choices = [NO_SELECTOR, *SELECTORS]

    @classmethod
    def variant_layers(cls, args):
        if getattr(args, "encoder_selector", None) == NO_SELECTOR:
            return []
        return super().variant_layers(args)

    @classmethod
    def build_variant_attention(cls, args, embed_dim, cfg):
        name = args.encoder_selector
        return selector_class(name).build_attention(
            site_args(args, name, "encoder"),
            embed_dim,
            cfg.encoder.attention_heads,
            dropout=cfg.attention_dropout,
            q_noise=cfg.quant_noise.pq,
            qn_block_size=cfg.quant_noise.pq_block_size,
        )

    @classmethod
    def decoder_attention_builders(cls, args):
        builders = {}
        for site in ("decoder", "cross"):
            name = getattr(args, f"{site}_selector", None) or NO_SELECTOR
            if name == NO_SELECTOR:
                builders[site] = None
                continue
            option = f"--{site}-selector"
            selector_args = site_args(args, name, site, getattr(args, f"{site}_selector_args", ""), option)

            def build(layer_index, embed_dim, cfg, name=name, site=site, selector_args=selector_args):
                return selector_class(name).build_attention(
                    selector_args, embed_dim, cfg.decoder.attention_heads,
                    dropout=cfg.attention_dropout, q_noise=cfg.quant_noise.pq,
                    qn_block_size=cfg.quant_noise.pq_block_size, site=site,
                    kdim=cfg.encoder.embed_dim)

            builders[site] = build
        return builders


register_variant_architectures(
    "selective_transformer", SelectiveTransformerModel, {**FAIRSEQ_SHAPES, **LARGE_SHAPES}
)
