"""ssan_plugin/tasks/sentence_pair.py: the sentence_pair task on a tiny prepared directory
(synthetic SICK rows, word tokens): the heads each --pair-target / --relatedness-loss asks for,
a batch checked against the raw pairs, every missing or mismatched input named, predictions
mapped back to pair indices, and --encoder-init applied only to a model built for training."""

import shutil

import numpy as np
import pytest
import torch
from fairseq.tasks import FairseqTask
from helpers.pairs_cli import prepare_in_process, sick_rows

from ssan_plugin.errors import OptionError
from ssan_plugin.pairs import datadir
from ssan_plugin.pairs.corpus import LABELS
from ssan_plugin.tasks.sentence_pair import SentencePairConfig, SentencePairTask

TRAIN, VALID = sick_rows(12), sick_rows(5, start_id=100)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return prepare_in_process(tmp_path_factory.mktemp("pairs") / "bin", TRAIN, VALID)


@pytest.fixture
def copy(data, tmp_path):
    return shutil.copytree(data, tmp_path / "bin")


def make_task(data, **kwargs):
    kwargs.setdefault("seed", 1)
    return SentencePairTask.setup_task(SentencePairConfig(data=str(data), **kwargs))


def whole_split(task, split):
    dataset = task.load_dataset(split)
    return dataset.collater([dataset[i] for i in range(len(dataset))])


@pytest.mark.parametrize("target, loss, heads", [
    ("entailment", "kl", {"entailment": 3}),
    ("relatedness", "kl", {"relatedness": 5}),  # Tai et al.'s five levels
    ("relatedness", "mse", {"relatedness": 1}),  # one score
    ("both", "mse", {"entailment": 3, "relatedness": 1}),
    ("both", "kl", {"entailment": 3, "relatedness": 5}),
])
def test_heads_follow_the_target_and_the_loss(data, target, loss, heads):
    task = make_task(data, pair_target=target, relatedness_loss=loss)
    assert task.heads == heads and task.relatedness_loss == loss
    assert task.target_dictionary is None and task.max_positions() is None
    assert task.source_dictionary is task.dictionary


def test_an_unknown_relatedness_loss_is_an_option_error(data):
    task = make_task(data, pair_target="relatedness", relatedness_loss="l1")
    with pytest.raises(OptionError, match="--relatedness-loss must be one of kl, mse"):
        task.heads


