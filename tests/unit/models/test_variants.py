"""ssan_plugin/models/variants.py: the registry of encoder variants offers every variant's
options in one parser whatever the order of the table (two variants share SSAN's options), and
each encoder-only choice parses."""

import argparse
import dataclasses
import itertools

import pytest

from ssan_plugin.models.variants import ENCODER_VARIANTS, add_encoder_args


def parsed_defaults(order) -> dict:
    """The defaults of an encoder-only parser built with the variants in ``order``."""
    parser = argparse.ArgumentParser()
    table = {name: ENCODER_VARIANTS[name] for name in order}
    original = dict(ENCODER_VARIANTS)
    ENCODER_VARIANTS.clear()
    ENCODER_VARIANTS.update(table)
    try:
        add_encoder_args(parser, "--some-encoder")
    finally:
        ENCODER_VARIANTS.clear()
        ENCODER_VARIANTS.update(original)
    return vars(parser.parse_args([]))


ORDERS = [list(ENCODER_VARIANTS), list(reversed(ENCODER_VARIANTS)),
          ["selective", "ssan", "san", "resa", "disan", "biblosan"]]


@pytest.mark.parametrize("order", ORDERS, ids=["table", "reversed", "selective_first"])
def test_the_order_of_the_variant_table_does_not_matter(order):
    assert parsed_defaults(order) == parsed_defaults(list(ENCODER_VARIANTS))


def declared_defaults(variant) -> dict:
    """{option: declared default} of every dataclass of ``variant``."""
    return {f.name: f.default for options in variant.option_dataclasses()
            for f in dataclasses.fields(options) if f.name != "_name"}


def test_every_pair_of_variants_shares_options_without_conflict():
    """Two variants in one parser, in either order: each gets every option it declares, at its
    declared default (a shared dataclass, SSAN's, is added once)."""
    for a, b in itertools.permutations([n for n, v in ENCODER_VARIANTS.items() if v], 2):
        parser = argparse.ArgumentParser()
        for name in (a, b):
            ENCODER_VARIANTS[name].add_variant_args(parser)
        parsed = vars(parser.parse_args([]))
        for name in (a, b):
            for option, default in declared_defaults(ENCODER_VARIANTS[name]).items():
                assert parsed[option] == default, (a, b, option)


def test_encoder_only_models_refuse_decoder_sites():
    """The SRL tagger and the pair classifier build only an encoder: a decoder site's selector
    given to them is refused in one line, never ignored."""
    from ssan_plugin.errors import OptionError
    from ssan_plugin.models.variants import refuse_decoder_sites

    refuse_decoder_sites(argparse.Namespace(decoder_selector="none", cross_selector=None), "SRL tagger")
    with pytest.raises(OptionError, match="--cross-selector topk: the SRL tagger has no decoder"):
        refuse_decoder_sites(argparse.Namespace(decoder_selector="none", cross_selector="topk"),
                             "SRL tagger")
