"""A resumable runner for translation comparisons: baseline, SSAN from scratch, SSAN warm-started.

A plan (JSON, e.g. ``examples/translation/experiments.json``) names language pairs (raw data,
preparation options), studies (a set of pairs, shared extra flags such as pre-norm, the
systems), system definitions (arch, criterion, flags, optionally ``warm_from``) and seeds. For
every (seed, study, pair, system), in that order (so each seed of everything lands before the
next seed starts):

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
One child process at a time.

Archive (plan key ``archive``, a directory relative to the project root, meant to be committed):
a decoded run's small outputs (``train.json`` summary, ``curve.jsonl`` with fairseq's train and
valid records, ``test.json``, the hypotheses) are copied to ``ARCHIVE/STUDY/PAIR/SYSTEM@SEED``
and the pooled tables are written to ``ARCHIVE/results``. A run found in the archive is done,
so a fresh clone (whose ``OUT`` is empty) continues the plan where the last one stopped. When a
warm-started run needs ``checkpoint_base.pt`` of an archived baseline whose checkpoints are
gone, the baseline's first ``base`` updates are trained again (same seed and flags) to rebuild
it; the archived baseline itself is not replaced.
"""

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from .archive import relativize_text
from .train_log import parse_record, record_updates, training_summary, write_curve
from ..translation.textio import PipelineError

logger = logging.getLogger("ssan_plugin.experiments.runner")

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


@dataclass
class Pair:
    name: str
    raw: str  # directory with {train,valid,test}.{src,tgt}
    src: str
    tgt: str
    prepare: List[str] = field(default_factory=list)  # extra ssan-prepare-translation flags
    # a project script and its arguments that writes ``raw`` when it is missing (e.g. the
    # built-in corpus: ["scripts/make_synthetic_corpus.py", "--seed", "1"]; ``--out RAW`` added)
    make: Optional[List[str]] = None


@dataclass
class System:
    name: str
    arch: str
    criterion: str
    flags: List[str] = field(default_factory=list)
    warm_from: Optional[str] = None  # a system of the same study (its checkpoint_base.pt)
    pairs: Optional[List[str]] = None  # None: every pair of the study
    seeds: Optional[List[int]] = None  # None: every seed of the study and pair


@dataclass
class Study:
    name: str
    pairs: List[str]
    systems: List[str]  # the first is the baseline (compared against, warm-start source)
    flags: List[str] = field(default_factory=list)
    # None: the plan's seeds; a list: these seeds for every pair; {pair: [seeds]}: per pair
    # (a pair not named keeps the plan's seeds)
    seeds: Optional[object] = None

    def seeds_for(self, pair: str, default: List[int]) -> List[int]:
        if self.seeds is None:
            return list(default)
        if isinstance(self.seeds, dict):
            return list(self.seeds.get(pair, default))
        return list(self.seeds)


