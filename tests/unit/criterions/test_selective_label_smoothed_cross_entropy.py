"""selective_label_smoothed_cross_entropy against fairseq's label-smoothed CE."""

import pytest
import torch
from fairseq import options, tasks
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion

import ssan_plugin  # noqa: F401  (registrations)
from ssan_plugin.criterions.selective_label_smoothed_cross_entropy import (
    SelectiveLabelSmoothedCrossEntropyCriterion,
)
from conftest import PLUGIN_DIR, TINY_MODEL


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
    assert [s["layer"] for s in stats] == [0, 1]
    key = "select_rate" if form == "rate" else "select_count"
    expected = sum(0.3 * s[key].item() + 0.7 * s["neg_entropy"].item() for s in stats)
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
