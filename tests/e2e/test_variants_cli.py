"""DiSAN / Bi-BloSAN / ReSA through the fairseq CLI on a tiny synthetic corpus.

Each architecture trains a few updates (with validation), and fairseq-generate decodes every
test sentence; ReSA also resumes (its warm-up counter is restored) and runs fairseq-interactive.
Option validation is checked from Python in tests/unit/models/test_variant_transformer.py.
"""

import importlib.util
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import ssan_plugin  # noqa: F401

REPO = Path(__file__).resolve().parents[2]


BIN = Path(sys.executable).parent


N_TEST = 10


TINY = ("--encoder-layers 2 --decoder-layers 1 --encoder-embed-dim 16 --decoder-embed-dim 16 "
        "--encoder-ffn-embed-dim 32 --decoder-ffn-embed-dim 32 --encoder-attention-heads 2 "
        "--decoder-attention-heads 2").split()


def run(tool, *args, stdin=None):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run([str(BIN / tool), *map(str, args)], input=stdin, capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    root = tmp_path_factory.mktemp("variants_cli")
    spec = importlib.util.spec_from_file_location("make_synthetic_corpus", REPO / "scripts" / "make_synthetic_corpus.py")
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    corpus.write_corpus(str(root / "raw"), {"train": 64, "valid": 16, "test": N_TEST}, seed=1)
    run("fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--trainpref", root / "raw/train",
        "--validpref", root / "raw/valid", "--testpref", root / "raw/test", "--destdir", root / "bin",
        "--workers", "1")
    return root


def train(data, arch, save_dir, max_update, *extra):
    return run("fairseq-train", data / "bin", "--user-dir", REPO / "ssan_plugin", "--arch", arch, *TINY,
               "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "400", "--max-update", max_update,
               "--save-dir", save_dir, "--cpu", "--seed", "1", "--log-format", "simple", "--log-interval", "1",
               "--no-progress-bar", "--no-epoch-checkpoints", *extra)


def generate(data, checkpoint):
    out = run("fairseq-generate", data / "bin", "--user-dir", REPO / "ssan_plugin", "--path", checkpoint,
              "--gen-subset", "test", "--batch-size", "4", "--required-batch-size-multiple", "1", "--beam", "2",
              "--max-len-b", "10", "--cpu")
    ids = sorted(int(m.group(1)) for m in re.finditer(r"^H-(\d+)\t", out, re.M))
    assert ids == list(range(N_TEST)), out[-2000:]  # every test sentence got a hypothesis


@pytest.mark.parametrize("arch,extra", [
    ("disan_transformer_iwslt_de_en", ["--disan-query-block", "3"]),
    ("biblosan_transformer_iwslt_de_en", ["--biblosan-block-length", "3"]),
])
def test_train_and_generate(data_bin, tmp_path, arch, extra):
    log = train(data_bin, arch, tmp_path / "ckpt", 3, "--criterion", "label_smoothed_cross_entropy",
                "--label-smoothing", "0.1", *extra)
    assert "valid on 'valid' subset" in log and "num_updates 3" in log
    generate(data_bin, tmp_path / "ckpt" / "checkpoint_last.pt")


def test_resa_warmup_resume_generate_interactive(data_bin, tmp_path):
    ckpt = tmp_path / "ckpt"
    common = ["--criterion", "selective_label_smoothed_cross_entropy", "--label-smoothing", "0.1",
              "--resa-warmup-updates", "2", "--resa-lambda", "0.01"]
    log = train(data_bin, "resa_transformer_iwslt_de_en", ckpt, 2, *common)
    warm = re.findall(r"train_inner .*? sel=([\d.]+)", log)
    assert warm and all(float(s) == 1.0 for s in warm), log[-2000:]  # warm-up: everything selected
    warm_lines = re.findall(r"train_inner .*", log)
    assert all("resa_pg=0," in line and "resa_reward" not in line for line in warm_lines)  # RSS untrained

    log = train(data_bin, "resa_transformer_iwslt_de_en", ckpt, 5, *common)  # resumes at update 2
    inner = re.findall(r"train_inner .*", log)
    assert inner and all("resa_pg" in line and "resa_head_0" in line and "resa_var_ratio" in line for line in inner)
    assert any(float(re.search(r" sel=([\d.]+)", line).group(1)) < 1.0 for line in inner)

    state = torch.load(ckpt / "checkpoint_last.pt", map_location="cpu", weights_only=True)
    # fairseq's task.train_step passes the 0-based index of the update being computed
    assert int(state["model"]["encoder.layers.0.self_attn.num_updates"]) == 4
    generate(data_bin, ckpt / "checkpoint_last.pt")

    out = run("fairseq-interactive", data_bin / "bin", "--user-dir", REPO / "ssan_plugin", "--path",
              ckpt / "checkpoint_last.pt", "--source-lang", "src", "--target-lang", "tgt", "--beam", "2",
              "--max-len-b", "10", "--cpu", stdin=(data_bin / "raw/test.src").read_text().splitlines()[0] + "\n")
    assert re.search(r"^H-0\t", out, re.M), out[-2000:]


def test_resa_gumbel_trains(data_bin, tmp_path):
    log = train(data_bin, "resa_transformer_iwslt_de_en", tmp_path / "ckpt", 2, "--criterion",
                "selective_label_smoothed_cross_entropy", "--resa-estimator", "gumbel", "--resa-direction", "bi",
                "--disable-validation")
    inner = re.findall(r"train_inner .*", log)
    assert inner and all("resa_pg" not in line and "resa_dep_0" in line for line in inner)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_resa_two_process_cpu_training_through_warmup(data_bin, tmp_path):
    """The RSS gets no real gradient during the warm-up: two ranks must still stay in step."""
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    procs = []
    for rank in (0, 1):
        cmd = [str(BIN / "fairseq-train"), str(data_bin / "bin"), "--user-dir", str(REPO / "ssan_plugin"),
               "--arch", "resa_transformer_iwslt_de_en", *TINY, "--resa-warmup-updates", "1",
               "--criterion", "selective_label_smoothed_cross_entropy", "--optimizer", "adam", "--lr", "1e-3",
               "--max-tokens", "400", "--max-update", "3", "--save-dir", str(tmp_path / "ckpt"), "--cpu",
               "--disable-validation", "--log-format", "simple", "--log-interval", "1", "--no-progress-bar",
               "--distributed-world-size", "2", "--distributed-rank", str(rank), "--device-id", "0",
               "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--distributed-no-spawn",
               "--distributed-backend", "gloo", "--ddp-backend", "legacy_ddp"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env))
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs[0][-3000:] + outs[1][-3000:]
    assert "num_updates 3" in outs[0] and "resa_reward" in outs[0]
