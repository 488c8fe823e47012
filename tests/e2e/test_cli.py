"""The fairseq CLI end to end with --user-dir ssan_plugin on tiny data."""

import os
import re
import sys

import pytest
import torch

import ssan_plugin
from conftest import PLUGIN_DIR, TINY_MODEL, run_cli

TRAIN = [
    "--user-dir", PLUGIN_DIR, "--cpu", *TINY_MODEL, "--optimizer", "adam", "--lr", "0.002",
    "--max-tokens", "300", "--log-format", "simple", "--log-interval", "5",
    "--no-epoch-checkpoints", "--seed", "3",
]
SSAN = ["--arch", "ssan_transformer", "--criterion", "selective_label_smoothed_cross_entropy",
        "--label-smoothing", "0.1"]
BASELINE = ["--arch", "transformer", "--criterion", "label_smoothed_cross_entropy",
            "--label-smoothing", "0.1"]


@pytest.fixture(scope="module")
def ssan_run(tiny_bin, tmp_path_factory):
    save = tmp_path_factory.mktemp("ssan")
    proc = run_cli("fairseq-train", tiny_bin, *TRAIN, *SSAN, "--max-update", 12, "--save-dir", save)
    return save, proc.stdout + proc.stderr


def test_train_logs_selection_rates(ssan_run):
    save, log = ssan_run
    assert (save / "checkpoint_last.pt").exists()
    valid = [line for line in log.splitlines() if "valid on 'valid' subset" in line]
    assert valid and all(k in valid[-1] for k in ("sel_0", "sel_1", "sel ", "pol_ent"))
    rate = float(re.search(r"\| sel ([0-9.]+)", valid[-1]).group(1))
    assert 0.0 <= rate <= 1.0


def test_resume_continues_from_saved_update(ssan_run, tiny_bin, tmp_path):
    save, _ = ssan_run
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    (resumed / "checkpoint_last.pt").write_bytes((save / "checkpoint_last.pt").read_bytes())
    proc = run_cli("fairseq-train", tiny_bin, *TRAIN, *SSAN, "--max-update", 20, "--save-dir", resumed)
    log = proc.stdout + proc.stderr
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ 12 updates\)", log), log[-2000:]
    state = torch.load(resumed / "checkpoint_last.pt", map_location="cpu")
    assert state["optimizer_history"][-1]["num_updates"] == 20


def test_generate_translates_every_sentence(ssan_run, tiny_bin):
    save, _ = ssan_run
    proc = run_cli("fairseq-generate", tiny_bin, "--user-dir", PLUGIN_DIR, "--cpu",
                   "--path", save / "checkpoint_last.pt", "--gen-subset", "test", "--beam", 2,
                   "--batch-size", 8, "--required-batch-size-multiple", 1)
    ids = sorted(int(m) for m in re.findall(r"^H-(\d+)\t", proc.stdout, re.M))
    assert ids == list(range(37)), "every test sentence (37, not a multiple of 8) translated once"


def test_validate_reports_selection(ssan_run, tiny_bin):
    save, _ = ssan_run
    proc = run_cli("fairseq-validate", tiny_bin, "--user-dir", PLUGIN_DIR, "--cpu",
                   "--path", save / "checkpoint_last.pt", "--task", "translation",
                   "--batch-size", 8, "--valid-subset", "valid")
    assert re.search(r"\| sel_0 [0-9.]+", proc.stdout + proc.stderr)


def test_interactive(ssan_run, tiny_bin, tiny_corpus):
    save, _ = ssan_run
    lines = (tiny_corpus / "test.src").read_text().splitlines()[:3]
    proc = run_cli("fairseq-interactive", tiny_bin, "--user-dir", PLUGIN_DIR, "--cpu",
                   "--path", save / "checkpoint_last.pt", "--source-lang", "src",
                   "--target-lang", "tgt", "--beam", 2, input="\n".join(lines) + "\n")
    assert len(re.findall(r"^H-\d+\t", proc.stdout, re.M)) == 3


