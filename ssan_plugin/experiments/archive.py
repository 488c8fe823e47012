"""Sequential, resumable experiment runs whose results outlive the checkout.

The runners of the sentence-pair and SRL comparisons (``examples/pairs/run_pairs.py``,
``examples/srl/run_srl.py``) describe each run as a :class:`Run` (a fairseq-train command, the
evaluation commands that follow it, the files to keep, how to read its result) and hand the
list to :func:`execute`, which

- takes a lock on ``OUT`` (one runner, so one training at a time, per output directory);
- skips a run whose ``ARCHIVE/NAME/result.json`` exists: the archive is meant to be committed,
  so a fresh clone (empty ``OUT``) continues the plan where the last session stopped;
- trains in ``OUT/runs/NAME`` (fairseq resumes a killed training from its
  ``checkpoint_last.pt``); ``TRAINED`` marks a finished training, so only the evaluation is
  redone when it was the step killed;
- copies the kept files and the learning curve (``curve.jsonl``, from fairseq's json log) into
  ``ARCHIVE/NAME`` and writes ``result.json`` last (with the run's minutes);
- calls ``after_each(archive)`` after every archived run (summaries, comparisons as they come),
  and once more at the end when the last run of the list was skipped (a plan already archived
  still gets summaries and comparisons a newer runner makes); then makes every path in the
  archive's text files relative to the project root (:func:`relativize_tree`).

Commands run with their output appended to a log in the run directory; a failure stops the
runner with the log's path (:class:`RunFailed`). ``dry_run`` prints the commands only.
"""

import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from .train_log import write_curve
from ..cli.steps import run_step

ROOT = Path(__file__).resolve().parents[2]


#: files of an archive whose text may hold paths (rewritten by :func:`relativize_tree`)
ARCHIVE_TEXT_SUFFIXES = (".json", ".jsonl", ".md", ".log", ".txt")


def relativize_text(text: str, root: Path = ROOT) -> str:
    """``text`` with this machine's absolute paths made relative to the project root:
    ``ROOT/x`` -> ``x`` and ``ROOT/../x`` -> ``../x`` (the shared data beside the checkout).
    Committed archives name no machine path. Only whole paths: a path elsewhere that merely
    contains the root's parent's text further in (``OTHER/PARENT/...``) is kept."""
    root = Path(root).resolve()
    start = r"(?<![\w.~/-])"  # not inside a longer path or word
    text = re.sub(start + re.escape(f"{root}/"), "", text)
    return re.sub(start + re.escape(f"{root.parent}/"), "../", text)


def project_path(path, root: Path = ROOT) -> str:
    """``path`` relative to the project root when it lies inside it (as a user types it from
    the root, and as archives name it), else as given. Inside is judged on the path as written
    first (``runs`` may be a link to another disk: ``ROOT/runs/x`` is still ``runs/x``), then
    with links resolved (a link into the project)."""
    root = Path(root)
    for mine, theirs in ((Path(os.path.abspath(path)), Path(os.path.abspath(root))),
                         (Path(path).resolve(), root.resolve())):
        try:
            return str(mine.relative_to(theirs))
        except ValueError:
            continue
    return str(path)


def relativize_tree(directory: Path, root: Path = ROOT) -> int:
    """Rewrite every text file of an archive (``ARCHIVE_TEXT_SUFFIXES``) with
    :func:`relativize_text`; returns how many files changed."""
    changed = 0
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file() and path.suffix in ARCHIVE_TEXT_SUFFIXES:
            text = path.read_text(encoding="utf-8")
            new = relativize_text(text, root)
            if new != text:
                write_atomic(path, new)
                changed += 1
    return changed


class RunFailed(RuntimeError):
    """A child command failed; the message names its log."""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def step_name(command: Sequence) -> str:
    """A child's name in its error: the module of ``python -m MODULE``, the script of ``python
    SCRIPT.py``, else the program (``fairseq-train``)."""
    command = [str(c) for c in command]
    if len(command) > 2 and command[1] == "-m":
        return command[2]
    if len(command) > 1 and command[1].endswith(".py"):
        return Path(command[1]).name
    return Path(command[0]).name


