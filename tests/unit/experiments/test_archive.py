"""ssan_plugin/experiments/archive.py with stand-in commands (small Python one-liners instead of
fairseq-train): archive contents, skipping, the TRAINED marker, failures, the lock."""

import json
import sys

import pytest

from ssan_plugin.experiments.archive import Run, RunFailed, execute, locked, run_command

TRAIN = ("import sys, pathlib; d = pathlib.Path(sys.argv[1]); d.joinpath('trained').write_text('x'); "
         "print('2026 | INFO | valid | {\"valid_loss\": \"1.5\", \"valid_num_updates\": \"10\"}')")
EVAL = "import sys, pathlib, json; pathlib.Path(sys.argv[1]).joinpath('score.json').write_text(json.dumps({'acc': 0.5}))"


def make_run(name, fail=False):
    return Run(
        name=name,
        train=lambda save: [sys.executable, "-c", TRAIN, save],
        evaluate=lambda save: [[sys.executable, "-c", "raise SystemExit(3)" if fail else EVAL, save]],
        result=lambda save: json.loads((save / "score.json").read_text()),
        keep=("score.json",))


def test_execute_archives_skips_and_resumes_evaluation(tmp_path):
    out, archive = tmp_path / "out", tmp_path / "archive"
    seen = []
    assert execute([make_run("a"), make_run("b")], out, archive, {}, after_each=seen.append) == 2
    assert seen == [archive, archive]
    result = json.loads((archive / "a" / "result.json").read_text())
    assert result["name"] == "a" and result["acc"] == 0.5 and "minutes" in result
    assert json.loads((archive / "a" / "score.json").read_text()) == {"acc": 0.5}
    curve = [json.loads(x) for x in (archive / "a" / "curve.jsonl").read_text().splitlines()]
    assert curve == [{"kind": "valid", "valid_loss": "1.5", "valid_num_updates": "10"}]
    assert (out / "runs" / "a" / "TRAINED").is_file()
    # archived: nothing runs again, even with an empty OUT; summaries are refreshed once
    assert execute([make_run("a"), make_run("b")], tmp_path / "fresh", archive, {},
                   after_each=seen.append) == 0
    assert seen == [archive] * 3
    assert not (tmp_path / "fresh" / "runs").exists()
    # trained but not archived (killed during evaluation): evaluation only
    (archive / "b" / "result.json").unlink()
    (out / "runs" / "b" / "trained").unlink()
    assert execute([make_run("b")], out, archive, {}) == 1
    assert not (out / "runs" / "b" / "trained").exists()


def test_failure_names_the_log_and_archives_nothing(tmp_path):
    out, archive = tmp_path / "out", tmp_path / "archive"
    with pytest.raises(RunFailed, match=r"failed \(exit 3\): no output; full log: .*evaluate.log"):
        execute([make_run("x", fail=True)], out, archive, {})
    assert "$ " in (out / "runs" / "x" / "evaluate.log").read_text()  # the command, appended
    assert not (archive / "x").exists()
    skipped = Run(name="y", train=None, evaluate=None, result=None, skip_reason="no checkpoint")
    assert execute([skipped], out, archive, {}) == 0


def test_a_command_without_a_log_fails_in_one_line(capfd):
    """Shown on the terminal, not logged: a failure is still RunFailed naming the command (the
    module of ``python -m``), never a CalledProcessError traceback."""
    run_command([sys.executable, "-c", "print('shown')"])
    assert "shown" in capfd.readouterr().out
    with pytest.raises(RunFailed, match=r"^json\.tool failed \(exit 2\): its output is above$"):
        run_command([sys.executable, "-m", "json.tool", "--no-such-option"])  # argparse: exit 2


def test_one_runner_per_output_directory(tmp_path):
    with locked(tmp_path, "runner.py"):
        with pytest.raises(SystemExit, match="another runner.py is running on"):
            with locked(tmp_path, "runner.py"):
                pass


