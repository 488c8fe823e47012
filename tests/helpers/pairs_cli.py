"""Sentence-pair test helpers: a synthetic SICK-layout corpus, SNLI-layout files, and the
command lines of prepare_pairs.py / fairseq-train --task sentence_pair / evaluate_pairs.py
(tests/e2e/test_pairs_cli.py, tests/unit/pairs/, tests/unit/criterions/test_sentence_pair_loss.py)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
BIN = Path(sys.executable).parent
NLI = ROOT.parent / "shared" / "data" / "nli"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}

SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tSemEval_set"
SUBJECTS = ("A man", "A woman", "A boy", "A girl", "The dog", "Two kids")
ACTIONS = ("is playing a guitar", "is riding a horse", "is cutting an onion",
           "is running on the beach", "is eating a banana")


def sick_rows(n: int, start_id: int = 1):
    """n (pair_ID, A, B, label, score) rows with a learnable rule: same sentence -> entailment
    (5.0), negated -> contradiction (3.5), another action -> neutral (2.0)."""
    rows = []
    for i in range(n):
        subject = SUBJECTS[i % len(SUBJECTS)]
        action = ACTIONS[(i // len(SUBJECTS)) % len(ACTIONS)]
        a = f"{subject} {action}"
        kind = i % 3
        if kind == 0:
            b, label, score = a, "ENTAILMENT", 5.0
        elif kind == 1:
            b, label, score = f"{subject} is not {action[3:]}", "CONTRADICTION", 3.5
        else:
            other = ACTIONS[(i // len(SUBJECTS) + 1) % len(ACTIONS)]
            b, label, score = f"{subject} {other}", "NEUTRAL", 2.0
        rows.append((str(start_id + i), a, b, label, score))
    return rows


def write_sick(path, rows, set_name="TRAIN"):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    lines = [SICK_HEADER] + [f"{i}\t{a}\t{b}\t{label}\t{score}\t{set_name}"
                             for i, a, b, label, score in rows]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_snli(directory, split, rows):
    """rows: (s1, s2, label) -> DIR/{s1,s2,labels}.SPLIT."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(("s1", "s2", "labels")):
        (directory / f"{name}.{split}").write_text("".join(r[index] + "\n" for r in rows),
                                                   encoding="utf-8")


def run(args, check=True, timeout=600):
    proc = subprocess.run([str(a) for a in args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-3000:]}")
    return proc


def prepare(fmt, train, valid, test, dest, *extra, check=True):
    return run([sys.executable, "-m", "ssan_plugin.commands.prepare_pairs", "--format", fmt, "--train", train,
                "--valid", valid, "--test", test, "--dest", dest, *extra], check=check)


TINY_PAIR_MODEL = ("--encoder-embed-dim", 32, "--encoder-ffn-embed-dim", 64,
                   "--encoder-layers", 2, "--encoder-attention-heads", 2, "--dropout", 0.0)


def train(data, save_dir, encoder, *extra, updates=4, target="entailment", shape=TINY_PAIR_MODEL,
          user_dir=ROOT / "ssan_plugin"):
    """fairseq-train --task sentence_pair, a tiny pair_classifier for `updates` updates."""
    proc = run([BIN / "fairseq-train", data, "--user-dir", user_dir,
                "--task", "sentence_pair", "--pair-target", target, "--arch", "pair_classifier",
                "--pair-encoder", encoder, *shape, "--criterion", "sentence_pair_loss",
                "--optimizer", "adam", "--lr", 0.003, "--batch-size", 16,
                "--max-update", updates, "--cpu", "--save-dir", save_dir,
                "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", 1,
                "--seed", 1, "--num-workers", 0, *extra])
    checkpoint = Path(save_dir) / "checkpoint_last.pt"
    assert checkpoint.is_file(), f"training wrote no {checkpoint}"
    return checkpoint, proc


def evaluate(data, systems, json_out, *extra, subset="test", check=True):
    args = [sys.executable, "-m", "ssan_plugin.commands.evaluate_pairs", "--data", data, "--subset", subset,
            "--json", json_out, "--bootstrap-samples", 200]
    for system in systems:
        args += ["--checkpoint", system]
    return run(args + list(extra), check=check)


# ---------------------------------------------------------------- in-process: data dir, model

def prepare_in_process(dest, train_rows, valid_rows, tokens="words", **kwargs):
    """A sentence-pair data dir of synthetic SICK rows (test split = valid), in-process."""
    from ssan_plugin.pairs.prepare import PairPrepareConfig, prepare as run_prepare

    raw = Path(dest).parent / (Path(dest).name + "_raw")
    write_sick(raw / "train.tsv", train_rows)
    write_sick(raw / "valid.tsv", valid_rows, "TRIAL")
    run_prepare(PairPrepareConfig(format="sick", train=str(raw / "train.tsv"),
                                  valid=str(raw / "valid.tsv"), test=str(raw / "valid.tsv"),
                                  dest=str(dest), tokens=tokens, **kwargs))
    return Path(dest)


def build_pair(data, *argv):
    """fairseq-train's start-up in-process: (task, model, criterion) of a sentence_pair run."""
    import ssan_plugin  # noqa: F401  (registrations)
    from fairseq import options, tasks

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [str(data), "--task", "sentence_pair", "--arch",
                                                "pair_classifier", "--criterion",
                                                "sentence_pair_loss", "--cpu",
                                                *map(str, argv)])
    task = tasks.setup_task(args)
    return task, task.build_model(args), task.build_criterion(args)


def batch(task, split="valid", indices=range(6)):
    task.load_dataset(split)
    dataset = task.dataset(split)
    return dataset.collater([dataset[i] for i in indices])
