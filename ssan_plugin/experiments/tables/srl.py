"""SRL tables of ``examples/srl/run_srl.py``'s archive (``CONFIG_ENCODER_sSEED/`` per run):
every run's dev predictions rescored against the gold props with the project's scorer and
checked against its ``result.json``; seed-level dev F1 comparisons; per-run tables of single
runs and of seed groups; learning curves read from ``curve.jsonl``; F1 by sentence length and by
argument distance."""

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .archives import RESULT, SeedRunArchive, archived_record, archived_value, curve_records
from .blocks import ResultsError
from .verdicts import Comparison, apply_holm, mean_sd, seed_comparison

PREDICTIONS = "dev.pred.props.gz"


def srl_gold_props(dev_conll: Path, dest: Path) -> Path:
    """The gold props of a CoNLL-2012 dev file, as ``ssan-prepare-srl`` writes them
    (``valid.props``): one column per proposition, in column order."""
    from ...srl.conll2012 import read_conll2012
    from ...srl.props import write_props

    if not Path(dev_conll).is_file():
        raise ResultsError(f"{dev_conll}: the gold dev file is missing (the shared data)")
    sentences = read_conll2012(str(dev_conll))
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_props(str(dest), ((s.targets(), [list(p.tags) for p in s.propositions])
                            for s in sentences))
    return dest


class SrlArchive(SeedRunArchive):
    """The runs of a ``run_srl.py`` archive, each read and rescored at most once: its
    ``dev.pred.props.gz`` against the gold props (``srl.compare.score_system``: srl-eval.pl's
    counts, per-sentence statistics, F1 by length and distance), refused with a
    :class:`ResultsError` naming the file when the recomputed counts differ from the ones its
    ``result.json`` archived; its ``curve.jsonl`` (fairseq's train and valid records)."""

    def __init__(self, archive: Path, gold_props: Path):
        super().__init__(archive)
        self.gold_props = Path(gold_props)
        self._gold = None
        self._scores: Dict[str, object] = {}
        self._curves: Dict[str, List[dict]] = {}

    # ------------------------------------------------------------------ reading
    def _read(self, path: Path, option: str):
        from ...srl.compare import CompareError, read_checked

        try:
            return read_checked(str(path), option, f"{option} {path}")
        except CompareError as err:
            text = str(err)
            raise ResultsError(text if str(path) in text else f"{path}: {text}") from None

    @property
    def gold(self):
        if self._gold is None:
            self._gold = self._read(self.gold_props, "--gold-props")
            if not self._gold.sentences:
                raise ResultsError(f"{self.gold_props}: no sentences")
        return self._gold

    def score(self, name: str):
        """``srl.compare.SystemScore`` of the run's dev predictions, checked against its
        ``result.json`` (counts exactly, F1 to 1e-6)."""
        if name not in self._scores:
            from ...srl.compare import CompareError, check_aligned, score_system

            d = self.run_dir(name)
            path = d / PREDICTIONS
            pred = self._read(path, "--pred-props")
            try:
                check_aligned(self.gold, pred)
                scored = score_system(self.gold, name, pred)
            except CompareError as err:
                raise ResultsError(f"{path}: {err}") from None
            result = self.result(name)
            for key in ("correct", "excess", "missed", "f1"):
                recorded = archived_value(d / RESULT, "dev", key, data=result)
                computed = scored.entry[key]
                if abs(recorded - computed) > 1e-6:
                    raise ResultsError(f"{d / RESULT}: dev {key} {recorded:g} archived, "
                                       f"{computed:g} recomputed from {path}")
            self._scores[name] = scored
        return self._scores[name]

    def seeds(self, prefix: str) -> Dict[int, str]:
        """{seed: run name} of the archived runs ``PREFIX_sSEED``."""
        return self.prefixed_seeds(prefix)

    def group(self, prefix: str, least: int = 1) -> Dict[int, str]:
        found = self.seeds(prefix)
        if len(found) < least:
            raise ResultsError(f"{self.archive}: {len(found)} archived runs {prefix}_sSEED, "
                               f"at least {least} needed")
        return found

    # ------------------------------------------------------------------ curves
    def curve(self, name: str) -> List[dict]:
        if name not in self._curves:
            self._curves[name] = curve_records(self.run_dir(name))
        return self._curves[name]

    def validations(self, name: str, key: str) -> Dict[int, float]:
        """{update: value of ``valid_KEY``} over the run's validations (a later record at the
        same update, e.g. after a resume, replaces the earlier)."""
        path = self.run_dir(name) / "curve.jsonl"
        out = {}
        for number, record in enumerate(self.curve(name), 1):
            if record.get("kind") != "valid":
                continue
            update = int(archived_record(path, number, record, "valid_num_updates"))
            out[update] = archived_record(path, number, record, f"valid_{key}")
        if not out:
            raise ResultsError(f"{path}: no validation with valid_{key}")
        return out

    def at(self, name: str, key: str, update: int) -> float:
        values = self.validations(name, key)
        if update not in values:
            raise ResultsError(f"{self.run_dir(name) / 'curve.jsonl'}: no validation at "
                               f"{update} updates")
        return values[update]

    def train_max(self, name: str, key: str) -> float:
        """The largest ``KEY`` of the run's training records (logged every 100 updates)."""
        path = self.run_dir(name) / "curve.jsonl"
        values = [archived_record(path, number, record, key)
                  for number, record in enumerate(self.curve(name), 1)
                  if record.get("kind") == "train_inner"]
        if not values:
            raise ResultsError(f"{path}: no training record with {key!r}")
        return max(values)

    def train_last(self, name: str, key: str) -> Tuple[int, float]:
        """(update, ``KEY``) of the run's last training record."""
        path = self.run_dir(name) / "curve.jsonl"
        last = None
        for number, record in enumerate(self.curve(name), 1):
            if record.get("kind") == "train_inner":
                last = (int(archived_record(path, number, record, "num_updates")),
                        archived_record(path, number, record, key))
        if last is None:
            raise ResultsError(f"{path}: no training record with {key!r}")
        return last


