"""What every encoder variant shares (SSAN, DiSAN, Bi-BloSAN, ReSA).

A variant model is fairseq's legacy ``TransformerModel`` whose encoder layers listed in one
option (``--ssan-layers`` etc.) get another self-attention sublayer; everything else (decoder,
embeddings, shapes, the other layers) is fairseq's. A variant declares, once:

- ``options``: a dataclass of its own options (names prefixed, e.g. ``ssan_tau``; defaults and
  help live there only; ``add_args`` and the architecture functions are generated from it);
- ``layers_option``: the field that lists the variant layers (``"all"`` or ``I,J,...``);
- ``build_variant_attention(args, embed_dim, cfg)``: the attention module of one variant layer
  (the module validates its own arguments).

:func:`register_variant_architectures` registers the variant's architectures from one table of
fairseq shapes. The encoder returns, in ``encoder_out["selection_stats"]``, the list of
:class:`~ssan_plugin.modules.selection.SelectionStats` records of its selective layers (layer
order); the model copies the list into ``extra["selection_stats"]`` for the criterion, followed
by the records of a decoder whose attention selects too (``decoder_attention_builders``:
:class:`VariantTransformerDecoder`, decoder self-attention then cross attention per layer).
"""

import dataclasses
from abc import ABCMeta, abstractmethod
from typing import Callable, ClassVar, Dict, List, Optional

import torch.nn as nn
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.distributed import fsdp_wrap
from fairseq.models import register_model_architecture
from fairseq.models.transformer import TransformerConfig
from fairseq.models.transformer.transformer_decoder import TransformerDecoder
from fairseq.models.transformer.transformer_encoder import TransformerEncoderBase
from fairseq.models.transformer.transformer_legacy import TransformerModel
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

from ..modules import AttentionVariantEncoderLayer
from ..modules.decoder_layer import AttentionVariantDecoderLayer, DecoderAttentionBuilder
from ..modules.selection import (SelectionReporter, SelectionStats, layer_label,
                                 no_selection_statistics)
from ..errors import OptionError
from ..modules.selectors.base import SITE_OPTIONS, SelectorMultiheadAttention, tensor_name

# build_attention(layer_index, embed_dim, cfg) -> the self-attention module of that layer
LayerAttentionBuilder = Callable[[int, int, TransformerConfig], nn.Module]


def parse_layer_list(spec, num_layers: int, option: str) -> List[int]:
    """``"all"`` or comma-separated 0-based layer indices -> sorted unique list."""
    if spec is None or str(spec).strip().lower() == "all":
        return list(range(num_layers))
    try:
        layers = sorted({int(tok) for tok in str(spec).split(",")})
    except ValueError:
        raise OptionError(
            f"{option} must be 'all' or comma-separated layer indices, got {spec!r}"
        ) from None
    bad = [i for i in layers if not 0 <= i < num_layers]
    if bad or not layers:
        raise OptionError(
            f"{option} {spec!r}: indices must lie in [0, {num_layers - 1}] "
            f"(the encoder has {num_layers} layers)"
        )
    return layers


def add_options_once(parser, options: type) -> None:
    """fairseq's parser options of the dataclass ``options``, unless they are there already:
    two variants may share one declaration (SSAN's options serve ``ssan_transformer`` and the
    selective family's ``gumbel`` / ``soft``), and encoder-only models offer every variant in
    one parser. A dataclass whose options are only partly there is an error."""
    flags = ["--" + field.name.replace("_", "-") for field in dataclasses.fields(options)
             if field.name != "_name"]  # FairseqDataclass's own field, never an option
    present = [flag for flag in flags if flag in parser._option_string_actions]
    if present and len(present) == len(flags):
        return
    if present:
        raise ValueError(f"{options.__name__}: options {', '.join(present)} are declared twice")
    gen_parser_from_dataclass(parser, options())


