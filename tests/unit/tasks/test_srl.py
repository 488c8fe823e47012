"""ssan_plugin/tasks/srl.py: the srl task on a tiny prepared directory, with stand-in models
(fixed log-probabilities) instead of a trained tagger: what a batch holds, which splits carry
the gold propositions, each missing or mismatched file named, the batch-size multiple kept off
the validation splits, constrained decoding against a brute-force search, and the validation
span counts summed over batches into precision / recall / F1."""

import itertools
import math
import shutil

import numpy as np
import pytest
import torch
from fairseq.logging import metrics

from ssan_plugin.srl import datadir
from ssan_plugin.srl.binarize import prepare, write_indexed
from ssan_plugin.srl.validation import read_gold_instances
from ssan_plugin.tasks.srl import GOLD, SRLConfig, SRLTask

# 3 sentences: "I saw her leave" (two predicates), "She left" (one), "Rain" (none): 3 instances.
# Gold arguments (V excluded): see -> A0 "I", A1 "her leave"; leave -> A0 "her"; left -> A0 "She".
WORDS = "I\nsaw\nher\nleave\n\nShe\nleft\n\nRain\n"
PROPS = ("-   (A0*)   *\nsee (V*)    *\n-  (A1*   (A0*)\nleave *)   (V*)\n\n"
         "-  (A0*)\nleave (V*)\n\n-\n")
GOLD_ARGUMENTS = 4


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    raw = tmp_path_factory.mktemp("srl_raw")
    (raw / "t.words").write_text(WORDS)
    (raw / "t.props").write_text(PROPS)
    dest = tmp_path_factory.mktemp("srl") / "bin"
    prepare("conll2005", {"train": str(raw / "t"), "valid": str(raw / "t")}, str(dest))
    return dest


@pytest.fixture
def copy(data, tmp_path):
    """A copy of the prepared directory, to break."""
    return shutil.copytree(data, tmp_path / "bin")


def make_task(data, **kwargs):
    kwargs.setdefault("seed", 1)
    kwargs.setdefault("train_subset", "train")
    return SRLTask.setup_task(SRLConfig(data=str(data), **kwargs))


def whole_split(task, split):
    dataset = task.load_dataset(split)
    return dataset.collater([dataset[i] for i in range(len(dataset))])


# ---------------------------------------------------------------- set-up and loading

def test_setup_reads_the_three_dictionaries(data):
    task = make_task(data)
    assert task.source_dictionary is task.word_dict and task.target_dictionary is task.label_dict
    assert task.label_dict.symbols[task.label_dict.nspecial:] == ["B-A0", "B-V", "O", "B-A1", "I-A1"]
    assert {"I", "saw", "her", "leave", "She", "left", "Rain"} <= set(task.word_dict.symbols)
    assert set("Isawherleave") <= set(task.char_dict.symbols)


@pytest.mark.parametrize("name", [datadir.WORD_DICT, datadir.LABEL_DICT])
def test_setup_names_a_missing_dictionary(copy, name):
    (copy / name).unlink()
    with pytest.raises(FileNotFoundError) as err:
        make_task(copy)
    assert str(copy / name) in str(err.value) and "ssan-prepare-srl" in str(err.value)


def test_batch_holds_words_predicate_labels_and_characters(data):
    task = make_task(data, no_shuffle=True)
    batch = whole_split(task, "valid")
    net = batch["net_input"]
    words = [[task.word_dict[int(i)] for i in row[:n]]
             for row, n in zip(net["src_tokens"], net["src_lengths"].tolist())]
    assert words == [["I", "saw", "her", "leave"], ["I", "saw", "her", "leave"], ["She", "left"]]
    assert net["src_lengths"].tolist() == [4, 4, 2] and batch["ntokens"] == 10
    assert batch["nsentences"] == 3 and batch["id"].tolist() == [0, 1, 2]
    # the predicate indicator: 1 at the predicate word, padded with NOT_PREDICATE
    assert net["predicate"].tolist() == [[0, 1, 0, 0], [0, 0, 0, 1], [0, 1, 0, 0]]
    labels = [[task.label_dict[int(i)] for i in row] for row in batch["target"]]
    assert labels == [["B-A0", "B-V", "B-A1", "I-A1"], ["O", "O", "B-A0", "B-V"],
                      ["B-A0", "B-V", "<pad>", "<pad>"]]
    assert net["src_tokens"][2, 2:].eq(task.word_dict.pad()).all()
    assert net["chars"].shape[:2] == net["src_tokens"].shape


