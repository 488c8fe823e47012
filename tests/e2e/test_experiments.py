"""ssan-run-experiments (ssan_plugin/commands/run_experiments.py): a plan runs end to end, is resumed after a kill, skips finished
runs, warm-starts from the baseline's checkpoint at `base` updates; the pooled table of the
decoded runs groups seeds."""

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
from ssan_plugin.experiments.plan import Plan
from ssan_plugin.experiments.runner import Runner

COMMAND = ["-m", "ssan_plugin.commands.run_experiments"]


def write_plan(path, corpus, seeds=(1,), archive=None):
    plan = {
        "seeds": list(seeds), "updates": {"base": 4, "more": 2}, "save_interval": 2, "threads": 1,
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
    if archive is not None:
        plan["archive"] = str(archive)
    path.write_text(json.dumps(plan), encoding="utf-8")
    return path


def runner(plan, out, *extra, check=True):
    proc = subprocess.run([sys.executable, *COMMAND, "--plan", str(plan), "--out", str(out),
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
    plan = write_plan(tmp / "plan.json", tiny_corpus, archive=tmp / "archive")
    out = tmp / "out"
    # start, then kill the whole process group as soon as the baseline has its base checkpoint
    proc = subprocess.Popen([sys.executable, *COMMAND, "--plan", str(plan), "--out", str(out)],
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
    assert "2/2 runs done" in status


def test_warm_start_continues_from_base_checkpoint(experiment):
    _, out, _, _ = experiment
    run = out / "s" / "tiny" / "ssan_warm@1"
    log = (run / "train.log").read_text(encoding="utf-8")
    assert "@ 4 updates" in log  # resumed from the baseline's checkpoint at `base` updates
    n, state = updates_of(run / "checkpoint_last.pt")
    assert n == 6 and state["cfg"]["model"].arch == "ssan_transformer"
    assert (run / "checkpoint_best.pt").is_file()  # its own best, not the baseline's
    assert "new (freshly initialised)" in (run / "warm_start.log").read_text(encoding="utf-8")


def test_results_and_skip(experiment):
    plan, out, _, _ = experiment
    results = out.parent / "archive" / "results"
    report = json.loads((results / "s.tiny.json").read_text(encoding="utf-8"))
    assert [s["name"] for s in report["systems"]] == ["baseline@1", "ssan_warm@1"]
    assert report["systems"][1]["compared_with"] == "baseline@1"
    assert (results / "s.tiny.md").read_text(encoding="utf-8").startswith("| system |")
    lines = (out / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(x)["run"] for x in lines) == ["s/tiny/baseline@1",
                                                           "s/tiny/ssan_warm@1"]
    before = (out / "runs.jsonl").stat().st_mtime_ns
    again = runner(plan, out)
    assert "train " not in again.stderr and (out / "runs.jsonl").stat().st_mtime_ns == before


def test_archive_holds_each_finished_run(experiment):
    """The archive keeps, per run, the training summary, fairseq's train/valid records, the
    test report (hypotheses path relative to the run) and the hypotheses, equal to the run's."""
    _, out, _, _ = experiment
    for name in ("baseline@1", "ssan_warm@1"):
        run, kept = out / "s" / "tiny" / name, out.parent / "archive" / "s" / "tiny" / name
        hyp = f"{name}.test.tgt"
        assert (kept / hyp).read_bytes() == (run / hyp).read_bytes()
        report = json.loads((kept / "test.json").read_text(encoding="utf-8"))
        assert report["systems"][0]["hyp_file"] == hyp
        assert json.loads((kept / "train.json").read_text()) == json.loads(
            (run / "train.done").read_text())
        curve = [json.loads(x) for x in (kept / "curve.jsonl").read_text().splitlines()]
        assert "valid" in {r["kind"] for r in curve}  # (6 updates: no train_inner interval)
        assert {r["kind"] for r in curve} <= {"train_inner", "valid"}
        assert max(int(r["valid_num_updates"]) for r in curve if r["kind"] == "valid") == 6
    assert not list((out.parent / "archive").rglob("*.pt"))


def test_fresh_clone_continues_from_the_archive(experiment, tmp_path):
    """A new OUT (a fresh clone has no runs/) counts archived runs as done; a warm-started
    run whose baseline is archived but whose checkpoints are gone rebuilds the baseline's
    checkpoint at `base` updates and continues from it; the archived baseline is kept."""
    plan, out, _, _ = experiment
    archive = out.parent / "archive"
    status = runner(plan, tmp_path / "fresh", "--status").stdout
    assert "archived s/tiny/baseline@1" in status and "2/2 runs done" in status
    again = runner(plan, tmp_path / "fresh")
    assert "train " not in again.stderr and not (tmp_path / "fresh" / "s").exists()

    kept = (archive / "s" / "tiny" / "baseline@1" / "baseline@1.test.tgt").read_bytes()
    moved = tmp_path / "ssan_warm_archived"
    (archive / "s" / "tiny" / "ssan_warm@1").rename(moved)
    try:
        done = runner(plan, tmp_path / "fresh")
        assert "[rebuild] s/tiny/baseline@1" in done.stdout
        base = tmp_path / "fresh" / "s" / "tiny" / "baseline@1" / "checkpoint_base.pt"
        assert updates_of(base)[0] == 4
        warm_log = (tmp_path / "fresh" / "s" / "tiny" / "ssan_warm@1" / "train.log").read_text()
        assert "@ 4 updates" in warm_log
        assert (archive / "s" / "tiny" / "ssan_warm@1" / "test.json").is_file()
        assert (archive / "s" / "tiny" / "baseline@1" / "baseline@1.test.tgt").read_bytes() == kept
        assert not (tmp_path / "fresh" / "s" / "tiny" / "baseline@1" / "train.done").exists()
    finally:
        if not (archive / "s" / "tiny" / "ssan_warm@1").exists():
            moved.rename(archive / "s" / "tiny" / "ssan_warm@1")


def test_pooled_table_over_seeds(experiment, tmp_path, tiny_corpus):
    """Seeds of every system pooled as GROUP@SEED, from the decoded runs found on disk (here
    seed 2 is made from seed 1's outputs: a copy of the baseline and a degraded SSAN)."""
    _, out, _, _ = experiment
    plan = Plan.load(write_plan(tmp_path / "plan.json", tiny_corpus, seeds=(1, 2)))
    runner_ = Runner(plan, out)
    study, pair = plan.studies[0], plan.pairs["tiny"]
    for system in ("baseline", "ssan_warm"):
        src = out / "s" / "tiny" / f"{system}@1"
        dst = out / "s" / "tiny" / f"{system}@2"
        dst.mkdir()
        hyps = (src / f"{system}@1.test.tgt").read_text(encoding="utf-8").splitlines()
        if system == "ssan_warm":
            hyps = [" ".join(h.split()[:-1]) for h in hyps]
        (dst / f"{system}@2.test.tgt").write_text("".join(h + "\n" for h in hyps), "utf-8")
        (dst / "test.json").write_text(json.dumps(
            {"systems": [{"hyp_file": str(dst / f"{system}@2.test.tgt")}]}), "utf-8")
    runner_.pooled_report(study, pair, runner_.data_dir(pair))
    report = json.loads((out / "results" / "s.tiny.json").read_text(encoding="utf-8"))
    assert [s["name"] for s in report["systems"]] == ["baseline@1", "baseline@2",
                                                       "ssan_warm@1", "ssan_warm@2"]
    assert [(g["name"], g["n_seeds"]) for g in report["groups"]] == [("baseline", 2),
                                                                      ("ssan_warm", 2)]
    by_name = {s["name"]: s for s in report["systems"]}
    assert by_name["ssan_warm@2"]["compared_with"] == "baseline@2"
    assert by_name["baseline@2"]["identical"] and by_name["baseline@2"]["p_value"] == 1.0
    assert report["groups"][1]["mean_bleu"] == pytest.approx(
        (by_name["ssan_warm@1"]["bleu"] + by_name["ssan_warm@2"]["bleu"]) / 2)


def test_bad_plan(tmp_path, tiny_corpus):
    plan = json.loads(write_plan(tmp_path / "p.json", tiny_corpus).read_text())
    plan["studies"][0]["systems"] = ["ssan_warm", "baseline"]
    (tmp_path / "p.json").write_text(json.dumps(plan))
    proc = runner(tmp_path / "p.json", tmp_path / "o", check=False)
    assert proc.returncode == 2
    assert "warm-starts from 'baseline', but the baseline (first system) of study 's' is " \
           "'ssan_warm'" in proc.stderr
    assert "Traceback" not in proc.stderr
