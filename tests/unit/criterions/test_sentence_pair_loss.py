"""ssan_plugin/criterions/sentence_pair_loss.py: each head's loss against a direct computation,
the selective criterion's regulariser and REINFORCE on pairs, and its errors."""

import pytest
import torch
import torch.nn.functional as F
from helpers.pairs_cli import TINY_PAIR_MODEL, batch, build_pair, prepare_in_process, sick_rows

from ssan_plugin.pairs.relatedness import relatedness_distribution


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return prepare_in_process(tmp_path_factory.mktemp("pairs") / "bin", sick_rows(30),
                              sick_rows(12, start_id=100))


def run(data, *argv, train=False):
    task, model, criterion = build_pair(data, *TINY_PAIR_MODEL, *argv)
    assert criterion.relatedness_loss == model.relatedness_loss == task.cfg.relatedness_loss
    model.train(train)
    sample = batch(task)
    torch.manual_seed(0)
    loss, sample_size, log = criterion(model, sample)
    torch.manual_seed(0)
    logits, extra = model(**sample["net_input"])
    return loss, sample_size, log, logits, extra, sample


def test_entailment_is_cross_entropy_per_pair(data):
    loss, sample_size, log, logits, _, sample = run(data)
    gold = sample["target"]["entailment"]
    assert gold.tolist() == [0, 2, 1, 0, 2, 1]  # entailment, contradiction, neutral, ...
    ce = F.cross_entropy(logits["entailment"], gold, reduction="sum")
    assert sample_size == 6 and log["ntokens"] == 6 and log["nsentences"] == 6
    assert float(loss) == pytest.approx(float(ce), rel=1e-5)
    assert float(log["nll_loss"]) == pytest.approx(float(ce), rel=1e-5)
    assert log["n_correct"] == int((logits["entailment"].argmax(-1) == gold).sum())
    assert log["total"] == 6


def test_label_smoothing_applies_to_entailment(data):
    loss, _, log, logits, _, sample = run(data, "--label-smoothing", "0.1")
    lprobs = F.log_softmax(logits["entailment"], -1)
    gold = sample["target"]["entailment"]
    nll = -lprobs.gather(1, gold[:, None]).squeeze(1)
    eps_i = 0.1 / (3 - 1)
    expected = (1 - 0.1 - eps_i) * nll - eps_i * lprobs.sum(-1)  # fairseq's form
    assert float(loss) == pytest.approx(float(expected.sum()), rel=1e-5)
    assert float(log["nll_loss"]) == pytest.approx(float(nll.sum()), rel=1e-5)


def test_relatedness_kl_to_tai_distribution(data):
    loss, _, log, logits, _, sample = run(data, "--pair-target", "relatedness")
    y = sample["target"]["relatedness"]
    assert y.tolist() == [5.0, 3.5, 2.0, 5.0, 3.5, 2.0]
    p = relatedness_distribution(y)
    q = F.log_softmax(logits["relatedness"], -1)
    kl = (p * (torch.log(p.clamp(min=1e-30)) - q)).sum()
    assert float(loss) == pytest.approx(float(kl), rel=1e-5)
    predicted = F.softmax(logits["relatedness"], -1) @ torch.arange(1.0, 6.0)
    assert log["rel_sq_err"] == pytest.approx(float(((predicted - y) ** 2).sum()), rel=1e-5)


def test_relatedness_mse_and_both_heads_sum(data):
    loss, _, _, logits, _, sample = run(data, "--pair-target", "relatedness",
                                        "--relatedness-loss", "mse")
    y = sample["target"]["relatedness"]
    predicted = 1 + 4 * torch.sigmoid(logits["relatedness"].squeeze(-1))
    assert float(loss) == pytest.approx(float(((predicted - y) ** 2).sum()), rel=1e-5)
    loss, _, _, logits, _, sample = run(data, "--pair-target", "both")
    ce = F.cross_entropy(logits["entailment"], sample["target"]["entailment"], reduction="sum")
    p = relatedness_distribution(sample["target"]["relatedness"])
    kl = (p * (torch.log(p.clamp(min=1e-30)) - F.log_softmax(logits["relatedness"], -1))).sum()
    assert float(loss) == pytest.approx(float(ce + kl), rel=1e-5)


def test_selection_regulariser_as_in_translation(data):
    loss, sample_size, log, logits, extra, sample = run(
        data, "--pair-encoder", "ssan", "--select-scale", "0.5", "--nce-scale", "0.25")
    records = extra["selection_stats"]
    assert [r.layer for r in records] == [0, 1]
    ce = F.cross_entropy(logits["entailment"], sample["target"]["entailment"], reduction="sum")
    reg = sum(0.5 * r.pair_rate + 0.25 * r.neg_entropy for r in records)
    assert float(loss) == pytest.approx(float(ce + reg * sample_size), rel=1e-5)
    assert log["ssan_reg"] == pytest.approx(float(reg * sample_size), rel=1e-5)
    assert log["sel_pairs_0"] > 0 and log["sel_pairs_1"] > 0


def test_reinforce_rewards_one_per_pair(data):
    loss, _, log, *_ = run(data, "--pair-encoder", "resa", train=True)
    assert log["resa_n"] == 6  # one reward per pair, not per sentence
    assert "resa_pg" in log
    task, model, criterion = build_pair(data, *TINY_PAIR_MODEL, "--pair-encoder", "resa")
    model.train()
    loss, _, _ = criterion(model, batch(task))
    loss.backward()
    sampler_grads = [p.grad for n, p in model.named_parameters() if "rss" in n.lower()]
    assert sampler_grads and any(g is not None and g.abs().sum() > 0 for g in sampler_grads)


def test_regulariser_without_selector_is_an_error(data):
    with pytest.raises(ValueError, match="weight a selector, but this model has none"):
        run(data, "--select-scale", "0.1")
