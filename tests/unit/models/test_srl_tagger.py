"""ssan_plugin/models/srl_tagger.py: the --srl- options, declared once in SRLTaggerOptions
(parser, defaults of older checkpoints' args, one-line refusals); the predicate-distance
embedding (--srl-predicate-distance) on a tiny CoNLL-2005 data-bin: distances computed from the
indicator on either padding side, clipped, added to the input; off by default (old checkpoints
and recipes unchanged); word dropout; the predicate-aware classifier (--srl-classifier
predicate-mlp) against its formula."""

import argparse
import math

import pytest
import torch
from helpers.srl_cli import tiny05  # noqa: F401  (fixture)

from ssan_plugin.errors import OptionError
from ssan_plugin.models.variants import ENCODER_VARIANTS

ENCODERS = sorted(ENCODER_VARIANTS)  # the encoder choices: the registry's names


def parse(data, *extra):
    import ssan_plugin  # noqa: F401
    from fairseq import options

    return options.parse_args_and_arch(options.get_training_parser(), [
        str(data), "--task", "srl", "--arch", "srl_tagger", "--encoder-embed-dim", "16",
        "--encoder-ffn-embed-dim", "32", "--encoder-layers", "1", "--encoder-attention-heads", "2",
        "--cpu", *extra])


def build(data, *extra):
    from fairseq import tasks

    args = parse(data, *extra)
    task = tasks.setup_task(args)
    return task, task.build_model(args).eval()


# ---------------------------------------------------------------- the --srl- options

# the options as they were before their declaration moved into SRLTaggerOptions:
# name -> (type, default, choices, metavar)
SRL_OPTIONS = {
    "--srl-encoder": (str, "san", ENCODERS, None),
    "--srl-predicate-distance": (int, 0, None, "K"),
    "--srl-word-dropout": (float, 0.0, None, "P"),
    "--srl-char-dim": (int, 0, None, "D"),
    "--srl-classifier": (str, "linear", ["linear", "predicate-mlp"], None),
}


def model_group():
    """The model's options as fairseq-train adds them (parse_args_and_arch's group)."""
    from ssan_plugin.models.srl_tagger import SRLTaggerModel

    parser = argparse.ArgumentParser()
    group = parser.add_argument_group("Model-specific configuration",
                                      argument_default=argparse.SUPPRESS)
    SRLTaggerModel.add_args(group)
    return parser, {action.dest: action for action in group._group_actions}


def test_options_are_declared_once():
    """The parser's --srl- options are the fields of SRLTaggerOptions (name, type, default,
    choices, metavar, help) and the ones the model had before; fairseq's encoder options and
    every variant's options are there too."""
    from ssan_plugin.models.srl_tagger import SRLTaggerOptions

    parser, actions = model_group()
    fields = SRLTaggerOptions.option_fields()
    assert [name for name in actions if name.startswith("srl_")] == [f.name for f in fields]
    declared = {}
    for f in fields:
        action = actions[f.name]
        assert action.option_strings == ["--" + f.name.replace("_", "-")]
        assert action.default == f.default and action.help == f.metadata["help"]
        assert action.metavar == f.metadata.get("metavar")
        declared[action.option_strings[0]] = (action.type, action.default, action.choices,
                                              action.metavar)
    assert declared == SRL_OPTIONS
    assert {"encoder_embed_dim", "encoder_layers", "dropout", "ssan_tau", "disan_impl",
            "biblosan_block_length", "resa_estimator"} <= set(actions)
    defaults = vars(parser.parse_args([]))
    assert {k: v for k, v in defaults.items() if k.startswith("srl_")} == \
        {f.name: f.default for f in fields}
    help_text = parser.format_help()
    assert "--srl-predicate-distance K" in help_text and "--srl-char-dim D" in help_text


def test_older_args_get_the_defaults(tiny05):
    """Args of a checkpoint written before the options existed (or with None): the
    architecture presets fill every --srl- option with its default, and the model built from
    them, directly or through fairseq's checkpoint path, reads those defaults."""
    from fairseq import tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.models import ARCH_CONFIG_REGISTRY

    from ssan_plugin.models.srl_tagger import SRLTaggerOptions

    names = [f.name for f in SRLTaggerOptions.option_fields()]
    for arch, width in (("srl_tagger", 256), ("srl_tagger_small", 128)):
        old = argparse.Namespace(arch=arch, srl_char_dim=None)
        ARCH_CONFIG_REGISTRY[arch](old)
        assert {name: getattr(old, name) for name in names} == {
            "srl_encoder": "san", "srl_predicate_distance": 0, "srl_word_dropout": 0.0,
            "srl_char_dim": 0, "srl_classifier": "linear"}
        assert old.encoder_embed_dim == width and old.ssan_tau == 0.5  # shape, variants: as before
    assert SRLTaggerOptions.from_args(argparse.Namespace()) == SRLTaggerOptions()

    for through_checkpoint_path in (False, True):
        args = parse(tiny05, "--srl-char-dim", "6", "--srl-classifier", "predicate-mlp")
        for name in names:
            delattr(args, name)
        task = tasks.setup_task(args)
        model_args = convert_namespace_to_omegaconf(args).model if through_checkpoint_path else args
        model = task.build_model(model_args)
        assert model.options == SRLTaggerOptions() == model.encoder.options
        assert model.encoder.char_features is None and isinstance(model.classifier, torch.nn.Linear)


