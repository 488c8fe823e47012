"""Two-process CPU training through scripts/train_distributed.sh, for every architecture family.

fairseq saves checkpoints on rank 0 only, so rank 1's parameters are read through a thin
wrapper around fairseq-train: this file run as a script (``python THIS_FILE FAIRSEQ_ARGS``,
passed to the launcher as ``FAIRSEQ_TRAIN``) runs ``fairseq_cli.train.cli_main`` unchanged
except that ``checkpoint_utils.save_checkpoint`` (called on every rank) first dumps the rank's
model state to ``$RELIABILITY_DUMP_DIR/rank{R}_upd{N}.pt``. With ``--save-interval-updates 1``
that is every update. Other switches of the wrapper (environment):

- ``RELIABILITY_CPU_PYTORCH_DDP=1``: build torch DDP without ``device_ids`` so that fairseq's
  ``pytorch_ddp`` backend can be exercised on CPU (fairseq passes ``device_ids=[device_id]``,
  which torch refuses for CPU modules; see test_ddp_backends).
- ``RELIABILITY_FAIL_RANK=R``: rank R exits with status 3 before doing anything;
  ``RELIABILITY_PID_DIR``: every rank writes its pid there.
"""

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "scripts" / "train_distributed.sh"


def _wrapper_main():  # pragma: no cover - runs in the rank processes
    argv = sys.argv[1:]
    rank = int(argv[argv.index("--distributed-rank") + 1]) if "--distributed-rank" in argv else 0
    pid_dir = os.environ.get("RELIABILITY_PID_DIR")
    if pid_dir:
        Path(pid_dir, f"rank{rank}.pid").write_text(str(os.getpid()))
    if os.environ.get("RELIABILITY_FAIL_RANK") == str(rank):
        print(f"rank {rank}: failing on purpose", file=sys.stderr)
        sys.exit(3)

    from fairseq import checkpoint_utils
    import fairseq.models.distributed_fairseq_model as dfm

    if os.environ.get("RELIABILITY_CPU_PYTORCH_DDP"):
        torch_ddp = dfm.DistributedDataParallel

        def cpu_ddp(module, device_ids=None, output_device=None, **kwargs):
            return torch_ddp(module=module, **kwargs)

        dfm.DistributedDataParallel = cpu_ddp

    dump = os.environ.get("RELIABILITY_DUMP_DIR")
    save_checkpoint = checkpoint_utils.save_checkpoint

    def dumping_save_checkpoint(cfg, trainer, epoch_itr, val_loss):
        if dump:
            state = {k: v.detach().clone() for k, v in trainer.get_model().state_dict().items()}
            name = f"rank{trainer.data_parallel_rank}_upd{trainer.get_num_updates()}.pt"
            torch.save(state, os.path.join(dump, name))
        return save_checkpoint(cfg, trainer, epoch_itr, val_loss)

    checkpoint_utils.save_checkpoint = dumping_save_checkpoint
    sys.argv = ["fairseq-train", *argv]
    from fairseq_cli.train import cli_main

    cli_main()


if __name__ == "__main__":
    _wrapper_main()
    sys.exit(0)

# ---------------------------------------------------------------------------------------------
from conftest import BIN, PLUGIN_DIR, TINY_MODEL, cli_env, run_cli  # noqa: E402

import ssan_plugin  # noqa: E402

WRAPPER = f"{sys.executable} {Path(__file__).resolve()}"

ARCHS = {
    "ssan_transformer": ["--criterion", "selective_label_smoothed_cross_entropy", "--label-smoothing", "0.1"],
    "disan_transformer": ["--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"],
    "biblosan_transformer": ["--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
                             "--biblosan-block-length", "3"],
    # updates 1-2: ReSA warm-up (every token selected, the RSS gets a zero gradient); 3: REINFORCE
    "resa_transformer": ["--criterion", "selective_label_smoothed_cross_entropy", "--label-smoothing", "0.1",
                         "--resa-warmup-updates", "2"],
}


