"""The plan of a translation comparison: what runs exist and what each is (run by
:mod:`.runner`).

A plan (JSON, e.g. ``examples/translation/experiments.json``) names language pairs (raw data,
preparation options), studies (a set of pairs, shared extra flags such as pre-norm, the
systems), system definitions (arch, criterion, flags, optionally ``warm_from``) and seeds. Its
runs (:meth:`Plan.runs`) are every (seed, study, pair, system), in that order (so each seed of
everything lands before the next seed starts); a study's first system is its baseline (compared
against, and the only system another may warm-start from). Paths in a plan are relative to the
project root. Loading checks every key's type (:func:`check_plan_types`: unknown keys refused,
names of pairs, systems and studies safe as directory names; :func:`read_plan_json`: no key
twice in one object) and what the keys refer to (:meth:`Plan.validate`: a study, pair, system
or seed listed twice, a study without pairs or systems, an archive that is a file are refused);
an error is one line naming the file and the key.

What each run is, is the commands that make it (:meth:`Plan.planned_commands`: preparation,
every training stage, decoding, threads), built here from the plan alone; the runner runs them.

Archive (plan key ``archive``, a directory relative to the project root, meant to be committed):
the runner writes it; :meth:`Plan.archived_outputs` finds a run's archived test outputs.

Borrowed runs (a study's key ``borrow``): a study may take a system's runs from another plan's
archive instead of training them, e.g. ``"borrow": {"baseline": {"plan":
"examples/translation/experiments.json", "study": "prenorm", "system": "baseline", "out":
"runs/experiments"}}`` (paths relative to the project root; ``out`` is the other plan's runner
``--out``, where its checkpoints and data live). Loading the plan checks, run by run, that the
other plan would run exactly the commands this plan would run (preparation, every training
stage, decoding, threads; :meth:`Plan.planned_commands`), apart from the output and data paths
and the run's label; a difference is a one-line error naming both sides
(:func:`describe_difference`). What the runner does with borrowed runs is in :mod:`.runner`.

Selection statistics (plan key ``selection``: ``{"conll": CONLL_FILE, "systems": [...]}``,
systems by default every system but each study's baseline): which runs are analysed
(:meth:`Plan.analysed`) and where their ``selection.json`` is kept (:meth:`Plan.selection_file`).

Word alignments (plan key ``alignment``: ``{"bitext": FILE, "gold": FILE, "pairs": [...],
"systems": [...]}``, systems by default every system): the runs of those pairs whose
``checkpoint_best.pt`` ``ssan-align`` scores against the gold links (:meth:`Plan.aligned`), with
the cross attention's weights, and with its selection too for a system that selects there
(:meth:`Plan.alignment_maps`); kept as ``alignment.MAP.json`` (:meth:`Plan.alignment_file`).
"""

import difflib
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import PipelineError

ROOT = Path(__file__).resolve().parents[2]


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
class Alignment:
    """Word alignments scored after decoding (plan key ``alignment``)."""

    bitext: str  # tokenised "A ||| B" pairs, resolved
    gold: str  # their gold links, resolved
    pairs: List[str]  # the plan's pairs whose runs are aligned
    systems: Optional[List[str]] = None  # None: every system


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


