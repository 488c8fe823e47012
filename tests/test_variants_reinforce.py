"""ReSA training: REINFORCE estimator, baseline, criterion wiring, warm-up and inference modes."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.data import Dictionary

import ssan_plugin  # noqa: F401
from ssan_plugin.criterions.resa_label_smoothed_cross_entropy import (
    ReSALabelSmoothedCrossEntropyCriterion,
    leave_one_out_mean,
    policy_gradient_loss,
)
from ssan_plugin.modules.resa import ReSAAttention

torch.set_num_threads(1)


def make_criterion(**kwargs):
    task = SimpleNamespace(target_dictionary=Dictionary())
    return ReSALabelSmoothedCrossEntropyCriterion(task, sentence_avg=False, label_smoothing=0.1, **kwargs)


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


def selection_task(bsz=16, length=6, seed=0):
    """Tokens whose feature 0 is +1 are 'good', -1 'bad'; the last sentence is padded."""
    gen = torch.Generator().manual_seed(seed)
    good = torch.rand(bsz, length, generator=gen) < 0.5
    x = torch.randn(bsz, length, 4, generator=gen) * 0.1
    x[..., 0] = good.float() * 2 - 1
    pad = torch.zeros(bsz, length, dtype=torch.bool)
    pad[-1, 3:] = True
    return x, pad, good & ~pad


def test_resa_rss_learns_known_selection_through_the_criterion():
    """Real module + the criterion's policy_loss: loss = #bad selected - #good selected (heads
    and dependents). After training the deterministic selection is exactly the good tokens."""
    torch.manual_seed(0)
    m = ReSAAttention(4, rss_hidden=8)
    crit = make_criterion(resa_lambda=0.0)
    rss = list(m.head_rss.parameters()) + list(m.dep_rss.parameters())
    opt = torch.optim.Adam(rss, lr=0.05)
    x, pad, good = selection_task()
    bad = ~good & ~pad
    m.train()
    for _ in range(120):
        m.encode(x, pad)
        stats = dict(m.selection_stats, layer=0)
        z = stats["z_head"] + stats["z_dep"]
        sentence_loss = (z * bad).sum(1) - (z * good).sum(1)
        pg, logs = crit.policy_loss([stats], sentence_loss)
        opt.zero_grad()
        pg.backward()
        opt.step()
    assert logs["resa_n"] == x.size(0) and logs["resa_a2"] < logs["resa_r2"]
    m.eval()
    m.encode(x, pad)
    assert torch.equal(m.selection_stats["z_dep"].bool(), good)
    assert torch.equal(m.selection_stats["z_head"].bool(), good)


def test_sparsity_penalty_lowers_selection():
    torch.manual_seed(0)
    m = ReSAAttention(4, rss_hidden=8)
    crit = make_criterion(resa_lambda=1.0, resa_baseline="running")
    opt = torch.optim.Adam(list(m.head_rss.parameters()) + list(m.dep_rss.parameters()), lr=0.05)
    x, pad, _ = selection_task()
    m.train()
    rates = []
    for _ in range(60):
        m.encode(x, pad)
        stats = m.selection_stats
        rates.append(float(stats["selected"] / stats["pairs"]))
        pg, _ = crit.policy_loss([stats], torch.zeros(x.size(0)))  # reward = -lambda * fraction
        opt.zero_grad()
        pg.backward()
        opt.step()
    assert sum(rates[:5]) / 5 > 0.3 and sum(rates[-5:]) / 5 < 0.1, rates


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


def test_resa_warmup_inference_modes_and_checkpointed_update_count():
    torch.manual_seed(0)
    x, pad, _ = selection_task(bsz=4, length=5)
    m = ReSAAttention(4, warmup_updates=3, rss_hidden=8)
    m.train()
    out = m.encode(x, pad)
    stats = m.selection_stats
    assert bool(stats["warmup"]) and stats["selected"] == stats["pairs"]
    (out.sum() + stats["log_prob"].sum()).backward()
    rss_grads = [p.grad for p in m.head_rss.parameters()] + [p.grad for p in m.dep_rss.parameters()]
    assert all(g is not None and g.abs().max() == 0 for g in rss_grads)  # in the graph, untrained

    m.zero_grad(set_to_none=True)
    m.set_num_updates(3)
    out = m.encode(x, pad)
    stats = m.selection_stats
    assert not bool(stats["warmup"]) and stats["selected"] < stats["pairs"]
    assert stats["log_prob"].shape == (4,) and stats["log_prob"].requires_grad
    out.sum().backward()  # REINFORCE: the main loss sends no gradient to the RSS
    assert all(p.grad is None for p in m.head_rss.parameters())

    state = m.state_dict()
    assert int(state["num_updates"]) == 3
    fresh = ReSAAttention(4, warmup_updates=3, rss_hidden=8)
    fresh.load_state_dict(state)
    assert not fresh.in_warmup

    m.eval()
    first = m.encode(x, pad)
    assert torch.equal(first, m.encode(x, pad))
    assert torch.equal(m.selection_stats["z_dep"].bool(), (m.dep_rss(x, (~pad).float()) > 0) & ~pad)
    assert "log_prob" not in m.selection_stats
    m.sample_at_inference = True
    draws = {tuple(m.encode(x, pad).flatten().tolist()) for _ in range(5)}
    assert len(draws) > 1


def test_gumbel_estimator_trains_rss_by_backprop():
    torch.manual_seed(0)
    x, pad, _ = selection_task(bsz=4, length=5)
    m = ReSAAttention(4, estimator="gumbel", rss_hidden=8)
    m.train()
    out = m.encode(x, pad)
    assert "log_prob" not in m.selection_stats
    out.pow(2).sum().backward()
    assert m.dep_rss.out.weight.grad.abs().sum() > 0 and m.head_rss.out.weight.grad.abs().sum() > 0
    z = m.selection_stats["z_dep"]
    assert set(z.unique().tolist()) <= {0.0, 1.0} and z[pad].abs().max() == 0