@dataclass
class Plan:
    pairs: Dict[str, Pair]
    systems: Dict[str, System]
    studies: List[Study]
    seeds: List[int]
    base_updates: int
    more_updates: int
    train: List[str]  # fairseq-train flags shared by every run (model size, optimiser, ...)
    save_interval: int = 250
    threads: int = 2  # OMP threads of the one running child
    beam: int = 5
    archive: Optional[str] = None  # committed copy of finished runs (module docstring)
    decode: List[str] = field(default_factory=list)  # extra ssan-evaluate-bleu decoding flags

    @classmethod
    def load(cls, path, root=ROOT) -> "Plan":
        """Read a plan; relative ``raw`` paths are relative to the project root."""
        try:
            with open(path, encoding="utf-8") as f:
                raw = json.load(f)
        except json.JSONDecodeError as err:
            raise PipelineError(f"{path}:{err.lineno}:{err.colno}: not valid JSON ({err.msg})") \
                from None
        except UnicodeDecodeError:
            raise PipelineError(f"{path}: not UTF-8 text") from None
        check_plan_types(raw, path)
        try:
            pairs = {name: Pair(name=name, **spec) for name, spec in raw["pairs"].items()}
            systems = {name: System(name=name, **spec) for name, spec in raw["systems"].items()}
            studies = [Study(**spec) for spec in raw["studies"]]
            plan = cls(pairs=pairs, systems=systems, studies=studies, seeds=raw["seeds"],
                       base_updates=raw["updates"]["base"], more_updates=raw["updates"]["more"],
                       train=raw["train"], **{k: raw[k] for k in ("save_interval", "threads", "beam", "archive", "decode")
                                              if k in raw})
        except (KeyError, TypeError) as err:
            raise PipelineError(f"{path}: not a valid plan ({err})") from None
        for pair in plan.pairs.values():
            if not Path(pair.raw).is_absolute():
                pair.raw = str((Path(root) / pair.raw).resolve())
        if plan.archive is not None and not Path(plan.archive).is_absolute():
            plan.archive = str((Path(root) / plan.archive).resolve())
        plan.validate(path)
        return plan

    def validate(self, path):
        if self.base_updates < 1 or self.more_updates < 0:
            raise PipelineError(f"{path}: updates.base must be >= 1 and updates.more >= 0")
        if not self.seeds:
            raise PipelineError(f"{path}: no seeds")
        for study in self.studies:
            for p in study.pairs:
                if p not in self.pairs:
                    raise PipelineError(f"{path}: study {study.name!r} names unknown pair {p!r}")
            for s in study.systems:
                if s not in self.systems:
                    raise PipelineError(f"{path}: study {study.name!r} names unknown system {s!r}")
                warm = self.systems[s].warm_from
                if warm is not None and warm != study.systems[0]:
                    raise PipelineError(f"{path}: system {s!r} warm-starts from {warm!r}, but "
                                        f"the baseline (first system) of study {study.name!r} "
                                        f"is {study.systems[0]!r}")
            if self.systems[study.systems[0]].warm_from is not None:
                raise PipelineError(f"{path}: study {study.name!r}'s baseline cannot warm-start")
            seeds = study.seeds if isinstance(study.seeds, dict) else {None: study.seeds}
            for pair, listed in seeds.items():
                if pair is not None and pair not in study.pairs:
                    raise PipelineError(f"{path}: study {study.name!r} lists seeds for pair "
                                        f"{pair!r}, which it does not run")
                if listed is not None and not listed:  # types: check_plan_types
                    raise PipelineError(f"{path}: study {study.name!r}: seeds must be a "
                                        f"non-empty list of integers, got {listed!r}")

    def all_seeds(self) -> List[int]:
        """Every seed any study runs, ascending."""
        seeds = set(self.seeds)
        for study in self.studies:
            for pair in study.pairs:
                seeds.update(study.seeds_for(pair, self.seeds))
        return sorted(seeds)

    def planned(self, study: "Study", pair: str, system: "System", seed: int) -> bool:
        """Whether the plan runs ``system`` on ``pair`` with ``seed`` in ``study``."""
        return (seed in study.seeds_for(pair, self.seeds)
                and (system.pairs is None or pair in system.pairs)
                and (system.seeds is None or seed in system.seeds))

    def runs(self) -> List["Run"]:
        """Every run, in execution order: seed, study, pair, system (baseline first)."""
        out = []
        for seed in self.all_seeds():
            for study in self.studies:
                for pair in study.pairs:
                    for name in study.systems:
                        system = self.systems[name]
                        if self.planned(study, pair, system, seed):
                            out.append(Run(study=study, pair=self.pairs[pair], system=system,
                                           seed=seed))
        return out


# ---------------------------------------------------------------- plan file types
def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_str_list(x) -> bool:
    return isinstance(x, list) and all(isinstance(v, str) for v in x)


def _is_int_list(x) -> bool:
    return isinstance(x, list) and all(_is_int(v) for v in x)


_TYPES = {  # predicate, what it is called in an error
    "int": (_is_int, "an integer"), "str": (lambda x: isinstance(x, str), "a string"),
    "strs": (_is_str_list, "a list of strings"), "ints": (_is_int_list, "a list of integers"),
    "seeds": (lambda x: _is_int_list(x) or (isinstance(x, dict) and all(
        _is_int_list(v) for v in x.values())), "a list of integers or {pair: [integers]}"),
}
_PLAN_KEYS = {"seeds": "ints", "train": "strs", "save_interval": "int", "threads": "int",
              "beam": "int", "archive": "str", "decode": "strs", "_comment": "str"}
