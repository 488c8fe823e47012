"""ssan_plugin/criterions/resa_label_smoothed_cross_entropy.py: the REINFORCE estimator and
leave-one-out baseline, reward and baselines, the policy loss added to the summed loss, warm-up.
(The ReSA module trained through this criterion: tests/unit/modules/test_resa.py.)"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from helpers.resa import make_criterion

import ssan_plugin  # noqa: F401
from ssan_plugin.criterions.resa_label_smoothed_cross_entropy import (
    leave_one_out_mean,
    policy_gradient_loss,
)


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
    stats = [{"log_prob": log_prob, "select_frac": torch.tensor([0.5, 1.0, 0.0]), "layer": 0}]
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
        stats = {"log_prob": log_prob, "select_frac": torch.full((bsz,), 0.5), "warmup": torch.tensor(self.warmup),
                 "selected": torch.tensor(1.0), "pairs": torch.tensor(2.0), "entropy_sum": torch.tensor(0.0),
                 "layer": 0}
        return logits, {"selection_stats": [stats]}

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