def common(data, save_dir, max_update):
    return [str(data), "--user-dir", str(PLUGIN_DIR), *TINY_MODEL, "--optimizer", "adam", "--lr", "1e-3",
            "--max-tokens", "300", "--max-update", str(max_update), "--save-dir", str(save_dir), "--seed", "1",
            "--log-format", "simple", "--log-interval", "1", "--no-progress-bar", "--disable-validation",
            "--no-epoch-checkpoints"]


def launch(nproc, args, *, env=None, timeout=300):
    full_env = dict(cli_env(), **(env or {}))
    return subprocess.run(["bash", str(LAUNCHER), str(nproc), *map(str, args)], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


def losses(log):
    """{update: train loss} from fairseq's train_inner lines (--log-interval 1)."""
    out = {}
    for line in log.splitlines():
        if "train_inner" in line:
            upd = int(re.search(r"num_updates=(\d+)", line).group(1))
            out[upd] = float(re.search(r" loss=([-\d.]+)", line).group(1))
    return out


def rank_logs(save_dir):
    return {r: (save_dir / "train_logs" / f"rank{r}.log").read_text() for r in (0, 1)}


def assert_same_state(a, b, what):
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"{what}: ranks differ in {different[:5]}"


@pytest.mark.slow
@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_two_ranks_stay_identical_and_match_one_process(arch, tiny_bin, tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    save = tmp_path / "dist"
    proc = launch(2, [*common(tiny_bin, save, 3), "--arch", arch, *ARCHS[arch], "--save-interval-updates", "1"],
                  env={"FAIRSEQ_TRAIN": WRAPPER, "RELIABILITY_DUMP_DIR": str(dump)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    logs = rank_logs(save)
    assert "distributed init (rank 1)" in logs[1] and "num_updates 3" in logs[0]

    states = {(r, u): torch.load(dump / f"rank{r}_upd{u}.pt", weights_only=True) for r in (0, 1) for u in (1, 2, 3)}
    for upd in (1, 2, 3):
        assert_same_state(states[0, upd], states[1, upd], f"{arch} after update {upd}")
    moved = [k for k in states[0, 1] if not torch.equal(states[0, 1][k], states[0, 3][k])]
    assert moved, "training changed nothing"
    saved = torch.load(save / "checkpoint_last.pt", weights_only=True)["model"]
    assert_same_state(saved, states[1, 3], "rank 0's checkpoint vs rank 1")

    if arch == "resa_transformer":
        rss = [k for k in states[0, 1] if "_rss." in k]
        assert rss
        # warm-up: the RSS receives a zero gradient (Adam then leaves it exactly unchanged) ...
        assert all(torch.equal(states[0, 1][k], states[0, 2][k]) for k in rss)
        # ... and the first REINFORCE update moves it, identically on both ranks
        assert any(not torch.equal(states[0, 2][k], states[0, 3][k]) for k in rss)
        assert int(states[1, 3]["encoder.layers.0.self_attn.num_updates"]) == 2

    # one process, two batches per update (--update-freq 2): the same batches per update
    single = run_cli("fairseq-train", *common(tiny_bin, tmp_path / "single", 3), "--arch", arch, *ARCHS[arch],
                     "--update-freq", "2")
    dist_loss, single_loss = losses(logs[0]), losses(single.stdout + single.stderr)
    assert sorted(dist_loss) == sorted(single_loss) == [1, 2, 3]
    # Deterministic forward passes match to the printed precision (3 decimals): DiSAN, Bi-BloSAN,
    # ReSA during its warm-up. SSAN's Gumbel noise and ReSA's Bernoulli samples are drawn per rank
    # (each rank seeds with seed + update) instead of in one stream: measured differences <= 0.003.
    deterministic = {"disan_transformer": (1, 2, 3), "biblosan_transformer": (1, 2, 3),
                     "resa_transformer": (1, 2), "ssan_transformer": ()}[arch]
    for upd in (1, 2, 3):
        tol = 0.0011 if upd in deterministic else 0.02
        assert abs(dist_loss[upd] - single_loss[upd]) <= tol, (upd, dist_loss, single_loss)


RESA_CE = ["--arch", "resa_transformer", "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1"]


@pytest.mark.slow
def test_ddp_backends(tiny_bin, tmp_path):
    """ReSA trained with a plain CE criterion: its RSS is outside the loss graph (grad None)."""
    def run(name, *extra, env=None):
        return launch(2, [*common(tiny_bin, tmp_path / name, 2), *RESA_CE, *extra], env=env)

    # fairseq's pytorch_ddp passes device_ids=[device_id] to torch DDP: refused for CPU modules
    proc = run("pt_cpu", "--ddp-backend", "pytorch_ddp")
    assert proc.returncode != 0
    assert "device_ids and output_device arguments only work" in rank_logs(tmp_path / "pt_cpu")[0]

    cpu_ddp = {"FAIRSEQ_TRAIN": WRAPPER, "RELIABILITY_CPU_PYTORCH_DDP": "1"}
    proc = run("pt_unused", "--ddp-backend", "pytorch_ddp", env=cpu_ddp)
    assert proc.returncode != 0
    assert "find_unused_parameters=True" in rank_logs(tmp_path / "pt_unused")[0]

    proc = run("pt_find", "--ddp-backend", "pytorch_ddp", "--find-unused-parameters", env=cpu_ddp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run("legacy", env={})  # the launcher's default: legacy_ddp (zero-fills missing grads)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'ddp_backend': 'legacy_ddp'" in rank_logs(tmp_path / "legacy")[0]


@pytest.mark.slow
def test_failed_rank_stops_the_others(tiny_bin, tmp_path):
    """Rank 1 dies before the rendezvous: rank 0 would wait for it forever; the launcher kills it."""
    pids = tmp_path / "pids"
    pids.mkdir()
    start = time.monotonic()
    proc = launch(2, [*common(tiny_bin, tmp_path / "ckpt", 2), "--arch", "ssan_transformer"],
                  env={"FAIRSEQ_TRAIN": WRAPPER, "RELIABILITY_FAIL_RANK": "1", "RELIABILITY_PID_DIR": str(pids)},
                  timeout=120)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert time.monotonic() - start < 100
    assert "rank 1 failed (exit 3)" in proc.stderr and "failing on purpose" in proc.stderr
    pid0 = int((pids / "rank0.pid").read_text())
    time.sleep(0.5)
    status = Path(f"/proc/{pid0}/status")
    assert not status.exists() or "State:\tZ" in status.read_text(), "rank 0 still running"
    assert not (tmp_path / "ckpt" / "checkpoint_last.pt").exists()


def test_launcher_refuses_options_it_owns(tmp_path):
    for flags in (["--distributed-world-size", "4"], ["--distributed-rank=1"], ["--device-id", "0"]):
        proc = launch(2, [str(tmp_path), *flags], timeout=30)
        assert proc.returncode == 2 and "is set by this script" in proc.stderr
    proc = launch("two", [str(tmp_path)], timeout=30)
    assert proc.returncode == 2 and "NPROC must be a positive integer" in proc.stderr
    proc = launch(2, [str(tmp_path)], env={"NNODES": "2", "NODE_RANK": "1"}, timeout=30)
    assert proc.returncode == 2 and "needs MASTER_ADDR and MASTER_PORT" in proc.stderr
    proc = launch(2, [str(tmp_path)], env={"NNODES": "2", "NODE_RANK": "2"}, timeout=30)
    assert proc.returncode == 2 and "NODE_RANK must lie in [0, 1]" in proc.stderr


def test_launcher_multi_node_ranks(tmp_path):
    """NODE_RANK=1 of 2 nodes with 2 local ranks: global ranks 2 and 3 of world size 4."""
    fake = tmp_path / "fake_train.sh"
    fake.write_text('#!/bin/bash\necho "$OMP_NUM_THREADS $*"\n')
    fake.chmod(0o755)
    proc = launch(2, ["DATA", "--cpu", "--save-dir", tmp_path / "s"],
                  env={"FAIRSEQ_TRAIN": str(fake), "NNODES": "2", "NODE_RANK": "1",
                       "MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29511"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for local, rank in ((0, 2), (1, 3)):
        line = (tmp_path / "s" / "train_logs" / f"rank{rank}.log").read_text().strip()
        assert line.startswith("1 DATA --cpu"), line
        for expected in ("--distributed-world-size 4", f"--distributed-rank {rank}", "--device-id 0",
                         "--distributed-init-method tcp://10.1.2.3:29511", "--distributed-no-spawn",
                         "--distributed-backend gloo", "--ddp-backend legacy_ddp"):
            assert expected in line, (expected, line)


# ---- distributed resume and the torch.load allow-list ----------------------------------------

def broadcast_payload(checkpoint):
    """The bytes fairseq's rank 0 sends on distributed resume (trainer.load_checkpoint ->
    distributed_utils.broadcast_object: tensors split out, the rest torch.save'd; the other
    ranks torch.load it with torch's default weights_only=True)."""
    from fairseq import checkpoint_utils
    from fairseq.distributed.utils import _split_tensors_from_obj

    state = checkpoint_utils.load_checkpoint_to_cpu(str(checkpoint))
    buffer = io.BytesIO()
    torch.save(_split_tensors_from_obj(state, []), buffer)
    return buffer.getvalue()


def needed_globals(path):
    """Globals a file needs beyond torch's defaults, measured in a fresh interpreter (the
    plugin's allow-list must not hide anything)."""
    code = ("import sys, torch; print('\\n'.join(sorted("
            "torch.serialization.get_unsafe_globals_in_checkpoint(sys.argv[1]))))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         env=cli_env(), check=True).stdout
    return set(out.split())


@pytest.fixture(scope="module")
def small_checkpoint(tiny_bin, tmp_path_factory):
    save = tmp_path_factory.mktemp("small_ckpt")
    run_cli("fairseq-train", *common(tiny_bin, save, 1), "--arch", "ssan_transformer", *ARCHS["ssan_transformer"])
    return save / "checkpoint_last.pt"


def test_checkpoint_file_needs_only_namespace(small_checkpoint):
    assert needed_globals(small_checkpoint) == {"argparse.Namespace"}


def test_allow_list_is_exactly_what_distributed_resume_needs(small_checkpoint, tmp_path):
    payload = tmp_path / "broadcast.pt"
    payload.write_bytes(broadcast_payload(small_checkpoint))
    needed = needed_globals(payload) | needed_globals(small_checkpoint)
    allowed = {f"{g.__module__}.{g.__qualname__}" for g in ssan_plugin.runtime.checkpoint_safety.fairseq_checkpoint_globals()}
    assert needed - allowed == set(), f"missing from the allow-list: {sorted(needed - allowed)}"
    assert allowed - needed == set(), f"allow-listed but never needed: {sorted(allowed - needed)}"
    torch.load(payload, weights_only=True)  # what rank 1 does


@pytest.mark.slow
def test_distributed_resume(tiny_bin, tmp_path):
    save = tmp_path / "ckpt"
    args = [*common(tiny_bin, save, 2), "--arch", "ssan_transformer", *ARCHS["ssan_transformer"]]
    first = launch(2, args)
    assert first.returncode == 0, first.stderr[-3000:]
    args[args.index("--max-update") + 1] = "4"
    second = launch(2, args)
    logs = rank_logs(save)
    assert second.returncode == 0, logs[1][-3000:]
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ 2 updates\)", logs[0])
    assert "num_updates 4" in logs[0]