_PAIR_KEYS = {"raw": "str", "src": "str", "tgt": "str", "prepare": "strs", "make": "strs"}
_SYSTEM_KEYS = {"arch": "str", "criterion": "str", "flags": "strs", "warm_from": "str",
                "pairs": "strs", "seeds": "ints"}
_STUDY_KEYS = {"name": "str", "pairs": "strs", "systems": "strs", "flags": "strs",
               "seeds": "seeds"}
_REQUIRED = {"plan": ("seeds", "updates", "train", "pairs", "systems", "studies"),
             "pair": ("raw", "src", "tgt"), "system": ("arch", "criterion"),
             "study": ("name", "pairs", "systems")}


def _check_keys(obj, keys: dict, required, where: str, path) -> None:
    if not isinstance(obj, dict):
        raise PipelineError(f"{path}: {where} must be a mapping, got {type(obj).__name__}")
    for key in required:
        if key not in obj:
            raise PipelineError(f"{path}: {where} lacks the key {key!r}")
    for key, value in obj.items():
        if key not in keys:
            raise PipelineError(f"{path}: {where} has an unknown key {key!r} (known: "
                                f"{', '.join(sorted(keys))})")
        kind = keys[key]
        if kind in _TYPES and not _TYPES[kind][0](value):
            raise PipelineError(f"{path}: {where}.{key} must be {_TYPES[kind][1]}, got "
                                f"{json.dumps(value)[:60]}")


#: names of pairs, systems and studies become directory names under OUT and the archive
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+-]*(\.[A-Za-z0-9_+-]+)*")