def test_warm_start_from_plain_transformer(tiny_bin, tmp_path):
    base = tmp_path / "baseline"
    run_cli("fairseq-train", tiny_bin, *TRAIN, *BASELINE, "--max-update", 6, "--save-dir", base)
    proc = run_cli("fairseq-train", tiny_bin, *TRAIN, *SSAN, "--max-update", 8,
                   "--save-dir", tmp_path / "ssan", "--finetune-from-model", base / "checkpoint_last.pt")
    log = proc.stdout + proc.stderr
    for layer in (0, 1):
        assert f"encoder.layers.{layer}.self_attn.selector (gumbel): not in the checkpoint" in log
    # every baseline weight is loaded as is (checked on the model directly, before training)
    from fairseq import checkpoint_utils, options, tasks

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(tiny_bin), "--user-dir", str(PLUGIN_DIR), "--arch", "ssan_transformer", *TINY_MODEL])
    model = tasks.setup_task(args).build_model(args)
    baseline = checkpoint_utils.load_checkpoint_to_cpu(str(base / "checkpoint_last.pt"))["model"]
    model.load_state_dict(dict(baseline), strict=True)
    own = model.state_dict()
    assert all(torch.equal(own[k], v) for k, v in baseline.items())
    assert {k for k in own if k not in baseline} == {
        f"encoder.layers.{i}.self_attn.{p}" for i in (0, 1)
        for p in ("selector.policy_proj.weight", "selector.policy_proj.bias", "selector_name")}


