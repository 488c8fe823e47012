"""A resumable runner for translation comparisons: baseline, SSAN from scratch, SSAN warm-started.

It executes a plan (:mod:`.plan`: the JSON format, its runs, the commands that make each run).
For every run of the plan (seed, study, pair, system, in that order):

1. **prepare** the pair once (``ssan-prepare-translation``, run as ``python -m
   ssan_plugin.commands.prepare_translation``) into ``OUT/data/PAIR``;
2. **train** one system at a time with fairseq-train into ``OUT/STUDY/PAIR/SYSTEM@SEED``:
   - a system without ``warm_from`` trains ``base + more`` updates; the study's baseline
     (the first system) stops at ``base`` first and keeps that checkpoint as
     ``checkpoint_base.pt``, then continues: the baseline at ``base + more`` *is* the baseline
     continued for ``more`` updates;
   - a system with ``warm_from: baseline`` starts from that run's ``checkpoint_base.pt``
     (``warm_start.continue_as_variant``: weights, update counter, lr schedule and epoch
     position kept, fresh optimizer, new parameters logged) and trains ``more`` updates, so it
     meets the continued baseline at the same total budget;
   checkpoints are chosen on the valid split only (``checkpoint_best.pt``, lowest valid loss);
3. **decode** the test split once per run (``ssan-evaluate-bleu``, run as ``python -m
   ssan_plugin.commands.evaluate_bleu``, beam 5) into the run directory; then the study's
   pooled table for the pair (``--hyp SYSTEM@SEED=...``: per-seed deltas, seed-pooled groups,
   BLEU by length) is rewritten in ``OUT/results/STUDY.PAIR.json`` and ``.md`` from every
   decoded run (also when a run was decoded before a kill).

Resumable: a step is done when its output exists (``train.done``, ``test.json``); a killed
training resumes from its ``checkpoint_last.pt`` (fairseq's own resume; checkpoints every
``save_interval`` updates). Finished runs are appended to ``OUT/runs.jsonl`` with their times.
One child process at a time, and it dies with the runner (``archive.die_with_parent``: a runner
killed, even by SIGKILL, leaves no training behind). A run directory is locked while its run
trains and decodes (``archive.run_locked``: ``RUN/.lock``, held by the runner and inherited by
the run's children), so a second runner refuses, in one line naming the run, a run that a live
process is training. A dry run prints the commands and creates, changes and deletes nothing.

Archive (plan key ``archive``, a directory relative to the project root, meant to be committed):
a decoded run's small outputs (``train.json`` summary, ``curve.jsonl`` with fairseq's train and
valid records, ``test.json``, the hypotheses) are copied to ``ARCHIVE/STUDY/PAIR/SYSTEM@SEED``
and the pooled tables are written to ``ARCHIVE/results``. A run found in the archive is done,
so a fresh clone (whose ``OUT`` is empty) continues the plan where the last one stopped. When a
warm-started run needs ``checkpoint_base.pt`` of an archived baseline whose checkpoints are
gone, the baseline's first ``base`` updates are trained again (same seed and flags) to rebuild
it; the archived baseline itself is not replaced.

Borrowed runs (a study's key ``borrow``; loading the plan checks that they are the same runs,
:mod:`.plan`): the runner never trains a borrowed run; it reads its test outputs from the other
plan's archive (or its ``out``) for the pooled tables, and before the first training of a pair
it checks that its own prepared data equals the other runner's, file by file, when that exists
(:func:`data_fingerprint`).

Word alignments (plan key ``alignment``): after a run of an aligned pair is decoded,
``ssan-align`` scores its ``checkpoint_best.pt`` against the plan's gold links, with each map
of ``Plan.alignment_maps``, archived as ``ARCHIVE/STUDY/PAIR/SYSTEM@SEED/alignment.MAP.json``
(relative paths; every reading and layer's scores and per-sentence counts, the links of the
rule's entry and the held-apart choice), once, as the selection statistics below.

Selection statistics (plan key ``selection``): after a run is decoded, the selection statistics
of ``ssan-selection-stats`` (by word class and distance, on the CoNLL file's words) of its
``checkpoint_best.pt`` are archived as ``ARCHIVE/STUDY/PAIR/SYSTEM@SEED/selection.json``
(relative paths; ``OUT/...`` without an archive). A borrowed run gets its ``selection.json`` in
this plan's archive under this plan's name for it, from the checkpoint in the other runner's
``out`` when it is there (skipped, and said, when it is not). Skipped when already archived,
like every step.
"""

