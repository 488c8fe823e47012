"""Helpers shared by tests/test_translation_*.py (not a test module)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
SHARED_DATA = ROOT.parent / "shared" / "data"
PY = sys.executable
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run(args, check=True, timeout=600):
    """Run a command with one thread; return CompletedProcess (stdout/stderr as text)."""
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=ENV,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{args} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
                             f"{result.stderr[-3000:]}")
    return result


def load_script(name):
    """Import scripts/NAME.py as a module (to call its main(argv) in-process)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prepare(src, tgt, prefix_dir, dest, vocab_size, *extra, check=True):
    d = Path(prefix_dir)
    return run([PY, SCRIPTS / "prepare_translation.py", "--src", src, "--tgt", tgt,
                "--train", d / "train", "--valid", d / "valid", "--test", d / "test",
                "--dest", dest, "--vocab-size", vocab_size, *extra], check=check)


def train_tiny(data, arch, save_dir, updates=20, seed=1):
    """A 1-layer, 32-dim model trained for `updates` steps on CPU; returns the checkpoint."""
    run([PY, "-m", "fairseq_cli.train", data, "--user-dir", ROOT / "ssan_plugin",
         "--task", "translation", "--arch", arch,
         "--encoder-layers", 1, "--decoder-layers", 1,
         "--encoder-embed-dim", 32, "--decoder-embed-dim", 32,
         "--encoder-ffn-embed-dim", 64, "--decoder-ffn-embed-dim", 64,
         "--encoder-attention-heads", 2, "--decoder-attention-heads", 2,
         "--share-all-embeddings", "--optimizer", "adam", "--lr", 0.005,
         "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", 0.1,
         "--max-tokens", 2000, "--max-update", updates, "--seed", seed, "--cpu",
         "--disable-validation", "--no-epoch-checkpoints", "--save-dir", save_dir,
         "--log-format", "simple", "--num-workers", 0])
    checkpoint = Path(save_dir) / "checkpoint_last.pt"
    assert checkpoint.is_file(), f"training wrote no {checkpoint}"
    return checkpoint


def evaluate(data, ref, systems, json_out, *extra, check=True):
    args = [PY, SCRIPTS / "evaluate_bleu.py", "--data", data, "--ref", ref, "--json", json_out,
            "--beam", 2, "--max-len-a", 1.2, "--max-len-b", 5]
    for kind, name, path in systems:
        args += [f"--{kind}", f"{name}={path}"]
    return run(args + list(extra), check=check)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def lines(path):
    return Path(path).read_text(encoding="utf-8").splitlines()


def generate_sources(log_path):
    """{sentence id: S- text} from a saved fairseq-generate log."""
    out = {}
    for line in lines(log_path):
        if line.startswith("S-"):
            head, text = line.split("\t", 1)
            out[int(head[2:])] = text
    return out
