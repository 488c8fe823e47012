"""The tables of ``examples/*/RESULTS.md``, regenerated from the committed run archives.

A RESULTS file holds generated blocks between two markers::

    <!-- begin generated: KEY -->
    ...
    <!-- end generated: KEY -->

``scripts/make_results.py`` recomputes every block it knows (:data:`BLOCKS`) from the archives
and the test references, and writes them in place (``--check``: fails when a committed block
differs from its regeneration; a test runs it). Prose around the blocks is written by hand and
must say nothing the blocks do not show.

Evidence, as everywhere in the project: the seed is the unit. Each comparison is the
seed-level test of ``significance.seed_level_test`` (per-seed deltas, the 95 % interval, p),
with Holm's correction over every comparison of the table the row is in; the pooled
sentence-level bootstrap, where shown, is labelled as describing the seeds at hand.
"""

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..stats.significance import holm, seed_level_test

ROOT = Path(__file__).resolve().parents[2]
BEGIN = "<!-- begin generated: {key} -->"
END = "<!-- end generated: {key} -->"
_BLOCK = re.compile(r"<!-- begin generated: (?P<key>[\w.-]+) -->\n.*?<!-- end generated: "
                    r"(?P=key) -->", re.S)


class ResultsError(ValueError):
    """An archive or a RESULTS file that does not hold what a table needs (one line)."""


# --------------------------------------------------------------------------- blocks
def block_keys(text: str) -> List[str]:
    return [m.group("key") for m in _BLOCK.finditer(text)]


def fill_blocks(text: str, blocks: Dict[str, str]) -> str:
    """``text`` with every generated block whose key is in ``blocks`` replaced (markers kept);
    a key of ``blocks`` without its markers in ``text`` is an error."""
    missing = [k for k in blocks if k not in block_keys(text)]
    if missing:
        raise ResultsError(f"no generated block for {', '.join(missing)} (add the markers "
                           f"{BEGIN.format(key=missing[0])} ... {END.format(key=missing[0])})")

    def replace(match):
        key = match.group("key")
        if key not in blocks:
            return match.group(0)
        return f"{BEGIN.format(key=key)}\n{blocks[key].rstrip()}\n{END.format(key=key)}"

    return _BLOCK.sub(replace, text)


