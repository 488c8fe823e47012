"""Tables of the selector head-to-head (``examples/selectors``): a runner plan whose study trains
every selector and borrows the baseline and SSAN (``gumbel``) from the translation plan's
archive (``plan.Plan.archived_outputs`` finds a run's test outputs in whichever archive holds
them).

- :func:`selector_rows` / :func:`verdict_table`: per system its archived seeds, BLEU (recomputed
  from the hypotheses and checked against ``test.json``) and chrF, and against the study's
  baseline the seed-level test (Δ, its 95 % interval, p, Holm over the table's comparisons,
  the per-seed deltas), with the evaluation selection rate: ``valid_sel`` of the validation
  that chose ``checkpoint_best.pt`` (the lowest ``valid_loss`` of ``curve.jsonl``; between equal
  logged losses the later one, as fairseq keeps a new best on ``<=``), on the valid split, in
  evaluation mode (no sampling), as the selective criterion counts it;
- :func:`development_table` / :func:`carried_forward`: per system the validation loss of its
  best checkpoint over seeds, and the pre-registered rule that picks, from those validation
  losses alone (never the test set), the selectors that go on to the next pair;
- :func:`cost_table`: the committed outputs of ``benchmarks/bench_ssan.py --plan ... --json``
  (training words/s, teacher-forced scoring sentences/s, peak resident memory, each a ratio of
  the baseline's measured in the same invocation);
- :func:`selection_table`: each run's archived ``selection.json`` (``ssan-selection-stats``):
  key selection rate by word class and by word distance, pooled over layers and heads, then
  averaged over the seeds that have one; :func:`learnt_table`: what a selector learnt per head
  (entmax's alpha), from the same files.

Every function works on whatever is archived: no run, some, or all.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...errors import PipelineError
from ...analysis.report import DISTANCE_BUCKETS, WORD_CLASSES, distance_bucket
from ...stats.seed_groups import interim_label
from ..archive import relativize_text
from .archives import archive_json, archived_record, archived_value, curve_records
from .bench import PROCESS_MEASURES, layers_table_by_kind
from .blocks import ResultsError
from .translation import PAIR_LABELS, STUDY_LABELS, bleu_scorer, hypotheses_stats, test_reference
from .verdicts import (Comparison, apply_holm, corrected_header, corrected_interval, mean_sd,
                       power_table, seed_comparison, spread_ratio_table)

#: the measures of the cost table: those of the process table (label, key of bench_ssan.py's
#: medians, format) that the head-to-head's bench measures
COST_MEASURES = tuple(m for m in PROCESS_MEASURES
                      if m[1] in ("train_wps", "score_sps", "peak_rss_mib"))


def _study(plan, study: str):
    try:
        return plan.study(study)
    except PipelineError as err:
        raise ResultsError(str(err)) from None


def head_to_head_runs(plan, study: str, pair: str) -> Dict[str, Dict[int, Tuple[Path, str]]]:
    """{system: {seed: (archive directory, hypotheses file)}} of the study's archived runs on
    ``pair``, in the study's system order (borrowed runs from the other plan's archive)."""
    found: Dict[str, Dict[int, Tuple[Path, str]]] = {s: {} for s in _study(plan, study).systems}
    for run in plan.runs():
        if run.study.name == study and run.pair.name == pair:
            outputs = plan.archived_outputs(run)
            if outputs is not None:
                found[run.system.name][run.seed] = outputs
    return found


def best_validation(run_dir: Path) -> dict:
    """The validation record that chose ``checkpoint_best.pt``: the lowest ``valid_loss``, the
    later of equal ones (fairseq replaces its best on ``<=``)."""
    path = run_dir / "curve.jsonl"
    best, best_loss = None, math.inf
    for number, record in enumerate(curve_records(run_dir), 1):
        if record.get("kind") == "valid":
            loss = archived_record(path, number, record, "valid_loss")
            if loss <= best_loss:
                best, best_loss = record, loss
    if best is None:
        raise ResultsError(f"{path}: no validation record")
    return best


def evaluation_selection_rate(run_dir: Path) -> Optional[float]:
    """``valid_sel`` of :func:`best_validation`; None for a run that logs no selection."""
    record = best_validation(run_dir)
    if "valid_sel" not in record:
        return None
    try:
        rate = float(record["valid_sel"])
    except (TypeError, ValueError):
        rate = math.nan
    if not math.isfinite(rate):
        raise ResultsError(f"{run_dir / 'curve.jsonl'}: valid_sel {record['valid_sel']!r} is "
                           f"not a finite number")
    return rate


@dataclass
class SelectorRow:
    """One system of the head-to-head: its archived seeds and, against the baseline, the
    comparison (None with fewer than two seeds a side)."""

    system: str
    borrowed: Optional[str]  # "PLAN STUDY/SYSTEM" of the runs' source, or None
    seeds: List[int]
    bleu: List[float]
    chrf: List[float]
    selection: List[float]  # evaluation selection rate per seed that logs one
    comparison: Optional[Comparison] = None
    interim: Optional[str] = None  # seed_groups.interim_label while planned seeds are missing

    @property
    def verdict(self) -> str:
        """The comparison's verdict once this system and the baseline have their planned
        seeds; before, :attr:`interim` (the test is shown, the plan is read at its seeds)."""
        if self.comparison is None:
            return ""
        return self.interim or self.comparison.verdict


def selector_rows(plan, study: str, pair: str, table: str = "selectors",
                  n_samples: int = 1000, seed: int = 12345) -> List[SelectorRow]:
    """Every system of ``study`` on ``pair`` (the baseline first), with the seed-level test of
    each system against the baseline where both have two seeds or more; Holm over those."""
    found = head_to_head_runs(plan, study, pair)
    the_study = _study(plan, study)
    the_pair = plan.pairs[pair]
    base_name = the_study.systems[0]
    rows, comparisons = [], []
    score = stats_of = None
    if any(found.values()):
        ref = test_reference(the_pair)
        score = bleu_scorer(ref, the_pair.tgt)[1]
        stats_of = hypotheses_stats(ref, the_pair.tgt)
    for system in the_study.systems:
        runs = found[system]
        seeds = sorted(runs)
        for s in seeds:  # every run's BLEU recomputed and checked against its test.json
            stats_of(runs[s])
        borrow = the_study.borrow.get(system)
        row = SelectorRow(
            system=system, seeds=seeds,
            borrowed=None if borrow is None else f"{relativize_text(borrow.plan)} "
                                                 f"{borrow.study}/{borrow.system}",
            bleu=[archived_value(runs[s][0] / "test.json", "systems", 0, "bleu") for s in seeds],
            chrf=[archived_value(runs[s][0] / "test.json", "systems", 0, "chrf") for s in seeds],
            selection=[r for r in (evaluation_selection_rate(runs[s][0]) for s in seeds)
                       if r is not None])
        if system != base_name:
            row.comparison = seed_comparison(
                found[base_name], runs, stats_of, score, table=table,
                label=f"{STUDY_LABELS.get(study, study)} {PAIR_LABELS.get(pair, pair)}",
                system=system, baseline=base_name, n_samples=n_samples, seed=seed)
            if row.comparison is not None:
                comparisons.append(row.comparison)
        rows.append(row)
    apply_holm(comparisons)
    def planned(system):
        return len(planned_seeds(plan, study, pair, system))
    for row in rows[1:]:
        row.interim = interim_label(len(row.seeds), planned(row.system), len(rows[0].seeds),
                                    planned(base_name))
    return rows


def verdict_table(rows: Sequence[SelectorRow]) -> str:
    """Markdown, one row per system: its seeds, BLEU mean ± sd over seeds, chrF mean, Δ BLEU
    against the baseline with the seed-level 95 % interval (on the seeds both have, when the
    system's are among the baseline's) and its interval corrected over the table's tests, p,
    Holm-corrected p over the table, per-seed Δ, how many share Δ's sign, the verdict (:attr:`SelectorRow.verdict`: interim until the plan's
    seeds are in), and the evaluation selection rate (mean ± sd over seeds)."""
    tests = sum(r.comparison is not None for r in rows)
    out = [f"| system | seeds | BLEU mean ± sd | chrF mean | Δ BLEU vs baseline [95% interval, "
           f"seeds and sentences] | {corrected_header(tests)} | p (seeds) | p (Holm, {tests} "
           f"tests) | per-seed Δ | same sign | verdict | evaluation selection rate |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = f"{r.system} (borrowed: {r.borrowed})" if r.borrowed else r.system
        seeds = " ".join(str(s) for s in r.seeds) if r.seeds else "none yet"
        bleu = mean_sd(r.bleu)
        chrf = f"{np.mean(r.chrf):.2f}" if r.chrf else "—"
        if r.selection:
            sel = mean_sd(r.selection, 3)
        elif r.seeds and not r.selection:
            sel = "— (no selection: every pair)"
        else:
            sel = "—"
        c = r.comparison
        if c is None:
            cells = ["", "", "", "", "", "", ""] if r is rows[0] else \
                ["— (fewer than two seeds a side)", "", "", "", "", "", ""]
        else:
            res = c.result
            low, high = res.ci
            per_seed = " ".join(f"{d:+.2f}" for d in res.per_seed) if res.per_seed \
                else "unpaired"
            cells = [f"{res.delta:+.2f} [{low:+.2f}, {high:+.2f}]", corrected_interval(res, tests),
                     f"{res.p_value:.3g}", f"{c.p_holm:.3g}", per_seed,
                     f"{res.same_sign}/{len(res.per_seed)}" if res.per_seed else "",
                     r.verdict]
        out.append(f"| {name} | {seeds} | {bleu} | {chrf} | " + " | ".join(cells)
                   + f" | {sel} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- development
def planned_seeds(plan, study: str, pair: str, system: str) -> List[int]:
    """The seeds the plan runs (or borrows) for ``system`` in ``study`` on ``pair``."""
    return [run.seed for run in plan.runs() if run.study.name == study
            and run.pair.name == pair and run.system.name == system]


def development_losses(plan, study: str, pair: str) -> Dict[str, Dict[int, float]]:
    """{system: {seed: valid_loss of the checkpoint_best.pt validation}} of every archived run
    of ``study`` on ``pair`` (:func:`best_validation`; the pair's valid split, never its test
    set), in the study's system order."""
    return {system: {seed: float(best_validation(where)["valid_loss"])
                     for seed, (where, _) in sorted(runs.items())}
            for system, runs in head_to_head_runs(plan, study, pair).items()}


