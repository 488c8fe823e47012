"""ssan_plugin/models/pair_classifier.py (with the sentence_pair task on a tiny data dir); its
--pair- options, declared once in PairClassifierOptions (parser, defaults of older
checkpoints' args, one-line refusals)."""

import argparse
import dataclasses

import pytest
import torch
from helpers.pairs_cli import TINY_PAIR_MODEL, batch, build_pair, prepare_in_process, sick_rows

from ssan_plugin.errors import OptionError
from ssan_plugin.models.pair_classifier import (
    PairClassifierModel,
    PairClassifierOptions,
    mean_pool,
    pair_features,
    pair_records,
    stack_pair,
)
from ssan_plugin.models.variants import ENCODER_VARIANTS
from ssan_plugin.modules.selection import SelectionStats

ENCODERS = sorted(ENCODER_VARIANTS)  # the encoder choices: the registry's names


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return prepare_in_process(tmp_path_factory.mktemp("pairs") / "bin", sick_rows(30),
                              sick_rows(12, start_id=100))


def tiny(data, *argv):
    return build_pair(data, *TINY_PAIR_MODEL, *argv)


@pytest.mark.parametrize("encoder", ["san", "ssan"])
@pytest.mark.parametrize("pooling", ["mean", "source2token"])
def test_both_sentences_share_the_encoder_and_padding_does_not_matter(data, encoder, pooling):
    task, model, _ = tiny(data, "--pair-encoder", encoder, "--pair-pooling", pooling)
    model.eval()
    sample = batch(task)
    net = sample["net_input"]
    u, v, _ = model.encode(**net)
    # swapped pair: the first sentence's vector becomes the second's (one encoder, one pooling)
    u2, v2, _ = model.encode(net["src2_tokens"], net["src2_lengths"], net["src_tokens"],
                             net["src_lengths"])
    torch.testing.assert_close(u2, v, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(v2, u, atol=1e-5, rtol=1e-5)
    # each sentence alone, without the other sentences' padding, gives the same vector
    for row in range(net["src_tokens"].size(0)):
        n = int(net["src_lengths"][row])
        alone = net["src_tokens"][row:row + 1, :n]
        length = torch.tensor([n])
        u_alone, _, _ = model.encode(alone, length, alone, length)
        torch.testing.assert_close(u_alone[0], u[row], atol=1e-5, rtol=1e-5)


def test_heads_follow_the_task_target(data):
    for target, loss, sizes in (("entailment", "kl", {"entailment": 3}),
                                ("relatedness", "kl", {"relatedness": 5}),
                                ("relatedness", "mse", {"relatedness": 1}),
                                ("both", "kl", {"entailment": 3, "relatedness": 5})):
        task, model, _ = tiny(data, "--pair-target", target, "--relatedness-loss", loss)
        assert model.relatedness_loss == loss  # the task's option, handed over explicitly
        sample = batch(task)
        logits, extra = model(**sample["net_input"])
        assert {k: v.shape for k, v in logits.items()} == {k: (6, n) for k, n in sizes.items()}
        assert extra["selection_stats"] == []  # san: no selector
        predicted = model.predict((logits, extra))
        assert ("label" in predicted) == ("entailment" in sizes)
        if "relatedness" in sizes:
            assert bool(((predicted["score"] >= 1) & (predicted["score"] <= 5)).all())


def test_variant_options_are_the_variants_own(data):
    _, model, _ = tiny(data, "--pair-encoder", "ssan", "--ssan-tau", "0.7", "--ssan-layers", "1")
    assert [hasattr(layer.self_attn, "selector") for layer in model.encoder.layers] == [False, True]
    assert model.encoder.layers[1].self_attn.selector.tau == 0.7
    _, small, _ = build_pair(data, "--arch", "pair_classifier_small", "--pair-encoder", "disan")
    assert (small.args.encoder_layers, small.args.encoder_embed_dim,
            small.args.encoder_ffn_embed_dim, small.args.encoder_attention_heads) == (3, 128, 512, 4)
    assert small.args.pair_mlp_dim == 128 and small.args.pair_pooling == "source2token"


def test_sampled_selectors_report_per_pair_log_probabilities(data):
    task, model, _ = tiny(data, "--pair-encoder", "resa")
    model.train()
    sample = batch(task)
    _, extra = model(**sample["net_input"])
    records = extra["selection_stats"]
    assert len(records) == 2
    for record in records:
        assert record.log_prob.shape == (6,) and record.sentence_token_rate.shape == (6,)
        assert record.log_prob.requires_grad


def test_pair_records_sum_log_probs_and_average_rates():
    zero = torch.tensor(0.0)
    record = SelectionStats(zero, zero, zero, zero, zero, zero, zero,
                            log_prob=torch.tensor([1.0, 2.0, 10.0, 20.0]),
                            sentence_token_rate=torch.tensor([0.2, 0.4, 0.6, 1.0]), layer=3)
    plain = dataclasses.replace(record, log_prob=None, sentence_token_rate=None)
    merged, untouched = pair_records([record, plain], 2)
    assert merged.log_prob.tolist() == [11.0, 22.0]
    assert merged.sentence_token_rate.tolist() == pytest.approx([0.4, 0.7])
    assert merged.layer == 3 and untouched is plain


def test_small_functions():
    a = torch.tensor([[5, 6, 1]])
    b = torch.tensor([[7, 1, 1, 1, 1]])
    assert stack_pair(a, b, pad=1).tolist() == [[5, 6, 1, 1, 1], [7, 1, 1, 1, 1]]
    x = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    assert mean_pool(x, torch.tensor([[False, False, True]])).tolist() == [[2.0, 3.0]]
    u, v = torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, 5.0]])
    assert pair_features(u, v).tolist() == [[1, 2, 3, 5, -2, -3, 3, 10]]


