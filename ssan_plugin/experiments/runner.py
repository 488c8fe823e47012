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

Borrowed runs (a study's key ``borrow``): a study may take a system's runs from another plan's
archive instead of training them, e.g. ``"borrow": {"baseline": {"plan":
"examples/translation/experiments.json", "study": "prenorm", "system": "baseline", "out":
"runs/experiments"}}`` (paths relative to the project root; ``out`` is the other plan's runner
``--out``, where its checkpoints and data live). Loading the plan checks, run by run, that the
other plan would run exactly the commands this plan would run (preparation, every training
stage, decoding, threads; :meth:`Runner.planned_commands`), apart from the output and data
paths and the run's label; a difference is a one-line error naming both sides. The runner never
trains a borrowed run; it reads its test outputs from the other plan's archive (or its ``out``)
for the pooled tables, and before the first training of a pair it checks that its own prepared
data equals the other runner's, file by file, when that exists (:func:`data_fingerprint`).

Selection statistics (plan key ``selection``: ``{"conll": CONLL_FILE, "systems": [...]}``,
systems by default every system but each study's baseline): after a run is decoded, the
selection statistics of ``ssan-selection-stats`` (by word class and distance, on the CoNLL
file's words) of its ``checkpoint_best.pt`` are archived as ``ARCHIVE/STUDY/PAIR/SYSTEM@SEED/
selection.json`` (relative paths; ``OUT/...`` without an archive). A borrowed run gets its
``selection.json`` in this plan's archive under this plan's name for it, from the checkpoint
in the other runner's ``out`` when it is there (skipped, and said, when it is not). Skipped
when already archived, like every step.
"""

import difflib
import hashlib
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
from typing import Dict, List, Optional, Tuple

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
class Borrow:
    """Runs of one system of a study taken from another plan (module docstring)."""

    plan: str  # the other plan's file (resolved)
    study: str  # its study
    system: str  # its system
    out: str  # its runner's --out (resolved): checkpoints and data
    source: Optional["Plan"] = None  # the other plan, loaded when this plan is


@dataclass
class Selection:
    """Selection statistics after decoding (plan key ``selection``)."""

    conll: str  # a CoNLL-2012 file (words, POS), resolved
    systems: Optional[List[str]] = None  # None: every system but each study's baseline


@dataclass
class Study:
    name: str
    pairs: List[str]
    systems: List[str]  # the first is the baseline (compared against, warm-start source)
    flags: List[str] = field(default_factory=list)
    # None: the plan's seeds; a list: these seeds for every pair; {pair: [seeds]}: per pair
    # (a pair not named keeps the plan's seeds)
    seeds: Optional[object] = None
    borrow: Dict[str, Borrow] = field(default_factory=dict)  # system -> where its runs are

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
    selection: Optional[Selection] = None  # selection statistics after decoding
    path: Optional[str] = None  # the file the plan was read from

    @classmethod
    def load(cls, path, root=ROOT, _loading=()) -> "Plan":
        """Read a plan; relative ``raw`` paths are relative to the project root. A plan that
        borrows runs loads the plans it borrows from and checks the borrowed runs' commands
        (:meth:`check_borrowed`)."""
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
            studies = [Study(**{**spec, "borrow": {
                name: Borrow(**{**b, "plan": _resolve(b["plan"], root),
                                "out": _resolve(b["out"], root)})
                for name, b in spec.get("borrow", {}).items()}}) for spec in raw["studies"]]
            selection = raw.get("selection")
            if selection is not None:
                selection = Selection(**{**selection,
                                         "conll": _resolve(selection["conll"], root)})
            plan = cls(pairs=pairs, systems=systems, studies=studies, seeds=raw["seeds"],
                       base_updates=raw["updates"]["base"], more_updates=raw["updates"]["more"],
                       train=raw["train"], selection=selection, path=str(path),
                       **{k: raw[k] for k in ("save_interval", "threads", "beam", "archive", "decode")
                          if k in raw})
        except (KeyError, TypeError) as err:
            raise PipelineError(f"{path}: not a valid plan ({err})") from None
        for pair in plan.pairs.values():
            pair.raw = _resolve(pair.raw, root)
        if plan.archive is not None:
            plan.archive = _resolve(plan.archive, root)
        plan.validate(path)
        plan.load_borrowed(path, root, _loading)
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
            for name in study.borrow:
                if name not in study.systems:
                    raise PipelineError(f"{path}: study {study.name!r} borrows {name!r}, which "
                                        f"is not one of its systems")
            for name in study.systems:
                warm = self.systems[name].warm_from
                if warm is not None and warm in study.borrow and name not in study.borrow:
                    raise PipelineError(f"{path}: system {name!r} warm-starts from {warm!r}, "
                                        f"whose runs study {study.name!r} borrows (their "
                                        f"checkpoints are another runner's): train {warm!r} "
                                        f"here or borrow {name!r} too")
        if self.selection is not None:
            for name in self.selection.systems or ():
                if name not in self.systems:
                    raise PipelineError(f"{path}: selection.systems names unknown system "
                                        f"{name!r}")

    # ---------------------------------------------------------------- borrowed runs
    def load_borrowed(self, path, root=ROOT, _loading=()) -> None:
        """Load every plan this one borrows from and check each borrowed run
        (:meth:`check_borrowed`); PipelineError, one line, otherwise."""
        me = str(Path(path).resolve())
        for study in self.studies:
            for name, borrow in study.borrow.items():
                where = (f"{path}: study {study.name!r} borrows {name!r} from {borrow.plan} "
                         f"(study {borrow.study!r}, system {borrow.system!r})")
                if str(Path(borrow.plan).resolve()) in (me, *_loading):
                    raise PipelineError(f"{where}: a plan cannot borrow from itself or from a "
                                        f"plan that borrows from it")
                if not Path(borrow.plan).is_file():
                    raise PipelineError(f"{where}: no such plan file")
                try:
                    borrow.source = Plan.load(borrow.plan, root, (*_loading, me))
                except PipelineError as err:
                    raise PipelineError(f"{where}: that plan cannot be used: {err}") from None
                self.check_borrowed(study, name, borrow, where)

    def check_borrowed(self, study: "Study", name: str, borrow: Borrow, where: str) -> None:
        """Every run of ``name`` in ``study`` exists in the other plan and is run there with
        the commands this plan would run (:meth:`Runner.planned_commands`)."""
        source = borrow.source
        other = next((s for s in source.studies if s.name == borrow.study), None)
        if other is None:
            raise PipelineError(f"{where}: that plan has no study {borrow.study!r} (it has "
                                f"{', '.join(s.name for s in source.studies)})")
        if borrow.system not in other.systems:
            raise PipelineError(f"{where}: that plan's study {borrow.study!r} has no system "
                                f"{borrow.system!r} (it has {', '.join(other.systems)})")
        if borrow.system in other.borrow:
            raise PipelineError(f"{where}: that plan borrows those runs itself; borrow them "
                                f"from {other.borrow[borrow.system].plan}")
        if source.archive is None:
            raise PipelineError(f"{where}: that plan has no archive to read the runs from")
        mine = Runner(self, Path("/__this_plan_out__"))
        theirs = Runner(source, Path(borrow.out))
        for run in self.runs():
            if run.study is not study or run.system.name != name:
                continue
            if run.pair.name not in other.pairs:
                raise PipelineError(f"{where}: that study does not run pair {run.pair.name!r}")
            their_run = self.source_run(run)
            if not source.planned(their_run.study, run.pair.name, their_run.system, run.seed):
                raise PipelineError(f"{where}: that plan does not run seed {run.seed} of "
                                    f"{borrow.system!r} on {run.pair.name!r}")
            a, b = mine.planned_commands(run), theirs.planned_commands(their_run)
            if a != b:
                raise PipelineError(f"{where}, but {run.key} would not be the same run: "
                                    f"{describe_difference(a, b)}")

    def source_run(self, run: "Run") -> "Run":
        """The other plan's run that a borrowed ``run`` is."""
        borrow = run.study.borrow[run.system.name]
        source = borrow.source
        study = next(s for s in source.studies if s.name == borrow.study)
        return Run(study=study, pair=source.pairs[run.pair.name],
                   system=source.systems[borrow.system], seed=run.seed)

    def archived_outputs(self, run: "Run") -> Optional[Tuple[Path, str]]:
        """(archive directory, hypotheses file name) of a run's archived test outputs; a
        borrowed run's are in the other plan's archive. None: not archived."""
        if run.borrowed is not None:
            return run.borrowed.source.archived_outputs(self.source_run(run))
        if not self.archive:
            return None
        d = run.directory(Path(self.archive))
        return (d, run.hyp_name) if (d / "test.json").is_file() and \
            (d / run.hyp_name).is_file() else None

    def analysed(self, run: "Run") -> bool:
        """Whether the plan archives selection statistics for ``run``."""
        if self.selection is None:
            return False
        if self.selection.systems is not None:
            return run.system.name in self.selection.systems
        return not run.is_baseline()

    def selection_file(self, run: "Run", out=None) -> Optional[Path]:
        """Where ``run``'s ``selection.json`` is kept: this plan's archive, else ``out``."""
        root = Path(self.archive) if self.archive else (Path(out) if out is not None else None)
        return None if root is None else run.directory(root) / "selection.json"

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


def _resolve(path: str, root) -> str:
    """A plan's path, relative to the project root unless absolute."""
    return path if Path(path).is_absolute() else str((Path(root) / path).resolve())


COMMAND_KINDS = ("threads", "preparation")  # then training stages, decoding


def describe_difference(mine: List[List[str]], theirs: List[List[str]]) -> str:
    """One line: the first command of two :meth:`Runner.planned_commands` lists that differs
    (each list starts with what the command does), and how: this plan's arguments against the
    other plan's."""
    if [c[0] for c in mine] != [c[0] for c in theirs]:
        return (f"this plan runs {', '.join(c[0] for c in mine)}; the other runs "
                f"{', '.join(c[0] for c in theirs)}")
    for a, b in zip(mine, theirs):
        if a == b:
            continue
        matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
        parts = [f"this plan has {' '.join(a[i1:i2]) or 'nothing'!r} where the other has "
                 f"{' '.join(b[j1:j2]) or 'nothing'!r}"
                 for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"]
        return f"{a[0]}: {'; '.join(parts)}"
    return "the commands differ"


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
              "beam": "int", "archive": "str", "decode": "strs", "_comment": "str",
              "selection": None}
_PAIR_KEYS = {"raw": "str", "src": "str", "tgt": "str", "prepare": "strs", "make": "strs"}
_SYSTEM_KEYS = {"arch": "str", "criterion": "str", "flags": "strs", "warm_from": "str",
                "pairs": "strs", "seeds": "ints"}
_STUDY_KEYS = {"name": "str", "pairs": "strs", "systems": "strs", "flags": "strs",
               "seeds": "seeds", "borrow": None}
_BORROW_KEYS = {"plan": "str", "study": "str", "system": "str", "out": "str"}
_SELECTION_KEYS = {"conll": "str", "systems": "strs"}
_REQUIRED = {"plan": ("seeds", "updates", "train", "pairs", "systems", "studies"),
             "pair": ("raw", "src", "tgt"), "system": ("arch", "criterion"),
             "study": ("name", "pairs", "systems"), "borrow": ("plan", "study", "system", "out"),
             "selection": ("conll",)}


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
        borrow = spec.get("borrow", {})
        if not isinstance(borrow, dict):
            raise PipelineError(f"{path}: studies[{k}].borrow must be a mapping of system "
                                f"names, got {type(borrow).__name__}")
        for name, entry in borrow.items():
            _check_keys(entry, _BORROW_KEYS, _REQUIRED["borrow"],
                        f"studies[{k}].borrow.{name}", path)
    if "selection" in raw:
        _check_keys(raw["selection"], _SELECTION_KEYS, _REQUIRED["selection"], "selection",
                    path)


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

    @property
    def borrowed(self) -> Optional[Borrow]:
        """Where the run comes from when its study borrows it, else None."""
        return self.study.borrow.get(self.system.name)

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
        self._sources: Dict[tuple, "Runner"] = {}
        self._data_checked: set = set()

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
        return self.out / "data" / pair.name

    def results_path(self, study: Study, pair: Pair, suffix: str) -> Path:
        root = Path(self.plan.archive) if self.plan.archive else self.out
        return root / "results" / f"{study.name}.{pair.name}.{suffix}"

    def archived(self, run: Run) -> Optional[Path]:
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
        d = run.directory(self.out)
        return d / run.hyp_name if (d / "test.json").is_file() and (d / run.hyp_name).is_file() \
            else None

    def state(self, run: Run) -> str:
        """archived, decoded, trained, started or todo (a borrowed run: its state in the other
        plan's archive and ``out``)."""
        if run.borrowed is not None:
            source, their_run = self.source(run)
            return source.state(their_run)
        d = run.directory(self.out)
        return ("archived" if self.archived(run) is not None else
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
        print(f"[prepare] {pair.name} -> {dest}", flush=True)
        self._child(self.prepare_command(pair, raw, dest),
                    self.out / "logs" / f"prepare.{pair.name}.log")
        return dest

    def prepare_command(self, pair: Pair, raw: Path, dest: Path) -> List:
        return [self.python, "-m", "ssan_plugin.commands.prepare_translation", "--src", pair.src,
                "--tgt", pair.tgt, "--train", raw / "train", "--valid", raw / "valid",
                "--test", raw / "test", "--dest", dest, *pair.prepare]

    def warm_start_command(self, run: Run, data: Path, save: Path) -> List:
        source = run.baseline_directory(self.out) / "checkpoint_base.pt"
        cmd = [self.python, "-m", "ssan_plugin.commands.warm_start", "--base", source, "--arch",
               run.system.arch, "--criterion", run.system.criterion, "--data", data,
               "--out", save / "checkpoint_last.pt"]
        return cmd + ["--", *run.system.flags] if run.system.flags else cmd

    def decode_command(self, run: Run, data: Path, save: Path) -> List:
        return [self.python, "-m", "ssan_plugin.commands.evaluate_bleu", "--data", data, "--cpu",
                "--ref", Path(run.pair.raw) / f"test.{run.pair.tgt}",
                "--system", f"{run.system.name}@{run.seed}={save / 'checkpoint_best.pt'}",
                "--beam", str(self.plan.beam), *self.plan.decode, "--json", save / "test.json",
                "--hyp-dir", save, "--overwrite"]  # a decoding stopped half-way is redone

    def planned_commands(self, run: Run) -> List[List[str]]:
        """Every command that makes ``run`` from nothing to its decoded test split, as this
        runner would run it, each list headed by what it does: the threads, the pair's
        preparation (its ``make`` command first, if any), the training stages (the study
        baseline's two, a warm start's, or one), the decoding. Paths are placeholders: the run
        directory ``<run>``, the data directory ``<data>``, ``--out`` ``<out>``, and the run's
        label ``<name>@SEED``; what remains is what makes the run what it is."""
        data, save = self.data_dir(run.pair), run.directory(self.out)
        raw = Path(run.pair.raw)
        base, total = self.plan.base_updates, self.plan.base_updates + self.plan.more_updates
        cmds = [["threads", f"OMP_NUM_THREADS={self.plan.threads}"]]
        if run.pair.make:
            cmds.append(["corpus", self.python, ROOT / run.pair.make[0], *run.pair.make[1:],
                         "--out", raw])
        cmds.append(["preparation", *self.prepare_command(run.pair, raw, data)])
        if run.is_baseline():
            cmds.append(["training to updates.base", *self.train_command(run, data, save, base)])
        elif run.system.warm_from is not None:
            cmds.append(["warm start", *self.warm_start_command(run, data, save)])
        cmds.append(["training", *self.train_command(run, data, save, total)])
        cmds.append(["decoding", *self.decode_command(run, data, save)])
        label = f"{run.system.name}@{run.seed}="

        def placeholder(arg) -> str:
            text = str(arg)
            for path, name in ((save, "<run>"), (data, "<data>"), (self.out, "<out>")):
                text = text.replace(str(path), name)
            return f"<name>@{run.seed}=" + text[len(label):] if text.startswith(label) else text

        return [[placeholder(a) for a in cmd] for cmd in cmds]

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
        if self.state(run) not in ("decoded", "archived"):
            return "pending"
        checkpoint, data = self.selection_inputs(run)
        return "todo" if checkpoint.is_file() and (data / "manifest.json").is_file() \
            else "no checkpoint"

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
        if not self.dry_run and not (checkpoint.is_file() and (data / "manifest.json").is_file()):
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
        record = {"run": run.key, "checkpoint": str(checkpoint), "data": str(data)}
        if run.borrowed is not None:
            their_run = self.plan.source_run(run)
            record["borrowed"] = {"plan": run.borrowed.plan, "run": their_run.key}
        record.update(stats)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.write_text(relativize_text(json.dumps(record, indent=1) + "\n"), encoding="utf-8")
        os.replace(tmp, dest)
        return dest

    def check_borrowed_data(self, pair: Pair, data: Path) -> None:
        """Before this plan trains on ``pair``: its prepared data equals, file by file
        (:func:`data_fingerprint`), the data of every runner it borrows runs of the pair from,
        where that data exists; PipelineError naming the first differing file otherwise."""
        if self.dry_run or pair.name in self._data_checked:
            return
        for run in self.plan.runs():
            if run.pair.name != pair.name or run.borrowed is None:
                continue
            source, their_run = self.source(run)
            theirs = source.data_dir(their_run.pair)
            if not (theirs / "manifest.json").is_file() or theirs.resolve() == data.resolve():
                continue
            a, b = data_fingerprint(data), data_fingerprint(theirs)
            if a != b:
                first = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))[0]
                raise PipelineError(f"{data} differs from {theirs} (the data of the runs "
                                    f"{run.study.name} borrows from {run.borrowed.plan}) in "
                                    f"{first}: the borrowed runs were trained on other data; "
                                    f"prepare both with the same code and options")
        self._data_checked.add(pair.name)

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
            rows.append(row)
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
            if run.borrowed is not None:  # never trained here; its selection when possible
                self.analyse(run)
                continue
            if self.archived(run) is not None:
                self.analyse(run)  # killed after archiving, or archived before analysis
                continue
            if (save / "test.json").is_file():
                results = self.results_path(run.study, run.pair, "json")
                if (self.plan.archive or not results.is_file() or
                        results.stat().st_mtime < (save / "test.json").stat().st_mtime):
                    # killed between a decode and the archive or the table
                    self.archive(run)
                    self.pooled_report(run.study, run.pair, self.prepare(run.pair))
                self.analyse(run)
                continue
            if limit is not None and trained >= limit:
                print(f"stopping after {limit} training(s); run again to continue", flush=True)
                return
            data = self.prepare(run.pair)
            self.check_borrowed_data(run.pair, data)
            if not (save / "train.done").is_file():
                trained += 1
            self.train(run, data)
            self.decode(run, data, save)
            self.archive(run)
            self.analyse(run)
            self.pooled_report(run.study, run.pair, data)  # results as they come
        print("plan complete" if not only else f"runs matching {only!r} complete", flush=True)