def carried_forward(plan, study: str, pair: str, keep: Sequence[str],
                    choose: int) -> Tuple[Optional[List[str]], List[str]]:
    """The pre-registered rule that picks which selectors go on to the next pair: ``keep``
    always, and of the other selectors (every system but the baseline and ``keep``) the
    ``choose`` with the lowest mean best validation loss over their seeds (ties: by name).
    Returns (the chosen systems, or None while a candidate lacks a planned seed; the
    candidates still missing seeds)."""
    the_study = _study(plan, study)
    unknown = sorted(set(keep) - set(the_study.systems))
    if unknown:
        raise ResultsError(f"study {study!r} has no system {', '.join(unknown)}")
    losses = development_losses(plan, study, pair)
    candidates = [s for s in the_study.systems[1:] if s not in keep]
    if choose > len(candidates):
        raise ResultsError(f"study {study!r}: cannot choose {choose} of {len(candidates)} "
                           f"candidates")
    missing = [s for s in candidates
               if set(planned_seeds(plan, study, pair, s)) - set(losses[s])]
    if missing:
        return None, missing
    ranked = sorted(candidates, key=lambda s: (float(np.mean(list(losses[s].values()))), s))
    return list(keep) + ranked[:choose], []


def check_carried_forward(plan, study: str, pair: str, keep: Sequence[str], choose: int,
                          next_study: str, also: Optional[Callable] = None) -> None:
    """ResultsError unless ``next_study`` runs, besides its baseline, what the rule carries
    forward: ``keep`` alone while :func:`carried_forward` waits for seeds, ``keep`` and the
    chosen selectors after (so the next pair's systems are never picked by hand).

    ``also``: a function of the plan and ``study`` returning systems the next study runs
    whatever the rule chooses (e.g. :func:`.everywhere.cross_alone_systems`); it must run them
    from the start, each defined exactly as derived (architecture, criterion and flags). The
    error for a missing one spells out its plan entry."""
    chosen, _ = carried_forward(plan, study, pair, keep, choose)
    expected = list(keep) if chosen is None else list(chosen)
    extra = [] if also is None else list(also(plan, study))
    expected += [system.name for system in extra]
    runs = _study(plan, next_study).systems[1:]
    state = ("has not chosen yet" if chosen is None
             else f"chose {', '.join(chosen[len(keep):])}")
    if set(runs) != set(expected):
        entries = "; ".join(f"{s.name!r}: {json.dumps(system_entry(s))}" for s in extra
                            if s.name not in plan.systems)
        raise ResultsError(f"study {next_study!r} runs {', '.join(runs) or 'its baseline alone'}; "
                           f"it must run {', '.join(expected)}: the rule of study {study!r} "
                           f"{state}" + (f" (plan systems to add: {entries})" if entries else ""))
    for system in extra:
        planned = plan.systems[system.name]
        if system_entry(planned) != system_entry(system):
            raise ResultsError(f"system {system.name!r} of study {next_study!r} is "
                               f"{json.dumps(system_entry(planned))}; the rule of study "
                               f"{study!r} ({state}) derives {json.dumps(system_entry(system))}")


