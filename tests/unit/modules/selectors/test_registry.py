"""modules/selectors/registry.py: every registered selector builds from its own declared
defaults, runs as fairseq's encoder self-attention (training, evaluation, records), declares
its options once, under names fairseq leaves alone, appears in --encoder-selector's choices and
in the parsers of the selective family and of encoder-only models, and has its own tests."""

import argparse
import dataclasses
from pathlib import Path

import pytest
import torch
from helpers.selectors import build, call, inputs

from ssan_plugin.errors import OptionError
from ssan_plugin.models.selective_transformer import SelectiveTransformerModel
from ssan_plugin.models.variants import add_encoder_args
from ssan_plugin.modules.selection import SelectionReporter
from ssan_plugin.modules.selectors import SELECTORS, Selector, selector_class, selector_options

HERE = Path(__file__).parent


def option_names(options):
    return [f.name for f in dataclasses.fields(options) if f.name != "_name"]


@pytest.mark.parametrize("name", list(SELECTORS))
def test_every_selector_builds_and_runs(name):
    selector = SELECTORS[name]
    assert issubclass(selector, Selector) and selector.name == name
    attn = build(name, double=False)
    assert isinstance(attn, SelectionReporter)
    x, pad = inputs(seed=1, dtype=torch.float32, left_pad=True)
    attn.train()
    out, _ = call(attn, x, pad)
    assert out.shape == x.shape and torch.isfinite(out).all()
    record = attn.pop_selection()
    assert record is not None and 0 < float(record.pairs_selected) <= float(record.pairs_possible)
    out.sum().backward()
    assert attn.q_proj.weight.grad is not None
    attn.eval()
    with torch.no_grad():
        out, weights = call(attn, x, pad, need_weights=True)
    assert attn.pop_selection() is None  # evaluation reports only when asked
    assert weights.shape == (x.size(1), x.size(0), x.size(0))
    assert torch.all(weights.masked_select(pad.unsqueeze(1).expand_as(weights)) == 0)


@pytest.mark.parametrize("name", list(SELECTORS))
def test_every_selector_has_its_test_file(name):
    assert (HERE / f"test_{name}.py").is_file()


def test_options_declared_once_under_names_fairseq_leaves_alone():
    seen = {}
    for options in selector_options():
        for name in option_names(options):
            assert name not in seen, f"{name} declared by {options.__name__} and {seen[name]}"
            # TransformerConfig would file encoder_* / decoder_* options away under cfg.encoder
            assert not name.startswith(("encoder_", "decoder_")), name
            seen[name] = options.__name__
    assert {SELECTORS[n].options for n in ("gumbel", "soft")} == {SELECTORS["gumbel"].options}


def test_family_parser_has_every_selector_option_and_choice():
    parser = argparse.ArgumentParser()
    SelectiveTransformerModel.add_variant_args(parser)
    for option, default in (("--encoder-selector", "gumbel"), ("--decoder-selector", "none"),
                            ("--cross-selector", "none")):
        action = parser._option_string_actions[option]
        assert list(action.choices) == ["none", *SELECTORS] and action.default == default
    args = parser.parse_args([])
    for options in selector_options():
        for name in option_names(options):
            assert getattr(args, name) == getattr(options, name), name  # the declared default
    for name in SELECTORS:
        assert parser.parse_args(["--encoder-selector", name]).encoder_selector == name
    with pytest.raises(SystemExit):
        parser.parse_args(["--encoder-selector", "nope"])
    with pytest.raises(OptionError, match="--encoder-selector must be one of gumbel, soft"):
        selector_class("nope")


def test_encoder_only_models_offer_the_family_without_duplicate_options():
    parser = argparse.ArgumentParser()
    add_encoder_args(parser, "--some-encoder")  # every variant's options in one parser
    args = parser.parse_args(["--some-encoder", "selective", "--encoder-selector", "topk",
                              "--topk", "3", "--ssan-tau", "0.7"])
    assert (args.some_encoder, args.encoder_selector, args.topk, args.ssan_tau) == (
        "selective", "topk", 3.0, 0.7)
