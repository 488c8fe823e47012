"""ssan_plugin/criterions/selective_label_smoothed_cross_entropy.py: against fairseq's
label-smoothed CE, the regularisers, REINFORCE (estimator, baselines, reward, warm-up), and the
errors for terms that would act on nothing."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq import options, tasks
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion

import ssan_plugin  # noqa: F401  (registrations)
from ssan_plugin.criterions.selective_label_smoothed_cross_entropy import (
    SelectiveLabelSmoothedCrossEntropyCriterion,
    leave_one_out_mean,
    policy_gradient_loss,
)
from ssan_plugin.modules.selection import SelectionStats
from conftest import PLUGIN_DIR, TINY_MODEL
from helpers.fairseq_setup import build as start_up, first_batch
from helpers.resa import make_criterion


def sampled_record(log_prob, token_rate, in_warmup=False):
    """A layer record of a sampled selector (counts irrelevant here)."""
    one = torch.tensor(1.0)
    return SelectionStats(pairs_selected=one, pairs_possible=2 * one, decisions=2 * one,
                          entropy_sum=0 * one, pair_rate=0 * one, pair_count=0 * one,
                          neg_entropy=0 * one, log_prob=log_prob, sentence_token_rate=token_rate,
                          in_warmup=in_warmup, layer=0)


def build(tiny_bin, *extra):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(tiny_bin), "--user-dir", str(PLUGIN_DIR), "--arch", "ssan_transformer", "--cpu",
        "--criterion", "selective_label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        *TINY_MODEL, *extra,
    ])
    task = tasks.setup_task(args)
    task.load_dataset("valid")
    model = task.build_model(args)
    batch = task.dataset("valid").collater([task.dataset("valid")[i] for i in range(8)])
    return args, task, model, batch


def loss_and_grads(criterion, model, batch, seed=0):
    model.zero_grad()
    torch.manual_seed(seed)  # the same Gumbel noise in every call
    loss, sample_size, logs = criterion(model, batch)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return loss.detach(), sample_size, logs, grads


def test_zero_weights_equal_fairseq_label_smoothed_ce(tiny_bin):
    args, task, model, batch = build(tiny_bin)
    model.train()
    ours = SelectiveLabelSmoothedCrossEntropyCriterion(task, False, 0.1)
    theirs = LabelSmoothedCrossEntropyCriterion(task, False, 0.1)
    l1, s1, logs, g1 = loss_and_grads(ours, model, batch)
    l2, s2, _, g2 = loss_and_grads(theirs, model, batch)
    assert s1 == s2 and torch.equal(l1, l2)
    assert g1.keys() == g2.keys() and all(torch.equal(g1[k], g2[k]) for k in g1)
    assert {f"sel_selected_{i}" for i in range(2)} <= logs.keys()


@pytest.mark.parametrize("form", ["rate", "count"])
def test_regularisers_add_sample_size_times_mean(tiny_bin, form):
    args, task, model, batch = build(tiny_bin)
    model.train()
    plain = SelectiveLabelSmoothedCrossEntropyCriterion(task, False, 0.1)
    reg = SelectiveLabelSmoothedCrossEntropyCriterion(
        task, False, 0.1, select_scale=0.3, nce_scale=0.7, select_penalty_form=form
    )
    l1, s1, _, g1 = loss_and_grads(plain, model, batch)
    torch.manual_seed(0)
    net_output = model(**batch["net_input"])
    stats = net_output[1]["selection_stats"]
    assert [s.layer for s in stats] == [0, 1]
    expected = sum(0.3 * s.regulariser(form).item() + 0.7 * s.neg_entropy.item() for s in stats)
    l2, s2, logs, g2 = loss_and_grads(reg, model, batch)
    assert s1 == s2
    assert (l2 - l1).item() == pytest.approx(expected * s1, rel=1e-4)
    assert logs["ssan_reg"] == pytest.approx(expected * s1, rel=1e-4)
    # the regularisers reach the policy networks, not the decoder
    policy = [k for k in g1 if "policy_proj" in k]
    assert policy and all(not torch.allclose(g1[k], g2[k]) for k in policy)
    decoder = [k for k in g1 if k.startswith("decoder.")]
    assert all(torch.allclose(g1[k], g2[k], atol=1e-7) for k in decoder)


def test_rate_regulariser_pushes_selection_down(tiny_bin):
    args, task, model, batch = build(tiny_bin)
    model.train()
    crit = SelectiveLabelSmoothedCrossEntropyCriterion(task, False, 0.0, select_scale=50.0)
    opt = torch.optim.Adam([p for n, p in model.named_parameters() if "policy_proj" in n], lr=0.05)
    rates = []
    for step in range(15):
        opt.zero_grad()
        loss, _, logs = crit(model, batch)
        loss.backward()
        opt.step()
        rates.append(sum(logs[f"sel_selected_{i}"] for i in range(2)) / sum(logs[f"sel_pairs_{i}"] for i in range(2)))
    assert rates[-1] < 0.5 * rates[0], rates


@pytest.mark.parametrize("kwargs, message", [
    (dict(select_scale=-1.0), "--select-scale must be finite and >= 0"),
    (dict(nce_scale=-0.5), "--nce-scale must be finite and >= 0"),
    (dict(select_penalty_form="sum"), "--select-penalty-form"),
])
def test_bad_weights_rejected(tiny_bin, kwargs, message):
    args, task, model, batch = build(tiny_bin)
    with pytest.raises(ValueError, match=message):
        SelectiveLabelSmoothedCrossEntropyCriterion(task, False, 0.1, **kwargs)


def test_policy_gradient_learns_known_selection_on_bernoulli_toy():
    """Reward +1 per selected good item, -1 per selected bad one: optimum = select exactly the good."""
    torch.manual_seed(0)
    good = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    theta = torch.zeros(6, requires_grad=True)
    opt = torch.optim.Adam([theta], lr=0.1)
    for _ in range(150):
        p = torch.sigmoid(theta).expand(64, 6)
        z = torch.bernoulli(p.detach())
        log_prob = (z * F.logsigmoid(theta) + (1 - z) * F.logsigmoid(-theta)).sum(1)
        reward = -5.0 + (z * (2 * good - 1)).sum(1)  # offset like a CE loss
        loss, _ = policy_gradient_loss(reward, leave_one_out_mean(reward), log_prob)
        opt.zero_grad()
        loss.backward()
        opt.step()
    p = torch.sigmoid(theta)
    assert (p[:3] > 0.9).all() and (p[3:] < 0.1).all(), p


def test_baseline_is_unbiased_and_saves_variance():
    """Per-sample estimates -(R - b) d log pi / d theta: same mean with/without the leave-one-out
    baseline (both match the exact gradient), far smaller second moment with it."""
    torch.manual_seed(0)
    theta = torch.tensor([0.3, -0.2, 0.1, 0.0])
    w = torch.tensor([1.0, -1.0, 0.5, 0.0])
    p = torch.sigmoid(theta)
    n = 20000
    z = torch.bernoulli(p.expand(n, 4))
    reward = -5.0 + z @ w
    score = z - p  # d log pi(z) / d theta for a Bernoulli(sigmoid(theta))
    exact = -(p * (1 - p) * w)  # gradient of -E[R]
    raw = -reward.unsqueeze(1) * score
    adv = -(reward - leave_one_out_mean(reward)).unsqueeze(1) * score
    torch.testing.assert_close(raw.mean(0), exact, atol=0.06, rtol=0)
    torch.testing.assert_close(adv.mean(0), exact, atol=0.02, rtol=0)
    assert (adv.var(0) < 0.2 * raw.var(0))[:3].all()


def test_reward_and_baselines_follow_the_formula():
    log_prob = torch.tensor([-1.0, -2.0, -3.0], requires_grad=True)
    stats = [sampled_record(log_prob, torch.tensor([0.5, 1.0, 0.0]))]
    loss = torch.tensor([2.0, 1.0, 4.0])
    reward = -loss - 0.02 * torch.tensor([0.5, 1.0, 0.0])
    for mode, baseline in (("none", torch.zeros(3)), ("batch", (reward.sum() - reward) / 2)):
        pg, _ = make_criterion(resa_lambda=0.02, resa_baseline=mode).policy_loss(stats, loss)
        torch.testing.assert_close(pg, -((reward - baseline) * log_prob).mean())
    crit = make_criterion(resa_lambda=0.02, resa_baseline="running", resa_baseline_momentum=0.5)
    crit.policy_loss(stats, loss)  # first call: baseline = batch mean, then running update
    pg, _ = crit.policy_loss(stats, loss)
    torch.testing.assert_close(pg, -((reward - reward.mean()) * log_prob).mean())
    for bad in (dict(resa_lambda=-1.0), dict(resa_baseline="mean"), dict(resa_baseline_momentum=1.0),
                dict(resa_reward_loss="max"), dict(resa_policy_weight=-0.1)):
        with pytest.raises(ValueError, match="--resa-"):
            make_criterion(**bad)


class FakeSeq2Seq(nn.Module):
    """Logits from a table; a 'policy' theta whose log-probabilities the stats report."""

    def __init__(self, vocab, warmup=False):
        super().__init__()
        self.table = nn.Parameter(torch.randn(vocab))
        self.theta = nn.Parameter(torch.tensor([0.5, -0.5]))
        self.warmup = warmup

    def forward(self, src_tokens, src_lengths, prev_output_tokens):
        bsz, tgt_len = prev_output_tokens.shape
        logits = self.table.expand(bsz, tgt_len, -1)
        z = torch.tensor([[1.0, 0.0]]).expand(bsz, 2)
        log_prob = (z * F.logsigmoid(self.theta) + (1 - z) * F.logsigmoid(-self.theta)).sum(1)
        if self.warmup:
            log_prob = log_prob * 0.0
        record = sampled_record(log_prob, torch.full((bsz,), 0.5), in_warmup=self.warmup)
        return logits, {"selection_stats": [record]}

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        return F.log_softmax(net_output[0], dim=-1)

    def get_targets(self, sample, net_output):
        return sample["target"]


def fake_sample(pad_idx):
    target = torch.tensor([[5, 6, 7, 2], [5, 2, pad_idx, pad_idx], [6, 6, 2, pad_idx]])
    return {"net_input": {"src_tokens": target, "src_lengths": torch.tensor([4, 2, 3]),
                          "prev_output_tokens": target},
            "target": target, "ntokens": int(target.ne(pad_idx).sum())}


def test_criterion_adds_policy_loss_to_the_summed_loss():
    torch.manual_seed(0)
    crit = make_criterion(resa_lambda=0.01, resa_baseline="none")
    model = FakeSeq2Seq(10)
    sample = fake_sample(crit.padding_idx)
    model.eval()
    ce, sample_size, log_eval = crit(model, sample)
    assert "resa_pg" not in log_eval and sample_size == sample["ntokens"]
    model.train()
    loss, _, log_train = crit(model, sample)
    # per-sentence token-mean label-smoothed loss, as the reward sees it
    lprobs = F.log_softmax(model.table, -1)
    eps = 0.1 / (10 - 1)  # fairseq: epsilon / (vocabulary size - 1)
    per_token = -(1 - 0.1 - eps) * lprobs[sample["target"]] - eps * lprobs.sum()
    mask = sample["target"].ne(crit.padding_idx)
    sent = (per_token * mask).sum(1) / mask.sum(1)
    log_prob = F.logsigmoid(model.theta[0]) + F.logsigmoid(-model.theta[1])
    pg = -((-sent - 0.01 * 0.5).detach() * log_prob).mean()
    torch.testing.assert_close(loss, ce + pg * sample_size)
    assert log_train["loss"] == pytest.approx(float(ce))  # logged loss excludes the policy term
    loss.backward()
    expected = torch.autograd.grad(pg * sample_size, model.theta)[0]
    torch.testing.assert_close(model.theta.grad, expected)


def test_criterion_during_warmup_gives_zero_policy_gradient():
    crit = make_criterion()
    model = FakeSeq2Seq(10, warmup=True)
    model.train()
    loss, _, logs = crit(model, fake_sample(crit.padding_idx))
    loss.backward()
    assert model.theta.grad is not None and model.theta.grad.abs().max() == 0
    assert "resa_n" not in logs
    assert crit.running_baseline is None


def test_checkpointed_ssan_trains_policy_and_refuses_cut_off_regulariser(tiny_bin):
    task, model, criterion = start_up(tiny_bin, ["--arch", "ssan_transformer", "--checkpoint-activations",
                                              "--criterion", "selective_label_smoothed_cross_entropy"])
    sample = first_batch(task)
    model.train()
    loss, _, _ = criterion(model, sample)
    loss.backward()
    grad = model.encoder.layers[0].self_attn.selector.policy_proj.weight.grad
    assert grad is not None and grad.abs().sum() > 0  # straight-through through the layer output
    task, model, criterion = start_up(tiny_bin, ["--arch", "ssan_transformer", "--checkpoint-activations",
                                              "--criterion", "selective_label_smoothed_cross_entropy",
                                              "--select-scale", "0.1"])
    model.train()
    with pytest.raises(RuntimeError, match="--checkpoint-activations"):
        criterion(model, sample)


def test_regulariser_without_selector_is_an_error(tiny_bin):
    task, model, criterion = start_up(tiny_bin, ["--arch", "disan_transformer", "--criterion",
                                              "selective_label_smoothed_cross_entropy", "--select-scale", "0.1"])
    with pytest.raises(ValueError, match="has none"):
        criterion(model, first_batch(task))


def test_resa_trains_its_samplers_with_the_generic_criterion(tiny_bin):
    argv = ["--arch", "resa_transformer", "--criterion", "selective_label_smoothed_cross_entropy"]
    task, model, criterion = start_up(tiny_bin, argv)
    sample = first_batch(task)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if "_rss." in n}
    assert before
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for _ in range(3):
        optimizer.zero_grad()
        loss, _, logging_output = criterion(model, sample)
        loss.backward()
        optimizer.step()
    assert "resa_pg" in logging_output and "resa_var_ratio" not in logging_output
    unchanged = [n for n, p in model.named_parameters() if n in before and torch.equal(p, before[n])]
    assert unchanged == []
    # fairseq's own criterion ignores the selection: the samplers get no gradient at all
    task, model, plain = start_up(tiny_bin, ["--arch", "resa_transformer", "--criterion",
                                          "label_smoothed_cross_entropy"])
    model.train()
    loss, _, _ = plain(model, sample)
    loss.backward()
    assert all(p.grad is None for n, p in model.named_parameters() if "_rss." in n)