# --------------------------------------------------------------------------- archives
def _archive_json(path: Path):
    """The JSON of an archived file; ResultsError naming the file when it cannot be read or
    parsed (a truncated or hand-edited archive)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path} cannot be read: {err}") from None
    try:
        return json.loads(text)
    except ValueError as err:
        raise ResultsError(f"{path} is not valid JSON ({err})") from None


def _archived(path: Path, *keys, number: bool = True, data=None):
    """``data`` (default: the JSON of ``path``) at ``keys`` (object keys and list indices),
    checked: every key present and, with ``number``, a finite-or-not number (not a bool);
    ResultsError naming the file and the key otherwise."""
    value = _archive_json(path) if data is None else data
    walked = []
    for key in keys:
        walked.append(str(key))
        present = (isinstance(value, list) and -len(value) <= key < len(value)
                   if isinstance(key, int) else isinstance(value, dict) and key in value)
        if not present:
            raise ResultsError(f"{path}: key {'.'.join(walked)!r} is missing")
        value = value[key]
    if number and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ResultsError(f"{path}: key {'.'.join(walked)!r} must be a number, found "
                           f"{value!r}")
    return value


def _archived_record(path: Path, number: int, record, key: str) -> float:
    """``record[key]`` of line ``number`` of a JSON-lines archive, as a number."""
    try:
        return float(record[key])
    except (KeyError, TypeError, ValueError):
        raise ResultsError(f"{path}:{number}: key {key!r} missing or not a number") from None


# --------------------------------------------------------------------------- comparisons
@dataclass
class Comparison:
    """One row of a verdict table: a group of seeds against its baseline group."""

    table: str  # rows of one table share Holm's correction
    label: str  # e.g. "pre-norm En-De"
    system: str
    baseline: str
    baseline_scores: List[float]
    system_scores: List[float]
    result: object  # significance.SeedLevelResult
    p_holm: Optional[float] = None
    extra: Dict[str, object] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        if self.p_holm is None:
            return ""
        if self.p_holm < 0.05:
            return "**better**" if self.result.delta > 0 else "**worse**"
        return "no difference shown"


def apply_holm(rows: Sequence[Comparison]) -> None:
    """Holm over the rows of each table (``Comparison.table``)."""
    for table in sorted({r.table for r in rows}):
        family = [r for r in rows if r.table == table]
        for row, adjusted in zip(family, holm([r.result.p_value for r in family])):
            row.p_holm = adjusted


def _mean_sd(values: Sequence[float]) -> str:
    return f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}" if len(values) > 1 else \
        f"{values[0]:.2f}"


def verdict_table(rows: Sequence[Comparison], metric: str = "BLEU") -> str:
    """Markdown: per comparison the seeds, both means ± sd over seeds, Δ with its seed-level
    95 % interval, p and Holm-corrected p, per-seed deltas, how many share the sign, the
    verdict."""
    out = [f"| comparison | system | seeds | baseline {metric} | system {metric} | Δ [95% "
           f"interval, seeds and sentences] | p (seeds) | p (Holm, {len(rows)} tests) | "
           f"per-seed Δ | same sign | verdict |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        res = r.result
        low, high = res.ci
        per_seed = " ".join(f"{d:+.2f}" for d in res.per_seed) if res.per_seed else "unpaired"
        sign = f"{res.same_sign}/{len(res.per_seed)}" if res.per_seed else ""
        out.append(f"| {r.label} | {r.system} | {len(r.system_scores)} | "
                   f"{_mean_sd(r.baseline_scores)} | {_mean_sd(r.system_scores)} | "
                   f"{res.delta:+.2f} [{low:+.2f}, {high:+.2f}] | {res.p_value:.3g} | "
                   f"{r.p_holm:.3g} | {per_seed} | {sign} | {r.verdict} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- power
def seeds_for_power(effect: float, sd_seed: float, var_sentence: float, alpha: float = 0.05,
                    power: float = 0.8, most: int = 200) -> Optional[int]:
    """Fewest paired seeds n (>= 2) for which the seed-level test detects a true difference
    ``effect`` with probability ``power`` at ``alpha`` (two-sided): t on n - 1 degrees of
    freedom, noncentrality ``effect / sqrt(sd_seed^2 / n + var_sentence)``. None: more than
    ``most``."""
    from scipy.stats import nct, t

    for n in range(2, most + 1):
        se = np.sqrt(sd_seed ** 2 / n + var_sentence)
        crit = t.ppf(1 - alpha / 2, n - 1)
        ncp = effect / se
        achieved = nct.sf(crit, n - 1, ncp) + nct.cdf(-crit, n - 1, ncp)
        if achieved >= power:
            return n
    return None


def power_table(rows: Sequence[Comparison], effects=(0.5, 1.0)) -> str:
    """Seeds needed per comparison, from its measured per-seed spread and sentence part."""
    head = " | ".join(f"seeds for {e:g} BLEU" for e in effects)
    out = [f"| comparison | system | seeds measured | sd of per-seed Δ | sentence part (se) | "
           f"{head} |", "|---|---|---|---|---|" + "---|" * len(effects)]
    for r in rows:
        res = r.result
        if not res.per_seed:
            continue
        sd = float(np.std(res.per_seed, ddof=1))
        cells = []
        for e in effects:
            n = seeds_for_power(e, sd, res.se_sentence ** 2)
            cells.append(str(n) if n is not None else "> 200")
        out.append(f"| {r.label} | {r.system} | {len(res.per_seed)} | {sd:.2f} | "
                   f"{res.se_sentence:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(out)


# --------------------------------------------------------------------------- translation
STUDY_LABELS = {"postnorm": "post-norm", "prenorm": "pre-norm"}
PAIR_LABELS = {"en-de": "En-De", "en-ro": "En-Ro", "en-ja": "En-Ja", "builtin": "built-in"}


@functools.lru_cache(maxsize=None)
def _bleu_scorer(ref_path: Path, tgt: str):
    """(per-sentence statistics of a hypothesis list, score function) for one test set, as
    ``ssan-evaluate-bleu`` scores it without a data-bin (the reference's language rules)."""
    from sacrebleu.metrics import BLEU

    from ..stats.significance import sacrebleu_score_fn, sacrebleu_stats
    from ..translation.languages import LanguageConfig, looks_segmented
    from ..translation.textio import read_lines

    raw = read_lines(ref_path)
    lang = LanguageConfig.create(tgt, looks_segmented(raw, tgt))
    refs = [lang.reference(x) for x in raw]
    bleu = BLEU(tokenize=lang.sacrebleu_tokenize())
    return (lambda hyps: sacrebleu_stats(bleu, hyps, refs)), sacrebleu_score_fn(bleu), len(refs)


@functools.lru_cache(maxsize=None)
def run_stats(run_dir: Path, hyp_name: str, ref: Path, tgt: str) -> np.ndarray:
    """Per-sentence BLEU statistics of an archived run's hypotheses (read and scored once per
    process), checked: one hypothesis per reference, and the BLEU its ``test.json`` archived
    recomputed exactly (the same scoring, or an error)."""
    from ..translation.textio import read_lines

    stats_of, score, n = _bleu_scorer(ref, tgt)
    hyps = read_lines(run_dir / hyp_name)
    if len(hyps) != n:
        raise ResultsError(f"{run_dir}: {len(hyps)} hypotheses for {n} references")
    stats = stats_of(hyps)
    recorded = _archived(run_dir / "test.json", "systems", 0, "bleu")
    computed = score(stats.sum(0))
    if abs(recorded - computed) > 1e-6:
        raise ResultsError(f"{run_dir}: BLEU {computed:.4f} recomputed, {recorded:.4f} archived")
    return stats


def _reference(pair) -> Path:
    ref = Path(pair.raw) / f"test.{pair.tgt}"
    if not ref.is_file():
        raise ResultsError(f"{ref}: the test reference is missing (the shared data)")
    return ref


def archived_runs(plan) -> Dict[tuple, Dict[str, Dict[int, Path]]]:
    """{(study, pair): {system: {seed: archived run directory}}} of a runner plan's archive."""
    archive = Path(plan.archive)
    found: Dict[tuple, Dict[str, Dict[int, Path]]] = {}
    for run in plan.runs():
        d = run.directory(archive)
        if (d / "test.json").is_file() and (d / run.hyp_name).is_file():
            found.setdefault((run.study.name, run.pair.name), {}).setdefault(
                run.system.name, {})[run.seed] = d
    return found


def translation_comparisons(plan, table: str, n_samples: int = 1000,
                            seed: int = 12345) -> List[Comparison]:
    """Every (study, pair, system) of a plan's archive against the study's baseline, seed
    level, with two seeds or more a side (:func:`run_stats` checks each run's BLEU)."""
    rows = []
    for (study_name, pair_name), by_system in archived_runs(plan).items():
        study = next(s for s in plan.studies if s.name == study_name)
        pair = plan.pairs[pair_name]
        ref = _reference(pair)
        score = _bleu_scorer(ref, pair.tgt)[1]

        def stats(system, s):
            return run_stats(by_system[system][s], f"{system}@{s}.test.{pair.tgt}", ref,
                             pair.tgt)

        base_name = study.systems[0]
        base_seeds = sorted(by_system.get(base_name, {}))
        for system in study.systems[1:]:
            sys_seeds = sorted(by_system.get(system, {}))
            if len(base_seeds) < 2 or len(sys_seeds) < 2:
                continue
            result = seed_level_test([stats(base_name, s) for s in base_seeds],
                                     [stats(system, s) for s in sys_seeds], score,
                                     [str(s) for s in base_seeds], [str(s) for s in sys_seeds],
                                     n_samples, seed)
            paired_base = [int(s) for s in result.baseline_seeds]
            rows.append(Comparison(
                table=table, label=f"{STUDY_LABELS.get(study_name, study_name)} "
                                   f"{PAIR_LABELS.get(pair_name, pair_name)}",
                system=system, baseline=base_name,
                baseline_scores=[score(stats(base_name, s).sum(0)) for s in paired_base],
                system_scores=[score(stats(system, s).sum(0)) for s in sys_seeds],
                result=result))
    apply_holm(rows)
    return rows


# --------------------------------------------------------------------------- stability
def _curve(run_dir: Path) -> List[dict]:
    path = run_dir / "curve.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path} cannot be read: {err}") from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError as err:
            raise ResultsError(f"{path}:{number} is not valid JSON ({err})") from None
        if not isinstance(record, dict):
            raise ResultsError(f"{path}:{number}: expected a JSON object")
        records.append(record)
    return records


