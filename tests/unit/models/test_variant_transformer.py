"""Option validation of the variant models (ssan_plugin/models/variant_transformer.py and the
DiSAN / Bi-BloSAN / ReSA / SSAN models built on it) and of the plugin criterions.

Every --ssan-*, --disan-*, --biblosan-*, --resa-* and plugin-criterion option goes through
fairseq-train's own start-up path in-process (argument parsing with the architecture's
defaults, task set-up, build_model, build_criterion: what fairseq-train does before the first
batch); a bad value must stop it with a message naming the option and the accepted range.
The model hooks (variant_layers, build_variant_attention) are also called directly.
(tests/e2e/test_cli.py runs a few of these through the real CLI.)
"""

import argparse
import re

import pytest
import torch
from helpers.fairseq_setup import build, first_batch

import ssan_plugin  # noqa: F401
from conftest import PLUGIN_DIR, TINY_MODEL
from fairseq.models import ARCH_CONFIG_REGISTRY
from ssan_plugin.models.biblosan_transformer import BiBloSANTransformerModel
from ssan_plugin.models.disan_transformer import DiSANTransformerModel
from ssan_plugin.models.resa_transformer import ReSATransformerModel
from ssan_plugin.models.ssan_transformer import SSANTransformerModel
from ssan_plugin.modules.selectors.gumbel import SSANSelectorOptions

disan_transformer = ARCH_CONFIG_REGISTRY["disan_transformer"]
biblosan_transformer = ARCH_CONFIG_REGISTRY["biblosan_transformer"]
resa_transformer = ARCH_CONFIG_REGISTRY["resa_transformer"]


ARCH_CRITERION = {
    "ssan": ["--arch", "ssan_transformer", "--criterion", "selective_label_smoothed_cross_entropy"],
    "disan": ["--arch", "disan_transformer", "--criterion", "label_smoothed_cross_entropy"],
    "biblosan": ["--arch", "biblosan_transformer", "--criterion", "label_smoothed_cross_entropy"],
    "resa": ["--arch", "resa_transformer", "--criterion", "selective_label_smoothed_cross_entropy"],
}


