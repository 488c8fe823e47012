"""The registry of encoder variants: name -> the VariantTransformerModel that declares it, and
how encoder-only models offer them.

The encoder-only models, ``srl_tagger`` (``--srl-encoder``) and ``pair_classifier``
(``--pair-encoder``), offer every entry as a choice of their own, with the variant's own option
declarations and layer builder. Each declares its own options as the fields of an
:class:`EncoderModelOptions` subclass, the encoder choice among them (:func:`encoder_field`,
choices :data:`ENCODER_CHOICES`); its ``add_args`` puts fairseq's Transformer options and every
variant's (:func:`add_encoder_args`) before those fields.
"""

import dataclasses
from dataclasses import dataclass, field, make_dataclass
from enum import Enum
from typing import Callable, Dict, List, Optional, Tuple

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models.transformer.transformer_legacy import TransformerModel

from ..errors import OptionError
from .biblosan_transformer import BiBloSANTransformerModel
from .disan_transformer import DiSANTransformerModel
from .resa_transformer import ReSATransformerModel
from .selective_transformer import SelectiveTransformerModel
from .ssan_transformer import SSANTransformerModel

# "san" is fairseq's own self-attention (no variant layer); "selective" takes its selector from
# --encoder-selector. "ssan" and "selective" both offer SSAN's options (one dataclass, added once
# to the one parser of an encoder-only model, whichever comes first).
ENCODER_VARIANTS: Dict[str, Optional[type]] = {
    "san": None,
    "ssan": SSANTransformerModel,
    "disan": DiSANTransformerModel,
    "biblosan": BiBloSANTransformerModel,
    "resa": ReSATransformerModel,
    "selective": SelectiveTransformerModel,
}


def refuse_decoder_sites(args, model: str) -> None:
    """An encoder-only model has no decoder: ``--decoder-selector`` / ``--cross-selector`` (which
    its parser lists with the selective family's options) are refused unless left at none."""
    for option in ("decoder_selector", "cross_selector"):
        value = getattr(args, option, None)
        if value not in (None, "none"):
            raise OptionError(f"{option_name(option)} {value}: the {model} has no decoder; "
                              f"select in its encoder with --encoder-selector")


# ---------------------------------------------------------------- the encoder choice

ENCODER_CHOICES = ChoiceEnum(sorted(ENCODER_VARIANTS))


def encoder_field():
    """The option choosing the encoder layers' self-attention (``--srl-encoder`` etc.)."""
    return field(default="san", metadata={
        "help": "self-attention of the encoder layers: san = fairseq's own, or an encoder "
                "variant; default san"})


def add_encoder_args(parser, option: Optional[str] = None) -> None:
    """Options of an encoder-only model built on the registry: fairseq's Transformer options
    (encoder shape, dropout, positions; the decoder's go unused) and every variant's own
    options; with ``option`` (e.g. ``--some-encoder``), also the option choosing the variant,
    as :func:`encoder_field` declares it (an :class:`EncoderModelOptions` subclass has it as
    one of its fields instead)."""
    TransformerModel.add_args(parser)
    for variant in ENCODER_VARIANTS.values():
        if variant is not None:
            variant.add_variant_args(parser)
    if option is not None:
        choice = make_dataclass("EncoderChoice",
                                [(option.lstrip("-").replace("-", "_"), ENCODER_CHOICES,
                                  encoder_field())], bases=(FairseqDataclass,))
        gen_parser_from_dataclass(parser, choice())


# ---------------------------------------------------------------- options of encoder-only models

# a field's ``rule`` metadata: (what the value must be, its test); e.g. (">= 0", lambda v: v >= 0)
Rule = Tuple[str, Callable[[object], bool]]


def option_name(field_name: str) -> str:
    """``srl_char_dim`` -> ``--srl-char-dim`` (as fairseq's gen_parser_from_dataclass names it)."""
    return "--" + field_name.replace("_", "-")


class _MetavarParser:
    """The parser as fairseq's ``gen_parser_from_dataclass`` sees it: each option gets its
    field's ``metavar`` metadata, which fairseq does not read (``--srl-char-dim D``)."""

    def __init__(self, parser, metavars: Dict[str, str]):
        self.parser = parser
        self.metavars = metavars

    def add_argument(self, *names, **kwargs):
        if names[0] in self.metavars:
            kwargs["metavar"] = self.metavars[names[0]]
        return self.parser.add_argument(*names, **kwargs)


@dataclass
class EncoderModelOptions(FairseqDataclass):
    """The own options of an encoder-only model built on :data:`ENCODER_VARIANTS`, declared
    once as the fields of a subclass: name (prefixed), type, default and metadata
    ``help``, optionally ``metavar``, ``rule`` (:data:`Rule`; a ChoiceEnum field's rule is its
    choices) and ``default_from`` (default None: the value of that other option, such as
    ``encoder_embed_dim``, once the architecture has set it).

    ``add_args``: :func:`add_encoder_args` (fairseq's Transformer options, every variant's
    own options), then these fields, generated by fairseq's ``gen_parser_from_dataclass`` as
    the variants' options are. ``from_args``: the typed options of an args namespace, a
    missing or None option read as its default (args of a checkpoint written before the option
    existed), every rule checked: a refused value is an :class:`OptionError` naming the
    option, the value and the rule. ``fill_defaults``: the same, written back into args (the
    architecture functions)."""

    @classmethod
    def option_fields(cls) -> List[dataclasses.Field]:
        return [f for f in dataclasses.fields(cls) if not f.name.startswith("_")]

    @classmethod
    def add_args(cls, parser) -> None:
        add_encoder_args(parser)
        metavars = {option_name(f.name): f.metadata["metavar"]
                    for f in cls.option_fields() if "metavar" in f.metadata}
        gen_parser_from_dataclass(_MetavarParser(parser, metavars), cls())

    @classmethod
    def from_args(cls, args) -> "EncoderModelOptions":
        values = {}
        for f in cls.option_fields():
            value = getattr(args, f.name, None)
            if value is None and "default_from" in f.metadata:
                value = getattr(args, f.metadata["default_from"], None)
            values[f.name] = f.default if value is None else value
        options = cls(**values)
        options.check()
        return options

    @classmethod
    def fill_defaults(cls, args) -> "EncoderModelOptions":
        options = cls.from_args(args)
        for f in cls.option_fields():
            setattr(args, f.name, getattr(options, f.name))
        return options

    @staticmethod
    def rule(f: dataclasses.Field) -> Optional[Rule]:
        if isinstance(f.type, type) and issubclass(f.type, Enum):
            choices = [choice.value for choice in f.type]
            return "one of " + ", ".join(choices), lambda value: value in choices
        return f.metadata.get("rule")

    def check(self) -> None:
        for f in self.option_fields():
            rule = self.rule(f)
            if rule is None:
                continue
            text, test = rule
            value = getattr(self, f.name)
            try:
                accepted = bool(test(value))
            except (TypeError, ValueError):  # e.g. None or a string where a number belongs
                accepted = False
            if not accepted:
                raise OptionError(f"{option_name(f.name)} must be {text}, got {value!r}")