def test_a_run_lock_lasts_while_the_runner_or_a_child_holding_it_lives(tmp_path):
    """run_locked: a second holder is refused in one line naming the run; a child started with
    the lock (child_options) keeps it after the runner let go (a runner killed while its
    training goes on), until the child ends."""
    import subprocess

    from ssan_plugin.errors import PipelineError
    from ssan_plugin.experiments.archive import child_options, run_locked

    run = tmp_path / "runs" / "a"
    refused = r"^s/a/base@1 is being trained by another live process \(it holds .*/runs/a/.lock\)"
    with run_locked(run, "s/a/base@1") as lock:
        assert (run / ".lock").is_file()
        with pytest.raises(PipelineError, match=refused):
            with run_locked(run, "s/a/base@1"):
                pass
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                 **child_options((lock,)))
    try:
        with pytest.raises(PipelineError, match=refused):  # the child holds it still
            with run_locked(run, "s/a/base@1"):
                pass
        # the seed runners: the same line, as their other stops (SystemExit)
        with pytest.raises(SystemExit, match=r"^a is being trained by another live process"):
            execute([make_run("a")], tmp_path, tmp_path / "archive", {})
    finally:
        child.kill()
        child.wait()
    with run_locked(run, "s/a/base@1"):  # free once no process holds it
        pass
    assert execute([make_run("a")], tmp_path, tmp_path / "archive", {}) == 1


def test_archives_name_no_machine_path(tmp_path):
    """relativize_text/tree: the project root's paths become relative, the shared data beside it
    ../; other text is untouched; every committed archive is clean (no path of this machine)."""
    from conftest import ROOT
    from ssan_plugin.experiments.archive import relativize_text, relativize_tree

    root = tmp_path / "project"
    text = (f'{{"hyp": "{root}/runs/x/h.de", "ref": "{tmp_path}/shared/data/t.de", '
            f'"other": "/usr/share/x"}}\nwrote {root}/examples/r.json\n')
    assert relativize_text(text, root) == ('{"hyp": "runs/x/h.de", "ref": "../shared/data/t.de", '
                                           '"other": "/usr/share/x"}\nwrote examples/r.json\n')
    elsewhere = f"/elsewhere{tmp_path}/shared/x {tmp_path}x/y"  # contain the text, other paths
    assert relativize_text(elsewhere, root) == elsewhere
    archive = tmp_path / "archive"
    (archive / "run").mkdir(parents=True)
    (archive / "run" / "test.json").write_text(text)
    (archive / "run" / "model.bin").write_bytes(b"\x00" + str(root).encode())
    assert relativize_tree(archive, root) == 1
    assert str(root) not in (archive / "run" / "test.json").read_text()
    assert relativize_tree(archive, root) == 0
    for path in (ROOT / "examples").rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".md", ".log", ".txt"):
            assert str(ROOT) not in path.read_text(encoding="utf-8", errors="replace"), path


def test_project_path_is_relative_inside_the_project_only(tmp_path):
    from ssan_plugin.experiments.archive import project_path

    root = tmp_path / "work" / "main"
    (root / "runs" / "x").mkdir(parents=True)
    assert project_path(root / "runs" / "x", root) == "runs/x"
    assert project_path(root, root) == "."
    beside = tmp_path / "work" / "shared"  # beside the project, not in it: as given
    assert project_path(beside, root) == str(beside)
    # runs/ a link to another disk: still named as inside the project, never by its target
    disk = tmp_path / "disk" / "runs"
    (disk / "y").mkdir(parents=True)
    (root / "runs2").symlink_to(disk, target_is_directory=True)
    assert project_path(root / "runs2" / "y", root) == "runs2/y"
    # a link into the project from outside it: named by where it lands
    (tmp_path / "into").symlink_to(root / "runs", target_is_directory=True)
    assert project_path(tmp_path / "into" / "x", root) == "runs/x"
