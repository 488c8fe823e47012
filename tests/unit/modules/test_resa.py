"""ssan_plugin/modules/resa.py: ReSA with given selections against its direct equations, the
everything-selected case against DiSA/DiSAN, and RSS training (REINFORCE through the criterion's
policy loss, sparsity penalty, warm-up, inference modes, Gumbel estimator)."""

import pytest
import torch

import ssan_plugin  # noqa: F401  (registrations)
from helpers.attention_reference import assert_same, direct_resa_direction, fixed_selection, make_input
from helpers.resa import make_criterion, selection_task
from ssan_plugin.modules.disan import DiSANAttention
from ssan_plugin.modules.resa import ReSAAttention


@pytest.mark.parametrize("direction", ["none", "bi"])
@pytest.mark.parametrize("straight_through", [False, True])
def test_resa_with_given_selection_matches_direct(direction, straight_through):
    torch.manual_seed(0)
    m = ReSAAttention(6, direction=direction, rss_hidden=4).double()
    x, pad = make_input(length=6)
    z_head = torch.tensor([[1, 0, 1, 1, 0, 1], [0, 1, 1, 0, 1, 1], [1, 1, 1, 1, 1, 1]])
    z_dep = torch.tensor([[1, 1, 0, 1, 1, 0], [1, 0, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])

    def module():
        m.select = fixed_selection(z_head, z_dep, straight_through)
        return m.encode(x, pad)

    def direct():
        return torch.cat([direct_resa_direction(blk, x, pad, z_head, z_dep) for blk in m.blocks], dim=-1)

    params = [p for n, p in m.named_parameters() if "rss" not in n]
    # with straight-through selections x also reaches the output through the RSS logits
    assert_same(module, direct, params if straight_through else [x] + params)
    if straight_through:
        module().sum().backward()
        assert m.dep_rss.out.weight.grad.abs().sum() > 0 and m.head_rss.out.weight.grad.abs().sum() > 0
    stats = m.pop_selection()
    valid = (~pad).long()
    assert stats.queries_selected == (z_head * valid).sum() and stats.keys_selected == (z_dep * valid).sum()
    pairs = sum(int((z_head[b] * valid[b]).sum() * (z_dep[b] * valid[b]).sum()
                    - (z_head[b] * z_dep[b] * valid[b]).sum()) for b in range(3))
    assert stats.pairs_selected == pairs


def test_resa_everything_selected_equals_masked_attention():
    """Warm-up selects every token: ReSA equals DiSA with the diag-disabled mask ('none'), and
    ReSA 'bi' equals DiSAN (forward + backward) with the same weights."""
    torch.manual_seed(0)
    x, pad = make_input(length=6)
    resa = ReSAAttention(6, warmup_updates=5, direction="none").double()
    assert_same(lambda: resa.encode(x, pad), lambda: resa.blocks[0](x, pad),
                [x] + list(resa.blocks[0].parameters()))
    stats = resa.pop_selection()
    assert stats.pairs_selected == stats.pairs_possible

    resa_bi = ReSAAttention(6, warmup_updates=5, direction="bi").double()
    disan = DiSANAttention(6).double()
    disan.fw.load_state_dict(resa_bi.blocks[0].state_dict())
    disan.bw.load_state_dict(resa_bi.blocks[1].state_dict())
    disan.out_proj.load_state_dict(resa_bi.out_proj.state_dict())
    xt = x.transpose(0, 1)
    torch.testing.assert_close(resa_bi(xt, xt, xt, key_padding_mask=pad)[0], disan(xt, xt, xt, key_padding_mask=pad)[0])


def test_resa_rss_learns_known_selection_through_the_criterion():
    """Real module + the criterion's policy_loss: loss = #bad selected - #good selected (heads
    and dependents). After training the deterministic selection is exactly the good tokens."""
    torch.manual_seed(0)
    m = ReSAAttention(4, rss_hidden=8)
    m.keep_selection = True
    crit = make_criterion(resa_lambda=0.0)
    rss = list(m.head_rss.parameters()) + list(m.dep_rss.parameters())
    opt = torch.optim.Adam(rss, lr=0.05)
    x, pad, good = selection_task()
    bad = ~good & ~pad
    m.train()
    for _ in range(120):
        m.encode(x, pad)
        stats = m.pop_selection()
        z = stats.selection.sum(1).float()  # heads + dependents
        sentence_loss = (z * bad).sum(1) - (z * good).sum(1)
        pg, logs = crit.policy_loss([stats], sentence_loss)
        opt.zero_grad()
        pg.backward()
        opt.step()
    assert logs["resa_n"] == x.size(0) and logs["resa_a2"] < logs["resa_r2"]
    m.eval()
    m.encode(x, pad)
    selection = m.pop_selection().selection
    assert torch.equal(selection[:, 1], good)
    assert torch.equal(selection[:, 0], good)


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
        stats = m.pop_selection()
        rates.append(float((stats.queries_selected + stats.keys_selected) / (2 * stats.tokens)))
        pg, _ = crit.policy_loss([stats], torch.zeros(x.size(0)))  # reward = -lambda * fraction
        opt.zero_grad()
        pg.backward()
        opt.step()
    assert sum(rates[:5]) / 5 > 0.3 and sum(rates[-5:]) / 5 < 0.1, rates


def test_resa_warmup_inference_modes_and_checkpointed_update_count():
    torch.manual_seed(0)
    x, pad, _ = selection_task(bsz=4, length=5)
    m = ReSAAttention(4, warmup_updates=3, rss_hidden=8)
    m.train()
    out = m.encode(x, pad)
    stats = m.pop_selection()
    assert stats.in_warmup and stats.pairs_selected == stats.pairs_possible
    (out.sum() + stats.log_prob.sum()).backward()
    rss_grads = [p.grad for p in m.head_rss.parameters()] + [p.grad for p in m.dep_rss.parameters()]
    assert all(g is not None and g.abs().max() == 0 for g in rss_grads)  # in the graph, untrained

    m.zero_grad(set_to_none=True)
    m.set_num_updates(3)
    out = m.encode(x, pad)
    stats = m.pop_selection()
    assert not stats.in_warmup and stats.pairs_selected < stats.pairs_possible
    assert stats.log_prob.shape == (4,) and stats.log_prob.requires_grad
    out.sum().backward()  # REINFORCE: the main loss sends no gradient to the RSS
    assert all(p.grad is None for p in m.head_rss.parameters())

    state = m.state_dict()
    assert int(state["num_updates"]) == 3
    fresh = ReSAAttention(4, warmup_updates=3, rss_hidden=8)
    fresh.load_state_dict(state)
    assert not fresh.in_warmup

    m.eval()
    m.keep_selection = True
    first = m.encode(x, pad)
    assert torch.equal(first, m.encode(x, pad))
    stats = m.pop_selection()
    assert torch.equal(stats.selection[:, 1], (m.dep_rss(x, (~pad).float()) > 0) & ~pad)
    assert stats.log_prob is None
    m.sample_at_inference = True
    draws = {tuple(m.encode(x, pad).flatten().tolist()) for _ in range(5)}
    assert len(draws) > 1


def test_gumbel_estimator_trains_rss_by_backprop():
    torch.manual_seed(0)
    x, pad, _ = selection_task(bsz=4, length=5)
    m = ReSAAttention(4, estimator="gumbel", rss_hidden=8)
    m.keep_selection = True
    m.train()
    out = m.encode(x, pad)
    stats = m.pop_selection()
    assert stats.log_prob is None
    out.pow(2).sum().backward()
    assert m.dep_rss.out.weight.grad.abs().sum() > 0 and m.head_rss.out.weight.grad.abs().sum() > 0
    z = stats.selection[:, 1]
    assert z.dtype == torch.bool and not z[pad].any()