def wrap_encoder_layer(layer: nn.Module, cfg: TransformerConfig) -> nn.Module:
    """fairseq's own wrapping of an encoder or decoder layer (``build_encoder_layer``):
    activation checkpointing with ``--checkpoint-activations``, then FSDP where it is active."""
    checkpoint = cfg.checkpoint_activations
    if checkpoint:
        layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
    # as fairseq: a checkpointed layer is always its own FSDP unit, whatever its size
    return fsdp_wrap(layer, min_num_params=cfg.min_params_to_wrap if not checkpoint else 0)


class VariantTransformerEncoder(TransformerEncoderBase):
    """fairseq's Transformer encoder whose layers in ``variant_layers`` use ``build_attention``.

    Args: args (namespace), dictionary, embed_tokens as fairseq's legacy encoder;
    variant_layers: 0-based indices; build_attention: see ``LayerAttentionBuilder``.
    """

    def __init__(self, args, dictionary, embed_tokens, variant_layers: List[int],
                 build_attention: Optional[LayerAttentionBuilder], return_fc: bool = False):
        self.args = args
        self.variant_layers = list(variant_layers)
        self.build_attention = build_attention
        cfg = TransformerConfig.from_namespace(args)
        num_layers = cfg.encoder.layers
        cfg.encoder.layers = 0  # the base builds no layer: they are built below, each by index
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        cfg.encoder.layers = num_layers
        self.layers.extend(self.build_encoder_layer(cfg, index) for index in range(num_layers))
        self.num_layers = len(self.layers)

    def build_encoder_layer(self, cfg: TransformerConfig, layer_index: int) -> nn.Module:
        if layer_index in self.variant_layers:
            build = self.build_attention
            layer = AttentionVariantEncoderLayer(
                cfg, lambda embed_dim, cfg: build(layer_index, embed_dim, cfg),
                return_fc=self.return_fc,
            )
        else:
            layer = TransformerEncoderLayerBase(cfg, return_fc=self.return_fc)
        return wrap_encoder_layer(layer, cfg)

    def forward(self, src_tokens, src_lengths=None, return_all_hiddens=False, token_embeddings=None):
        self.take_selection_stats()  # stale records (an activation-checkpointing recomputation)
        out = super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings)
        out["selection_stats"] = self.take_selection_stats()
        return out

    def selective_layers(self) -> Dict[int, SelectionReporter]:
        """{layer index: its selective attention}, every layer that can report a record."""
        return {index: self.layers[index].self_attn for index in self.variant_layers
                if isinstance(self.layers[index].self_attn, SelectionReporter)}

    def forward_torchscript(self, net_input):
        """fairseq's decoding entry (sequence generator, interactive, hub): the same encoder
        output without selection records, which nothing there reads."""
        with no_selection_statistics(self):
            return super().forward_torchscript(net_input)

    def take_selection_stats(self) -> List[SelectionStats]:
        """The records of this forward's selective layers, in layer order (a layer skipped by
        layerdrop has none). Indexing, not iterating: LayerDropModuleList's iterator drops."""
        records = []
        for index in self.variant_layers:
            attention = self.layers[index].self_attn
            if isinstance(attention, SelectionReporter):
                record = attention.pop_selection()
                if record is not None:
                    record.layer = index
                    records.append(record)
        return records


