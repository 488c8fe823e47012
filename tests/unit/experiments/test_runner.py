"""ssan_plugin.experiments.runner.Runner without training: the commands a dry run prints (a made
corpus, decoding flags), a dry run deletes and creates nothing, borrowed runs never trained,
selection statistics archived once, own data checked against the borrowed runs' data."""

import json
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from helpers.experiment_plans import fake_decoded, plan_file, source_and_borrower
from helpers.tree_snapshot import snapshot
from ssan_plugin.experiments.plan import Plan
from ssan_plugin.experiments.runner import Runner
from ssan_plugin.translation.textio import PipelineError


def test_a_made_corpus_and_decoding_flags_reach_the_commands(tmp_path, capsys):
    path = plan_file(tmp_path, decode=["--max-len-a", "1", "--max-len-b", "10"],
                     studies=[{"name": "s", "pairs": ["a"], "systems": ["base"]}])
    spec = json.loads(path.read_text())
    spec["pairs"]["a"]["make"] = ["scripts/make_synthetic_corpus.py", "--seed", "3"]
    path.write_text(json.dumps(spec))
    runner = Runner(Plan.load(path), tmp_path / "out", dry_run=True)
    runner.run(limit=1)
    printed = capsys.readouterr().out
    make = [line for line in printed.splitlines() if "make_synthetic_corpus.py" in line]
    assert make and make[0].endswith(f"--seed 3 --out {tmp_path / 'a'}")
    assert str(ROOT / "scripts" / "make_synthetic_corpus.py") in make[0]
    decode = [line for line in printed.splitlines() if "ssan_plugin.commands.evaluate_bleu" in line]
    assert decode and "--beam 5 --max-len-a 1 --max-len-b 10" in decode[0]


def test_a_dry_run_deletes_nothing(tmp_path):
    path = plan_file(tmp_path, studies=[{"name": "s", "pairs": ["a"], "systems": ["base"]}])
    half_prepared = tmp_path / "out" / "data" / "a"
    half_prepared.mkdir(parents=True)
    (half_prepared / "keep").write_text("x")
    Runner(Plan.load(path), tmp_path / "out", dry_run=True).run(limit=1)
    assert (half_prepared / "keep").is_file()


@pytest.mark.parametrize("earlier_table", [False, True])
def test_a_dry_run_creates_nothing(tmp_path, capsys, earlier_table):
    """No run directory, no logs folder, no results folder for a pooled table, and an earlier
    pooled table's log kept: the tree under the plan's folders is the same after a dry run."""
    path = source_and_borrower(tmp_path)
    fake_decoded(tmp_path / "src_archive" / "s" / "a" / "base@1", "base@1")  # a pooled table
    if earlier_table:
        (tmp_path / "archive" / "results").mkdir(parents=True)
        (tmp_path / "archive" / "results" / "s.a.log").write_text("earlier table\n")
    before = snapshot(tmp_path)
    Runner(Plan.load(path), tmp_path / "out", dry_run=True).run()
    printed = capsys.readouterr().out
    assert "would run:" in printed and "--hyp base@1=" in printed
    assert snapshot(tmp_path) == before


def test_a_second_runner_on_the_same_out_stops_at_once(tmp_path):
    import fcntl

    path = plan_file(tmp_path, studies=[{"name": "s", "pairs": ["a"], "systems": ["base"]}])
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".lock", "w") as held:  # the first runner's lock
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        before = snapshot(tmp_path)
        with pytest.raises(SystemExit, match=r"another ssan-run-experiments is running on .*out"):
            Runner(Plan.load(path), out).run(limit=1)
        assert snapshot(tmp_path) == before  # it started nothing
        Runner(Plan.load(path), out, dry_run=True).run(limit=1)  # a dry run is not stopped