def test_the_model_reads_one_typed_object(tiny05):
    from ssan_plugin.models.srl_tagger import SRLTaggerOptions

    _, model = build(tiny05, "--srl-encoder", "ssan", "--srl-predicate-distance", "2",
                     "--srl-word-dropout", "0.25", "--srl-classifier", "predicate-mlp")
    assert model.options == SRLTaggerOptions(srl_encoder="ssan", srl_predicate_distance=2,
                                             srl_word_dropout=0.25, srl_classifier="predicate-mlp")
    assert model.encoder.options == model.options
    assert (model.encoder.max_distance, model.encoder.word_dropout) == (2, 0.25)


REFUSED = [
    ("srl_predicate_distance", -1, "--srl-predicate-distance must be >= 0, got -1"),
    ("srl_word_dropout", 1.0, "--srl-word-dropout must be in [0, 1), got 1.0"),
    ("srl_word_dropout", -0.1, "--srl-word-dropout must be in [0, 1), got -0.1"),
    ("srl_word_dropout", math.nan, "--srl-word-dropout must be in [0, 1), got nan"),
    ("srl_char_dim", -1, "--srl-char-dim must be >= 0, got -1"),
    ("srl_char_dim", "8", "--srl-char-dim must be >= 0, got '8'"),
    ("srl_classifier", "bilinear",
     "--srl-classifier must be one of linear, predicate-mlp, got 'bilinear'"),
    ("srl_encoder", "lstm", f"--srl-encoder must be one of {', '.join(ENCODERS)}, got 'lstm'"),
]


@pytest.mark.parametrize("name,value,message", REFUSED, ids=[f"{n}={v!r}" for n, v, _ in REFUSED])
def test_bad_values_are_one_line_option_errors(name, value, message):
    """Args that argparse did not parse (a checkpoint's, a caller's): the preset and the model
    refuse them with one line naming the option, the value and the rule."""
    from fairseq.models import ARCH_CONFIG_REGISTRY

    from ssan_plugin.models.srl_tagger import SRLTaggerOptions

    with pytest.raises(OptionError) as refused:
        SRLTaggerOptions.from_args(argparse.Namespace(**{name: value}))
    assert str(refused.value) == message
    with pytest.raises(OptionError) as refused:
        ARCH_CONFIG_REGISTRY["srl_tagger_small"](argparse.Namespace(**{name: value}))
    assert str(refused.value) == message


@pytest.mark.parametrize("flags,message", [
    (["--srl-predicate-distance", "-2"], "--srl-predicate-distance must be >= 0, got -2"),
    (["--srl-word-dropout", "1.5"], "--srl-word-dropout must be in [0, 1), got 1.5"),
    (["--srl-char-dim", "-3"], "--srl-char-dim must be >= 0, got -3"),
])
def test_bad_values_on_the_command_line(tiny05, flags, message):
    with pytest.raises(OptionError) as refused:
        build(tiny05, *flags)
    assert str(refused.value) == message


def test_distance_embedding_is_off_by_default(tiny05):
    _, model = build(tiny05)
    assert model.encoder.embed_distance is None and model.encoder.max_distance == 0
    assert not any("embed_distance" in name for name, _ in model.named_parameters())


def test_predicate_distance_clipped_on_either_padding_side(tiny05):
    _, model = build(tiny05, "--srl-predicate-distance", "2")
    encoder = model.encoder
    assert encoder.embed_distance.num_embeddings == 5
    predicate = torch.tensor([[0, 0, 0, 0, 1, 0],   # right-padded or not: positions as given
                              [1, 0, 0, 0, 0, 0],
                              [0, 0, 0, 1, 0, 0]])
    expected = [[min(max(j - p, -2), 2) + 2 for j in range(6)] for p in (4, 0, 3)]
    assert encoder.predicate_distance(predicate).tolist() == expected
    with pytest.raises(ValueError, match="--srl-predicate-distance must be >= 0"):
        build(tiny05, "--srl-predicate-distance", "-1")