# ---------------------------------------------------------------- the --pair- options

# the options as they were before their declaration moved into PairClassifierOptions:
# name -> (type, default, choices, metavar); --pair-mlp-dim None: the embed dim
PAIR_OPTIONS = {
    "--pair-encoder": (str, "san", ENCODERS, None),
    "--pair-pooling": (str, "source2token", ["mean", "source2token"], None),
    "--pair-mlp-dim": (int, None, None, "N"),
}


def test_options_are_declared_once():
    """The parser's --pair- options (as fairseq-train adds them) are the fields of
    PairClassifierOptions (name, type, default, choices, metavar, help) and the ones the model
    had before; fairseq's encoder options and every variant's options are there too."""
    parser = argparse.ArgumentParser()
    group = parser.add_argument_group("Model-specific configuration",
                                      argument_default=argparse.SUPPRESS)
    PairClassifierModel.add_args(group)
    actions = {action.dest: action for action in group._group_actions}
    fields = PairClassifierOptions.option_fields()
    assert [name for name in actions if name.startswith("pair_")] == [f.name for f in fields]
    declared = {}
    for f in fields:
        action = actions[f.name]
        assert action.option_strings == ["--" + f.name.replace("_", "-")]
        assert action.default == f.default and action.help == f.metadata["help"]
        assert action.metavar == f.metadata.get("metavar")
        declared[action.option_strings[0]] = (action.type, action.default, action.choices,
                                              action.metavar)
    assert declared == PAIR_OPTIONS
    assert {"encoder_embed_dim", "encoder_layers", "dropout", "ssan_tau", "disan_impl",
            "biblosan_block_length", "resa_estimator"} <= set(actions)
    defaults = vars(parser.parse_args([]))
    assert {k: v for k, v in defaults.items() if k.startswith("pair_")} == \
        {f.name: f.default for f in fields}
    assert "--pair-mlp-dim N" in parser.format_help()