def run_command(command: Sequence, log_path: Optional[Path] = None, dry_run: bool = False,
                env: Optional[Dict[str, str]] = None) -> None:
    """Run ``command`` from the project root, its output appended to ``log_path``
    (``cli.steps.run_step``; a failure is RunFailed ``NAME failed (exit N): LAST LINE; full log:
    LOG``, NAME from :func:`step_name`) or shown on the terminal (a failure: RunFailed ``NAME
    failed (exit N): its output is above``)."""
    log("$ " + shlex.join(map(str, command)))
    if dry_run:
        return
    env = {**os.environ, **(env or {})}
    if log_path is None:  # on the terminal as it is (its own progress bars), nothing to log
        code = subprocess.run(list(map(str, command)), cwd=ROOT, env=env).returncode
        if code != 0:
            raise RunFailed(f"{step_name(command)} failed (exit {code}): its output is above")
        return
    header = f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} $ {shlex.join(map(str, command))}\n"
    # appended: a resumed run keeps its history
    run_step(step_name(command), command, log_path, append=True, header=header, error=RunFailed,
             cwd=ROOT, env=env)


@contextmanager
def locked(out: Path, runner: str):
    """One runner per output directory: a second one stops with a clear message."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another {runner} is running on {out} (one training at a time)")
        yield


@dataclass
class Run:
    """One training and its evaluation. Paths in commands may use the run directory ``save``
    given to the builders; ``result(save)`` reads the evaluation's outputs into a dict."""

    name: str
    train: Callable[[Path], List]  # save dir -> fairseq-train command (--save-dir save)
    evaluate: Callable[[Path], List[List]]  # save dir -> commands run after training
    result: Callable[[Path], dict]  # save dir -> result (JSON-able)
    keep: Sequence[str] = field(default_factory=tuple)  # files of save to archive
    skip_reason: Optional[str] = None  # set: the run is not possible, logged and skipped


def is_archived(archive: Path, name: str) -> bool:
    """Whether run ``name`` has its ``result.json`` in ``archive``."""
    return (archive / name / "result.json").is_file()


def execute(runs: Sequence[Run], out: Path, archive: Path, env: Dict[str, str],
            dry_run: bool = False, after_each: Optional[Callable[[Path], None]] = None) -> int:
    """Run what the archive does not hold yet (module docstring); returns how many ran."""
    done = 0
    refreshed = False  # after_each ran after the latest run of the list
    for number, run in enumerate(runs, 1):
        head = f"[{number}/{len(runs)}] {run.name}"
        refreshed = False
        if is_archived(archive, run.name):
            log(f"{head}: done, skipped")
            continue
        if run.skip_reason:
            log(f"{head}: {run.skip_reason}, skipped")
            continue
        save = out / "runs" / run.name
        save.mkdir(parents=True, exist_ok=True)
        started = time.time()
        if not (save / "TRAINED").exists():
            resumed = (save / "checkpoint_last.pt").exists()
            log(f"{head}: {'resuming' if resumed else 'training'}")
            run_command(run.train(save), save / "train.log", dry_run, env)
            if not dry_run:
                (save / "TRAINED").write_text(time.strftime("%Y-%m-%d %H:%M:%S\n"))
        for command in run.evaluate(save):
            run_command(command, save / "evaluate.log", dry_run, env)
        if dry_run:
            continue
        result = {"name": run.name, **run.result(save),
                  "minutes": round((time.time() - started) / 60, 1)}
        kept = archive / run.name
        kept.mkdir(parents=True, exist_ok=True)
        for name in run.keep:
            shutil.copyfile(save / name, kept / name)
        write_curve(save / "train.log", kept / "curve.jsonl")
        write_atomic(kept / "result.json", json.dumps(result, indent=2) + "\n")
        done += 1
        log(f"{head}: archived in {kept}")
        if after_each is not None:
            after_each(archive)
            refreshed = True
        relativize_tree(archive)
    if after_each is not None and not dry_run and not refreshed and archive.is_dir():
        after_each(archive)
        relativize_tree(archive)
    return done