def test_a_run_that_a_live_process_trains_is_refused(tmp_path, monkeypatch):
    """A runner killed (its OUT lock gone with it) leaves a training child that still holds its
    run's lock: a new runner on the same OUT refuses that run in one line naming it, before
    any child starts; the lock free again, the run trains."""
    import subprocess
    import sys

    path = plan_file(tmp_path, studies=[{"name": "s", "pairs": ["a"], "systems": ["base"]}])
    out = tmp_path / "out"
    (out / "data" / "a").mkdir(parents=True)
    (out / "data" / "a" / "manifest.json").write_text("{}")  # prepared
    started = []
    monkeypatch.setattr(Runner, "_child", lambda self, cmd, log, progress=None:
                        started.append((cmd, self._held)))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'w'); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
         str(out / "s" / "a" / "base@1" / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        (out / "s" / "a" / "base@1").mkdir(parents=True)
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(PipelineError, match=r"^s/a/base@1 is being trained by another live "
                                                r"process \(it holds .*/s/a/base@1/.lock\)"):
            Runner(Plan.load(path), out).run(limit=1)
        assert started == []
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(FileNotFoundError):  # no training ran: no log to summarise
        Runner(Plan.load(path), out).run(limit=1)
    assert [cmd[0].name for cmd, _ in started] == ["fairseq-train"] and len(started[0][1]) == 1


# ------------------------------------------------------------------ borrowed runs
def test_borrowed_runs_are_never_trained_and_status_names_their_source(tmp_path, capsys):
    plan = Plan.load(source_and_borrower(tmp_path))
    fake_decoded(tmp_path / "src_archive" / "s" / "a" / "base@1", "base@1")
    (tmp_path / "src_out" / "s" / "a" / "ssan@1").mkdir(parents=True)
    (tmp_path / "src_out" / "s" / "a" / "ssan@1" / "checkpoint_last.pt").write_text("")
    runner = Runner(plan, tmp_path / "out", dry_run=True)
    rows = {row["run"]: row for row in runner.status()}
    assert rows["s/a/base@1"] == {"run": "s/a/base@1", "state": "borrowed",
                                  "source_state": "archived",
                                  "source": f"{tmp_path / 'source.json'} s/a/base@1"}
    assert rows["s/a/gumbel@1"]["source_state"] == "started"
    assert rows["s/a/gumbel@1"]["selection"] == "pending"  # its best is not final yet
    assert rows["s/a/other@1"] == {"run": "s/a/other@1", "state": "todo", "selection": "pending"}
    runner.run()
    printed = capsys.readouterr().out
    trained = [line for line in printed.splitlines() if "fairseq-train" in line]
    assert len(trained) == 2 and all("--arch selective_transformer" in t for t in trained)
    assert "[selection] s/a/gumbel@1" not in printed  # not decoded in its plan
    # the pooled table reads the borrowed baseline's hypotheses from the other archive
    pooled = [line for line in printed.splitlines() if "--hyp base@1=" in line]
    assert pooled and str(tmp_path / "src_archive" / "s" / "a" / "base@1" / "base@1.test.tgt") \
        in pooled[0]
    # the plan's seeds of each decoded system, so that its verdicts stay interim until then
    assert pooled[0].endswith("--planned-seeds base=2") and "gumbel=" not in pooled[0]


def test_selection_statistics_are_archived_once_with_relative_paths(tmp_path, monkeypatch):
    """A borrowed run's statistics come from the checkpoint and data in the other runner's out
    and land in this plan's archive under this plan's name; an own run's from its own."""
    from ssan_plugin.experiments import runner as runner_module

    monkeypatch.setattr(runner_module, "ROOT", tmp_path)  # paths under it become relative
    plan = Plan.load(source_and_borrower(tmp_path))
    runs = {run.key: run for run in plan.runs()}
    fake_decoded(tmp_path / "src_archive" / "s" / "a" / "ssan@1", "ssan@1")
    src = tmp_path / "src_out"
    (src / "s" / "a" / "ssan@1").mkdir(parents=True)
    (src / "s" / "a" / "ssan@1" / "checkpoint_best.pt").write_text("")
    (src / "data" / "a").mkdir(parents=True)
    (src / "data" / "a" / "manifest.json").write_text("{}")
    calls = []

    def child(self, cmd, log, progress=None):
        cmd = [str(c) for c in cmd]
        calls.append(cmd)
        log.parent.mkdir(parents=True, exist_ok=True)
        out = cmd[cmd.index("--json") + 1]
        Path(out).write_text(json.dumps({"conll": cmd[cmd.index("--conll") + 1],
                                         "n_sentences": 1, "layers": []}))

    monkeypatch.setattr(Runner, "_child", child)
    monkeypatch.setattr(runner_module, "relativize_text",
                        lambda text: text.replace(f"{tmp_path}/", ""))
    runner = Runner(plan, tmp_path / "out")
    assert runner.selection_state(runs["s/a/gumbel@1"]) == "todo"
    dest = runner.analyse(runs["s/a/gumbel@1"])
    assert dest == tmp_path / "archive" / "s" / "a" / "gumbel@1" / "selection.json"
    (cmd,) = calls
    assert cmd[cmd.index("--checkpoint") + 1] == str(src / "s" / "a" / "ssan@1" /
                                                     "checkpoint_best.pt")
    assert cmd[cmd.index("--data") + 1] == str(src / "data" / "a")
    assert cmd[cmd.index("--json") + 1] == str(tmp_path / "out" / "s" / "a" / "gumbel@1" /
                                               "selection.stats.json")
    record = json.loads(dest.read_text())
    assert record == {"run": "s/a/gumbel@1", "checkpoint": "src_out/s/a/ssan@1/checkpoint_best.pt",
                      "data": "src_out/data/a",
                      "borrowed": {"plan": "source.json", "run": "s/a/ssan@1"},
                      "conll": "dev.conll", "n_sentences": 1, "layers": []}
    assert sorted(p.name for p in dest.parent.iterdir()) == ["selection.json"]
    assert runner.analyse(runs["s/a/gumbel@1"]) == dest and len(calls) == 1  # done once
    assert runner.selection_state(runs["s/a/gumbel@1"]) == "archived"
    # a baseline is not analysed; a run without its checkpoint here is skipped
    assert runner.analyse(runs["s/a/base@1"]) is None
    fake_decoded(tmp_path / "archive" / "s" / "a" / "other@1", "other@1")
    assert runner.selection_state(runs["s/a/other@1"]) == "no checkpoint"
    assert runner.analyse(runs["s/a/other@1"]) is None and len(calls) == 1


def test_own_data_must_equal_the_data_of_borrowed_runs(tmp_path, capsys):
    from ssan_plugin.experiments.runner import data_fingerprint

    plan = Plan.load(source_and_borrower(tmp_path))
    runner = Runner(plan, tmp_path / "out")
    mine, theirs = tmp_path / "out" / "data" / "a", tmp_path / "src_out" / "data" / "a"
    for d in (mine, theirs):
        (d / "text").mkdir(parents=True)
        (d / "dict.src.txt").write_text("a 1\n")
        (d / "text" / "train.spm.src").write_text("a\n")
        (d / "manifest.json").write_text(json.dumps({"dest": str(d)}))  # paths differ: ignored
    assert sorted(data_fingerprint(mine)) == ["dict.src.txt", "text/train.spm.src"]
    runner.check_borrowed_data(plan.pairs["a"], mine)
    runner._data_checked.clear()
    (theirs / "text" / "train.spm.src").write_text("b\n")
    with pytest.raises(PipelineError, match=r"differs from .* in text/train.spm.src: the "
                                            r"borrowed runs were trained on other data"):
        runner.check_borrowed_data(plan.pairs["a"], mine)
    assert "[data]" not in capsys.readouterr().out
    # their data is not on this machine: nothing to compare, and the log says so, once
    (theirs / "manifest.json").unlink()
    runner.check_borrowed_data(plan.pairs["a"], mine)
    runner.check_borrowed_data(plan.pairs["a"], mine)
    said = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[data]")]
    assert len(said) == 1 and said[0].startswith("[data] a: not compared with the data of the "
                                                 "runs borrowed from ") \
        and said[0].endswith(f"{theirs} is not on this machine"), said


# ------------------------------------------------------------------ children
def test_a_child_appends_to_its_log_and_fails_in_one_line(tmp_path):
    """Runner._child (cli.steps.run_step): each child's output appended after a ``$ COMMAND``
    line (a resumed training keeps the killed one's output), from the project root, each line
    to ``progress``; a failure is one StepError line naming the module, its last line and the
    log."""
    import sys

    from ssan_plugin.errors import StepError
    from ssan_plugin.experiments.archive import step_name
    from ssan_plugin.experiments.runner import ROOT as CHILD_ROOT

    runner = Runner(Plan.load(plan_file(tmp_path)), tmp_path / "out")
    log = tmp_path / "out" / "run" / "train.log"
    seen = []
    runner._child([sys.executable, "-c", "import os; print(os.getcwd())"], log, seen.append)
    assert seen == [f"{CHILD_ROOT}\n"]
    with pytest.raises(StepError) as info:
        runner._child([sys.executable, "-m", "no_such_module_of_ssan_plugin"], log)
    message = str(info.value)
    assert message.startswith("no_such_module_of_ssan_plugin failed (exit 1): ")
    assert "No module named" in message and "\n" not in message
    assert message.endswith(f"; full log: {log}")
    sections = log.read_text().split("\n$ ")
    assert len(sections) == 2 and sections[0] == f"$ {sys.executable} -c import os; " \
                                                  f"print(os.getcwd())\n{CHILD_ROOT}"
    assert sections[1].startswith(f"{sys.executable} -m no_such_module_of_ssan_plugin\n")
    assert step_name(["/v/bin/python", "scripts/make_corpus.py", "--seed", "3"]) == \
        "make_corpus.py"
    assert step_name([Path("/v/bin/fairseq-train"), "data"]) == "fairseq-train"


# the parent: starts the child the way the runners start theirs (the child prints its pid in
# the log); then waits to be killed
PARENTS = {
    "Runner._child": "from ssan_plugin.experiments.plan import Plan; "
                     "from ssan_plugin.experiments.runner import Runner; "
                     "Runner(Plan.load(sys.argv[1]), sys.argv[2])._child(CHILD, Path(sys.argv[3]))",
    "archive.run_command": "from ssan_plugin.experiments.archive import run_command; "
                           "run_command(CHILD, Path(sys.argv[3]))",
}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG)")
@pytest.mark.parametrize("starter", list(PARENTS))
def test_a_child_dies_with_its_runner_killed_by_sigkill(tmp_path, starter):
    """A runner killed with SIGKILL (no cleanup of its own runs) takes its child with it: the
    kernel sends the child SIGTERM (archive.die_with_parent), so no training outlives it."""
    import os
    import signal
    import subprocess
    import time

    log = tmp_path / "child.log"
    code = ("import sys; from pathlib import Path; "
            "CHILD = ['sh', '-c', 'echo $$; exec sleep 60']; " + PARENTS[starter])
    parent = subprocess.Popen([sys.executable, "-c", code, str(plan_file(tmp_path)),
                               str(tmp_path / "out"), str(log)])
    child = None
    try:
        deadline = time.time() + 30
        while child is None and time.time() < deadline and parent.poll() is None:
            lines = log.read_text().split("\n") if log.is_file() else []
            child = next((int(x) for x in lines if x.strip().isdigit()), None)
            time.sleep(0.05)
        assert child is not None, "the child did not start"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.time() + 5
        while time.time() < deadline and process_state(child) not in ("gone", "Z"):
            time.sleep(0.05)
        assert process_state(child) in ("gone", "Z")  # ended (a zombie until reaped)
    finally:
        parent.kill()
        parent.wait()
        if child is not None and process_state(child) not in ("gone", "Z"):
            os.kill(child, signal.SIGKILL)