class VariantTransformerDecoder(TransformerDecoder):
    """fairseq's Transformer decoder whose layers build their decoder self-attention with
    ``build_self`` and their encoder-decoder attention with ``build_cross`` (None: fairseq's),
    each called as build(layer_index, embed_dim, cfg). Its selective attentions report records
    as the encoder's do (site ``decoder`` / ``cross``); a decoding step reports none."""

    def __init__(self, args, dictionary, embed_tokens, build_self: Optional[LayerAttentionBuilder],
                 build_cross: Optional[LayerAttentionBuilder], no_encoder_attn: bool = False):
        self.site_builders = {"decoder": build_self, "cross": build_cross}
        self._next_layer = 0
        super().__init__(args, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn)

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        cfg = TransformerConfig.from_namespace(cfg)
        index, self._next_layer = self._next_layer, self._next_layer + 1

        def at(site: str) -> DecoderAttentionBuilder:
            build = self.site_builders[site]
            return None if build is None else (lambda embed_dim, cfg: build(index, embed_dim, cfg))

        layer = AttentionVariantDecoderLayer(cfg, at("decoder"), at("cross"), no_encoder_attn)
        return wrap_encoder_layer(layer, cfg)

    def site_attentions(self):
        """[(layer index, site, attention)] of every layer's selective attentions, in layer
        order, decoder self-attention before cross attention. Indexing the layers, not
        iterating: LayerDropModuleList's iterator drops."""
        found = []
        for index in range(len(self.layers)):
            layer = self.layers[index]
            for site, attention in (("decoder", layer.self_attn), ("cross", layer.encoder_attn)):
                if isinstance(attention, SelectionReporter):
                    found.append((index, site, attention))
        return found

    def selective_layers(self) -> Dict[str, SelectionReporter]:
        """{layer label ("dec3", "cross3"): its selective attention}."""
        return {layer_label(site, index): attention for index, site, attention in self.site_attentions()}

    def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None, **kwargs):
        if incremental_state is not None:  # a decoding step: nothing reads its records
            with no_selection_statistics(self):
                return super().forward(prev_output_tokens, encoder_out=encoder_out,
                                       incremental_state=incremental_state, **kwargs)
        self.take_selection_stats()  # stale records (an activation-checkpointing recomputation)
        pads = prev_output_tokens.eq(self.padding_idx)
        attentions = self.site_attentions()
        for _, _, attention in attentions:  # the statistics' pad queries
            attention.query_padding_mask = pads if bool(pads.any()) else None
        try:
            x, extra = super().forward(prev_output_tokens, encoder_out=encoder_out, **kwargs)
        finally:
            for _, _, attention in attentions:
                attention.query_padding_mask = None
        extra["selection_stats"] = self.take_selection_stats()
        return x, extra

    def take_selection_stats(self) -> List[SelectionStats]:
        """The records of this forward's selective attentions (see ``site_attentions``)."""
        records = []
        for index, site, attention in self.site_attentions():
            record = attention.pop_selection()
            if record is not None:
                record.layer, record.site = index, site
                records.append(record)
        return records