# --------------------------------------------------------------------------- verdicts
def srl_comparisons(runs: SrlArchive, specs: Sequence[tuple], table: str = "srl",
                    n_samples: int = 1000, seed: int = 12345) -> List[Comparison]:
    """Seed-level dev F1 comparisons: ``specs`` are (label, baseline run prefix, system run
    prefix), a prefix ``CONFIG_ENCODER`` whose runs are ``PREFIX_sSEED``; paired by seed when
    the system's seeds are among the baseline's; Holm over the specs."""
    from ...srl.compare import f1_score

    rows = []
    for label, base_prefix, sys_prefix in specs:
        base, sys_ = runs.seeds(base_prefix), runs.seeds(sys_prefix)
        if len(base) < 2 or len(sys_) < 2:
            raise ResultsError(f"{label}: fewer than two archived seeds of {base_prefix} or "
                               f"{sys_prefix} in {runs.archive}")
        rows.append(seed_comparison(
            base, sys_, lambda name: runs.score(name).stats, f1_score, table=table, label=label,
            system=sys_prefix, baseline=base_prefix,
            scored=lambda name: runs.score(name).entry["f1"], n_samples=n_samples, seed=seed))
    apply_holm(rows)
    return rows


# --------------------------------------------------------------------------- columns
@dataclass
class Column:
    """One column of a per-run table: its header and its cell of a run."""

    header: str
    cell: Callable[[SrlArchive, str], str]


def options(flags: Sequence[str]) -> Dict[str, Tuple[str, ...]]:
    """``--option value ...`` tokens -> {option: values}."""
    out: Dict[str, Tuple[str, ...]] = {}
    current = None
    for token in flags:
        if token.startswith("--"):
            current = token
            out[current] = ()
        elif current is not None:
            out[current] += (token,)
    return out


def flags_of(runs: SrlArchive, name: str) -> List[str]:
    flags = archived_value(runs.run_dir(name) / RESULT, "flags", number=False, data=runs.result(name))
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise ResultsError(f"{runs.run_dir(name) / RESULT}: key 'flags' must be a list of "
                           f"strings")
    return flags