def first_validation(run_dir: Path) -> Dict[str, float]:
    """The first validation record of a run: ``update``, ``loss`` and the per-layer selection
    rates ``sel_0``, ``sel_1``, ... (absent for a run without selection)."""
    path = run_dir / "curve.jsonl"
    for number, record in enumerate(_curve(run_dir), 1):
        if record.get("kind") == "valid":
            out = {"update": int(_archived_record(path, number, record, "valid_num_updates")),
                   "loss": _archived_record(path, number, record, "valid_loss")}
            out.update({k[len("valid_"):]: _archived_record(path, number, record, k)
                        for k in record if re.fullmatch(r"valid_sel_\d+", k)})
            return out
    raise ResultsError(f"{run_dir}: no validation record in curve.jsonl")


@dataclass
class SeedSpread:
    """One system's seeds: test BLEU, best valid loss, the first validation's selection."""

    system: str
    seeds: List[int]
    bleu: List[float]
    valid_loss: List[float]
    first_sel: List[Dict[str, float]]
    max_gnorm: List[float]  # per seed, the largest logged gradient norm (interval means)

    def sd(self, values: Sequence[float]) -> float:
        return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def seed_spreads(plan, study: str, pair: str) -> List[SeedSpread]:
    """Every system of ``study`` on ``pair`` in the plan's archive, seeds ascending."""
    runs = archived_runs(plan).get((study, pair), {})
    out = []
    for system in next(s for s in plan.studies if s.name == study).systems:
        by_seed = runs.get(system, {})
        if not by_seed:
            continue
        seeds = sorted(by_seed)
        bleu, loss, sel, gnorm = [], [], [], []
        for s in seeds:
            d = by_seed[s]
            bleu.append(_archived(d / "test.json", "systems", 0, "bleu"))
            loss.append(_archived(d / "train.json", "best_valid_loss"))
            sel.append(first_validation(d))
            norms = [_archived_record(d / "curve.jsonl", k, r, "gnorm")
                     for k, r in enumerate(_curve(d), 1)
                     if r.get("kind") != "valid" and "gnorm" in r]
            if not norms:
                raise ResultsError(f"{d / 'curve.jsonl'}: no training record with 'gnorm'")
            gnorm.append(max(norms))
        out.append(SeedSpread(system, seeds, bleu, loss, sel, gnorm))
    return out


