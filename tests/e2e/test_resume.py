"""Crash and resume: SIGKILL mid-epoch, resume from checkpoint_last.pt, the LR schedule and the
losses continue as in an uninterrupted run; checkpoints are never half-written in place;
deterministic runs repeat exactly.

How fairseq-fixed 0.12.3.1 writes checkpoints (fairseq/checkpoint_utils.py, file_io.py):
``save_checkpoint`` writes the FIRST due file (checkpointE.pt, then checkpoint_E_U.pt, then
checkpoint_best.pt, ..., checkpoint_last.pt last) with ``torch_persistent_save``: to
``NAME.tmp``, then ``os.rename`` -> atomic on a local file system. Every OTHER due file,
including checkpoint_last.pt whenever an epoch/interval/best checkpoint is written at the same
time, is a ``PathManager.copy`` = ``shutil.copyfile`` (iopath is not installed): it truncates the
destination and copies into it, which is NOT atomic. A kill during that copy leaves a torn
checkpoint_last.pt, but the file written first (e.g. checkpoint_E_U.pt) is complete; resuming
from the torn file fails with a clear error, and ``--restore-file`` of the interval checkpoint
resumes. Both are tested below.
"""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

import ssan_plugin  # noqa: F401  (allow-list for torch.load)
from conftest import BIN, PLUGIN_DIR, TINY_MODEL, cli_env, run_cli

SSAN = ["--arch", "ssan_transformer", "--criterion", "selective_label_smoothed_cross_entropy",
        "--label-smoothing", "0.1"]
SAVE_EVERY = 5
MAX_UPDATE = 16


def train_args(data, save_dir, max_update=MAX_UPDATE, *extra):
    return [str(data), "--user-dir", str(PLUGIN_DIR), *TINY_MODEL, *SSAN, "--cpu", "--optimizer", "adam",
            "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "8", "--max-tokens", "200",
            "--max-update", str(max_update), "--save-dir", str(save_dir), "--seed", "7",
            "--save-interval-updates", str(SAVE_EVERY), "--disable-validation", "--no-epoch-checkpoints",
            "--log-format", "simple", "--log-interval", "1", "--no-progress-bar", *extra]


def inner(log):
    """{update: (loss, lr, batch index in epoch, epoch size)} from train_inner lines."""
    out = {}
    for line in log.splitlines():
        m = re.search(r"train_inner \| epoch (\d+):\s+(\d+) / (\d+) loss=([-\d.]+),.*num_updates=(\d+), lr=([-\d.e]+)",
                      line)
        if m:
            out[int(m.group(5))] = (float(m.group(4)), float(m.group(6)), int(m.group(2)), int(m.group(3)))
    return out


@pytest.fixture(scope="module")
def reference(tiny_bin, tmp_path_factory):
    """An uninterrupted run."""
    save = tmp_path_factory.mktemp("reference")
    proc = run_cli("fairseq-train", *train_args(tiny_bin, save))
    return inner(proc.stdout + proc.stderr)