def flags_column(base: Optional[str] = None, header: Optional[str] = None) -> Column:
    """The run's flags (``run_srl.py --flags``), or those it adds to or changes in the flags of
    the run ``base``."""
    def cell(runs, name):
        own = options(flags_of(runs, name))
        if base is not None:
            theirs = options(flags_of(runs, base))
            own = {k: v for k, v in own.items() if theirs.get(k) != v}
        text = " ".join(" ".join((k,) + v) for k, v in own.items())
        return f"`{text}`" if text else "(none)"

    return Column(header or ("flags" if base is None else f"flags added to {base}'s"), cell)


def _dev(key: str, digits: int = 2) -> Callable:
    return lambda runs, name: f"{runs.score(name).entry[key]:.{digits}f}"


P = Column("dev P", _dev("precision"))
R = Column("dev R", _dev("recall"))
F1 = Column("dev F1", _dev("f1"))
COUNTS = Column("correct / excess / missed", lambda runs, name: " / ".join(
    str(runs.score(name).entry[k]) for k in ("correct", "excess", "missed")))


def _archived(key: str, fmt: str) -> Callable:
    return lambda runs, name: format(archived_value(runs.run_dir(name) / RESULT, key,
                                              data=runs.result(name)), fmt)


MINUTES = Column("minutes (whole run)", _archived("minutes", ".1f"))
UPDATES = Column("updates", _archived("updates", ","))
BEST_UPDATE = Column("best dev F1 at (updates)", lambda runs, name: f"{_best(runs, name)[0]:,}")
MAX_GNORM = Column("max grad norm", lambda runs, name: _number(runs.train_max(name, "gnorm")))
TRAIN_ACCURACY = Column("train token accuracy (last logged)",
                        lambda runs, name: f"{runs.train_last(name, 'accuracy')[1]:.1f}")
SELECTION = Column("dev selection rate (last validation)", lambda runs, name: _last_sel(runs, name))


def _best(runs: SrlArchive, name: str) -> Tuple[int, float]:
    """(update, dev F1) of the run's validation with the highest dev F1 (the first of ties)."""
    values = runs.validations(name, "f1")
    best = max(values.values())
    return min(u for u, v in values.items() if v == best), best


def _number(value: float) -> str:
    if value >= 1e6:
        mantissa, exponent = f"{value:.1e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def _last_sel(runs: SrlArchive, name: str) -> str:
    try:
        values = runs.validations(name, "sel")
    except ResultsError:  # SAN: no selection, every pair attends
        return "1 (all pairs)"
    return f"{values[max(values)]:.2f}"


def f1_at(update: int) -> Column:
    return Column(f"dev F1 at {update:,} updates (curve)",
                  lambda runs, name: f"{runs.at(name, 'f1', update):.2f}")


def entropy_at(first: int, last: int) -> Column:
    def cell(runs, name):
        try:
            values = runs.validations(name, "pol_ent")
        except ResultsError:
            return ""
        return f"{values[first]:.3f} → {values[last]:.3f}" if first in values and \
            last in values else ""

    return Column(f"dev policy entropy ({first:,} → {last:,})", cell)


def archived_best_f1() -> Column:
    """dev F1 of the best checkpoint as ``result.json`` archived it (``dev_best``: runs that
    decode an average of checkpoints also score the best one; its predictions are not kept)."""
    def cell(runs, name):
        result = runs.result(name)
        if "dev_best" not in result:
            return f"{runs.score(name).entry['f1']:.2f}"
        return f"{archived_value(runs.run_dir(name) / RESULT, 'dev_best', 'f1', data=result):.2f}"

    return Column("dev F1, best checkpoint", cell)


def checkpoint_column() -> Column:
    def cell(runs, name):
        text = runs.result(name).get("checkpoint", "best")
        return text if isinstance(text, str) else "best"

    return Column("checkpoint decoded", cell)


# --------------------------------------------------------------------------- tables
def runs_table(runs: SrlArchive, rows: Sequence[Tuple[str, str]],
               columns: Sequence[Column]) -> str:
    """Markdown: one row per (label, run name), the given columns."""
    out = ["| run | " + " | ".join(c.header for c in columns) + " |",
           "|---|" + "---|" * len(columns)]
    for label, name in rows:
        out.append(f"| {label} | " + " | ".join(c.cell(runs, name) for c in columns) + " |")
    return "\n".join(out)