def system_entry(system) -> dict:
    """A plan system's definition as its plan entry has it (what a derived system must match):
    architecture, criterion, flags, and whichever of warm_from / pairs / seeds it sets."""
    entry = {"arch": system.arch, "criterion": system.criterion, "flags": list(system.flags)}
    for key in ("warm_from", "pairs", "seeds"):
        if getattr(system, key) is not None:
            entry[key] = getattr(system, key)
    return entry


def development_table(plan, study: str, pair: str, keep: Sequence[str], choose: int) -> str:
    """Markdown, one row per system: its archived seeds and its best validation loss (mean ±
    sd over seeds, with the per-seed values), then the line that states what
    :func:`carried_forward` chooses, or which candidates it still waits for."""
    losses = development_losses(plan, study, pair)
    out = ["| system | seeds | best validation loss, mean ± sd | per seed |", "|---|---|---|---|"]
    for system, by_seed in losses.items():
        values = list(by_seed.values())
        out.append(f"| {system} | {' '.join(map(str, by_seed)) or 'none yet'} | "
                   f"{mean_sd(values, 3)} | {' '.join(f'{v:.3f}' for v in values)} |")
    chosen, missing = carried_forward(plan, study, pair, keep, choose)
    if chosen is None:
        out.append(f"\nThe rule chooses once every candidate has all its planned seeds; still "
                   f"missing seeds: {', '.join(missing)}.")
    else:
        out.append(f"\nCarried forward by the rule: {', '.join(chosen)}.")
    return "\n".join(out)