def check_name(name, where: str, path) -> None:
    """A name that is safe as one path component: letters, digits, ``_+-``, inner dots; never
    empty, ``.``, ``..`` or containing a separator."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise PipelineError(f"{path}: {where} name {name!r} cannot name a directory (letters, "
                            f"digits, '_', '+', '-' and inner dots only)")


def check_plan_types(raw, path) -> None:
    """Every key of a plan file has the type the runner expects; a PipelineError naming the
    file and the key (``pairs.en-de.src``) otherwise. Unknown keys are refused (typos), and
    the names of pairs, systems and studies must be safe directory names."""
    _check_keys(raw, {**_PLAN_KEYS, "updates": None, "pairs": None, "systems": None,
                      "studies": None}, _REQUIRED["plan"], "the plan", path)
    _check_keys(raw["updates"], {"base": "int", "more": "int"}, ("base", "more"), "updates",
                path)
    for section, keys, kind in (("pairs", _PAIR_KEYS, "pair"), ("systems", _SYSTEM_KEYS,
                                                                  "system")):
        if not isinstance(raw[section], dict):
            raise PipelineError(f"{path}: {section} must be a mapping of names, got "
                                f"{type(raw[section]).__name__}")
        for name, spec in raw[section].items():
            check_name(name, kind, path)
            _check_keys(spec, keys, _REQUIRED[kind], f"{section}.{name}", path)
    if not isinstance(raw["studies"], list):
        raise PipelineError(f"{path}: studies must be a list, got {type(raw['studies']).__name__}")
    for k, spec in enumerate(raw["studies"]):
        _check_keys(spec, _STUDY_KEYS, _REQUIRED["study"], f"studies[{k}]", path)
        check_name(spec["name"], "study", path)


@dataclass
class Run:
    study: Study
    pair: Pair
    system: System
    seed: int

    @property
    def key(self) -> str:
        return f"{self.study.name}/{self.pair.name}/{self.system.name}@{self.seed}"

    def directory(self, out: Path) -> Path:
        return out / self.study.name / self.pair.name / f"{self.system.name}@{self.seed}"

    def is_baseline(self) -> bool:
        return self.system.name == self.study.systems[0]

    def baseline_directory(self, out: Path) -> Path:
        return out / self.study.name / self.pair.name / f"{self.study.systems[0]}@{self.seed}"

    @property
    def hyp_name(self) -> str:
        return f"{self.system.name}@{self.seed}.test.{self.pair.tgt}"


class Runner:
    """Executes a plan under ``out``; see the module docstring."""

    def __init__(self, plan: Plan, out, python=sys.executable, dry_run: bool = False):
        self.plan, self.out, self.python, self.dry_run = plan, Path(out), python, dry_run
        self.bin_dir = Path(python).parent

    # ------------------------------------------------------------------ paths
    def data_dir(self, pair: Pair) -> Path:
        return self.out / "data" / pair.name

    def results_path(self, study: Study, pair: Pair, suffix: str) -> Path:
        root = Path(self.plan.archive) if self.plan.archive else self.out
        return root / "results" / f"{study.name}.{pair.name}.{suffix}"

    def archived(self, run: Run) -> Optional[Path]:
        """The run's archive directory if the run is archived (decoded and copied), else None."""
        if not self.plan.archive:
            return None
        d = run.directory(Path(self.plan.archive))
        return d if (d / "test.json").is_file() and (d / run.hyp_name).is_file() else None

    def decoded(self, run: Run) -> Optional[Path]:
        """The hypotheses of a decoded run, from the archive or from ``out``; None if not yet."""
        archived = self.archived(run)
        if archived is not None:
            return archived / run.hyp_name
        d = run.directory(self.out)
        return d / run.hyp_name if (d / "test.json").is_file() and (d / run.hyp_name).is_file() \
            else None

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
        """Run one child with its output in ``log``; ``progress(line)`` sees each line."""
        cmd = [str(c) for c in cmd]
        log.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, OMP_NUM_THREADS=str(self.plan.threads), PYTHONUNBUFFERED="1")
        if self.dry_run:
            print("would run:", " ".join(cmd))
            return
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"$ {' '.join(cmd)}\n")
            f.flush()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, bufsize=1, env=env, cwd=ROOT)
            for line in proc.stdout:
                f.write(line)
                f.flush()  # the log is what users tail while a run trains
                if progress is not None:
                    progress(line)
            code = proc.wait()
        if code != 0:
            tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
            raise PipelineError(f"{cmd[0]} {cmd[1] if len(cmd) > 1 else ''} failed (exit "
                                f"{code}); full log: {log}\n{tail}")

    # ------------------------------------------------------------------ steps
    def prepare_raw(self, pair: Pair) -> Path:
        """The pair's raw directory, written by its ``make`` command first when missing."""
        raw = Path(pair.raw)
        if pair.make and not (raw / f"test.{pair.tgt}").is_file():
            print(f"[make] {pair.name} -> {raw}", flush=True)
            self._child([self.python, ROOT / pair.make[0], *pair.make[1:], "--out", raw],
                        self.out / "logs" / f"make.{pair.name}.log")
        return raw

    def prepare(self, pair: Pair) -> Path:
        dest = self.data_dir(pair)
        if (dest / "manifest.json").is_file():
            return dest
        if dest.exists() and not self.dry_run:  # an interrupted preparation: start it again
            shutil.rmtree(dest)
        raw = self.prepare_raw(pair)
        cmd = [self.python, "-m", "ssan_plugin.commands.prepare_translation", "--src", pair.src,
               "--tgt", pair.tgt, "--train", raw / "train", "--valid", raw / "valid",
               "--test", raw / "test", "--dest", dest, *pair.prepare]
        print(f"[prepare] {pair.name} -> {dest}", flush=True)
        self._child(cmd, self.out / "logs" / f"prepare.{pair.name}.log")
        return dest

    def train_command(self, run: Run, data: Path, save: Path, max_update: int) -> List[str]:
        s = run.system
        return [self.bin_dir / "fairseq-train", data, "--user-dir", ROOT / "ssan_plugin",
                "--cpu", "--arch", s.arch, "--criterion", s.criterion, *self.plan.train,
                *run.study.flags, *s.flags, "--seed", str(run.seed),
                "--max-update", str(max_update), "--save-dir", save,
                "--save-interval-updates", str(self.plan.save_interval),
                "--validate-interval-updates", str(self.plan.save_interval),
                "--keep-interval-updates", "1", "--no-epoch-checkpoints",
                "--log-format", "json", "--log-interval", "50"]

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
            cmd = [self.python, "-m", "ssan_plugin.commands.warm_start", "--base", source, "--arch",
                   run.system.arch, "--criterion", run.system.criterion, "--data", data,
                   "--out", save / "checkpoint_last.pt"]
            if run.system.flags:
                cmd += ["--", *run.system.flags]
            self._child(cmd, save / "warm_start.log")
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
        if self.archived(baseline) is None:
            raise PipelineError(f"{run.key}: warm start needs {source} (train the baseline "
                                f"first)")
        save = source.parent
        print(f"[rebuild] {baseline.key}: its first {self.plan.base_updates} updates again, "
              f"for {run.key}'s warm start", flush=True)
        self._fairseq_train(baseline, data, save, self.plan.base_updates)
        shutil.copyfile(save / "checkpoint_last.pt", source)

    def decode(self, run: Run, data: Path, save: Path) -> Path:
        """Decode the test split with checkpoint_best.pt once; returns the hypotheses file."""
        report = save / "test.json"
        hyp = save / run.hyp_name
        if report.is_file() and hyp.is_file():
            return hyp
        cmd = [self.python, "-m", "ssan_plugin.commands.evaluate_bleu", "--data", data, "--cpu",
               "--ref", Path(run.pair.raw) / f"test.{run.pair.tgt}",
               "--system", f"{run.system.name}@{run.seed}={save / 'checkpoint_best.pt'}",
               "--beam", str(self.plan.beam), *self.plan.decode, "--json", report,
               "--hyp-dir", save, "--overwrite"]  # a decoding stopped half-way is redone
        print(f"[decode] {run.key}", flush=True)
        self._child(cmd, save / "decode.log")
        return hyp

    def pooled_report(self, study: Study, pair: Pair, data: Path):
        """Rewrite the study's table for ``pair`` from every decoded run (baseline first)."""
        hyps = []
        for name in study.systems:
            for seed in self.plan.all_seeds():
                run = Run(study=study, pair=pair, system=self.plan.systems[name], seed=seed)
                if not self.plan.planned(study, pair.name, run.system, seed):
                    continue
                hyp = self.decoded(run)
                if hyp is not None:
                    hyps.append(f"{name}@{seed}={hyp}")
        if len(hyps) < 1 or not hyps[0].startswith(f"{study.systems[0]}@"):
            return
        out_json = self.results_path(study, pair, "json")
        out_json.parent.mkdir(parents=True, exist_ok=True)
        cmd = [self.python, "-m", "ssan_plugin.commands.evaluate_bleu", "--data", data,
               "--ref", Path(pair.raw) / f"test.{pair.tgt}", "--json", out_json,
               "--hyp-dir", out_json.parent, "--overwrite"]  # the table, rewritten as runs finish
        for h in hyps:
            cmd += ["--hyp", h]
        log = self.results_path(study, pair, "log")
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
        rows = []
        for run in self.plan.runs():
            d = run.directory(self.out)
            state = ("archived" if self.archived(run) is not None else
                     "decoded" if (d / "test.json").is_file() else
                     "trained" if (d / "train.done").is_file() else
                     "started" if (d / "checkpoint_last.pt").is_file() else "todo")
            rows.append({"run": run.key, "state": state})
        return rows

    def run(self, only=None, limit: Optional[int] = None):
        """Everything not done yet, in plan order; ``only``: runs whose key contains it (a
        string, or a list: any of them);
        ``limit``: stop after that many trainings (finished or resumed)."""
        trained = 0
        for run in self.plan.runs():
            if only and not any(text in run.key for text in
                                ([only] if isinstance(only, str) else only)):
                continue
            save = run.directory(self.out)
            if self.archived(run) is not None:
                continue
            if (save / "test.json").is_file():
                results = self.results_path(run.study, run.pair, "json")
                if (self.plan.archive or not results.is_file() or
                        results.stat().st_mtime < (save / "test.json").stat().st_mtime):
                    # killed between a decode and the archive or the table
                    self.archive(run)
                    self.pooled_report(run.study, run.pair, self.prepare(run.pair))
                continue
            if limit is not None and trained >= limit:
                print(f"stopping after {limit} training(s); run again to continue", flush=True)
                return
            data = self.prepare(run.pair)
            if not (save / "train.done").is_file():
                trained += 1
            self.train(run, data)
            self.decode(run, data, save)
            self.archive(run)
            self.pooled_report(run.study, run.pair, data)  # results as they come
        print("plan complete" if not only else f"runs matching {only!r} complete", flush=True)