def test_without_character_dictionary_the_batch_has_no_characters(copy):
    (copy / datadir.CHAR_DICT).unlink()
    for name in ("train.chars", "valid.chars"):
        for ext in (".bin", ".idx"):
            (copy / (name + ext)).unlink()
    task = make_task(copy)
    assert task.char_dict is None
    assert "chars" not in whole_split(task, "valid")["net_input"]


def test_characters_missing_while_their_dictionary_exists(copy):
    for ext in (".bin", ".idx"):
        (copy / ("valid.chars" + ext)).unlink()
    with pytest.raises(FileNotFoundError) as err:
        make_task(copy).load_dataset("valid")
    message = str(err.value)
    assert str(copy / "valid.chars") in message and str(copy / datadir.CHAR_DICT) in message


def test_a_split_that_was_not_prepared(data):
    with pytest.raises(FileNotFoundError) as err:
        make_task(data).load_dataset("test")
    assert str(data / "test.words") + ".{bin,idx} not found" in str(err.value)
    assert "ssan-prepare-srl" in str(err.value)


def test_misaligned_datasets_are_refused(copy, data):
    task = make_task(data)
    # labels of other lengths (2, 1, 1 entries instead of 4, 4, 2)
    write_indexed(str(copy / "valid.labels"), [[4, 5], [6], [6]], len(task.label_dict))
    with pytest.raises(ValueError, match="SRL split 'valid': words, predicate and labels do not align"):
        make_task(copy).load_dataset("valid")


# ---------------------------------------------------------------- the gold of validation splits

def test_gold_only_outside_the_training_split(data):
    task = make_task(data, no_shuffle=True)
    batch = whole_split(task, "valid")
    assert batch[GOLD] == read_gold_instances(str(data), "valid")
    assert [g.targets for g in batch[GOLD]] == [["-", "see", "-", "-"], ["-", "-", "-", "leave"],
                                                ["-", "leave"]]
    assert GOLD not in whole_split(task, "train")
    assert GOLD not in whole_split(make_task(data, no_eval_f1=True), "valid")


def test_missing_gold_files_are_named_and_no_eval_f1_does_without(copy):
    (copy / "valid.props").unlink()
    with pytest.raises(FileNotFoundError) as err:
        make_task(copy).load_dataset("valid")
    assert str(copy / "valid.props") in str(err.value) and "--no-eval-f1" in str(err.value)
    assert len(make_task(copy, no_eval_f1=True).load_dataset("valid")) == 3


def test_gold_table_of_other_instances_is_refused(copy):
    table = (copy / "valid.instances.tsv").read_text().splitlines()
    (copy / "valid.instances.tsv").write_text("\n".join(table[:-1]) + "\n")  # 2 instances of 3
    with pytest.raises(ValueError, match="do not match the indexed datasets"):
        make_task(copy).load_dataset("valid")


# ---------------------------------------------------------------- order and batches