import hashlib
import json
import logging
import os
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .archive import child_options, locked, relativize_text, run_locked, step_name
from .plan import ROOT, Pair, Plan, Run, Study
from .train_log import parse_record, record_updates, training_summary, write_curve
from ..errors import PipelineError
from ..cli.steps import run_step

logger = logging.getLogger("ssan_plugin.experiments.runner")


def data_fingerprint(data: Path) -> Dict[str, str]:
    """{file: sha256} of a prepared translation data dir, the files training and decoding
    read: dictionaries, binarised splits, the sentencepiece vocabulary and model, and the text
    under ``text/``. The sentencepiece model is hashed without the two paths sentencepiece
    stores in it (its training input and model prefix, which name the directory)."""
    out = {}
    for path in sorted(Path(data).rglob("*")):
        rel = path.relative_to(data).as_posix()
        if not path.is_file() or rel in ("manifest.json", "preprocess.log"):
            continue
        payload = path.read_bytes()
        if path.name.endswith(".model"):
            try:
                from sentencepiece import sentencepiece_model_pb2

                proto = sentencepiece_model_pb2.ModelProto()
                proto.ParseFromString(payload)
                del proto.trainer_spec.input[:]
                proto.trainer_spec.model_prefix = ""
                payload = proto.SerializeToString()
            except Exception:  # not a sentencepiece model: the bytes as they are
                pass
        out[rel] = hashlib.sha256(payload).hexdigest()
    return out