def spread_table(spreads: Sequence[SeedSpread]) -> str:
    """Markdown: per system its seeds' BLEU and best valid loss (each seed, mean ± sd, sd as a
    multiple of the baseline's, the first system), at the first validation the lowest
    selection rate of any layer over the seeds, and each seed's largest logged gradient norm
    (a mean over a log interval, before clipping)."""
    base = spreads[0]
    out = ["| system | seeds | test BLEU per seed | BLEU mean ± sd | sd / baseline sd | "
           "best valid loss mean ± sd | loss sd / baseline sd | first validation: lowest "
           "layer selection rate over seeds | largest gradient norm per seed |",
           "|---|---|---|---|---|---|---|---|---|"]
    for s in spreads:
        ratio = s.sd(s.bleu) / base.sd(base.bleu) if base.sd(base.bleu) > 0 else float("nan")
        loss_ratio = (s.sd(s.valid_loss) / base.sd(base.valid_loss)
                      if base.sd(base.valid_loss) > 0 else float("nan"))
        rates = [min(v for k, v in f.items() if k.startswith("sel_")) for f in s.first_sel
                 if any(k.startswith("sel_") for k in f)]
        first = (f"{min(rates):.2f} (update {s.first_sel[0]['update']})" if rates else
                 "— (no selection)")
        out.append(f"| {s.system} | {len(s.seeds)} | " + " ".join(f"{b:.2f}" for b in s.bleu)
                   + f" | {np.mean(s.bleu):.2f} ± {s.sd(s.bleu):.2f} | {ratio:.2f} | "
                   f"{np.mean(s.valid_loss):.3f} ± {s.sd(s.valid_loss):.3f} | {loss_ratio:.2f} "
                   f"| {first} | " + " ".join(f"{g:.3g}" for g in s.max_gnorm) + " |")
    return "\n".join(out)