def test_distance_embedding_enters_the_input(tiny05):
    """The encoder output changes with the distance table, and equals the run whose token
    embeddings carry the distance embedding by hand."""
    task, model = build(tiny05, "--srl-predicate-distance", "3")
    task.load_dataset("valid")
    batch = task.dataset("valid").collater([task.dataset("valid")[i] for i in range(3)])
    net = batch["net_input"]
    encoder = model.encoder
    out = encoder(net["src_tokens"], net["src_lengths"], predicate=net["predicate"])
    by_hand = (encoder.embed_tokens(net["src_tokens"]) + encoder.embed_predicate(net["predicate"])
               + encoder.embed_distance(encoder.predicate_distance(net["predicate"])))
    from ssan_plugin.models.variant_transformer import VariantTransformerEncoder

    direct = VariantTransformerEncoder.forward(encoder, net["src_tokens"], net["src_lengths"],
                                               False, by_hand)
    torch.testing.assert_close(out["encoder_out"][0], direct["encoder_out"][0])
    with torch.no_grad():  # (not a constant shift: layer norm would remove it)
        encoder.embed_distance.weight.add_(
            torch.randn(encoder.embed_distance.weight.shape, generator=torch.Generator().manual_seed(0)))
    changed = encoder(net["src_tokens"], net["src_lengths"], predicate=net["predicate"])
    assert not torch.allclose(changed["encoder_out"][0], out["encoder_out"][0])


def test_word_dropout_is_off_by_default_and_in_evaluation(tiny05):
    _, model = build(tiny05)
    tokens = torch.tensor([[5, 6, 7, 1]])
    predicate = torch.tensor([[0, 1, 0, 0]])
    model.train()
    assert model.encoder.drop_words(tokens, predicate) is tokens
    _, model = build(tiny05, "--srl-word-dropout", "0.9")
    assert model.encoder.drop_words(tokens, predicate) is tokens  # built in eval mode


def test_word_dropout_replaces_words_but_never_the_predicate_or_padding(tiny05):
    _, model = build(tiny05, "--srl-word-dropout", "0.3")
    words = model.encoder.dictionary
    model.train()
    torch.manual_seed(0)
    tokens = torch.randint(words.nspecial, len(words), (64, 50))
    tokens[:, 40:] = words.pad()
    predicate = torch.zeros_like(tokens)
    predicate[torch.arange(64), torch.randint(0, 40, (64,))] = 1
    before = tokens.clone()
    dropped = model.encoder.drop_words(tokens, predicate)
    assert tokens.equal(before)  # the input is not modified
    changed = dropped.ne(tokens)
    assert dropped[changed].eq(words.unk()).all()
    assert not changed[predicate.eq(1)].any() and not changed[:, 40:].any()
    droppable = predicate[:, :40].eq(0).sum().item()
    rate = changed.sum().item() / droppable
    assert abs(rate - 0.3) < 0.03, rate  # 2,496 draws: sd 0.009


def test_word_dropout_out_of_range_is_refused(tiny05):
    for bad in ("1", "-0.1"):
        with pytest.raises(ValueError, match=r"--srl-word-dropout must be in \[0, 1\)"):
            build(tiny05, "--srl-word-dropout", bad)


def test_linear_classifier_is_the_default(tiny05):
    _, model = build(tiny05)
    assert isinstance(model.classifier, torch.nn.Linear)


def test_predicate_mlp_classifier_scores_word_and_predicate_states(tiny05):
    """logits[b, j] = W2 relu(W1 [h_j; h_p] + b1) + b2 with p the predicate of row b, on a
    batch where the predicate sits at different positions; changing only the predicate's state
    changes every word's logits."""
    task, model = build(tiny05, "--srl-classifier", "predicate-mlp")
    classifier = model.classifier
    torch.manual_seed(0)
    states = torch.randn(3, 5, 16)
    predicate = torch.zeros(3, 5, dtype=torch.long)
    predicate[0, 4] = predicate[1, 0] = predicate[2, 2] = 1
    logits = classifier(states, predicate)
    assert logits.shape == (3, 5, len(task.target_dictionary))
    for b, p in enumerate((4, 0, 2)):
        for j in range(5):
            hidden = torch.relu(classifier.hidden.weight @ torch.cat([states[b, j], states[b, p]])
                                + classifier.hidden.bias)
            expected = classifier.out.weight @ hidden + classifier.out.bias
            torch.testing.assert_close(logits[b, j], expected)
    moved = states.clone()
    moved[0, 4] += 1.0
    changed = classifier(moved, predicate)
    assert not torch.allclose(changed[0, :4], logits[0, :4])
    torch.testing.assert_close(changed[1:], logits[1:])