def test_order_by_length_with_seeded_ties_or_file_order(data):
    in_order = make_task(data, no_shuffle=True).load_dataset("valid")
    assert in_order.ordered_indices().tolist() == [0, 1, 2]
    sizes = np.array([4, 4, 2])
    shuffle = np.random.RandomState(1).permutation(3)  # data_utils.numpy_seed(1)
    expected = sorted(range(3), key=lambda i: (sizes[i], shuffle[i]))
    assert make_task(data, seed=1).load_dataset("valid").ordered_indices().tolist() == expected
    orders = {tuple(make_task(data, seed=s).load_dataset("valid").ordered_indices().tolist())
              for s in range(1, 8)}
    assert orders == {(2, 0, 1), (2, 1, 0)}  # the shortest first, the tie in a seeded order


def batches(task, split, multiple):
    itr = task.get_batch_iterator(task.load_dataset(split), max_sentences=2, seed=1,
                                  required_batch_size_multiple=multiple)
    return [b["id"].tolist() for b in itr.next_epoch_itr(shuffle=False)]


def test_batch_size_multiple_applies_to_the_training_split_only(data):
    task = make_task(data, no_shuffle=True)
    # fairseq drops the last batch when its size is not a multiple: instance 2 of train
    assert batches(task, "train", 2) == [[0, 1]]
    assert batches(task, "train", 1) == [[0, 1], [2]]
    # a validation split keeps every instance, whatever the multiple
    assert batches(task, "valid", 2) == [[0, 1], [2]]


# ---------------------------------------------------------------- decoding and validation F1

class FixedScores(torch.nn.Module):
    """A stand-in tagger: the scores of an instance are ``table[(words, predicate)]``, a
    (words, labels) tensor; its log-softmax is what the task decodes."""

    def __init__(self, table, n_labels):
        super().__init__()
        self.table, self.n_labels = table, n_labels

    def forward(self, src_tokens, src_lengths, predicate, chars=None):
        out = torch.zeros(*src_tokens.shape, self.n_labels)
        for b, n in enumerate(src_lengths.tolist()):
            key = (tuple(src_tokens[b, :n].tolist()), int(predicate[b].argmax()))
            out[b, :n] = self.table[key]
        return out

    def get_normalized_probs(self, net_output, log_probs):
        assert log_probs
        return torch.log_softmax(net_output, dim=-1)


class NoLoss:
    """A stand-in criterion: loss 0, and the counts fairseq's logging expects."""

    def __call__(self, model, sample):
        return torch.zeros(()), 1, {"loss": 0.0, "ntokens": sample["ntokens"],
                                    "nsentences": sample["nsentences"], "sample_size": 1}

    @staticmethod
    def reduce_metrics(logging_outputs):
        pass


def instance_keys(batch):
    net = batch["net_input"]
    return [(tuple(net["src_tokens"][b, :n].tolist()), int(net["predicate"][b].argmax()))
            for b, n in enumerate(net["src_lengths"].tolist())]


def model_preferring(task, batch, tags_of):
    """A model whose best tag at each word is ``tags_of(length, predicate)[word]``."""
    table = {}
    for key in instance_keys(batch):
        scores = torch.zeros(len(key[0]), len(task.label_dict))
        for i, tag in enumerate(tags_of(len(key[0]), key[1])):
            scores[i, task.label_dict.index(tag)] = 10.0
        table[key] = scores
    return FixedScores(table, len(task.label_dict))


def valid_counts(task, model, batch):
    _, _, log = task.valid_step(batch, model, NoLoss())
    return log["srl_correct"], log["srl_excess"], log["srl_missed"]


