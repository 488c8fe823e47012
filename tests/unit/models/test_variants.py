"""ssan_plugin/models/variants.py: the registry of encoder variants offers every variant's
options in one parser whatever the order of the table (two variants share SSAN's options), and
each encoder-only choice parses."""

import argparse
import itertools

import pytest

from ssan_plugin.models import variants
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


def test_every_pair_of_variants_shares_options_without_conflict():
    for a, b in itertools.permutations([n for n, v in ENCODER_VARIANTS.items() if v], 2):
        parser = argparse.ArgumentParser()
        for name in (a, b):
            ENCODER_VARIANTS[name].add_variant_args(parser)
        assert parser.parse_args([]) is not None
    assert variants.ENCODER_VARIANTS is ENCODER_VARIANTS
