"""scripts/run_experiments.py: a plan runs end to end, is resumed after a kill, skips finished
runs, warm-starts from the baseline's checkpoint at `base` updates, and pools seeds."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import ssan_plugin  # noqa: F401  (torch.load allow-list)
from conftest import ROOT, TINY_MODEL, cli_env

SCRIPT = ROOT / "scripts" / "run_experiments.py"


def write_plan(path, corpus):
    plan = {
        "seeds": [1, 2], "updates": {"base": 4, "more": 2}, "save_interval": 2, "threads": 1,
        "beam": 2,
        "train": [*TINY_MODEL, "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler",
                  "inverse_sqrt", "--warmup-updates", "2", "--max-tokens", "500"],
        "pairs": {"tiny": {"raw": str(corpus), "src": "src", "tgt": "tgt",
                           "prepare": ["--vocab-size", "60"]}},
        "systems": {
            "baseline": {"arch": "transformer", "criterion": "label_smoothed_cross_entropy"},
            "ssan_warm": {"arch": "ssan_transformer", "warm_from": "baseline",
                          "criterion": "selective_label_smoothed_cross_entropy"}},
        "studies": [{"name": "s", "pairs": ["tiny"], "systems": ["baseline", "ssan_warm"]}],
    }
    path.write_text(json.dumps(plan), encoding="utf-8")
    return path


def runner(plan, out, *extra, check=True):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--plan", str(plan), "--out", str(out),
                           *extra], capture_output=True, text=True, env=cli_env(), timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(proc.stdout[-3000:] + proc.stderr[-3000:])
    return proc


def updates_of(checkpoint):
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    return state["optimizer_history"][-1]["num_updates"], state


@pytest.fixture(scope="module")
def experiment(tiny_corpus, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("experiments")
    plan = write_plan(tmp / "plan.json", tiny_corpus)
    out = tmp / "out"
    # start, then kill the whole process group as soon as the baseline has its base checkpoint
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--plan", str(plan), "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=cli_env(),
                            start_new_session=True)
    base_ckpt = out / "s" / "tiny" / "baseline@1" / "checkpoint_base.pt"
    deadline = time.time() + 600
    while not base_ckpt.is_file() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_done = (out / "s" / "tiny" / "baseline@1" / "train.done").is_file()
    finished = runner(plan, out)
    return plan, out, killed_done, finished


def test_resumes_after_kill_and_completes(experiment):
    plan, out, killed_done, finished = experiment
    assert not killed_done  # killed between the base stage and the end of training
    log = (out / "s" / "tiny" / "baseline@1" / "train.log").read_text(encoding="utf-8")
    sections = log.split("\n$ ")
    assert len(sections) >= 3  # stage to 4 updates, the killed continuation, the resumed one
    assert "Loaded checkpoint" in sections[-1] and "@ 4 updates" in sections[-1]
    assert updates_of(out / "s" / "tiny" / "baseline@1" / "checkpoint_last.pt")[0] == 6
    assert updates_of(out / "s" / "tiny" / "baseline@1" / "checkpoint_base.pt")[0] == 4
    assert "plan complete" in finished.stdout
    status = runner(plan, out, "--status").stdout
    assert "4/4 runs done" in status


def test_warm_start_continues_from_base_checkpoint(experiment):
    _, out, _, _ = experiment
    run = out / "s" / "tiny" / "ssan_warm@1"
    log = (run / "train.log").read_text(encoding="utf-8")
    assert "@ 4 updates" in log  # resumed from the baseline's checkpoint at `base` updates
    n, state = updates_of(run / "checkpoint_last.pt")
    assert n == 6 and state["cfg"]["model"].arch == "ssan_transformer"
    assert (run / "checkpoint_best.pt").is_file()  # its own best, not the baseline's
    assert "new (freshly initialised)" in (run / "warm_start.log").read_text(encoding="utf-8")


def test_pooled_results_and_skip(experiment):
    plan, out, _, _ = experiment
    report = json.loads((out / "results" / "s.tiny.json").read_text(encoding="utf-8"))
    assert [s["name"] for s in report["systems"]] == ["baseline@1", "baseline@2",
                                                       "ssan_warm@1", "ssan_warm@2"]
    assert [g["name"] for g in report["groups"]] == ["baseline", "ssan_warm"]
    assert report["groups"][1]["n_seeds"] == 2
    assert report["systems"][2]["compared_with"] == "baseline@1"
    assert report["systems"][3]["compared_with"] == "baseline@2"
    assert (out / "results" / "s.tiny.md").read_text(encoding="utf-8").startswith("| system |")
    lines = (out / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(x)["run"] for x in lines) == sorted(
        f"s/tiny/{s}@{seed}" for s in ("baseline", "ssan_warm") for seed in (1, 2))
    before = (out / "runs.jsonl").stat().st_mtime_ns
    again = runner(plan, out)
    assert "train " not in again.stderr and (out / "runs.jsonl").stat().st_mtime_ns == before


def test_bad_plan(tmp_path, tiny_corpus):
    plan = json.loads(write_plan(tmp_path / "p.json", tiny_corpus).read_text())
    plan["studies"][0]["systems"] = ["ssan_warm", "baseline"]
    (tmp_path / "p.json").write_text(json.dumps(plan))
    proc = runner(tmp_path / "p.json", tmp_path / "o", check=False)
    assert proc.returncode == 2
    assert "warm-starts from 'baseline', but the baseline (first system) of study 's' is " \
           "'ssan_warm'" in proc.stderr
    assert "Traceback" not in proc.stderr