def test_setup_names_the_missing_dictionary(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        make_task(tmp_path)
    assert str(tmp_path / "dict.s1.txt") in str(err.value)
    assert "ssan-prepare-pairs" in str(err.value)


def test_batch_is_the_pairs_with_their_gold(data):
    task = make_task(data, pair_target="both", no_shuffle=True)
    batch = whole_split(task, "valid")
    net, d = batch["net_input"], task.dictionary

    def sentences(tokens, lengths):
        out = []
        for row, n in zip(tokens, lengths.tolist()):
            assert int(row[n - 1]) == d.eos() and row[n:].eq(d.pad()).all()  # EOS kept, padded
            out.append(" ".join(d[int(i)] for i in row[:n - 1]))
        return out

    assert sentences(net["src_tokens"], net["src_lengths"]) == [a for _, a, _, _, _ in VALID]
    assert sentences(net["src2_tokens"], net["src2_lengths"]) == [b for _, _, b, _, _ in VALID]
    assert batch["target"]["entailment"].tolist() == [LABELS.index(label.lower())
                                                      for *_, label, _ in VALID]
    assert batch["target"]["relatedness"].tolist() == [score for *_, score in VALID]
    assert batch["ntokens"] == sum(len(a.split()) + len(b.split()) + 2 for _, a, b, _, _ in VALID)
    assert batch["nsentences"] == len(VALID) and batch["id"].tolist() == list(range(len(VALID)))
    only = whole_split(make_task(data, pair_target="entailment", no_shuffle=True), "valid")
    assert set(only["target"]) == {"entailment"}


def test_order_by_the_longer_sentence_ties_seeded(data):
    assert make_task(data, no_shuffle=True).load_dataset("train").ordered_indices().tolist() == \
        list(range(len(TRAIN)))
    sizes = np.array([max(len(a.split()), len(b.split())) + 1 for _, a, b, _, _ in TRAIN])
    shuffle = np.random.RandomState(3).permutation(len(TRAIN))  # data_utils.numpy_seed(3)
    expected = sorted(range(len(TRAIN)), key=lambda i: (sizes[i], shuffle[i]))
    assert make_task(data, seed=3).load_dataset("train").ordered_indices().tolist() == expected


def test_a_split_that_was_not_prepared(copy):
    for ext in (".bin", ".idx"):
        (copy / ("valid.s1-s2.s2" + ext)).unlink()
    with pytest.raises(FileNotFoundError) as err:
        make_task(copy).load_dataset("valid")
    assert str(copy / "valid.s1-s2.s2") + ".{bin,idx} not found" in str(err.value)


def test_gold_rows_must_match_the_sentences(copy):
    gold = datadir.read_gold(datadir.gold_path(copy, "valid"))
    datadir.write_gold(datadir.gold_path(copy, "valid"), gold[:-1])
    with pytest.raises(ValueError, match="'valid': 5 first sentences, 5 second sentences, 4 gold rows"):
        make_task(copy).load_dataset("valid")


def test_missing_labels_or_scores_for_the_chosen_heads(copy):
    gold = datadir.read_gold(datadir.gold_path(copy, "valid"))
    datadir.write_gold(datadir.gold_path(copy, "valid"), [p._replace(score=None) for p in gold])
    with pytest.raises(ValueError, match="without relatedness score .* use --pair-target entailment"):
        make_task(copy, pair_target="relatedness").load_dataset("valid")
    assert len(make_task(copy, pair_target="entailment").load_dataset("valid")) == len(VALID)
    datadir.write_gold(datadir.gold_path(copy, "valid"), [p._replace(label=None) for p in gold])
    with pytest.raises(ValueError, match="split 'valid' has pairs without entailment label"):
        make_task(copy, pair_target="both").load_dataset("valid")


class Predicts(torch.nn.Module):
    """A stand-in model: row b of the batch gets label ``labels[b]`` and score ``scores[b]``."""

    def __init__(self, labels=None, scores=None):
        super().__init__()
        self.labels, self.scores = labels, scores

    def forward(self, src_tokens, src_lengths, src2_tokens, src2_lengths):
        return src_tokens.size(0)

    def predict(self, rows):
        out = {}
        if self.labels is not None:
            out["label"] = torch.tensor(self.labels[:rows])
        if self.scores is not None:
            out["score"] = torch.tensor(self.scores[:rows])
        return out


def test_predict_maps_rows_to_pair_indices(data):
    task = make_task(data, pair_target="both", seed=1)
    dataset = task.load_dataset("valid")
    order = dataset.ordered_indices().tolist()
    assert order != sorted(order)  # the batch is not in file order
    batch = dataset.collater([dataset[i] for i in order])
    out = task.predict(Predicts([2, 0, 1, 1, 0], [1.5, 2.0, 3.25, 4.0, 5.0]), batch)
    assert out == {index: {"label": LABELS[[2, 0, 1, 1, 0][row]],
                           "score": [1.5, 2.0, 3.25, 4.0, 5.0][row]}
                   for row, index in enumerate(order)}
    only_scores = task.predict(Predicts(scores=[1.0] * 5), batch)
    assert all(p == {"label": None, "score": 1.0} for p in only_scores.values())


def test_encoder_init_only_when_building_for_training(data, monkeypatch):
    built, calls = [], []

    class Model:
        encoder = object()

    monkeypatch.setattr(FairseqTask, "build_model",
                        lambda self, cfg, from_checkpoint=False: built.append(from_checkpoint) or Model())
    monkeypatch.setattr("ssan_plugin.pairs.transfer.init_encoder_from_translation",
                        lambda encoder, path: calls.append((encoder, path)))
    task = make_task(data, encoder_init="mt.pt")
    task.build_model(None)
    assert calls == [(Model.encoder, "mt.pt")]
    task.build_model(None, from_checkpoint=True)  # a model rebuilt from its own checkpoint
    assert len(calls) == 1 and built == [False, True]
    make_task(data).build_model(None)
    assert len(calls) == 1