class Payload:
    """Unpickling this would run a shell command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_hostile_checkpoint_is_refused(ssan_run, tiny_bin, tmp_path):
    save, _ = ssan_run
    marker = tmp_path / "payload_ran"
    state = torch.load(save / "checkpoint_last.pt", map_location="cpu")
    state["extra_state"]["payload"] = Payload(marker)
    hostile = tmp_path / "hostile.pt"
    torch.save(state, hostile)
    proc = run_cli("fairseq-generate", tiny_bin, "--user-dir", PLUGIN_DIR, "--cpu",
                   "--path", hostile, "--gen-subset", "test", "--batch-size", 8, check=False)
    assert proc.returncode != 0
    assert "Weights only load failed" in proc.stderr and "GLOBAL posix.system" in proc.stderr
    assert not marker.exists(), "the payload ran"


def test_checkpoint_needs_only_allow_listed_globals(ssan_run):
    save, _ = ssan_run
    needed = set(torch.serialization.get_unsafe_globals_in_checkpoint(str(save / "checkpoint_last.pt")))
    allowed = {f"{g.__module__}.{g.__qualname__}" for g in ssan_plugin.runtime.checkpoint_safety.fairseq_checkpoint_globals()}
    assert needed <= allowed, needed - allowed


@pytest.mark.parametrize("flags, message", [
    (["--ssan-layers", "5"], "--ssan-layers '5': indices must lie in [0, 1]"),
    (["--ssan-layers", "0,x"], "--ssan-layers must be 'all' or comma-separated"),
    (["--ssan-tau", "0"], "--ssan-tau must be finite and > 0"),
    (["--ssan-tau", "-1"], "--ssan-tau must be finite and > 0"),
    (["--select-scale", "-1"], "--select-scale must be finite and >= 0"),
    (["--nce-scale", "-0.1"], "--nce-scale must be finite and >= 0"),
    (["--ssan-dense-warmup", "-1"], "--ssan-dense-warmup must be >= 0"),
    (["--ssan-policy-init-bias", "inf"], "--ssan-policy-init-bias must be finite"),
    (["--ssan-policy-dim", "3"], "--ssan-policy-dim must be a positive multiple"),
    (["--ssan-straight-through-cap", "-1"], "--ssan-straight-through-cap must be finite"),
])
def test_bad_options_stop_before_training(tiny_bin, tmp_path, flags, message):
    """Like fairseq's own argparse errors: one line naming the option, the value and the rule,
    exit status 2, no traceback, nothing trained."""
    save = tmp_path / "never"
    proc = run_cli("fairseq-train", tiny_bin, *TRAIN, *SSAN, "--max-update", 5,
                   "--save-dir", save, *flags, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("fairseq-train: error: ") and message in last
    assert not (save / "checkpoint_last.pt").exists()
    assert "train_inner" not in proc.stdout + proc.stderr


def test_native_kernel_from_the_cli(tiny_bin, tmp_path, monkeypatch):
    """--ssan-kernel native trains from fairseq-train and logs the selection; its checkpoint
    decodes where no compiler is (only training uses the kernel); training where no compiler
    is stops at the first update with the compiler named, and saves nothing."""
    save = tmp_path / "native"
    proc = run_cli("fairseq-train", tiny_bin, *TRAIN, *SSAN, "--ssan-kernel", "native",
                   "--max-update", 6, "--save-dir", save)
    log = proc.stdout + proc.stderr
    assert (save / "checkpoint_last.pt").exists()
    assert "sel_0" in log and re.search(r"ssan_kernel'?[:=] ?'native'", log)
    monkeypatch.setenv("CC", "no-such-compiler-ssan")
    out = run_cli("fairseq-generate", tiny_bin, "--user-dir", PLUGIN_DIR, "--cpu",
                  "--path", save / "checkpoint_last.pt", "--gen-subset", "test", "--beam", 2,
                  "--batch-size", 8, "--required-batch-size-multiple", 1).stdout
    assert len(re.findall(r"^H-\d+\t", out, re.M)) == 37
    never = tmp_path / "never"
    proc = run_cli("fairseq-train", tiny_bin, *TRAIN, *SSAN, "--ssan-kernel", "native",
                   "--max-update", 6, "--save-dir", never, check=False)
    assert proc.returncode != 0
    assert "no-such-compiler-ssan" in proc.stderr and "--ssan-kernel torch" in proc.stderr
    assert not (never / "checkpoint_last.pt").exists()


def test_start_options_train_resume_and_decode(tiny_bin, tmp_path):
    """--ssan-dense-warmup 4 --ssan-policy-init-bias 3 through fairseq-train: the first
    validation (update 3, inside the warm-up) sees every pair selected; the update number is in
    the checkpoint (the last update trained, 0-based: 2 after three updates) and a resumed run
    continues it; generate decodes with selection."""
    save = tmp_path / "start"
    flags = ["--ssan-dense-warmup", 4, "--ssan-policy-init-bias", 3]
    proc = run_cli("fairseq-train", tiny_bin, *TRAIN, *SSAN, *flags, "--max-update", 3,
                   "--save-dir", save)
    valid = [l for l in (proc.stdout + proc.stderr).splitlines() if "valid on 'valid'" in l]
    assert valid and float(re.search(r"\| sel ([0-9.]+)", valid[-1]).group(1)) == 1.0
    state = torch.load(save / "checkpoint_last.pt", map_location="cpu")
    counters = {k: int(v) for k, v in state["model"].items() if k.endswith("self_attn.selector.num_updates")}
    assert counters and set(counters.values()) == {2}
    run_cli("fairseq-train", tiny_bin, *TRAIN, *SSAN, *flags, "--max-update", 8,
            "--save-dir", save)
    state = torch.load(save / "checkpoint_last.pt", map_location="cpu")
    assert {int(v) for k, v in state["model"].items() if k.endswith("num_updates")} == {7}
    out = run_cli("fairseq-generate", tiny_bin, "--user-dir", PLUGIN_DIR, "--cpu", "--path",
                  save / "checkpoint_last.pt", "--gen-subset", "test", "--beam", 2,
                  "--batch-size", 8, "--required-batch-size-multiple", 1)
    assert len(re.findall(r"^H-\d+\t", out.stdout, re.M)) == 37
