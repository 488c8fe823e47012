"""ssan_plugin.srl.evaluate: predictions back into the gold sentences, decoding every instance."""

import pytest

from ssan_plugin.srl import datadir
from ssan_plugin.srl.binarize import prepare
from ssan_plugin.srl.evaluate import (
    EvaluationError, decode_subset, evaluate_checkpoint, predicted_props,
)

GOLD = [
    (["-", "see", "-", "leave"], [["(A0*)", "(V*)", "(A1*", "*)"], ["*", "*", "(A0*)", "(V*)"]]),
    (["-"], []),
    (["leave", "-"], [["(V*)", "*"]]),
]
TABLE = [datadir.Instance(0, 0, 1), datadir.Instance(1, 0, 3), datadir.Instance(2, 2, 0)]


def test_predicted_props_puts_columns_in_predicate_order():
    decoded = {0: ["B-A0", "B-V", "O", "O"], 1: ["O", "O", "B-A1", "B-V"], 2: ["B-V", "B-A1"]}
    # the table order does not matter, the predicate positions do
    pred = predicted_props(GOLD, list(reversed(TABLE)), decoded, "g.props")
    assert pred == [
        (["-", "see", "-", "leave"], [["(A0*)", "(V*)", "*", "*"], ["*", "*", "(A1*)", "(V*)"]]),
        (["-"], []),
        (["leave", "-"], [["(V*)", "(A1*)"]]),
    ]


def test_predicted_props_disagreements():
    decoded = {0: ["O"] * 4, 1: ["O"] * 4, 2: ["O"] * 2}
    with pytest.raises(ValueError, match="g.props: sentence 0: predicates"):
        predicted_props(GOLD, TABLE[1:], decoded, "g.props")
    with pytest.raises(ValueError, match="refer to sentence 3"):
        predicted_props(GOLD, TABLE + [datadir.Instance(3, 3, 0)], {**decoded, 3: ["O"]}, "g.props")
    with pytest.raises(ValueError, match="instance 2 has 3 tags for 2 words"):
        predicted_props(GOLD, TABLE, {**decoded, 2: ["O"] * 3}, "g.props")


def test_missing_inputs(tmp_path):
    with pytest.raises(EvaluationError, match="does not exist"):
        evaluate_checkpoint(str(tmp_path / "none"), str(tmp_path / "c.pt"), "test",
                            str(tmp_path / "g"), str(tmp_path / "p"), str(tmp_path / "j"))


def test_decode_subset_covers_every_instance(tmp_path):
    from fairseq import options, tasks

    (tmp_path / "t.words").write_text("I\nsaw\nher\nleave\n\nShe\nleft\n\nRain\n")
    (tmp_path / "t.props").write_text("-   (A0*)   *\nsee (V*)    *\n-  (A1*   (A0*)\n"
                                      "leave *)   (V*)\n\n-  (A0*)\nleave (V*)\n\n-\n")
    dest = str(tmp_path / "bin")
    prepare("conll2005", {"train": str(tmp_path / "t")}, dest)
    args = options.parse_args_and_arch(options.get_training_parser(), [
        dest, "--task", "srl", "--arch", "srl_tagger", "--encoder-embed-dim", "16",
        "--encoder-ffn-embed-dim", "32", "--encoder-layers", "1", "--encoder-attention-heads",
        "2", "--cpu"])
    task = tasks.setup_task(args)
    model = task.build_model(args).eval()
    decoded = decode_subset(task, model, "train", batch_size=2, use_cuda=False)
    table = datadir.read_instances(datadir.instances_path(dest, "train"))
    assert sorted(decoded) == [row.instance for row in table]
    for row in table:
        assert decoded[row.instance][row.predicate] == "B-V"  # constrained decoding
    from ssan_plugin.srl.props import read_props

    gold = read_props(datadir.props_path(dest, "train"))
    pred = predicted_props(gold, table, decoded, "train.props")
    assert [targets for targets, _ in pred] == [targets for targets, _ in gold]


def test_a_checkpoint_of_another_dictionary_is_one_line(tmp_path):
    """Before fairseq builds the model (whose state-dict load would fail with a traceback): the
    word embedding's rows against the data directory's word dictionary."""
    import torch

    from ssan_plugin.srl.evaluate import load_srl_checkpoint

    (tmp_path / "t.words").write_text("I\nsaw\nher\nleave\n")
    (tmp_path / "t.props").write_text("-   (A0*)\nsee (V*)\n-  (A1*\n-  *)\n")
    dest = tmp_path / "bin"
    prepare("conll2005", {"train": str(tmp_path / "t")}, str(dest))
    entries = len((dest / datadir.WORD_DICT).read_text().splitlines()) + 4  # + specials
    checkpoint = tmp_path / "other.pt"
    torch.save({"model": {"encoder.embed_tokens.weight": torch.zeros(entries + 3, 4)},
                "cfg": {"task": {"_name": "srl"}, "model": {"_name": "srl_tagger"}}}, checkpoint)
    with pytest.raises(EvaluationError, match=(
            rf"other.pt was trained on another dictionary: expected a word embedding of "
            rf"{entries} rows \(.*dict.words.txt, with the 4 special symbols\), found "
            rf"{entries + 3}")):
        load_srl_checkpoint(str(checkpoint), str(dest))
