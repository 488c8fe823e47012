"""ssan-warm-start (ssan_plugin/commands/warm_start.py) + ssan_plugin/warm_start.py: a trained transformer continued as SSAN
(and DiSAN) keeps its weights, update counter, epoch position and learning-rate schedule."""

import re

import pytest
import torch

import ssan_plugin  # noqa: F401  (allow-list for torch.load)
from conftest import PLUGIN_DIR, ROOT, TINY_MODEL, run_cli
from ssan_plugin.warm_start import WarmStartError, continue_as_variant, fresh_optimizer_state

SCHEDULE = ["--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt",
            "--warmup-updates", "4", "--max-tokens", "500", "--cpu", "--no-epoch-checkpoints",
            "--log-format", "simple", "--log-interval", "1", "--disable-validation", "--seed", "3"]


def train(data, arch, save, updates, *extra):
    return run_cli("fairseq-train", data, "--user-dir", PLUGIN_DIR, "--arch", arch, *TINY_MODEL,
                   *SCHEDULE, "--max-update", updates, "--save-dir", save, *extra).stdout


def inner_lines(log):
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"num_updates=(\d+), lr=([\d.e-]+)", log)}


@pytest.fixture(scope="module")
def base(tiny_bin, tmp_path_factory):
    save = tmp_path_factory.mktemp("base")
    log = train(tiny_bin, "transformer", save, 6)
    return save / "checkpoint_last.pt", inner_lines(log)


def load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def test_ssan_continues_the_schedule(tiny_bin, base, tmp_path):
    base_ckpt, base_lrs = base
    out = tmp_path / "ssan" / "checkpoint_last.pt"
    proc = run_cli("ssan-warm-start", "--base", base_ckpt, "--arch", "ssan_transformer",
                   "--out", out, "--", "--ssan-tau", "0.7")
    assert "at update 6, 6 new and 0 dropped" in proc.stdout  # the policy and the selector's name
    assert "new (freshly initialised): encoder.layers.0.self_attn.selector.policy_proj.weight" in proc.stderr
    before, after = load(base_ckpt), load(out)
    assert set(after["model"]) - set(before["model"]) == {
        f"encoder.layers.{i}.self_attn.{p}" for i in range(2)
        for p in ("selector.policy_proj.weight", "selector.policy_proj.bias", "selector_name")}
    assert all(torch.equal(before["model"][k], after["model"][k]) for k in before["model"])
    assert after["last_optimizer_state"]["state"] == {}  # fresh moments
    assert after["optimizer_history"][-1]["lr_scheduler_state"] == before["optimizer_history"][-1]["lr_scheduler_state"]

    log = train(tiny_bin, "ssan_transformer", out.parent, 8, "--ssan-tau", "0.7",
                "--criterion", "selective_label_smoothed_cross_entropy")
    assert "Loaded checkpoint" in log and "@ 6 updates" in log
    lrs = inner_lines(log)
    assert sorted(lrs) == [7, 8]  # the counter continues, no update is repeated
    # inverse_sqrt after its warm-up: lr * sqrt(warmup / update); a second warm-up would be lower
    for update, lr in lrs.items():
        assert lr == pytest.approx(1e-3 * (4 / update) ** 0.5, rel=1e-4)
    assert base_lrs[6] == pytest.approx(1e-3 * (4 / 6) ** 0.5, rel=1e-4)
    assert re.search(r"sel_0=", log)


def test_disan_keeps_every_shared_parameter(tiny_bin, base, tmp_path):
    report = continue_as_variant(str(base[0]), str(tmp_path / "d.pt"), "disan_transformer")
    assert report.new_parameters and all(".self_attn." in k for k in report.new_parameters)
    assert report.dropped_parameters and all(
        ".self_attn.q_proj." in k or ".self_attn.k_proj." in k or ".self_attn.v_proj." in k
        for k in report.dropped_parameters)


def test_refusals(base, tmp_path):
    for arch, flags, message in (("transformer", [], "not an encoder variant"),
                                 ("ssan_transformer", ["--encoder-layers", "3"], "own options"),
                                 ("ssan_transformer", ["--ssan-tau"], "expected one argument")):
        with pytest.raises(WarmStartError, match=message):
            continue_as_variant(str(base[0]), str(tmp_path / "x.pt"), arch, flags)
    with pytest.raises(WarmStartError, match="parameter groups"):
        fresh_optimizer_state({"param_groups": [{"params": [0]}, {"params": [1]}]}, 2)
