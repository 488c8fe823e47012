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

Children never outlive their runner (:func:`die_with_parent`: a runner killed, even by SIGKILL,
takes its training with it), and a run directory is locked while its run trains
(:func:`run_locked`, ``RUN/.lock``, inherited by the run's children): a second runner never
trains a run that a live process is training.
"""

import ctypes
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from .train_log import write_curve
from ..errors import PipelineError
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


#: ``prctl`` option: the signal a process gets when its parent ends (<linux/prctl.h>)
PR_SET_PDEATHSIG = 1


def _libc_prctl():
    """libc's ``prctl``, or None where there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent() -> Optional[Callable[[], None]]:
    """A ``preexec_fn`` for a child that must not outlive this process: on Linux the kernel
    sends the child SIGTERM when this process ends, however it ends (SIGKILL included;
    ``prctl(PR_SET_PDEATHSIG)``), and a child whose parent ended before the call ends at once.
    None (nothing to do) where ``prctl`` does not exist. Start children from the main thread:
    the signal follows the thread that started the child."""
    prctl = _libc_prctl()  # looked up here, not in the forked child
    if prctl is None:
        return None
    parent = os.getpid()

    def set_death_signal() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent ended before the call
            os.kill(os.getpid(), signal.SIGTERM)

    return set_death_signal


def child_options(pass_fds: Sequence[int] = ()) -> dict:
    """``subprocess.Popen`` options of every child of a runner: it dies with the runner
    (:func:`die_with_parent`) and inherits ``pass_fds`` (a run's lock, :func:`run_locked`)."""
    options = {"preexec_fn": die_with_parent()}
    if pass_fds:
        options["pass_fds"] = tuple(pass_fds)
    return options


def run_command(command: Sequence, log_path: Optional[Path] = None, dry_run: bool = False,
                env: Optional[Dict[str, str]] = None, pass_fds: Sequence[int] = ()) -> None:
    """Run ``command`` from the project root, its output appended to ``log_path``
    (``cli.steps.run_step``; a failure is RunFailed ``NAME failed (exit N): LAST LINE; full log:
    LOG``, NAME from :func:`step_name`) or shown on the terminal (a failure: RunFailed ``NAME
    failed (exit N): its output is above``). The child dies with this process and inherits
    ``pass_fds`` (:func:`child_options`)."""
    log("$ " + shlex.join(map(str, command)))
    if dry_run:
        return
    env = {**os.environ, **(env or {})}
    if log_path is None:  # on the terminal as it is (its own progress bars), nothing to log
        code = subprocess.run(list(map(str, command)), cwd=ROOT, env=env,
                              **child_options(pass_fds)).returncode
        if code != 0:
            raise RunFailed(f"{step_name(command)} failed (exit {code}): its output is above")
        return
    header = f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} $ {shlex.join(map(str, command))}\n"
    # appended: a resumed run keeps its history
    run_step(step_name(command), command, log_path, append=True, header=header, error=RunFailed,
             cwd=ROOT, env=env, **child_options(pass_fds))


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


#: the lock file of a run directory (:func:`run_locked`)
RUN_LOCK = ".lock"


@contextmanager
def run_locked(directory: Path, run: str, error=PipelineError):
    """Hold the lock of run directory ``directory`` (``DIRECTORY/.lock``, created with it)
    while run ``run`` trains; yields the lock's file descriptor, which the run's children
    inherit (:func:`child_options`), so that the lock lasts while the runner or a child of it
    lives. Taken already: ``error`` (one line naming the run) at once, nothing started."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / RUN_LOCK, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise error(f"{run} is being trained by another live process (it holds "
                        f"{directory / RUN_LOCK}); wait for it to end, or stop it, then run "
                        f"again") from None
        yield lock.fileno()


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
        with nullcontext() if dry_run else run_locked(save, run.name, SystemExit) as lock:
            fds = () if lock is None else (lock,)  # the run's children hold its lock too
            if not (save / "TRAINED").exists():
                resumed = (save / "checkpoint_last.pt").exists()
                log(f"{head}: {'resuming' if resumed else 'training'}")
                run_command(run.train(save), save / "train.log", dry_run, env, fds)
                if not dry_run:
                    (save / "TRAINED").write_text(time.strftime("%Y-%m-%d %H:%M:%S\n"))
            for command in run.evaluate(save):
                run_command(command, save / "evaluate.log", dry_run, env, fds)
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