def test_valid_step_counts_against_hand_scored_taggings(data):
    task = make_task(data)
    batch = whole_split(task, "valid")
    gold_bio = {key: [task.label_dict[int(i)] for i in row[:len(key[0])]]
                for key, row in zip(instance_keys(batch), batch["target"])}
    oracle = FixedScores({k: torch.nn.functional.one_hot(
        torch.tensor([task.label_dict.index(t) for t in tags]), len(task.label_dict)).float() * 10
        for k, tags in gold_bio.items()}, len(task.label_dict))
    assert valid_counts(task, oracle, batch) == (GOLD_ARGUMENTS, 0, 0)

    def only_o(n, p):
        return ["B-V" if i == p else "O" for i in range(n)]

    assert valid_counts(task, model_preferring(task, batch, only_o), batch) == (0, 0, GOLD_ARGUMENTS)

    def every_word_a0(n, p):
        return ["B-V" if i == p else "B-A0" for i in range(n)]

    # see: A0 I correct, A0 her + A0 leave excess, A1 her-leave missed; leave: A0 her correct,
    # A0 I + A0 saw excess; left: A0 She correct
    assert valid_counts(task, model_preferring(task, batch, every_word_a0), batch) == (3, 4, 1)
    # the training split carries no gold: no counts
    _, _, log = task.valid_step(whole_split(task, "train"), oracle, NoLoss())
    assert "srl_correct" not in log


def reduced(task, logging_outputs):
    with metrics.aggregate(new_root=True) as agg:
        task.reduce_metrics(logging_outputs, NoLoss())
        return agg.get_smoothed_values()


def test_f1_is_derived_from_the_summed_counts(data):
    task = make_task(data)
    logs = [{"srl_correct": 1, "srl_excess": 2, "srl_missed": 1, "ntokens": 4, "nsentences": 1},
            {"srl_correct": 2, "srl_excess": 2, "srl_missed": 0, "ntokens": 6, "nsentences": 2}]
    values = reduced(task, logs)
    p, r = 100 * 3 / 7, 100 * 3 / 4  # summed: correct 3, excess 4, missed 1
    assert values["precision"] == pytest.approx(p)
    assert values["recall"] == pytest.approx(r)
    assert values["f1"] == pytest.approx(2 * p * r / (p + r))
    # not the mean of the batches' F1 (40.0 and 66.7)
    assert not math.isclose(values["f1"], (40.0 + 2 * 50 * 100 / 150) / 2, rel_tol=1e-3)
    nothing = reduced(task, [{"srl_correct": 0, "srl_excess": 0, "srl_missed": 0}])
    assert nothing["precision"] == nothing["recall"] == nothing["f1"] == 0
    assert "f1" not in reduced(task, [{"ntokens": 4, "nsentences": 1}])


def is_valid(tags, predicate):
    """The constraints of the task's decoding, written out: BIO tags only, I-X right after
    B-X or I-X, a tag of the predicate at the predicate word."""
    for i, tag in enumerate(tags):
        if tag.startswith("<"):
            return False
        if tag.startswith("I-") and (i == 0 or tags[i - 1][2:] != tag[2:] or tags[i - 1] == "O"):
            return False
    return tags[predicate] in ("B-V", "I-V")


def test_decode_is_the_best_valid_tagging(data):
    task = make_task(data)
    batch = whole_split(task, "valid")
    generator = torch.Generator().manual_seed(0)
    labels = task.label_dict.symbols
    for trial in range(5):
        table = {key: torch.randn(len(key[0]), len(labels), generator=generator)
                 for key in instance_keys(batch)}
        if trial == 0:  # the unconstrained best is invalid: I-A1 first, O at the predicate
            for key, scores in table.items():
                scores[0, task.label_dict.index("I-A1")] = 50.0
                scores[key[1], task.label_dict.index("O")] = 50.0
        model = FixedScores(table, len(labels))
        decoded = task.decode(model, batch)
        assert sorted(decoded) == batch["id"].tolist()
        for row, (index, key) in enumerate(zip(batch["id"].tolist(), instance_keys(batch))):
            lprobs = torch.log_softmax(table[key], dim=-1)
            best = max((tags for tags in itertools.product(labels, repeat=len(key[0]))
                        if is_valid(tags, key[1])),
                       key=lambda tags: sum(float(lprobs[i, labels.index(t)])
                                            for i, t in enumerate(tags)))
            assert decoded[index] == list(best), (trial, row)
    assert task.constraints is task.constraints  # built once