def last_flag_value(flags: Sequence[str], name: str) -> Optional[str]:
    """The value the last ``name VALUE`` or ``name=VALUE`` of ``flags`` gives (argparse keeps the
    last), None when ``name`` is not given."""
    value = None
    for i, flag in enumerate(flags):
        if flag == name and i + 1 < len(flags):
            value = flags[i + 1]
        elif flag.startswith(name + "="):
            value = flag[len(name) + 1:]
    return value


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
    alignment: Optional[Alignment] = None  # word alignments scored after decoding
    path: Optional[str] = None  # the file the plan was read from

    @classmethod
    def load(cls, path, root=ROOT, _loading=()) -> "Plan":
        """Read a plan; relative ``raw`` paths are relative to the project root. A plan that
        borrows runs loads the plans it borrows from and checks the borrowed runs' commands
        (:meth:`check_borrowed`)."""
        raw = read_plan_json(path)
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
            alignment = raw.get("alignment")
            if alignment is not None:
                alignment = Alignment(**{**alignment, "bitext": _resolve(alignment["bitext"], root),
                                         "gold": _resolve(alignment["gold"], root)})
            plan = cls(pairs=pairs, systems=systems, studies=studies, seeds=raw["seeds"],
                       base_updates=raw["updates"]["base"], more_updates=raw["updates"]["more"],
                       train=raw["train"], selection=selection, alignment=alignment, path=str(path),
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
        _refuse_twice(self.seeds, "seeds lists seed", path)
        if self.archive is not None and Path(self.archive).exists() and \
                not Path(self.archive).is_dir():
            raise PipelineError(f"{path}: archive {self.archive} exists and is not a directory")
        _refuse_twice([s.name for s in self.studies], "studies lists the study", path)
        for study in self.studies:
            for key, listed in (("pairs", study.pairs), ("systems", study.systems)):
                if not listed:
                    raise PipelineError(f"{path}: study {study.name!r} has no {key} (a study "
                                        f"needs one at least{BASELINE_NOTE[key]})")
                _refuse_twice(listed, f"study {study.name!r} lists {key[:-1]}", path)
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
                if listed is not None:
                    _refuse_twice(listed, f"study {study.name!r} lists seed", path)
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
        for system in self.systems.values():
            for key in ("pairs", "seeds"):
                _refuse_twice(getattr(system, key) or [], f"systems.{system.name}.{key} lists "
                                                          f"{key[:-1]}", path)
        if self.selection is not None:
            for name in self.selection.systems or ():
                if name not in self.systems:
                    raise PipelineError(f"{path}: selection.systems names unknown system "
                                        f"{name!r}")
        if self.alignment is not None:
            for name in self.alignment.systems or ():
                if name not in self.systems:
                    raise PipelineError(f"{path}: alignment.systems names unknown system {name!r}")
            for name in self.alignment.pairs:
                if name not in self.pairs:
                    raise PipelineError(f"{path}: alignment.pairs names unknown pair {name!r}")

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
        the commands this plan would run (:meth:`planned_commands`)."""
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
        for run in self.runs():
            if run.study is not study or run.system.name != name:
                continue
            if run.pair.name not in other.pairs:
                raise PipelineError(f"{where}: that study does not run pair {run.pair.name!r}")
            their_run = self.source_run(run)
            if not source.planned(their_run.study, run.pair.name, their_run.system, run.seed):
                raise PipelineError(f"{where}: that plan does not run seed {run.seed} of "
                                    f"{borrow.system!r} on {run.pair.name!r}")
            # both as a runner on the other plan's out would run them (a pair made inside
            # that out, e.g. a built-in corpus, is then the same path in both)
            a = self.planned_commands(run, Path(borrow.out))
            b = source.planned_commands(their_run, Path(borrow.out))
            if a != b:
                raise PipelineError(f"{where}, but {run.key} would not be the same run: "
                                    f"{describe_difference(a, b)}")

    def study(self, name: str) -> "Study":
        """The study called ``name``; a PipelineError naming the plan's studies otherwise."""
        found = next((s for s in self.studies if s.name == name), None)
        if found is None:
            raise PipelineError(f"{self.path}: no study {name!r} (it has "
                                f"{', '.join(s.name for s in self.studies)})")
        return found

    def source_run(self, run: "Run") -> "Run":
        """The other plan's run that a borrowed ``run`` is."""
        borrow = run.study.borrow[run.system.name]
        source = borrow.source
        study = source.study(borrow.study)
        return Run(study=study, pair=source.pairs[run.pair.name],
                   system=source.systems[borrow.system], seed=run.seed)

    def archived_outputs(self, run: "Run") -> Optional[Tuple[Path, str]]:
        """(archive directory, hypotheses file name) of a run's archived test outputs; a
        borrowed run's are in the other plan's archive. None: not archived."""
        if run.borrowed is not None:
            return run.borrowed.source.archived_outputs(self.source_run(run))
        if not self.archive:
            return None
        return (run.directory(Path(self.archive)), run.hyp_name) \
            if run.decoded_in(Path(self.archive)) else None

    def analysed(self, run: "Run") -> bool:
        """Whether the plan archives selection statistics for ``run``."""
        if self.selection is None:
            return False
        if self.selection.systems is not None:
            return run.system.name in self.selection.systems
        return not run.is_baseline()

    def aligned(self, run: "Run") -> bool:
        """Whether the plan scores ``run``'s word alignments."""
        if self.alignment is None or run.pair.name not in self.alignment.pairs:
            return False
        return self.alignment.systems is None or run.system.name in self.alignment.systems

    def alignment_maps(self, run: "Run") -> List[str]:
        """The maps ``run`` is aligned with: ``weights``, and ``selection`` when its system
        selects at the cross site (``--cross-selector`` other than ``none``)."""
        cross = last_flag_value(list(run.system.flags) + list(run.study.flags), "--cross-selector")
        return ["weights"] + (["selection"] if cross not in (None, "none") else [])

    def alignment_file(self, run: "Run", kind: str, out=None) -> Optional[Path]:
        """Where ``run``'s ``alignment.KIND.json`` is kept: this plan's archive, else ``out``."""
        root = Path(self.archive) if self.archive else (Path(out) if out is not None else None)
        return None if root is None else run.directory(root) / f"alignment.{kind}.json"

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

    # ---------------------------------------------------------------- the commands of a run
    @staticmethod
    def data_dir(out, pair: Pair) -> Path:
        """Where a runner on ``out`` prepares ``pair``."""
        return Path(out) / "data" / pair.name

    @staticmethod
    def make_command(pair: Pair, raw: Path, python) -> List:
        """The pair's ``make`` command (a corpus script of the project), writing into ``raw``."""
        return [python, ROOT / pair.make[0], *pair.make[1:], "--out", raw]

    @staticmethod
    def prepare_command(pair: Pair, raw: Path, dest: Path, python) -> List:
        return [python, "-m", "ssan_plugin.commands.prepare_translation", "--src", pair.src,
                "--tgt", pair.tgt, "--train", raw / "train", "--valid", raw / "valid",
                "--test", raw / "test", "--dest", dest, *pair.prepare]

    @staticmethod
    def warm_start_command(run: "Run", data: Path, save: Path, out, python) -> List:
        source = run.baseline_directory(Path(out)) / "checkpoint_base.pt"
        cmd = [python, "-m", "ssan_plugin.commands.warm_start", "--base", source, "--arch",
               run.system.arch, "--criterion", run.system.criterion, "--data", data,
               "--out", save / "checkpoint_last.pt"]
        return cmd + ["--", *run.system.flags] if run.system.flags else cmd

    def decode_command(self, run: "Run", data: Path, save: Path, python) -> List:
        return [python, "-m", "ssan_plugin.commands.evaluate_bleu", "--data", data, "--cpu",
                "--ref", Path(run.pair.raw) / f"test.{run.pair.tgt}",
                "--system", f"{run.system.name}@{run.seed}={save / 'checkpoint_best.pt'}",
                "--beam", str(self.beam), *self.decode, "--json", save / "test.json",
                "--hyp-dir", save, "--overwrite"]  # a decoding stopped half-way is redone

    def planned_commands(self, run: "Run", out, python=sys.executable) -> List[List[str]]:
        """Every command that makes ``run`` from nothing to its decoded test split, as a
        runner on ``out`` with ``python`` would run it, each list headed by what it does: the
        threads, the pair's preparation (its ``make`` command first, if any), the training
        stages (the study baseline's two, a warm start's, or one), the decoding. Paths are
        placeholders: the run directory ``<run>``, the data directory ``<data>``, ``--out``
        ``<out>``, and the run's label ``<name>@SEED``; what remains is what makes the run
        what it is."""
        out = Path(out)
        data, save = self.data_dir(out, run.pair), run.directory(out)
        raw = Path(run.pair.raw)
        base, total = self.base_updates, self.base_updates + self.more_updates
        cmds = [["threads", f"OMP_NUM_THREADS={self.threads}"]]
        if run.pair.make:
            cmds.append(["corpus", *self.make_command(run.pair, raw, python)])
        cmds.append(["preparation", *self.prepare_command(run.pair, raw, data, python)])
        if run.is_baseline():
            cmds.append(["training to updates.base",
                         *self.train_command(run, data, save, base, python)])
        elif run.system.warm_from is not None:
            cmds.append(["warm start", *self.warm_start_command(run, data, save, out, python)])
        cmds.append(["training", *self.train_command(run, data, save, total, python)])
        cmds.append(["decoding", *self.decode_command(run, data, save, python)])
        label = f"{run.system.name}@{run.seed}="

        def placeholder(arg) -> str:
            text = str(arg)
            for path, name in ((save, "<run>"), (data, "<data>"), (out, "<out>")):
                text = text.replace(str(path), name)
            return f"<name>@{run.seed}=" + text[len(label):] if text.startswith(label) else text

        return [[placeholder(a) for a in cmd] for cmd in cmds]

    def train_command(self, run: "Run", data: Path, save: Path, max_update: int,
                      python) -> List[str]:
        s = run.system
        return [Path(python).parent / "fairseq-train", data, "--user-dir", ROOT / "ssan_plugin",
                "--cpu", "--arch", s.arch, "--criterion", s.criterion, *self.train,
                *run.study.flags, *s.flags, "--seed", str(run.seed),
                "--max-update", str(max_update), "--save-dir", save,
                "--save-interval-updates", str(self.save_interval),
                "--validate-interval-updates", str(self.save_interval),
                "--keep-interval-updates", "1", "--no-epoch-checkpoints",
                "--log-format", "json", "--log-interval", "50"]


BASELINE_NOTE = {"pairs": "", "systems": "; the first is its baseline"}


def _refuse_twice(names, what: str, path) -> None:
    """PipelineError ``PATH: WHAT NAME twice`` for the first name listed twice: each would make
    its runs twice."""
    twice = next((name for k, name in enumerate(names) if name in names[:k]), None)
    if twice is not None:
        raise PipelineError(f"{path}: {what} {twice!r} twice")


class _KeyTwice(dict):
    """A JSON object that holds the key ``twice`` more than once (the last value kept, as
    ``json`` keeps it)."""

    twice: str = ""


def _note_keys_twice(pairs) -> dict:
    """``object_pairs_hook`` of :func:`read_plan_json`: the object, marked when a key repeats."""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    keys = [key for key, _ in pairs]
    marked = _KeyTwice(obj)
    marked.twice = next(key for k, key in enumerate(keys) if key in keys[:k])
    return marked


def _key_twice(value, where: str = "the plan"):
    """(where, key) of the first object of ``value`` with a key twice, else None; ``where``
    spelt as the type errors spell it (``systems``, ``studies[0].borrow``)."""
    if isinstance(value, _KeyTwice):
        return where, value.twice
    items = value.items() if isinstance(value, dict) else \
        enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        inner = (f"{where}[{key}]" if isinstance(key, int) else
                 key if where == "the plan" else f"{where}.{key}")
        found = _key_twice(item, inner)
        if found is not None:
            return found
    return None


def read_plan_json(path):
    """A plan file's JSON; PipelineError, one line naming the file, for text that is not UTF-8,
    not JSON (with its line and column) or with a key twice in one object (``json`` would keep
    the second silently: a system defined twice loses its first definition)."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f, object_pairs_hook=_note_keys_twice)
    except json.JSONDecodeError as err:
        raise PipelineError(f"{path}:{err.lineno}:{err.colno}: not valid JSON ({err.msg})") \
            from None
    except UnicodeDecodeError:
        raise PipelineError(f"{path}: not UTF-8 text") from None
    found = _key_twice(raw)
    if found is not None:
        raise PipelineError(f"{path}: {found[0]} has the key {found[1]!r} twice (JSON would "
                            f"keep only the last, silently)")
    return raw


def _resolve(path: str, root) -> str:
    """A plan's path, relative to the project root unless absolute. Made absolute lexically
    (``os.path.normpath``), not through links: a checkout whose ``runs/`` links elsewhere
    keeps naming ``ROOT/runs/...``, so archives still read ``runs/...`` once made relative."""
    return path if Path(path).is_absolute() else os.path.normpath(Path(root) / path)


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
              "selection": None, "alignment": None}
_PAIR_KEYS = {"raw": "str", "src": "str", "tgt": "str", "prepare": "strs", "make": "strs"}
_SYSTEM_KEYS = {"arch": "str", "criterion": "str", "flags": "strs", "warm_from": "str",
                "pairs": "strs", "seeds": "ints"}
_STUDY_KEYS = {"name": "str", "pairs": "strs", "systems": "strs", "flags": "strs",
               "seeds": "seeds", "borrow": None}
_BORROW_KEYS = {"plan": "str", "study": "str", "system": "str", "out": "str"}
_SELECTION_KEYS = {"conll": "str", "systems": "strs"}
_ALIGNMENT_KEYS = {"bitext": "str", "gold": "str", "pairs": "strs", "systems": "strs"}
_REQUIRED = {"plan": ("seeds", "updates", "train", "pairs", "systems", "studies"),
             "pair": ("raw", "src", "tgt"), "system": ("arch", "criterion"),
             "study": ("name", "pairs", "systems"), "borrow": ("plan", "study", "system", "out"),
             "selection": ("conll",), "alignment": ("bitext", "gold", "pairs")}


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
    if "alignment" in raw:
        _check_keys(raw["alignment"], _ALIGNMENT_KEYS, _REQUIRED["alignment"], "alignment", path)


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

    def decoded_in(self, root: Path) -> bool:
        """Whether the run's directory under ``root`` (a runner's out or an archive) holds its
        decoded test split: the report ``test.json`` and the hypotheses."""
        d = self.directory(Path(root))
        return (d / "test.json").is_file() and (d / self.hyp_name).is_file()


# ---------------------------------------------------------------- comparing commands
def describe_difference(mine: List[List[str]], theirs: List[List[str]]) -> str:
    """One line: the first command of two :meth:`Plan.planned_commands` lists that differs
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