def test_predicate_mlp_classifier_through_the_model(tiny05):
    task, model = build(tiny05, "--srl-classifier", "predicate-mlp")
    task.load_dataset("valid")
    batch = task.dataset("valid").collater([task.dataset("valid")[i] for i in range(3)])
    net = batch["net_input"]
    logits, _ = model(**net)
    states = model.encoder(net["src_tokens"], net["src_lengths"], predicate=net["predicate"])
    expected = model.classifier(states["encoder_out"][0].transpose(0, 1), net["predicate"])
    torch.testing.assert_close(logits, expected)
    with pytest.raises(SystemExit):
        build(tiny05, "--srl-classifier", "bilinear")


def test_character_cnn_is_each_word_pooled_alone(tiny05):
    """CharacterCNN on a padded (B, T, L) batch equals, word by word, conv1d (width 3, zero
    padding) over that word's own characters, ReLU, max, projection; a padding word pools to 0;
    repeated words (encoded once) get their own vector back, and gradients reach every use."""
    import torch.nn.functional as F

    task, model = build(tiny05, "--srl-char-dim", "6")
    cnn = model.encoder.char_features
    pad = task.char_dict.pad()
    torch.manual_seed(0)
    words = [[[5, 6, 7, 8], [9]], [[10, 11], []], [[9], [5, 6, 7, 8]]]  # [], padding
    chars = torch.full((3, 2, 4), pad, dtype=torch.long)
    for b, row in enumerate(words):
        for t, word in enumerate(row):
            chars[b, t, :len(word)] = torch.tensor(word)
    out = cnn(chars)  # each spelling encoded once (row 2 repeats row 0's words)
    assert out.shape == (3, 2, 16)
    expected = torch.zeros_like(out)
    for b, row in enumerate(words):
        for t, word in enumerate(row):
            if word:
                x = cnn.embed(torch.tensor(word)).t().unsqueeze(0)  # (1, D, len)
                pooled = F.relu(F.conv1d(x, cnn.conv.weight, cnn.conv.bias, padding=1)).amax(2)[0]
            else:
                pooled = torch.zeros(6)
            expected[b, t] = cnn.proj(pooled)
    torch.testing.assert_close(out, expected)
    weights = torch.randn_like(out)
    params = [cnn.embed.weight, cnn.conv.weight, cnn.proj.weight]
    grads = torch.autograd.grad((out * weights).sum(), params)
    for grad, reference in zip(grads, torch.autograd.grad((expected * weights).sum(), params)):
        torch.testing.assert_close(grad, reference)


def test_char_features_spell_out_unknown_words(tiny05):
    """Two <unk> words with different spellings get different encoder states with character
    features and the same states without."""
    def states(*extra):
        task, model = build(tiny05, *extra)
        task.load_dataset("valid")
        batch = task.dataset("valid").collater([task.dataset("valid")[0]] * 2)
        net = batch["net_input"]
        net["src_tokens"][:, 0] = task.word_dict.unk()
        net["chars"][1, 0, 0] = task.char_dict.index("R")  # "I" -> "R", still <unk>
        logits, _ = model(**net)
        return logits

    without = states()
    torch.testing.assert_close(without[0], without[1])
    with_chars = states("--srl-char-dim", "6")
    assert not torch.allclose(with_chars[0, 0], with_chars[1, 0])


def test_char_features_need_a_directory_with_characters(tiny05, tmp_path):
    import shutil

    data = tmp_path / "old"
    shutil.copytree(tiny05, data)
    (data / "dict.chars.txt").unlink()  # a directory from before characters
    task, model = build(data)  # without character features it still works
    task.load_dataset("valid")
    valid = task.dataset("valid")
    assert "chars" not in valid.collater([valid[0]])["net_input"]
    with pytest.raises(ValueError, match="--srl-char-dim needs a data directory with characters"):
        build(data, "--srl-char-dim", "6")
    with pytest.raises(ValueError, match="--srl-char-dim must be >= 0"):
        build(tiny05, "--srl-char-dim", "-1")
    _, model = build(tiny05, "--srl-char-dim", "6")
    tokens = torch.tensor([[4, 5]])
    with pytest.raises(ValueError, match=r"needs the \(B, T, L\) characters"):
        model(tokens, torch.tensor([2]), torch.tensor([[0, 1]]))


def test_a_sentence_longer_than_the_positions_is_one_line(tiny05):
    """The SRL task keeps every sentence, so the encoder refuses one its positions cannot hold
    (an IndexError in fairseq's learned positions otherwise), naming the option."""
    task, model = build(tiny05, "--max-source-positions", "3")
    task.load_dataset("valid")
    batch = task.dataset("valid").collater([task.dataset("valid")[i] for i in range(3)])
    net = batch["net_input"]
    assert net["src_tokens"].size(1) > 3
    with pytest.raises(OptionError, match=r"a sentence of \d+ words, longer than the encoder's "
                                          r"--max-source-positions 3"):
        model.encoder(net["src_tokens"], net["src_lengths"], predicate=net["predicate"])