class Runner:
    """Executes a plan under ``out``; see the module docstring."""

    def __init__(self, plan: Plan, out, python=sys.executable, dry_run: bool = False):
        self.plan, self.out, self.python, self.dry_run = plan, Path(out), python, dry_run
        self.bin_dir = Path(python).parent
        self._sources: Dict[tuple, "Runner"] = {}
        self._data_checked: set = set()
        self._held: Tuple[int, ...] = ()  # the lock of the run in progress (its children's too)

    def source(self, run: Run) -> Tuple["Runner", Run]:
        """The other plan's runner (on its ``out``) and run, for a borrowed ``run``."""
        borrow = run.borrowed
        key = (borrow.plan, borrow.out)
        if key not in self._sources:
            self._sources[key] = Runner(borrow.source, Path(borrow.out), self.python,
                                        self.dry_run)
        return self._sources[key], self.plan.source_run(run)

    # ------------------------------------------------------------------ paths
    def data_dir(self, pair: Pair) -> Path:
        return self.plan.data_dir(self.out, pair)

    def results_path(self, study: Study, pair: Pair, suffix: str) -> Path:
        root = Path(self.plan.archive) if self.plan.archive else self.out
        return root / "results" / f"{study.name}.{pair.name}.{suffix}"

    def archive_dir(self, run: Run) -> Optional[Path]:
        """The run's archive directory if the run is archived (decoded and copied), else None;
        a borrowed run's is in the other plan's archive."""
        found = self.plan.archived_outputs(run)
        return None if found is None else found[0]

    def decoded(self, run: Run) -> Optional[Path]:
        """The hypotheses of a decoded run, from the archive or from ``out`` (a borrowed run:
        the other plan's archive or ``out``); None if not yet."""
        if run.borrowed is not None:
            source, their_run = self.source(run)
            return source.decoded(their_run)
        found = self.plan.archived_outputs(run)
        if found is not None:
            return found[0] / found[1]
        return run.directory(self.out) / run.hyp_name if run.decoded_in(self.out) else None

    def state(self, run: Run) -> str:
        """archived, decoded, trained, started or todo (a borrowed run: its state in the other
        plan's archive and ``out``)."""
        if run.borrowed is not None:
            source, their_run = self.source(run)
            return source.state(their_run)
        d = run.directory(self.out)
        return ("archived" if self.archive_dir(run) is not None else
                "decoded" if (d / "test.json").is_file() else
                "trained" if (d / "train.done").is_file() else
                "started" if (d / "checkpoint_last.pt").is_file() else "todo")

    def archive(self, run: Run):
        """Copy a decoded run's small outputs into the archive (last file written: test.json)."""
        if not self.plan.archive or self.dry_run:
            return
        src, dst = run.directory(self.out), run.directory(Path(self.plan.archive))
        dst.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / "train.done", dst / "train.json")
        write_curve(src / "train.log", dst / "curve.jsonl")
        shutil.copyfile(src / run.hyp_name, dst / run.hyp_name)
        with open(src / "test.json", encoding="utf-8") as f:
            report = json.load(f)
        for system in report.get("systems", []):
            system["hyp_file"] = run.hyp_name  # relative to the archived run
        (dst / "test.json").write_text(relativize_text(json.dumps(report, indent=1) + "\n"),
                                       encoding="utf-8")

    # ------------------------------------------------------------------ children
    def _child(self, cmd, log: Path, progress=None):
        """Run one child from the project root (``cli.steps.run_step``), its output appended
        to ``log`` after a ``$ COMMAND`` line; ``progress(line)`` sees each line. A failure is
        StepError ``NAME failed (exit N): LAST LINE; full log: LOG`` (``archive.step_name``).
        The child dies with the runner and inherits the lock of the run in progress
        (``archive.child_options``)."""
        cmd = [str(c) for c in cmd]
        if self.dry_run:  # creates nothing, not even the log's folder
            print("would run:", " ".join(cmd))
            return
        env = dict(os.environ, OMP_NUM_THREADS=str(self.plan.threads), PYTHONUNBUFFERED="1")
        run_step(step_name(cmd), cmd, log, progress, append=True, header=f"$ {' '.join(cmd)}\n",
                 env=env, cwd=ROOT, **child_options(self._held))

    @contextmanager
    def _run_lock(self, run: Run):
        """Hold ``run``'s lock (``archive.run_locked``) while it trains and decodes, passed to
        its children; PipelineError naming the run when a live process holds it. A dry run
        takes none."""
        if self.dry_run:
            yield
            return
        with run_locked(run.directory(self.out), run.key) as lock:
            held, self._held = self._held, (*self._held, lock)
            try:
                yield
            finally:
                self._held = held

    # ------------------------------------------------------------------ steps
    def prepare_raw(self, pair: Pair) -> Path:
        """The pair's raw directory, written by its ``make`` command first when missing."""
        raw = Path(pair.raw)
        if pair.make and not (raw / f"test.{pair.tgt}").is_file():
            print(f"[make] {pair.name} -> {raw}", flush=True)
            self._child(self.plan.make_command(pair, raw, self.python),
                        self.out / "logs" / f"make.{pair.name}.log")
        return raw

    def prepare(self, pair: Pair) -> Path:
        dest = self.data_dir(pair)
        if (dest / "manifest.json").is_file():
            return dest
        if dest.exists() and not self.dry_run:  # an interrupted preparation: start it again
            shutil.rmtree(dest)
        raw = self.prepare_raw(pair)
        print(f"[prepare] {pair.name} -> {dest}", flush=True)
        self._child(self.prepare_command(pair, raw, dest),
                    self.out / "logs" / f"prepare.{pair.name}.log")
        return dest

    # the commands are the plan's (:meth:`Plan.planned_commands`), with this runner's paths
    def prepare_command(self, pair: Pair, raw: Path, dest: Path) -> List:
        return self.plan.prepare_command(pair, raw, dest, self.python)

    def warm_start_command(self, run: Run, data: Path, save: Path) -> List:
        return self.plan.warm_start_command(run, data, save, self.out, self.python)

    def decode_command(self, run: Run, data: Path, save: Path) -> List:
        return self.plan.decode_command(run, data, save, self.python)

    def train_command(self, run: Run, data: Path, save: Path, max_update: int) -> List[str]:
        return self.plan.train_command(run, data, save, max_update, self.python)

    def _fairseq_train(self, run: Run, data: Path, save: Path, max_update: int):
        from tqdm import tqdm

        bar = tqdm(total=max_update, desc=f"train {run.key}", unit=" updates",
                   mininterval=5.0, file=sys.stderr)

        def progress(line):
            parsed = parse_record(line)
            if parsed:
                done = record_updates(*parsed)
                bar.update(max(0, done - bar.n))
                if parsed[0] == "valid":
                    bar.set_postfix_str(f"valid {float(parsed[1]['valid_loss']):.3f}")

        try:
            self._child(self.train_command(run, data, save, max_update), save / "train.log",
                        progress)
        finally:
            bar.close()

    def train(self, run: Run, data: Path) -> Path:
        save = run.directory(self.out)
        done = save / "train.done"
        if done.is_file():
            return save
        if not self.dry_run:
            save.mkdir(parents=True, exist_ok=True)
        started = time.time()
        base, total = self.plan.base_updates, self.plan.base_updates + self.plan.more_updates
        if run.is_baseline():
            keep = save / "checkpoint_base.pt"
            if not keep.is_file():
                self._fairseq_train(run, data, save, base)
                if not self.dry_run:
                    shutil.copyfile(save / "checkpoint_last.pt", keep)
        elif run.system.warm_from is not None and not (save / "checkpoint_last.pt").is_file():
            source = run.baseline_directory(self.out) / "checkpoint_base.pt"
            if not source.is_file() and not self.dry_run:
                self.rebuild_base(run, data, source)
            self._child(self.warm_start_command(run, data, save), save / "warm_start.log")
        self._fairseq_train(run, data, save, total)
        if not self.dry_run:
            summary = training_summary(save / "train.log")
            summary.update(run=run.key, seconds=round(time.time() - started, 1),
                           max_update=total)
            done.write_text(json.dumps(summary) + "\n", encoding="utf-8")
            with open(self.out / "runs.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(summary) + "\n")
        return save

    def rebuild_base(self, run: Run, data: Path, source: Path):
        """Train the study baseline's first ``base`` updates again (its run is archived, its
        checkpoints gone) so that ``run`` can warm-start from them."""
        baseline = Run(study=run.study, pair=run.pair, seed=run.seed,
                       system=self.plan.systems[run.study.systems[0]])
        if self.archive_dir(baseline) is None:
            raise PipelineError(f"{run.key}: warm start needs {source} (train the baseline "
                                f"first)")
        save = source.parent
        print(f"[rebuild] {baseline.key}: its first {self.plan.base_updates} updates again, "
              f"for {run.key}'s warm start", flush=True)
        with self._run_lock(baseline):
            self._fairseq_train(baseline, data, save, self.plan.base_updates)
        shutil.copyfile(save / "checkpoint_last.pt", source)

    def decode(self, run: Run, data: Path, save: Path) -> Path:
        """Decode the test split with checkpoint_best.pt once; returns the hypotheses file."""
        hyp = save / run.hyp_name
        if (save / "test.json").is_file() and hyp.is_file():
            return hyp
        print(f"[decode] {run.key}", flush=True)
        self._child(self.decode_command(run, data, save), save / "decode.log")
        return hyp

    # ------------------------------------------------------------------ selection statistics
    def selection_inputs(self, run: Run) -> Tuple[Path, Path]:
        """(checkpoint_best.pt, data dir) of a run: a borrowed run's in the other runner's
        ``out``."""
        if run.borrowed is not None:
            source, their_run = self.source(run)
            return (their_run.directory(source.out) / "checkpoint_best.pt",
                    source.data_dir(their_run.pair))
        return run.directory(self.out) / "checkpoint_best.pt", self.data_dir(run.pair)

    def selection_state(self, run: Run) -> Optional[str]:
        """None (not analysed), archived, pending (the run is not decoded yet), todo, or
        "no checkpoint" (decoded, but its checkpoint or data is not here)."""
        if not self.plan.analysed(run):
            return None
        if self.plan.selection_file(run, self.out).is_file():
            return "archived"
        return self.unarchived_state(run)

    def inputs_here(self, run: Run) -> bool:
        """Whether ``run``'s best checkpoint and its data (:meth:`selection_inputs`) are here."""
        checkpoint, data = self.selection_inputs(run)
        return checkpoint.is_file() and (data / "manifest.json").is_file()

    def unarchived_state(self, run: Run) -> str:
        """What an analysis of ``run`` not archived yet waits for: pending (the run is not
        decoded), todo, or "no checkpoint" (its checkpoint or data is not here)."""
        if self.state(run) not in ("decoded", "archived"):
            return "pending"
        return "todo" if self.inputs_here(run) else "no checkpoint"

    def write_analysis(self, run: Run, dest: Path, record: dict) -> None:
        """``record`` (with, for a borrowed run, the run it analyses) written to ``dest`` with
        relative paths, atomically."""
        if run.borrowed is not None:
            record["borrowed"] = {"plan": run.borrowed.plan, "run": self.plan.source_run(run).key}
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.write_text(relativize_text(json.dumps(record, indent=1) + "\n"), encoding="utf-8")
        os.replace(tmp, dest)

    def analyse(self, run: Run) -> Optional[Path]:
        """The run's selection statistics (``ssan-selection-stats`` on the plan's CoNLL file
        with its ``checkpoint_best.pt``) archived as ``selection.json`` with relative paths,
        once; None when the plan does not analyse the run or its checkpoint is not here."""
        if not self.plan.analysed(run):
            return None
        dest = self.plan.selection_file(run, self.out)
        if dest.is_file():
            return dest
        if (run.borrowed is not None or not self.dry_run) and \
                self.state(run) not in ("decoded", "archived"):
            return None  # a borrowed run still training in its plan: its best is not final
        checkpoint, data = self.selection_inputs(run)
        if not self.dry_run and not self.inputs_here(run):
            print(f"[selection] {run.key}: no {relativize_text(str(checkpoint))} with its data "
                  f"here, skipped", flush=True)
            return None
        work = run.directory(self.out)  # this plan's, also for a borrowed run
        raw = work / "selection.stats.json"
        print(f"[selection] {run.key}", flush=True)
        self._child([self.python, "-m", "ssan_plugin.commands.selection_stats", "--data", data,
                     "--checkpoint", checkpoint, "--conll", self.plan.selection.conll,
                     "--json", raw, "--overwrite"], work / "selection.log")
        if self.dry_run:
            return None
        with open(raw, encoding="utf-8") as f:
            stats = json.load(f)
        self.write_analysis(run, dest, {"run": run.key, "checkpoint": str(checkpoint),
                                        "data": str(data), **stats})
        return dest

    # ------------------------------------------------------------------ word alignments
    def alignment_state(self, run: Run) -> Optional[str]:
        """None (not aligned), archived, pending, todo or "no checkpoint", as selection_state."""
        if not self.plan.aligned(run):
            return None
        if all(self.plan.alignment_file(run, kind, self.out).is_file()
               for kind in self.plan.alignment_maps(run)):
            return "archived"
        return self.unarchived_state(run)

    def align(self, run: Run) -> List[Path]:
        """The run's word alignments (``ssan-align`` on the plan's bitext and gold with its
        ``checkpoint_best.pt``, each map of ``Plan.alignment_maps``) archived as
        ``alignment.MAP.json`` with relative paths, once each; [] when the plan does not align
        the run or its checkpoint is not here."""
        if not self.plan.aligned(run):
            return []
        if (run.borrowed is not None or not self.dry_run) and \
                self.state(run) not in ("decoded", "archived"):
            return []
        checkpoint, data = self.selection_inputs(run)
        written = []
        for kind in self.plan.alignment_maps(run):
            dest = self.plan.alignment_file(run, kind, self.out)
            if dest.is_file():
                written.append(dest)
                continue
            if not self.dry_run and not self.inputs_here(run):
                print(f"[alignment] {run.key}: no {relativize_text(str(checkpoint))} with its data "
                      f"here, skipped", flush=True)
                return written
            work = run.directory(self.out)
            raw = work / f"alignment.{kind}.raw.json"
            print(f"[alignment] {run.key} ({kind})", flush=True)
            self._child([self.python, "-m", "ssan_plugin.commands.align", "--data", data,
                         "--checkpoint", checkpoint, "--bitext", self.plan.alignment.bitext,
                         "--gold", self.plan.alignment.gold, "--map", kind, "--out", raw,
                         "--links-of", "chosen", "--overwrite"], work / f"alignment.{kind}.log")
            if self.dry_run:
                continue
            with open(raw, encoding="utf-8") as f:
                report = json.load(f)
            self.write_analysis(run, dest, {"run": run.key, **report, "checkpoint": str(checkpoint),
                                            "data": str(data)})
            written.append(dest)
        return written

    def check_borrowed_data(self, pair: Pair, data: Path) -> None:
        """Before this plan trains on ``pair``: its prepared data equals, file by file
        (:func:`data_fingerprint`), the data of every runner it borrows runs of the pair from,
        where that data exists; PipelineError naming the first differing file otherwise. Where
        it does not exist, a ``[data]`` line in the log says that nothing was compared."""
        if self.dry_run or pair.name in self._data_checked:
            return
        unchecked = set()
        for run in self.plan.runs():
            if run.pair.name != pair.name or run.borrowed is None:
                continue
            source, their_run = self.source(run)
            theirs = source.data_dir(their_run.pair)
            if not (theirs / "manifest.json").is_file():
                unchecked.add((relativize_text(run.borrowed.plan), relativize_text(str(theirs))))
                continue
            if theirs.resolve() == data.resolve():
                continue
            a, b = data_fingerprint(data), data_fingerprint(theirs)
            if a != b:
                first = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))[0]
                raise PipelineError(f"{data} differs from {theirs} (the data of the runs "
                                    f"{run.study.name} borrows from {run.borrowed.plan}) in "
                                    f"{first}: the borrowed runs were trained on other data; "
                                    f"prepare both with the same code and options")
        for plan, theirs in sorted(unchecked):
            print(f"[data] {pair.name}: not compared with the data of the runs borrowed from "
                  f"{plan}: {theirs} is not on this machine", flush=True)
        self._data_checked.add(pair.name)

    def pooled_report(self, study: Study, pair: Pair, data: Path):
        """Rewrite the study's table for ``pair`` from every decoded run (baseline first)."""
        hyps, planned = [], {}  # planned: the seeds each decoded system's plan runs
        for name in study.systems:
            for seed in self.plan.all_seeds():
                run = Run(study=study, pair=pair, system=self.plan.systems[name], seed=seed)
                if not self.plan.planned(study, pair.name, run.system, seed):
                    continue
                planned[name] = planned.get(name, 0) + 1
                hyp = self.decoded(run)
                if hyp is not None:
                    hyps.append(f"{name}@{seed}={hyp}")
        if len(hyps) < 1 or not hyps[0].startswith(f"{study.systems[0]}@"):
            return
        out_json = self.results_path(study, pair, "json")
        if not self.dry_run:
            out_json.parent.mkdir(parents=True, exist_ok=True)
        cmd = [self.python, "-m", "ssan_plugin.commands.evaluate_bleu", "--data", data,
               "--ref", Path(pair.raw) / f"test.{pair.tgt}", "--json", out_json,
               "--hyp-dir", out_json.parent, "--overwrite"]  # the table, rewritten as runs finish
        for h in hyps:
            cmd += ["--hyp", h]
        for name in dict.fromkeys(h.split("@")[0] for h in hyps):  # verdicts interim till then
            cmd += ["--planned-seeds", f"{name}={planned[name]}"]
        log = self.results_path(study, pair, "log")
        if not self.dry_run:
            log.unlink(missing_ok=True)
        self._child(cmd, log)
        if not self.dry_run:
            text = relativize_text(log.read_text(encoding="utf-8"))
            table = text[text.index("| system |"):] if "| system |" in text else text
            self.results_path(study, pair, "md").write_text(table, encoding="utf-8")
            for suffix in ("json", "log"):
                path = self.results_path(study, pair, suffix)
                path.write_text(relativize_text(path.read_text(encoding="utf-8")),
                                encoding="utf-8")

    # ------------------------------------------------------------------ the loop
    def status(self) -> List[dict]:
        """Per run: ``run`` (its key), ``state`` (``borrowed`` for a borrowed run, else
        :meth:`state`), for a borrowed run ``source`` (the other plan's run) and
        ``source_state``, and ``selection`` (:meth:`selection_state`) when it is analysed."""
        rows = []
        for run in self.plan.runs():
            row = {"run": run.key}
            if run.borrowed is not None:
                row.update(state="borrowed", source_state=self.state(run),
                           source=f"{relativize_text(run.borrowed.plan)} "
                                  f"{self.plan.source_run(run).key}")
            else:
                row["state"] = self.state(run)
            selection = self.selection_state(run)
            if selection is not None:
                row["selection"] = selection
            alignment = self.alignment_state(run)
            if alignment is not None:
                row["alignment"] = alignment
            rows.append(row)
        return rows

    def run(self, only=None, limit: Optional[int] = None):
        """Everything not done yet, in plan order; ``only``: runs whose key contains it (a
        string, or a list: any of them);
        ``limit``: stop after that many trainings (finished or resumed). One runner per output
        directory (``OUT/.lock``): a second one stops at once; a dry run takes no lock."""
        if self.dry_run:
            return self._run(only, limit)
        with locked(self.out, "ssan-run-experiments"):
            return self._run(only, limit)

    def _run(self, only, limit: Optional[int]):
        trained = 0
        for run in self.plan.runs():
            if only and not any(text in run.key for text in
                                ([only] if isinstance(only, str) else only)):
                continue
            save = run.directory(self.out)
            if run.borrowed is not None:  # never trained here; its analyses when possible
                self.analyse(run)
                self.align(run)
                continue
            if self.archive_dir(run) is not None:
                self.analyse(run)  # killed after archiving, or archived before analysis
                self.align(run)
                continue
            if (save / "test.json").is_file():
                results = self.results_path(run.study, run.pair, "json")
                if (self.plan.archive or not results.is_file() or
                        results.stat().st_mtime < (save / "test.json").stat().st_mtime):
                    # killed between a decode and the archive or the table
                    self.archive(run)
                    self.pooled_report(run.study, run.pair, self.prepare(run.pair))
                self.analyse(run)
                self.align(run)
                continue
            if limit is not None and trained >= limit:
                print(f"stopping after {limit} training(s); run again to continue", flush=True)
                return
            data = self.prepare(run.pair)
            self.check_borrowed_data(run.pair, data)
            if not (save / "train.done").is_file():
                trained += 1
            with self._run_lock(run):
                self.train(run, data)
                self.decode(run, data, save)
            self.archive(run)
            self.analyse(run)
            self.align(run)
            self.pooled_report(run.study, run.pair, data)  # results as they come
        print("plan complete" if not only else f"runs matching {only!r} complete", flush=True)