@pytest.mark.slow
def test_same_seed_same_data_same_losses(reference, tiny_bin, tmp_path):
    proc = run_cli("fairseq-train", *train_args(tiny_bin, tmp_path / "again"))
    again = inner(proc.stdout + proc.stderr)
    assert sorted(again) == list(range(1, MAX_UPDATE + 1))
    assert again == reference
    # and the run is not trivially constant: the seed matters
    other = run_cli("fairseq-train", *train_args(tiny_bin, tmp_path / "seed8", 3, "--seed", "8"))
    assert [inner(other.stdout + other.stderr)[u][0] for u in (1, 2, 3)] != [reference[u][0] for u in (1, 2, 3)]


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume(reference, tiny_bin, tmp_path):
    save = tmp_path / "ckpt"
    epoch_size = reference[1][3]
    kill_after = 2 * SAVE_EVERY + 2  # between the 2nd and 3rd interval checkpoints
    assert kill_after < epoch_size, "the kill must fall inside the first epoch"
    cmd = [str(BIN / "fairseq-train"), *train_args(tiny_bin, save, 10_000)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cli_env())
    seen = []
    try:
        deadline = time.monotonic() + 300
        for line in proc.stdout:
            seen.append(line)
            m = re.search(r"num_updates=(\d+),", line)
            if m and int(m.group(1)) >= kill_after:
                proc.send_signal(signal.SIGKILL)
                break
            assert time.monotonic() < deadline, "".join(seen[-20:])
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    log = "".join(seen)
    # interval checkpoints are written first (tmp + rename); checkpoint_last.pt is a copy of it
    assert f"Saved checkpoint {save}/checkpoint_1_{2 * SAVE_EVERY}.pt (epoch 1 @ {2 * SAVE_EVERY} updates" in log
    assert not list(save.glob("*.tmp"))

    last = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=True)
    assert last["optimizer_history"][-1]["num_updates"] == 2 * SAVE_EVERY
    assert last["extra_state"]["train_iterator"]["iterations_in_epoch"] == 2 * SAVE_EVERY  # mid-epoch

    resumed = run_cli("fairseq-train", *train_args(tiny_bin, save))
    rlog = resumed.stdout + resumed.stderr
    assert re.search(rf"Loaded checkpoint \S+checkpoint_last\.pt \(epoch 1 @ {2 * SAVE_EVERY} updates\)", rlog), rlog[-3000:]
    after = inner(rlog)
    assert sorted(after) == list(range(2 * SAVE_EVERY + 1, MAX_UPDATE + 1))
    for upd, (loss, lr, index, size) in after.items():
        ref_loss, ref_lr, ref_index, ref_size = reference[upd]
        assert lr == ref_lr, (upd, lr, ref_lr)  # same inverse_sqrt schedule position
        assert (index, size) == (ref_index, ref_size), upd  # same place in the epoch (no batch replayed)
        assert loss == pytest.approx(ref_loss, abs=2e-3), (upd, loss, ref_loss)  # same batches, RNG, Adam state
    assert after[2 * SAVE_EVERY + 1][1] != reference[2 * SAVE_EVERY][1]  # the lr really moves per update
    final = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=True)
    assert final["optimizer_history"][-1]["num_updates"] == MAX_UPDATE


@pytest.mark.slow
def test_torn_checkpoint_last_gives_clear_error_and_interval_checkpoint_resumes(tiny_bin, tmp_path):
    save = tmp_path / "ckpt"
    run_cli("fairseq-train", *train_args(tiny_bin, save, SAVE_EVERY))
    good = (save / "checkpoint_last.pt").read_bytes()
    (save / "checkpoint_last.pt").write_bytes(good[: len(good) // 2])  # as a kill during shutil.copyfile

    proc = run_cli("fairseq-train", *train_args(tiny_bin, save, SAVE_EVERY + 2), check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"Preparing to load checkpoint {save}/checkpoint_last.pt" in log  # names the file
    assert "checkpoint file is corrupted" in log
    assert "train_inner" not in log
    assert len((save / "checkpoint_last.pt").read_bytes()) == len(good) // 2  # left as it was for inspection

    proc = run_cli("fairseq-train", *train_args(tiny_bin, save, SAVE_EVERY + 2, "--restore-file",
                                                str(save / f"checkpoint_1_{SAVE_EVERY}.pt")))
    log = proc.stdout + proc.stderr
    assert re.search(rf"Loaded checkpoint \S+checkpoint_1_{SAVE_EVERY}\.pt \(epoch 1 @ {SAVE_EVERY} updates\)", log)
    assert f"num_updates={SAVE_EVERY + 2}," in log


ATOMIC_SAVE_KILLED = r"""
import os, signal, sys, torch
from fairseq import checkpoint_utils
path = sys.argv[1]
real_save = torch.save
def dying_save(obj, f, *a, **k):
    real_save(obj, f, *a, **k)
    f.flush()
    f.truncate(f.tell() // 2)          # half of the new file is on disk ...
    os.kill(os.getpid(), signal.SIGKILL)  # ... when the process is killed
torch.save = dying_save
checkpoint_utils.torch_persistent_save({"new": torch.ones(10000)}, path)
"""


def test_kill_during_checkpoint_write_leaves_previous_checkpoint_intact(tmp_path):
    """fairseq's torch_persistent_save writes NAME.tmp and renames: a kill mid-write (simulated
    deterministically: half written, then SIGKILL) leaves the previous NAME untouched."""
    path = tmp_path / "checkpoint_last.pt"
    torch.save({"old": torch.zeros(3)}, path)
    proc = subprocess.run([sys.executable, "-c", ATOMIC_SAVE_KILLED, str(path)], env=cli_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert torch.equal(torch.load(path, weights_only=True)["old"], torch.zeros(3))
    tmp = tmp_path / "checkpoint_last.pt.tmp"
    assert tmp.exists()
    assert tmp.stat().st_size > 0
    with pytest.raises((RuntimeError, OSError)):  # the half-written file is not a checkpoint
        torch.load(tmp, weights_only=True)
