"""ssan_plugin/models/pair_classifier.py (with the sentence_pair task on a tiny data dir)."""

import dataclasses

import pytest
import torch
from helpers.pairs_cli import TINY_PAIR_MODEL, batch, build_pair, prepare_in_process, sick_rows

from ssan_plugin.models.pair_classifier import (
    mean_pool,
    pair_features,
    pair_records,
    stack_pair,
)
from ssan_plugin.modules.selection import SelectionStats


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
    assert [hasattr(layer.self_attn, "tau") for layer in model.encoder.layers] == [False, True]
    assert model.encoder.layers[1].self_attn.tau == 0.7
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