def start_up(data, argv):
    """fairseq-train's start-up (fairseq_cli/train.py main) up to the first batch."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(data), "--user-dir", str(PLUGIN_DIR), *TINY_MODEL, *argv])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    task.build_model(cfg.model)
    task.build_criterion(cfg.criterion)


def start_up_error(data, argv, capsys):
    try:
        start_up(data, argv)
    except SystemExit:  # argparse: message on stderr
        return capsys.readouterr().err
    except ValueError as err:
        return str(err)
    return None


REFUSED = [
    ("ssan", ["--ssan-layers", "2"], r"--ssan-layers '2': indices must lie in \[0, 1\]"),
    ("ssan", ["--ssan-layers", ""], r"--ssan-layers must be 'all' or comma-separated"),
    ("ssan", ["--ssan-tau", "nan"], r"--ssan-tau must be finite and > 0"),
    ("ssan", ["--ssan-selection", "sample"], r"--ssan-selection: invalid choice: 'sample' \(choose from 'hard', 'soft'\)"),
    ("ssan", ["--select-scale", "nan"], r"--select-scale must be finite and >= 0"),
    ("ssan", ["--nce-scale", "-1"], r"--nce-scale must be finite and >= 0"),
    ("ssan", ["--select-penalty-form", "sum"], r"--select-penalty-form: invalid choice: 'sum' \(choose from 'rate', 'count'\)"),
    ("disan", ["--disan-layers", "-1"], r"--disan-layers '-1': indices must lie in \[0, 1\]"),
    ("disan", ["--disan-impl", "fast"], r"--disan-impl: invalid choice: 'fast' \(choose from 'blocked', 'naive'\)"),
    ("disan", ["--disan-query-block", "-1"], r"--disan-query-block must be >= 0"),
    ("biblosan", ["--biblosan-layers", "0,5"], r"--biblosan-layers '0,5': indices must lie in \[0, 1\]"),
    ("biblosan", ["--biblosan-block-length", "-1"], r"--biblosan-block-length must be >= 0"),
    ("resa", ["--resa-layers", "x"], r"--resa-layers must be 'all' or comma-separated"),
    ("resa", ["--resa-estimator", "a2c"], r"--resa-estimator: invalid choice: 'a2c'"),
    ("resa", ["--resa-warmup-updates", "-1"], r"--resa-warmup-updates must be >= 0"),
    ("resa", ["--resa-tau", "0"], r"--resa-tau must be finite and > 0"),
    ("resa", ["--resa-direction", "left"], r"--resa-direction: invalid choice: 'left'"),
    ("resa", ["--resa-rss-hidden", "-2"], r"--resa-rss-hidden must be >= 0"),
    ("resa", ["--resa-query-block", "-3"], r"--resa-query-block must be >= 0"),
    ("resa", ["--resa-direction", "bi", "--encoder-embed-dim", "30", "--decoder-embed-dim", "30",
              "--encoder-attention-heads", "3", "--decoder-attention-heads", "3"], None),  # even: accepted
    ("resa", ["--resa-lambda", "-0.1"], r"--resa-lambda must be finite and >= 0"),
    ("resa", ["--resa-policy-weight", "nan"], r"--resa-policy-weight must be finite and >= 0"),
    ("resa", ["--resa-baseline", "mean"], r"--resa-baseline: invalid choice: 'mean' \(choose from 'batch', 'running', 'none'\)"),
    ("resa", ["--resa-baseline-momentum", "1"], r"--resa-baseline-momentum must lie in \[0, 1\)"),
    ("resa", ["--resa-reward-loss", "max"], r"--resa-reward-loss: invalid choice: 'max' \(choose from 'token_mean', 'sum'\)"),
]


@pytest.mark.parametrize("family,flags,message", REFUSED, ids=[" ".join(f) for _, f, _ in REFUSED])
def test_options_validated_at_start_up(family, flags, message, tiny_bin, capsys):
    error = start_up_error(tiny_bin, [*ARCH_CRITERION[family], *flags], capsys)
    if message is None:
        assert error is None, error
    else:
        assert error is not None, f"{flags} accepted"
        assert re.search(message, error), error


# Options fairseq itself leaves unchecked, and infinite values.
GAPS = [
    ("ssan", ["--label-smoothing", "-0.5"], r"--label-smoothing"),  # fairseq's option, inherited unchecked
    ("resa", ["--label-smoothing", "1.5"], r"--label-smoothing"),
    ("ssan", ["--ssan-tau", "inf"], r"--ssan-tau must be finite"),
    ("resa", ["--resa-tau", "inf"], r"--resa-tau must be finite"),  # (0, inf): inf makes pi -> 1/2 everywhere
    ("resa", ["--resa-lambda", "inf"], r"--resa-lambda"),
]


@pytest.mark.parametrize("family,flags,message", GAPS, ids=[" ".join(f) for _, f, _ in GAPS])
def test_options_checked_beyond_fairseq(family, flags, message, tiny_bin, capsys):
    error = start_up_error(tiny_bin, [*ARCH_CRITERION[family], *flags], capsys)
    assert error is not None and re.search(message, error)


def namespace(fill, **options):
    args = argparse.Namespace(encoder_layers=2, encoder_embed_dim=16, **options)
    fill(args)
    return args


@pytest.mark.parametrize("model,fill,options,message", [
    (DiSANTransformerModel, disan_transformer, dict(disan_query_block=-1), r"--disan-query-block must be >= 0"),
    (DiSANTransformerModel, disan_transformer, dict(disan_impl="fast"), r"--disan-impl must be"),
    (DiSANTransformerModel, disan_transformer, dict(disan_layers="0,5"), r"--disan-layers .*\[0, 1\]"),
    (BiBloSANTransformerModel, biblosan_transformer, dict(biblosan_block_length=-2),
     r"--biblosan-block-length must be >= 0"),
    (ReSATransformerModel, resa_transformer, dict(resa_tau=0.0), r"--resa-tau must be finite and > 0"),
    (ReSATransformerModel, resa_transformer, dict(resa_warmup_updates=-1), r"--resa-warmup-updates must be >= 0"),
    (ReSATransformerModel, resa_transformer, dict(resa_estimator="a2c"), r"--resa-estimator must be one of"),
])
def test_options_are_validated(model, fill, options, message):
    args = namespace(fill, **options)
    with pytest.raises(ValueError, match=message):
        model.variant_layers(args)
        model.build_variant_attention(args, args.encoder_embed_dim, None)


def test_odd_width_is_rejected_with_the_option_named():
    args = namespace(disan_transformer)
    args.encoder_embed_dim = 15
    with pytest.raises(ValueError, match="--encoder-embed-dim must be even"):
        DiSANTransformerModel.build_variant_attention(args, args.encoder_embed_dim, None)


@pytest.mark.parametrize("arch", ["ssan_transformer", "disan_transformer", "biblosan_transformer",
                                  "resa_transformer"])
def test_checkpoint_activations_wraps_variant_layers(tiny_bin, arch):
    _, plain, _ = build(tiny_bin, ["--arch", arch])
    _, wrapped, _ = build(tiny_bin, ["--arch", arch, "--checkpoint-activations"])
    for layer in plain.encoder.layers:
        assert not hasattr(layer, "precheckpoint_forward")
    for layer in wrapped.encoder.layers:  # fairseq's checkpoint_wrapper keeps the original forward
        assert hasattr(layer, "precheckpoint_forward")
        assert type(layer.self_attn).__name__ != "MultiheadAttention"


def test_layer_index_of_records_under_layerdrop(tiny_bin):
    task, model, criterion = build(tiny_bin, ["--arch", "ssan_transformer", "--encoder-layers", "3",
                                              "--ssan-layers", "1,2", "--encoder-layerdrop", "0.5",
                                              "--criterion", "selective_label_smoothed_cross_entropy"])
    layers = model.encoder.layers  # a LayerDropModuleList: index it, its iterator drops in training
    assert [type(layers[i].self_attn).__name__ for i in range(3)] == [
        "MultiheadAttention", "SelectorMultiheadAttention", "SelectorMultiheadAttention"]
    sample = first_batch(task)
    model.train()
    seen = set()
    torch.manual_seed(0)
    for _ in range(30):
        out = model.encoder(**{k: v for k, v in sample["net_input"].items() if k != "prev_output_tokens"})
        records = out["selection_stats"]
        layers = [r.layer for r in records]
        assert layers == sorted(layers) and set(layers) <= {1, 2}
        seen.add(tuple(layers))
    assert len(seen) > 1  # layerdrop really dropped selective layers in some passes
    model.eval()
    from ssan_plugin.modules.selection import selection_statistics

    with selection_statistics(model):  # evaluation forwards report only when asked
        out = model.encoder(**{k: v for k, v in sample["net_input"].items() if k != "prev_output_tokens"})
    assert [r.layer for r in out["selection_stats"]] == [1, 2]


def test_options_are_declared_once():
    parser = argparse.ArgumentParser()
    SSANTransformerModel.add_variant_args(parser)
    args = parser.parse_args([])
    assert vars(args) == {"ssan_layers": "all", "ssan_tau": 0.5, "ssan_selection": "hard",
                          "ssan_policy_dim": 0, "ssan_scale_policy_logits": False,
                          "ssan_straight_through_cap": 0.0, "ssan_kernel": "auto",
                          "ssan_policy_init_bias": 0.0, "ssan_dense_warmup": 0}
    assert SSANSelectorOptions().ssan_tau == args.ssan_tau
    old = argparse.Namespace(arch="ssan_transformer")  # args of a checkpoint without the options
    from fairseq.models import ARCH_CONFIG_REGISTRY
    ARCH_CONFIG_REGISTRY["ssan_transformer"](old)
    assert (old.ssan_layers, old.ssan_tau, old.ssan_selection) == ("all", 0.5, "hard")
    # checkpoints from before the option trained with the plain estimator's cap of 10
    assert old.ssan_straight_through_cap == 10.0
    # checkpoints from before the start options: the paper's start, no warm-up counter
    assert (old.ssan_policy_init_bias, old.ssan_dense_warmup) == (0.0, 0)