class VariantTransformerModel(TransformerModel, metaclass=ABCMeta):
    """Subclasses set ``options`` and ``layers_option`` and implement
    ``build_variant_attention``; see the module docstring."""

    options: ClassVar[type]
    layers_option: ClassVar[str]

    @classmethod
    def hub_models(cls):
        """No pretrained downloads: fairseq's list names plain Transformers, not this model."""
        return {}

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        cls.add_variant_args(parser)

    @classmethod
    def option_dataclasses(cls) -> List[type]:
        """The dataclasses that declare the variant's own options: ``options``, and for a family
        with parts of its own (the selective family's selectors) theirs."""
        return [cls.options]

    @classmethod
    def add_variant_args(cls, parser) -> None:
        """Only the variant's own options (also used by encoder-only models such as SRL)."""
        for options in cls.option_dataclasses():
            add_options_once(parser, options)

    @classmethod
    def fill_defaults(cls, args) -> None:
        """Set every missing option of the variant (also in args of older checkpoints): its
        default, or ``legacy_defaults[name]`` where the default changed since older checkpoints
        were trained (args without the option are an older checkpoint's)."""
        legacy = getattr(cls, "legacy_defaults", {})
        for options in cls.option_dataclasses():
            for field in dataclasses.fields(options):
                if getattr(args, field.name, None) is None:
                    setattr(args, field.name, legacy.get(field.name, field.default))

    @classmethod
    def variant_layers(cls, args) -> List[int]:
        option = "--" + cls.layers_option.replace("_", "-")
        return parse_layer_list(getattr(args, cls.layers_option), args.encoder_layers, option)

    @classmethod
    @abstractmethod
    def build_variant_attention(cls, args, embed_dim: int, cfg: TransformerConfig) -> nn.Module:
        """The self-attention module of one variant layer."""

    @classmethod
    def build_variant_encoder(cls, args, dictionary, embed_tokens, encoder_cls=None):
        """An encoder (``VariantTransformerEncoder`` or a subclass) with this variant's layers."""
        encoder_cls = encoder_cls or VariantTransformerEncoder

        def build_attention(layer_index, embed_dim, cfg):
            return cls.build_variant_attention(args, embed_dim, cfg)

        return encoder_cls(args, dictionary, embed_tokens, cls.variant_layers(args), build_attention)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return cls.build_variant_encoder(args, src_dict, embed_tokens)

    def set_beam_size(self, beam_size: int) -> None:
        """fairseq's generator passes its beam here (fairseq's Transformer has no such hook, so
        its own attentions keep one state per hypothesis): the selective cross attentions then
        keep the encoder's keys once per sentence (SelectorMultiheadAttention.set_beam_size)."""
        if isinstance(self.decoder, VariantTransformerDecoder):
            for _, _, attention in self.decoder.site_attentions():
                attention.set_beam_size(beam_size)

    def upgrade_state_dict_named(self, state_dict, name):
        """fairseq's upgrade, then: a layer the checkpoint trained with a selector (it holds that
        layer's ``selector_name``) where this model has another attention (fairseq's, e.g. after
        ``--model-overrides "{'cross_selector': 'none'}"``) is refused in one line naming the
        layer, the selector and the site's option, not by torch's list of unexpected keys."""
        super().upgrade_state_dict_named(state_dict, name)
        prefix = name + "." if name else ""
        suffix = ".selector_name"
        modules = dict(self.named_modules())
        for key in list(state_dict):
            if not (key.startswith(prefix) and key.endswith(suffix)):
                continue
            path = key[len(prefix):-len(suffix)]
            module = modules.get(path)
            if module is None or isinstance(module, SelectorMultiheadAttention):
                continue
            site = ("cross" if path.endswith(".encoder_attn") else
                    "decoder" if path.startswith("decoder.") else "encoder")
            raise OptionError(
                f"{prefix}{path}: the checkpoint's layer was trained with the "
                f"{tensor_name(state_dict[key])} selector, this model has "
                f"{type(module).__name__} there; a checkpoint decodes and resumes as what it "
                f"trained (leave {SITE_OPTIONS[site]} and --model-overrides' selectors unchanged)")

    @classmethod
    def decoder_attention_builders(cls, args) -> Dict[str, Optional[LayerAttentionBuilder]]:
        """{"decoder": builder or None, "cross": builder or None}: the decoder's attentions of a
        variant that selects there too; default none (fairseq's decoder itself)."""
        return {"decoder": None, "cross": None}

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        builders = cls.decoder_attention_builders(args)
        if builders["decoder"] is None and builders["cross"] is None:
            return super().build_decoder(args, tgt_dict, embed_tokens)
        return VariantTransformerDecoder(args, tgt_dict, embed_tokens, builders["decoder"],
                                         builders["cross"],
                                         no_encoder_attn=getattr(args, "no_cross_attention", False))

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
        """fairseq's forward; ``extra["selection_stats"]``: the encoder's records, then the
        decoder's."""
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
        extra["selection_stats"] = encoder_out["selection_stats"] + extra.get("selection_stats", [])
        return x, extra


def register_variant_architectures(model_name: str, model_cls, shapes: Dict[str, Callable]) -> None:
    """Register ``model_name + suffix`` for each (suffix, fairseq shape function) of ``shapes``:
    the variant's defaults, then the shape (see models.architectures.FAIRSEQ_SHAPES)."""
    for suffix, shape in shapes.items():
        def architecture(args, shape=shape):
            model_cls.fill_defaults(args)
            shape(args)

        architecture.__name__ = model_name + suffix
        architecture.__doc__ = f"{model_cls.__name__} with the shape of fairseq's {shape.__name__}"
        register_model_architecture(model_name, model_name + suffix)(architecture)