def test_older_args_get_the_defaults(data):
    """Args of a checkpoint written before the options existed (or with None): the presets
    fill every --pair- option (--pair-mlp-dim: the embed dim of the preset's shape), and the
    model built from them, directly or through fairseq's checkpoint path, reads them."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.models import ARCH_CONFIG_REGISTRY

    names = [f.name for f in PairClassifierOptions.option_fields()]
    for arch, width in (("pair_classifier", 512), ("pair_classifier_small", 128)):
        old = argparse.Namespace(arch=arch, pair_pooling=None)
        ARCH_CONFIG_REGISTRY[arch](old)
        assert {name: getattr(old, name) for name in names} == {
            "pair_encoder": "san", "pair_pooling": "source2token", "pair_mlp_dim": width}
        assert old.encoder_embed_dim == width and old.ssan_tau == 0.5
    assert PairClassifierOptions.from_args(argparse.Namespace(encoder_embed_dim=16)) == \
        PairClassifierOptions(pair_mlp_dim=16)

    for through_checkpoint_path in (False, True):
        args = options.parse_args_and_arch(options.get_training_parser(), [
            str(data), "--task", "sentence_pair", "--arch", "pair_classifier",
            "--criterion", "sentence_pair_loss", "--cpu", *map(str, TINY_PAIR_MODEL),
            "--pair-pooling", "mean", "--pair-mlp-dim", "7"])
        for name in names:
            delattr(args, name)
        task = tasks.setup_task(args)
        model_args = convert_namespace_to_omegaconf(args).model if through_checkpoint_path else args
        model = task.build_model(model_args)
        assert model.options == PairClassifierOptions(pair_mlp_dim=32)
        assert isinstance(model.pooling, torch.nn.Module) and model.mlp.out_features == 32


def test_the_model_reads_one_typed_object(data):
    _, model, _ = tiny(data, "--pair-encoder", "disan", "--pair-pooling", "mean",
                       "--pair-mlp-dim", "7")
    assert model.options == PairClassifierOptions(pair_encoder="disan", pair_pooling="mean",
                                                  pair_mlp_dim=7)
    assert model.pooling is None and model.mlp.out_features == 7
    assert {head.in_features for head in model.heads.values()} == {7}


REFUSED = [
    ("pair_mlp_dim", 0, "--pair-mlp-dim must be >= 1, got 0"),
    ("pair_mlp_dim", "64", "--pair-mlp-dim must be >= 1, got '64'"),
    ("pair_pooling", "max", "--pair-pooling must be one of mean, source2token, got 'max'"),
    ("pair_encoder", "lstm", f"--pair-encoder must be one of {', '.join(ENCODERS)}, got 'lstm'"),
]


@pytest.mark.parametrize("name,value,message", REFUSED, ids=[f"{n}={v!r}" for n, v, _ in REFUSED])
def test_bad_values_are_one_line_option_errors(name, value, message):
    """Args that argparse did not parse (a checkpoint's, a caller's): the preset and the model
    refuse them with one line naming the option, the value and the rule."""
    from fairseq.models import ARCH_CONFIG_REGISTRY

    with pytest.raises(OptionError) as refused:
        PairClassifierOptions.from_args(argparse.Namespace(encoder_embed_dim=16, **{name: value}))
    assert str(refused.value) == message
    with pytest.raises(OptionError) as refused:
        ARCH_CONFIG_REGISTRY["pair_classifier_small"](argparse.Namespace(**{name: value}))
    assert str(refused.value) == message


def test_bad_value_on_the_command_line(data):
    with pytest.raises(OptionError) as refused:
        tiny(data, "--pair-mlp-dim", "0")
    assert str(refused.value) == "--pair-mlp-dim must be >= 1, got 0"


def test_source2token_pooling_keeps_the_checkpoint_layout_and_the_formula(data):
    """The pooling is modules' Source2Token with a hidden layer as wide as the states: the
    parameter names and shapes of every earlier pair checkpoint, and DiSAN's formula."""
    _, model, _ = tiny(data, "--pair-encoder", "san", "--pair-pooling", "source2token")
    dim = model.mlp.in_features // 4
    assert {k: tuple(v.shape) for k, v in model.pooling.state_dict().items()} == {
        "hidden.weight": (dim, dim), "hidden.bias": (dim,),
        "score.weight": (dim, dim), "score.bias": (dim,)}
    torch.manual_seed(0)
    x = torch.randn(2, 5, dim)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    h, s = model.pooling.hidden, model.pooling.score
    logits = s(torch.nn.functional.elu(h(x))).masked_fill(pad.unsqueeze(-1), float("-inf"))
    expected = (torch.softmax(logits, dim=1) * x).sum(1)
    torch.testing.assert_close(model.pooling(x, pad), expected, rtol=1e-5, atol=1e-6)