def runs_table(plan) -> str:
    """Markdown: every archived run of a plan (study, pair, system, seed order): BLEU, chrF,
    best valid loss, validation selection rate, and against the same seed's baseline the
    difference and the sentence-level paired bootstrap p (it describes that seed only)."""
    from ..stats.significance import paired_bootstrap

    out = ["| study, pair | run | BLEU | chrF | Δ vs same-seed baseline | p (sentences, this "
           "seed) | best valid loss | valid selection rate |", "|---|---|---|---|---|---|---|---|"]
    found = archived_runs(plan)
    for study in plan.studies:
        for pair in study.pairs:
            by_system = found.get((study.name, pair), {})
            base_name = study.systems[0]
            base = by_system.get(base_name, {})
            tgt = plan.pairs[pair].tgt
            for system in study.systems:
                for seed, d in sorted(by_system.get(system, {}).items()):
                    test = _archive_json(d / "test.json")
                    entry = {key: _archived(d / "test.json", "systems", 0, key, data=test)
                             for key in ("bleu", "chrf")}
                    summary = _archive_json(d / "train.json")
                    _archived(d / "train.json", "best_valid_loss", data=summary)
                    delta = p = ""
                    if system != base_name and seed in base:
                        b = {"bleu": _archived(base[seed] / "test.json", "systems", 0, "bleu")}
                        delta = f"{entry['bleu'] - b['bleu']:+.2f}"
                        ref = _reference(plan.pairs[pair])
                        result = paired_bootstrap(
                            run_stats(base[seed], f"{base_name}@{seed}.test.{tgt}", ref, tgt),
                            run_stats(d, f"{system}@{seed}.test.{tgt}", ref, tgt),
                            _bleu_scorer(ref, tgt)[1])
                        p = "identical" if result.identical else f"{result.p_value:.3f}"
                    sel = summary.get("sel")
                    out.append(f"| {STUDY_LABELS.get(study.name, study.name)} "
                               f"{PAIR_LABELS.get(pair, pair)} | {system}@{seed} | "
                               f"{entry['bleu']:.2f} | {entry['chrf']:.2f} | {delta} | {p} | "
                               f"{summary['best_valid_loss']:.3f} | "
                               f"{'1 (all pairs)' if sel is None else f'{float(sel):.3f}'} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- SRL
def srl_gold_props(dev_conll: Path, dest: Path) -> Path:
    """The gold props of a CoNLL-2012 dev file, as ``ssan-prepare-srl`` writes them
    (``valid.props``): one column per proposition, in column order."""
    from ..srl.conll2012 import read_conll2012
    from ..srl.props import write_props

    sentences = read_conll2012(str(dev_conll))
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_props(str(dest), ((s.targets(), [list(p.tags) for p in s.propositions])
                            for s in sentences))
    return dest


def srl_comparisons(archive: Path, gold_props: Path,
                    specs: Sequence[tuple], table: str = "srl", n_samples: int = 1000,
                    seed: int = 12345) -> List[Comparison]:
    """Seed-level dev F1 comparisons of ``run_srl.py``'s archive: ``specs`` are
    (label, baseline run prefix, system run prefix), a prefix ``CONFIG_ENCODER`` whose runs are
    ``PREFIX_sSEED/dev.pred.props.gz``; paired by seed; Holm over the specs."""
    from ..srl.compare import f1_score, read_checked, score_system

    gold = read_checked(str(gold_props), "--gold-props", f"--gold-props {gold_props}")

    def runs(prefix):
        found = {}
        for d in sorted(archive.glob(f"{prefix}_s*")):
            if (d / "result.json").is_file() and re.fullmatch(rf"{re.escape(prefix)}_s\d+", d.name):
                found[int(d.name.rsplit("_s", 1)[1])] = d / "dev.pred.props.gz"
        return found

    cache: Dict[Path, tuple] = {}

    def scored(path: Path):
        if path not in cache:
            pred = read_checked(str(path), "--pred-props", f"--pred-props {path}")
            s = score_system(gold, path.parent.name, pred)
            cache[path] = (s.stats, s.entry["f1"])
        return cache[path]

    rows = []
    for label, base_prefix, sys_prefix in specs:
        base, sys_ = runs(base_prefix), runs(sys_prefix)
        if len(base) < 2 or len(sys_) < 2:
            raise ResultsError(f"{label}: fewer than two archived seeds of {base_prefix} or "
                               f"{sys_prefix} in {archive}")
        b_seeds, s_seeds = sorted(base), sorted(sys_)
        result = seed_level_test([scored(base[s])[0] for s in b_seeds],
                                 [scored(sys_[s])[0] for s in s_seeds], f1_score,
                                 [str(s) for s in b_seeds], [str(s) for s in s_seeds],
                                 n_samples, seed)
        paired = [int(s) for s in result.baseline_seeds]
        rows.append(Comparison(table=table, label=label, system=sys_prefix,
                               baseline=base_prefix,
                               baseline_scores=[scored(base[s])[1] for s in paired],
                               system_scores=[scored(sys_[s])[1] for s in s_seeds],
                               result=result))
    apply_holm(rows)
    return rows