def process_state(pid: int) -> str:
    """The state letter of process ``pid`` (/proc), or "gone"."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return "gone"


def test_word_alignments_are_archived_once_per_map_with_relative_paths(tmp_path, monkeypatch):
    """A plan's ``alignment``: each decoded run of an aligned pair gets ``ssan-align`` on its
    checkpoint, the cross attention's weights always and its selection for a system with a
    --cross-selector; archived once per map with relative paths; a run whose checkpoint is not
    here is skipped."""
    from ssan_plugin.experiments import runner as runner_module

    monkeypatch.setattr(runner_module, "ROOT", tmp_path)

    def edit(borrower):
        borrower["alignment"] = {"bitext": "gold/test.ro-en", "gold": "gold/test.gold", "pairs": ["a"]}
        borrower["systems"]["other"]["flags"] = ["--cross-selector", "topk"]

    path = source_and_borrower(tmp_path, borrower_edit=edit)
    bad = json.loads(path.read_text())
    bad["alignment"]["pairs"] = ["zz"]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(PipelineError, match="alignment.pairs names unknown pair 'zz'"):
        Plan.load(tmp_path / "bad.json")
    plan = Plan.load(path)
    runs = {run.key: run for run in plan.runs()}
    assert plan.alignment_maps(runs["s/a/base@1"]) == ["weights"]
    assert plan.alignment_maps(runs["s/a/other@1"]) == ["weights", "selection"]
    # the flag written --flag=value, and the last of several (argparse keeps the last)
    for flags, maps in ((["--cross-selector=entmax"], ["weights", "selection"]),
                        (["--cross-selector", "topk", "--cross-selector=none"], ["weights"]),
                        (["--cross-selector=topk", "--cross-selector", "none", "--topk", "8"], ["weights"])):
        runs["s/a/other@1"].system.flags[:] = flags
        assert plan.alignment_maps(runs["s/a/other@1"]) == maps, flags
    runs["s/a/other@1"].system.flags[:] = ["--cross-selector", "topk"]
    fake_decoded(tmp_path / "archive" / "s" / "a" / "other@1", "other@1")
    own = tmp_path / "out" / "s" / "a" / "other@1"
    own.mkdir(parents=True)
    (own / "checkpoint_best.pt").write_text("")
    (tmp_path / "out" / "data" / "a").mkdir(parents=True)
    (tmp_path / "out" / "data" / "a" / "manifest.json").write_text("{}")
    calls = []

    def child(self, cmd, log, progress=None):
        cmd = [str(c) for c in cmd]
        calls.append(cmd)
        log.parent.mkdir(parents=True, exist_ok=True)
        Path(cmd[cmd.index("--out") + 1]).write_text(json.dumps(
            {"map": cmd[cmd.index("--map") + 1], "rule_layer": 0, "layers": []}))

    monkeypatch.setattr(Runner, "_child", child)
    monkeypatch.setattr(runner_module, "relativize_text",
                        lambda text: text.replace(f"{tmp_path}/", ""))
    runner = Runner(plan, tmp_path / "out")
    assert runner.alignment_state(runs["s/a/other@1"]) == "todo"
    written = runner.align(runs["s/a/other@1"])
    archive = tmp_path / "archive" / "s" / "a" / "other@1"
    assert written == [archive / "alignment.weights.json", archive / "alignment.selection.json"]
    assert [cmd[cmd.index("--map") + 1] for cmd in calls] == ["weights", "selection"]
    assert all(cmd[cmd.index("--links-of") + 1] == "chosen" for cmd in calls)  # archives stay small
    assert calls[0][calls[0].index("--bitext") + 1] == str(ROOT / "gold" / "test.ro-en")  # the project's
    assert calls[0][calls[0].index("--checkpoint") + 1] == str(own / "checkpoint_best.pt")
    record = json.loads(written[1].read_text())
    assert record == {"run": "s/a/other@1", "map": "selection", "rule_layer": 0, "layers": [],
                      "checkpoint": "out/s/a/other@1/checkpoint_best.pt", "data": "out/data/a"}
    assert runner.align(runs["s/a/other@1"]) == written and len(calls) == 2  # done once
    assert runner.alignment_state(runs["s/a/other@1"]) == "archived"
    # a borrowed run decoded in its plan whose checkpoint is not on this machine: skipped
    fake_decoded(tmp_path / "src_archive" / "s" / "a" / "base@1", "base@1")
    assert runner.alignment_state(runs["s/a/base@1"]) == "no checkpoint"
    assert runner.align(runs["s/a/base@1"]) == [] and len(calls) == 2