def seeds_table(runs: SrlArchive, rows: Sequence[Tuple[str, str]],
                per_run: Sequence[Column] = ()) -> str:
    """Markdown: one row per (label, run prefix): dev F1 of each seed, the seed means of P and
    R, F1 mean ± sd over seeds, then each ``per_run`` column's cells of the seeds, a / b / c."""
    groups = [(label, runs.group(prefix)) for label, prefix in rows]
    seeds = sorted({s for _, g in groups for s in g})
    headers = [f"seed {s}" for s in seeds] + ["dev P (mean)", "dev R (mean)",
                                              "dev F1, mean ± sd"] + [c.header for c in per_run]
    out = ["| runs | " + " | ".join(headers) + " |",
           "|---|" + "---|" * (len(seeds) + 3 + len(per_run))]
    for label, group in groups:
        scored = {s: runs.score(n).entry for s, n in group.items()}
        f1 = [scored[s]["f1"] for s in sorted(group)]
        cells = [f"{scored[s]['f1']:.2f}" if s in group else "" for s in seeds]
        cells += [f"{statistics.fmean(e['precision'] for e in scored.values()):.2f}",
                  f"{statistics.fmean(e['recall'] for e in scored.values()):.2f}",
                  mean_sd(f1)]
        for column in per_run:
            texts = [column.cell(runs, group[s]) for s in sorted(group)]
            cells.append("" if not any(texts) else texts[0] if len(set(texts)) == 1
                         else " / ".join(texts))
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def curve_table(runs: SrlArchive, rows: Sequence[tuple], updates: Sequence[int]) -> str:
    """Markdown: validations of runs at the given updates; ``rows`` are (label, run name,
    key of ``valid_KEY``, digits), e.g. ("san@1", "ch32lr2_san_s1", "f1", 1). A cell past the
    run's last validation is empty; a validation missing before it is an error."""
    out = ["| updates | " + " | ".join(f"{u:,}" for u in updates) + " |",
           "|---|" + "---|" * len(updates)]
    for label, name, key, digits in rows:
        last = max(runs.validations(name, key))
        out.append(f"| {label} | " + " | ".join(
            f"{runs.at(name, key, u):.{digits}f}" if u <= last else "" for u in updates) + " |")
    return "\n".join(out)


BREAKDOWNS = {"by_length": ("sentence length (words)", "sentences"),
              "by_distance": ("words between argument and predicate", "gold_arguments")}


def breakdown_table(runs: SrlArchive, rows: Sequence[Tuple[str, str]], key: str) -> str:
    """Markdown: dev F1 per bucket of ``key`` (``by_length``, ``by_distance``; ``srl.compare``),
    the mean over each run prefix's seeds that every row has, and the last row minus the first
    (the buckets have no test of their own); ``—``: a bucket without gold or predicted
    arguments in some run."""
    title, size = BREAKDOWNS[key]
    groups = [(label, runs.group(prefix)) for label, prefix in rows]
    seeds = sorted(set.intersection(*(set(g) for _, g in groups)))
    if not seeds:
        raise ResultsError(f"{', '.join(p for _, p in rows)}: no seed archived for every row")
    first = runs.score(groups[0][1][seeds[0]]).entry[key]
    out = [f"| {title} | " + " | ".join(f"{b['bucket']} (n={b[size]:,})" for b in first) + " |",
           "|---|" + "---|" * len(first)]
    means = []  # None: a bucket without gold or predicted arguments in some run
    for label, group in groups:
        buckets = [runs.score(group[s]).entry[key] for s in seeds]
        means.append([None if any(b[k]["correct"] + b[k]["excess"] + b[k]["missed"] == 0
                                  for b in buckets)
                      else statistics.fmean(b[k]["f1"] for b in buckets)
                      for k in range(len(first))])
        out.append(f"| {label} | " + " | ".join("—" if m is None else f"{m:.2f}"
                                               for m in means[-1]) + " |")
    out.append("| Δ | " + " | ".join("—" if a is None or b is None else f"{b - a:+.2f}"
                                     for a, b in zip(means[0], means[-1])) + " |")
    return "\n".join(out)