# --------------------------------------------------------------------------- cost
def cost_table(paths: Sequence[Path], systems: Sequence[str],
               measures: Sequence[Tuple[str, str, str]] = COST_MEASURES,
               where: str = "examples/selectors/bench/") -> str:
    """Markdown from ``benchmarks/bench_ssan.py --plan ... --json`` outputs, one block of rows
    per file: per system the medians of training words/s, teacher-forced scoring sentences/s
    and peak RSS, each with its ratio to the baseline of the same file, and the ratio of peak
    RSS above an idle ``import fairseq, ssan_plugin``. ``systems``: the order of the rows (the
    study's); a system a file did not measure gets no row. ``measures``: the columns (label,
    key of the medians, format), by default :data:`COST_MEASURES`; ``where``: the folder named
    when there is no file."""
    if not paths:
        return f"No cost archive yet: `{where}` holds no `bench_ssan.py --plan` JSON."
    out = ["| bench | system | " + " | ".join(f"{label} | / baseline"
                                               for label, _, _ in measures)
           + " | peak RSS above idle / baseline |", "|---|---|" + "---|---|" * len(measures)
           + "---|"]
    for path in paths:
        record = archive_json(path)
        measured = archived_value(path, "median", number=False, data=record)
        if not isinstance(measured, dict) or "baseline" not in measured:
            raise ResultsError(f"{path}: key 'median' must name the systems, 'baseline' among "
                               f"them")
        idle = archived_value(path, "idle_rss_mib", data=record)
        # a measure the file lacks (bench_ssan.py --modes without score_sps) is shown as —
        keys = [key for _, key, _ in measures if key in measured["baseline"]]
        base = {key: archived_value(path, "median", "baseline", key, data=record) for key in keys}
        corpus = archived_value(path, "corpus", number=False, data=record)
        pieces = archived_value(path, "mean_source_pieces", data=record)
        settings = record.get("settings") or {}
        budget = (f", {settings['repeats']} x {settings['updates']} updates"
                  if {"repeats", "updates"} <= set(settings) else "")
        label = f"{path.name} ({corpus}, {pieces:.1f} source pieces{budget})"
        for system in [s for s in systems if s in measured]:
            values = {key: archived_value(path, "median", system, key, data=record) for key in keys}
            cells = []
            for _, key, fmt in measures:
                cells += [fmt.format(values[key]), f"{values[key] / base[key]:.3f}"] \
                    if key in values else ["—", "—"]
            above = (values["peak_rss_mib"] - idle) / (base["peak_rss_mib"] - idle)
            out.append(f"| {label} | {system} | " + " | ".join(cells) + f" | {above:.3f} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- selection
def pooled_rates(path: Path) -> Dict[str, float]:
    """From one ``selection.json``: the key selection rate of each word class and distance
    bucket, selected / possible pairs summed over every layer and head (NaN where nothing was
    possible)."""
    data = archive_json(path)
    layers = archived_value(path, "layers", number=False, data=data)
    if not isinstance(layers, list):
        raise ResultsError(f"{path}: key 'layers' must be a list")
    sums = {name: [0.0, 0.0] for name in WORD_CLASSES}
    sums.update({label: [0.0, 0.0] for label, _, _ in DISTANCE_BUCKETS})
    for k, layer in enumerate(layers):
        by_class = archived_value(path, "layers", k, "keys", "by_class", number=False, data=data)
        for name in WORD_CLASSES:
            if name in by_class:
                sums[name][0] += archived_value(path, "layers", k, "keys", "by_class", name,
                                          "selected", data=data)
                sums[name][1] += archived_value(path, "layers", k, "keys", "by_class", name,
                                          "possible", data=data)
        distances = archived_value(path, "layers", k, "distance", number=False, data=data)
        for j, _ in enumerate(distances):
            d = archived_value(path, "layers", k, "distance", j, "distance", data=data)
            if d < 0:
                raise ResultsError(f"{path}: layers.{k}.distance.{j}: negative distance {d}")
            bucket = sums[distance_bucket(int(d))]
            bucket[0] += archived_value(path, "layers", k, "distance", j, "selected", data=data)
            bucket[1] += archived_value(path, "layers", k, "distance", j, "possible", data=data)
    return {name: s / p if p else float("nan") for name, (s, p) in sums.items()}


def selection_files(plan, study: str, pair: str) -> Dict[str, List[Tuple[int, Path]]]:
    """{system: [(seed, its archived selection.json)]} of the analysed runs of ``study`` on
    ``pair`` that have one, in plan order."""
    files: Dict[str, List[Tuple[int, Path]]] = {}
    for run in plan.runs():
        if run.study.name != study or run.pair.name != pair or not plan.analysed(run):
            continue
        path = plan.selection_file(run)
        if path is not None and path.is_file():
            files.setdefault(run.system.name, []).append((run.seed, path))
    return files


def selection_table(plan, study: str, pair: str) -> str:
    """Markdown, one row per analysed system with at least one archived ``selection.json``:
    the seeds analysed, the CoNLL file's sentences, and the mean over those seeds of
    :func:`pooled_rates`: keys by word class, content / function, and by word distance."""
    the_study = _study(plan, study)
    by_system = {system: [(seed, pooled_rates(path), int(archived_value(path, "n_sentences")))
                          for seed, path in files]
                 for system, files in selection_files(plan, study, pair).items()}
    if not by_system:
        return "No selection statistics archived yet."
    out = ["| system | seeds | sentences | keys: content | keys: function | keys: punctuation | "
           "content / function | " + " | ".join(f"distance {label}"
                                                for label, _, _ in DISTANCE_BUCKETS) + " |",
           "|---|---|---|---|---|---|---|" + "---|" * len(DISTANCE_BUCKETS)]

    def cell(values):
        values = [v for v in values if not math.isnan(v)]
        return f"{np.mean(values):.3f}" if values else "—"

    for system in the_study.systems:
        runs = sorted(by_system.get(system, []), key=lambda x: x[0])
        if not runs:
            continue
        rates = [r for _, r, _ in runs]
        ratio = [r["content"] / r["function"] for r in rates
                 if r["function"] and not math.isnan(r["content"] / r["function"])]
        out.append(f"| {system} | {' '.join(str(s) for s, _, _ in runs)} | "
                   f"{'/'.join(sorted({str(n) for _, _, n in runs}))} | "
                   + " | ".join(cell([r[c] for r in rates]) for c in WORD_CLASSES)
                   + f" | {f'{np.mean(ratio):.3f}' if ratio else '—'} | "
                   + " | ".join(cell([r[label] for r in rates])
                                for label, _, _ in DISTANCE_BUCKETS) + " |")
    return "\n".join(out)


def learnt_values(path: Path) -> Dict[str, Dict[int, List[float]]]:
    """From one ``selection.json``: {name: {0-based layer: one value per head}} of its
    ``learnt`` entry (what a selector learns per head, e.g. entmax's alpha; ``{}`` for a file
    without one, written before the entry existed or by a selector that learns none)."""
    data = archive_json(path)
    learnt = data.get("learnt", {}) if isinstance(data, dict) else {}
    if not isinstance(learnt, dict):
        raise ResultsError(f"{path}: key 'learnt' must map layers to values")
    out: Dict[str, Dict[int, List[float]]] = {}
    for layer, values in learnt.items():
        if not (isinstance(layer, str) and layer.isdigit()) or not isinstance(values, dict):
            raise ResultsError(f"{path}: learnt.{layer}: a 0-based layer with named values "
                               f"expected")
        for name, heads in values.items():
            if not isinstance(heads, list) or not heads:
                raise ResultsError(f"{path}: learnt.{layer}.{name} must be a non-empty list")
            out.setdefault(name, {})[int(layer)] = [
                archived_value(path, "learnt", layer, name, h, data=data)
                for h in range(len(heads))]
    return out


def learnt_table(plan, study: str, pair: str) -> str:
    """Markdown, one row per (system, learnt quantity, seed) of the archived ``selection.json``
    files with learnt values (:func:`learnt_values`), systems in the study's order: per layer
    the heads' values in increasing order, then the mean, min and max over every head; after a
    system's seeds, when there are several, a row over all of them (mean ± sd over every head
    of every seed, min, max)."""
    files = selection_files(plan, study, pair)
    groups: Dict[Tuple[str, str], List[Tuple[int, Dict[int, List[float]]]]] = {}
    for system in _study(plan, study).systems:
        for seed, path in sorted(files.get(system, [])):
            for name, layers in learnt_values(path).items():
                groups.setdefault((system, name), []).append((seed, layers))
    if not groups:
        return "No learnt selector values archived yet."
    depth = 1 + max(max(layers) for runs in groups.values() for _, layers in runs)
    out = ["| system | seeds | learnt | " + " | ".join(f"layer {k}: heads, increasing"
                                                       for k in range(depth))
           + " | mean over heads | min | max |", "|---|---|---|" + "---|" * (depth + 3)]

    def spread(values):
        return f"{np.min(values):.3f} | {np.max(values):.3f}"

    for (system, name), runs in groups.items():
        for seed, layers in runs:
            every = [v for heads in layers.values() for v in heads]
            cells = [" ".join(f"{v:.3f}" for v in sorted(layers[k])) if k in layers else "—"
                     for k in range(depth)]
            out.append(f"| {system} | {seed} | {name} | " + " | ".join(cells)
                       + f" | {np.mean(every):.3f} | {spread(every)} |")
        if len(runs) > 1:
            every = [v for _, layers in runs for heads in layers.values() for v in heads]
            out.append(f"| {system} | {' '.join(str(seed) for seed, _ in runs)} | {name} | "
                       + " | ".join(["(all seeds)"] * depth)
                       + f" | {mean_sd(every, 3)} | {spread(every)} |")
    return "\n".join(out)


def selector_power_table(rows: Sequence[SelectorRow]) -> str:
    """``verdicts.power_table`` of a verdict table's comparisons, with the power of each
    comparison's own seeds; none yet: a line saying so. Holm's family is every planned
    comparison (each system of ``rows`` but the first, the baseline), whether its seeds are in
    or not, so that power read while seeds come in is read at the level the verdicts will need."""
    comparisons = [r.comparison for r in rows if r.comparison is not None]
    if not comparisons:
        return "No comparison yet (two seeds a side are needed)."
    return power_table(comparisons, family=len(rows) - 1, with_power=True)


def selector_spread_table(rows: Sequence[SelectorRow]) -> str:
    """``verdicts.spread_ratio_table`` of a verdict table's comparisons (each system's seed
    spread against the baseline's on the same seeds); none yet: a line saying so."""
    comparisons = [r.comparison for r in rows if r.comparison is not None]
    if not comparisons:
        return "No comparison yet (two seeds a side are needed)."
    return spread_ratio_table(comparisons)


def selector_blocks(plan, study: str, pair: str, bench_dir: Path,
                    keep: Sequence[str] = ("gumbel",), choose: int = 2,
                    next_pair: Optional[Tuple[str, str]] = None) -> Dict[str, str]:
    """The generated blocks of ``examples/selectors/RESULTS.md``: ``selectors-verdicts``,
    ``selectors-power`` (:func:`selector_power_table`), ``selectors-spread``
    (:func:`selector_spread_table`), ``selectors-development``
    (:func:`development_table` with ``keep`` and ``choose``),
    ``selectors-cost`` (every ``*.json`` of ``bench_dir``), ``selectors-selection``,
    ``selectors-learnt`` (:func:`learnt_table`) and, once
    ``bench_dir/layers/bench_encoder_layers.csv`` exists (``bench_encoder_layers.py --kinds
    san,selectors``), ``selectors-layers``; with ``next_pair`` = (STUDY, PAIR), the study the
    chosen selectors go on to, also ``selectors-PAIR-verdicts``, ``selectors-PAIR-power`` and
    ``selectors-PAIR-selection`` (Holm over that table's own comparisons)."""
    systems = _study(plan, study).systems
    bench = sorted(Path(bench_dir).glob("*.json")) if Path(bench_dir).is_dir() else []
    rows = selector_rows(plan, study, pair)
    blocks = {"selectors-verdicts": verdict_table(rows),
              "selectors-power": selector_power_table(rows),
              "selectors-spread": selector_spread_table(rows),
              "selectors-development": development_table(plan, study, pair, keep, choose),
              "selectors-cost": cost_table(bench, systems),
              "selectors-selection": selection_table(plan, study, pair),
              "selectors-learnt": learnt_table(plan, study, pair)}
    if next_pair is not None:
        other_study, other_pair = next_pair
        check_carried_forward(plan, study, pair, keep, choose, other_study)
        other_rows = selector_rows(plan, other_study, other_pair)
        blocks[f"selectors-{other_pair}-verdicts"] = verdict_table(other_rows)
        blocks[f"selectors-{other_pair}-power"] = selector_power_table(other_rows)
        blocks[f"selectors-{other_pair}-selection"] = selection_table(plan, other_study,
                                                                      other_pair)
    layers = Path(bench_dir) / "layers" / "bench_encoder_layers.csv"
    if layers.is_file():
        blocks["selectors-layers"] = layers_table_by_kind(layers)
    return blocks
