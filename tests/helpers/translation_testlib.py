"""Helpers shared by the translation tests (tests/unit/translation/, tests/e2e/test_translation*.py)."""

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


def script_command(name):
    """How to run the command (or project script) NAME.py after the interpreter: ``-m MODULE``
    for a command of ``ssan_plugin.commands``, the file for a project script."""
    stem = name[:-len(".py")] if name.endswith(".py") else name
    path = SCRIPTS / f"{stem}.py"
    return [str(path)] if path.exists() else ["-m", f"ssan_plugin.commands.{stem}"]


def script_file(name):
    """The file of the command (or project script) NAME.py: what ``sys.argv[0]`` is when it runs."""
    stem = name[:-len(".py")] if name.endswith(".py") else name
    path = SCRIPTS / f"{stem}.py"
    return path if path.exists() else ROOT / "ssan_plugin" / "commands" / f"{stem}.py"


def load_script(name):
    """The command ``ssan_plugin.commands.NAME`` (to call its main(argv) in-process), or, for a
    project script, scripts/NAME.py imported as a module."""
    path = SCRIPTS / f"{name}.py"
    if not path.exists():
        return importlib.import_module(f"ssan_plugin.commands.{name}")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prepare(src, tgt, prefix_dir, dest, vocab_size, *extra, check=True):
    d = Path(prefix_dir)
    return run([PY, "-m", "ssan_plugin.commands.prepare_translation", "--src", src, "--tgt", tgt,
                "--train", d / "train", "--valid", d / "valid", "--test", d / "test",
                "--dest", dest, "--vocab-size", vocab_size, *extra], check=check)


def train_tiny(data, arch, save_dir, updates=20, seed=1, *extra):
    """A 1-layer, 32-dim model trained for `updates` steps on CPU (more fairseq-train flags in
    `extra`); returns the last checkpoint."""
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
         "--log-format", "simple", "--num-workers", 0, *extra])
    checkpoint = Path(save_dir) / "checkpoint_last.pt"
    assert checkpoint.is_file(), f"training wrote no {checkpoint}"
    return checkpoint


def evaluate(data, ref, systems, json_out, *extra, check=True):
    args = [PY, "-m", "ssan_plugin.commands.evaluate_bleu", "--data", data, "--ref", ref, "--json", json_out,
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


# ---------------------------------------------------------------- prepare_translation.py in-process

PREPARE = load_script("prepare_translation")


def write_pairs(directory, split, src, tgt, pairs, src_lang="en", tgt_lang="ro"):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{split}.{src_lang}").write_text("".join(s + "\n" for s in src), "utf-8")
    (directory / f"{split}.{tgt_lang}").write_text("".join(t + "\n" for t in tgt), "utf-8")


def small_corpus(directory, n_train=40, bad_train=(), src_lang="en", tgt_lang="ro"):
    src = [f"The house number {i} is green." for i in range(n_train)]
    tgt = [f"Casa numărul {i} este verde." for i in range(n_train)]
    for s, t in bad_train:
        src.append(s)
        tgt.append(t)
    write_pairs(directory, "train", src, tgt, None, src_lang, tgt_lang)
    write_pairs(directory, "valid", ["A house.", "Two houses."], ["O casă.", "Două case."],
                None, src_lang, tgt_lang)
    write_pairs(directory, "test", ["Ştiinţa house.", "", "A green house."],
                ["Ştiinţa casei.", "Ceva.", "O casă verde."], None, src_lang, tgt_lang)


def call_prepare(tmp_path, raw, *extra, src="en", tgt="ro"):
    dest = tmp_path / "bin"
    argv = ["--src", src, "--tgt", tgt, "--train", str(raw / "train"),
            "--valid", str(raw / "valid"), "--test", str(raw / "test"),
            "--dest", str(dest), "--vocab-size", "60", *extra]
    return PREPARE.main(argv), dest
