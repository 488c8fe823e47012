"""Tables of selection at every attention (``examples/everywhere``): the selector head-to-head's
tables (:mod:`.selectors`: verdicts with the seed-level test and Holm, the development losses
and the rule that carries systems to En-Ro, the cost) plus its own:

- :func:`site_rates_table`: per system, the evaluation selection rate of each site (encoder,
  decoder self-attention, cross attention): the mean over the site's layers of ``valid_sel_L``
  (``L`` = ``3``, ``dec3``, ``cross3``) in the validation record that chose
  ``checkpoint_best.pt``, averaged over seeds;
- :func:`alignment_table`: per system of an aligned pair, the AER (and precision, recall) of its
  runs' archived ``alignment.MAP.json`` (``ssan-align``: the rule fixed in advance, and the
  held-apart choice of reading and layer), mean ± sd over seeds, with the statistical peer
  (eflomal, mean ± sd over its runs) and the diagonal reference (no training) beside;
- :func:`gold_words_table`: per side of the gold set, how the training text writes its words
  (the peer's ``gold_words``: never seen there, written there mostly with other diacritics);
- :func:`alignment_rows` / :func:`alignment_verdict_table`: per system and map, its AER against
  the baseline's attention weights with the seed-level test (paired by seed, on the per-sentence
  link counts each archive keeps), Holm over the table, for the rule fixed in advance and the
  held-apart choice;
- :func:`reference_rows`: the diagonal reference's AER (one deterministic run, each direction)
  against the baseline's attention weights, with the seed-level test (the reference paired with
  every baseline seed), Holm over the directions (shown by :func:`alignment_verdict_table`);
- :func:`site_cost_goal_table`: per selector and site of the cost bench, its ratios to the
  baseline against the cost goal (speed at least ``SPEED_GOAL`` of the baseline's, memory at
  most ``MEMORY_GOAL`` times);
- :func:`steps_goal_table`: the same training reading for every system of a paired-steps bench
  (the native kernel's);
- :func:`cross_alone_systems`: the systems En-Ro runs besides the baseline and the rule's two
  choices, every selector of the pre-norm study at the cross site alone (checked by
  :func:`.selectors.check_carried_forward`).

Every function works on whatever is archived: no run, some, or all.
"""

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...stats.seed_groups import interim_label
from ...translation.alignment import COUNTS, scores_of_counts
from ..plan import System
from .archives import archive_json, archived_value
from .blocks import ResultsError
from .selectors import _study, best_validation, head_to_head_runs, system_entry
from .verdicts import (Comparison, apply_holm, corrected_header, corrected_interval, mean_sd,
                       seed_comparison)

#: the sites of a layer label's prefix, in table order
SITE_OF_PREFIX = (("cross", "cross attention"), ("dec", "decoder self-attention"),
                  ("", "encoder self-attention"))
SITES = tuple(label for _, label in reversed(SITE_OF_PREFIX))
RATE_KEY = re.compile(r"^valid_sel_((?:dec|cross)?\d+)$")
#: the cost goal of selection at every site: training and decoding speed at least this
#: fraction of the baseline's, peak memory (above an idle import) at most this many times
SPEED_GOAL, MEMORY_GOAL = 0.9, 1.3
#: the bench systems' suffixes (``gumbel_decoder``, ...) and the sites they select at
BENCH_SITES = (("decoder", "decoder self-attention"), ("cross", "cross attention"),
               ("all", "every site"))


def site_of(label: str) -> str:
    for prefix, site in SITE_OF_PREFIX:
        if label.startswith(prefix) and label[len(prefix):].isdigit():
            return site
    raise ResultsError(f"not a layer label: {label!r}")


def site_rates(run_dir: Path) -> Dict[str, float]:
    """{site: mean valid_sel_L over its layers} of the validation that chose the best
    checkpoint; sites without a selective layer are absent."""
    record = best_validation(run_dir)
    by_site: Dict[str, List[float]] = {}
    for key, value in record.items():
        match = RATE_KEY.match(key)
        if match:
            rate = float(value)
            if not np.isfinite(rate):
                raise ResultsError(f"{run_dir / 'curve.jsonl'}: {key} {value!r} is not a finite number")
            by_site.setdefault(site_of(match.group(1)), []).append(rate)
    return {site: float(np.mean(rates)) for site, rates in by_site.items()}


def site_rates_table(plan, study: str, pair: str) -> str:
    """Markdown, one row per system of ``study`` on ``pair``: its seeds and, per site, the
    evaluation selection rate (mean ± sd over seeds; — where the site does not select)."""
    out = ["| system | seeds | " + " | ".join(SITES) + " |", "|---|---|" + "---|" * len(SITES)]
    for system, runs in head_to_head_runs(plan, study, pair).items():
        per_seed = [site_rates(where) for _, (where, _) in sorted(runs.items())]
        cells = [mean_sd([rates[site] for rates in per_seed if site in rates], 3) for site in SITES]
        seeds = " ".join(map(str, sorted(runs))) or "none yet"
        out.append(f"| {system} | {seeds} | " + " | ".join(cells) + " |")
    return "\n".join(out)


SCORES = ("aer", "precision", "recall")


def rule_scores(path: Path) -> Dict[str, float]:
    """AER, precision and recall of the rule's reading and layer of one ``alignment.MAP.json``."""
    record = archive_json(path)
    keys = alignment_entry(path, "rule", record)
    layers = archived_value(path, *keys[:2], number=False, data=record)
    if not isinstance(layers, list) or not 0 <= keys[2] < len(layers):
        raise ResultsError(f"{path}: key 'rule_layer' {keys[2]!r} is not one of its layers")
    return {key: archived_value(path, *keys, key, data=record) for key in SCORES}


def held_apart_scores(path: Path) -> Tuple[Dict[str, float], List[str]]:
    """AER, precision and recall of the held-apart choice of one ``alignment.MAP.json``, and its
    choices as ``READING LAYER`` (one a fold)."""
    record = archive_json(path)
    scores = {key: archived_value(path, "held_apart", key, data=record) for key in SCORES}
    choices = archived_value(path, "held_apart", "choices", number=False, data=record)
    named = [f"{archived_value(path, 'held_apart', 'choices', k, 'reading', number=False, data=record)} "
             f"{int(archived_value(path, 'held_apart', 'choices', k, 'layer', data=record))}"
             for k in range(len(choices))]
    return scores, named


#: the aligners ``ssan-align`` scores beside a model (its JSON's ``peer``) and their label in the
#: table
PEERS = {"eflomal": "eflomal (peer)", "diagonal": "diagonal (reference, no training)"}


def alignment_table(plan, study: str, pair: str, peers: Sequence[Path] = (),
                    maps: Sequence[str] = ("weights", "selection")) -> str:
    """Markdown, one row per system and map of ``study`` on ``pair`` with archived alignments:
    AER, precision and recall (percent, mean ± sd over seeds) of the rule fixed in advance and
    of the held-apart choice (with how often each reading and layer was chosen, over folds and
    seeds); then, per archived file of ``peers`` (``ssan-align --eflomal-train``'s or
    ``--diagonal``'s JSON), its directions (mean ± sd over its runs)."""
    out = ["| aligner | map | seeds (runs) | AER | precision | recall | held-apart AER | precision "
           "| recall | chosen (folds) |", "|---|---|---|---|---|---|---|---|---|---|"]
    archive = Path(plan.archive) if plan.archive else None
    for run_system in _study(plan, study).systems:
        for kind in maps:
            rule, held, chosen, seeds = [], [], Counter(), []
            for run in plan.runs():
                if (run.study.name, run.pair.name, run.system.name) != (study, pair, run_system):
                    continue
                path = plan.alignment_file(run, kind) if archive else None
                if path is not None and path.is_file():
                    rule.append(rule_scores(path))
                    scores, named = held_apart_scores(path)
                    held.append(scores)
                    chosen.update(named)
                    seeds.append(run.seed)
            if rule:
                cells = [mean_sd([100 * s[key] for s in runs], 1) for runs in (rule, held) for key in SCORES]
                choices = ", ".join(f"{name} ×{count}" for name, count in sorted(chosen.items()))
                out.append(f"| {run_system} | {kind} | {' '.join(map(str, seeds))} | "
                           + " | ".join(cells) + f" | {choices} |")
    for peer in (p for p in peers if Path(p).is_file()):
        record = archive_json(peer)
        name = archived_value(peer, "peer", number=False, data=record)
        if name not in PEERS:
            raise ResultsError(f"{peer}: key 'peer' {name!r} is not one of {sorted(PEERS)}")
        runs = int(archived_value(peer, "runs", data=record))
        for k, _ in enumerate(archived_value(peer, "directions", number=False, data=record)):
            direction = archived_value(peer, "directions", k, "direction", number=False, data=record)
            cells = [mean_sd([100 * v for v in archived_value(peer, "directions", k, f"{key}_runs",
                                                               number=False, data=record)], 1)
                     for key in SCORES]
            out.append(f"| {PEERS[name]} | {direction} | ({runs} run{'s' if runs > 1 else ''}) | "
                       + " | ".join(cells) + " | — | — | — | — |")
    if len(out) == 2:
        return "No alignment archived yet."
    return "\n".join(out)


def gold_words_table(peer: Path) -> str:
    """Markdown, one row per side of the peer's gold set (``ssan-align --eflomal-train``'s
    ``gold_words``): its tokens, the share never seen as written in the training text, and the
    share the training text writes mostly with other diacritics (with its commonest words)."""
    if not Path(peer).is_file():
        return "No peer archived yet."
    record = archive_json(peer)
    out = ["| side | gold tokens | never in the training text as written | written there mostly "
           "with other diacritics | commonest of those |", "|---|---|---|---|---|"]
    for lang in archived_value(peer, "gold_words", number=False, data=record):
        tokens, unseen, other = (int(archived_value(peer, "gold_words", lang, key, data=record))
                                 for key in ("tokens", "unseen", "other_marks"))
        examples = archived_value(peer, "gold_words", lang, "other_marks_examples", number=False,
                                  data=record)
        share = (lambda n: f"{n} ({100 * n / tokens:.1f} %)") if tokens else str
        out.append(f"| {lang} | {tokens} | {share(unseen)} | {share(other)} | "
                   + (", ".join(f"{word} ×{count}" for word, count in examples) or "—") + " |")
    return "\n".join(out)


#: the alignments of an archive the verdicts compare: (key, label)
ALIGNMENT_READINGS = (("rule", "rule fixed in advance"), ("held_apart", "held-apart choice"))


def alignment_entry(path: Path, which: str, record: Optional[dict] = None) -> tuple:
    """The keys in ``alignment.MAP.json`` of its ``which`` (ALIGNMENT_READINGS) alignment."""
    record = archive_json(path) if record is None else record
    if which == "held_apart":
        return ("held_apart",)
    reading = archived_value(path, "rule_reading", number=False, data=record)
    return ("readings", reading, int(archived_value(path, "rule_layer", data=record)))


def aer_score(totals) -> float:
    """AER in percent of link counts summed over sentences (translation/alignment.COUNTS)."""
    return 100 * scores_of_counts(list(totals)).aer


def aer_counts(path: Path, which: str) -> np.ndarray:
    """(sentences, 5) link counts of ``path``'s ``which`` alignment, checked against its
    archived AER."""
    record = archive_json(path)
    keys = alignment_entry(path, which, record)
    counts = np.asarray(archived_value(path, *keys, "sentence_counts", number=False, data=record),
                        dtype=float)
    if counts.ndim != 2 or counts.shape[1] != len(COUNTS) or not len(counts):
        raise ResultsError(f"{path}: {'/'.join(map(str, keys))} sentence_counts is not one row of "
                           f"{len(COUNTS)} counts a sentence")
    archived = 100 * archived_value(path, *keys, "aer", data=record)
    if abs(aer_score(counts.sum(0)) - archived) > 1e-6:
        raise ResultsError(f"{path}: {'/'.join(map(str, keys))} sentence_counts give AER "
                           f"{aer_score(counts.sum(0)):.4f}, the archive says {archived:.4f}")
    return counts


@dataclass
class AlignmentRow:
    """One system and map of an aligned pair for one of ALIGNMENT_READINGS: its seeds' AER
    (percent) and, against the baseline's attention weights, the comparison."""

    reading: str
    system: str
    map: str
    seeds: List[int]
    aer: List[float]
    comparison: Optional[Comparison] = None
    interim: Optional[str] = None
    baseline: bool = False  # the baseline's weights: what the others are tested against

    @property
    def verdict(self) -> str:
        if self.comparison is None:
            return ""
        return self.interim or self.comparison.verdict


def archived_alignments(plan, study: str, pair: str, system: str, kind: str) -> Dict[int, Path]:
    """{seed: the archived ``alignment.KIND.json``} of ``system``'s runs of ``study`` on
    ``pair``."""
    found = {}
    if not plan.archive:
        return found
    for run in plan.runs():
        if (run.study.name, run.pair.name, run.system.name) == (study, pair, system):
            path = plan.alignment_file(run, kind)
            if path is not None and path.is_file():
                found[run.seed] = path
    return found


def alignment_rows(plan, study: str, pair: str, maps: Sequence[str] = ("weights", "selection"),
                   n_samples: int = 1000, seed: int = 12345) -> List[AlignmentRow]:
    """Per reading of ALIGNMENT_READINGS, every system and map of ``study`` on ``pair`` with
    archived alignments; each but the baseline's weights tested against the baseline's weights
    where both have two seeds (lower AER is better); Holm over all the tests."""
    the_study = _study(plan, study)
    base_name = the_study.systems[0]

    def archived(system: str, kind: str) -> Dict[int, Path]:
        return archived_alignments(plan, study, pair, system, kind)

    def planned(system: str) -> int:
        return sum(1 for run in plan.runs()
                   if (run.study.name, run.pair.name, run.system.name) == (study, pair, system))

    counted: Dict[Tuple[Path, str], np.ndarray] = {}  # each archive read and checked once

    def counts_of(path: Path, which: str) -> np.ndarray:
        if (path, which) not in counted:
            counted[path, which] = aer_counts(path, which)
        return counted[path, which]

    rows, comparisons = [], []
    base_runs = archived(base_name, "weights")
    for which, label in ALIGNMENT_READINGS:
        for system in the_study.systems:
            for kind in maps:
                runs = archived(system, kind)
                if not runs:
                    continue
                row = AlignmentRow(label, system, kind, sorted(runs),
                                   [aer_score(counts_of(runs[s], which).sum(0)) for s in sorted(runs)],
                                   baseline=(system, kind) == (base_name, "weights"))
                if not row.baseline:
                    row.comparison = seed_comparison(
                        base_runs, runs, lambda path, which=which: counts_of(path, which), aer_score,
                        table="alignment", label=label, system=f"{system} ({kind})",
                        baseline=f"{base_name} (weights)", n_samples=n_samples, seed=seed,
                        higher_is_better=False)
                    if row.comparison is not None:
                        comparisons.append(row.comparison)
                    row.interim = interim_label(len(runs), planned(system), len(base_runs),
                                                planned(base_name))
                rows.append(row)
    apply_holm(comparisons)
    return rows


def alignment_verdict_table(rows: Sequence[AlignmentRow]) -> str:
    """Markdown, one row per reading, system and map: seeds, AER mean ± sd over seeds, Δ AER
    against the baseline's attention weights with the seed-level 95 % interval, p, Holm p over
    the table, per-seed Δ, how many share Δ's sign, the verdict (lower AER is better; interim
    until the plan's seeds are in)."""
    if not rows:
        return "No alignment archived yet."
    tests = sum(r.comparison is not None for r in rows)
    out = [f"| alignment | aligner | map | seeds | AER mean ± sd | Δ AER vs the baseline's weights "
           f"[95% interval, seeds and sentences] | {corrected_header(tests)} | p (seeds) | "
           f"p (Holm, {tests} tests) | per-seed Δ | same sign | verdict |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r.comparison
        if c is None:
            cells = ["", "", "", "", "", "", ""] if r.baseline \
                else ["— (fewer than two seeds a side)", "", "", "", "", "", ""]
        else:
            res = c.result
            low, high = res.ci
            per_seed = " ".join(f"{d:+.1f}" for d in res.per_seed) if res.per_seed else "unpaired"
            cells = [f"{res.delta:+.1f} [{low:+.1f}, {high:+.1f}]",
                     corrected_interval(res, tests, 1), f"{res.p_value:.3g}", f"{c.p_holm:.3g}",
                     per_seed,
                     f"{res.same_sign}/{len(res.per_seed)}" if res.per_seed else "", r.verdict]
        out.append(f"| {r.reading} | {r.system} | {r.map} | {' '.join(map(str, r.seeds))} | "
                   f"{mean_sd(r.aer, 1)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def reference_counts(path: Path, k: int) -> np.ndarray:
    """(sentences, 5) link counts of direction ``k`` of a peer's or the diagonal's archive
    (``ssan-align --diagonal`` / ``--eflomal-train``: its first run's), checked against that
    run's archived AER."""
    record = archive_json(path)
    counts = np.asarray(archived_value(path, "directions", k, "sentence_counts", number=False,
                                       data=record), dtype=float)
    if counts.ndim != 2 or counts.shape[1] != len(COUNTS) or not len(counts):
        raise ResultsError(f"{path}: directions/{k}/sentence_counts is not one row of "
                           f"{len(COUNTS)} counts a sentence")
    archived = 100 * archived_value(path, "directions", k, "aer_runs", 0, data=record)
    if abs(aer_score(counts.sum(0)) - archived) > 1e-6:
        raise ResultsError(f"{path}: directions/{k}/sentence_counts give AER "
                           f"{aer_score(counts.sum(0)):.4f}, the archive says {archived:.4f}")
    return counts


def reference_rows(plan, study: str, pair: str, reference: Path, n_samples: int = 1000,
                   seed: int = 12345) -> List[AlignmentRow]:
    """The baseline's attention weights (the rule fixed in advance) and, per direction of
    ``reference`` (one deterministic run: the diagonal's archive), the reference's AER against
    them with the seed-level test: the same links paired with each of the baseline's seeds, so
    the interval holds the baseline's seed spread and the sentences'; Holm over the
    directions."""
    base_name = _study(plan, study).systems[0]
    base_runs = archived_alignments(plan, study, pair, base_name, "weights")
    if not base_runs or not Path(reference).is_file():
        return []
    record = archive_json(reference)
    name = archived_value(reference, "peer", number=False, data=record)
    if int(archived_value(reference, "runs", data=record)) != 1:
        raise ResultsError(f"{reference}: a reference is one deterministic run; it has "
                           f"{record['runs']}")
    label = PEERS.get(name, name)
    seeds = sorted(base_runs)
    base_counts = {s: aer_counts(base_runs[s], "rule") for s in seeds}
    rows = [AlignmentRow(ALIGNMENT_READINGS[0][1], base_name, "weights", seeds,
                         [aer_score(base_counts[s].sum(0)) for s in seeds], baseline=True)]
    comparisons = []
    for k, _ in enumerate(archived_value(reference, "directions", number=False, data=record)):
        direction = archived_value(reference, "directions", k, "direction", number=False,
                                   data=record)
        counts = reference_counts(reference, k)
        row = AlignmentRow("—", label, direction, seeds, [aer_score(counts.sum(0))] * len(seeds))
        row.comparison = seed_comparison(
            {s: ("baseline", s) for s in seeds}, {s: ("reference", s) for s in seeds},
            lambda run, counts=counts: base_counts[run[1]] if run[0] == "baseline" else counts,
            aer_score, table="alignment reference", label="—", system=f"{label} ({direction})",
            baseline=f"{base_name} (weights)", n_samples=n_samples, seed=seed,
            higher_is_better=False)
        if row.comparison is not None:
            comparisons.append(row.comparison)
        rows.append(row)
    apply_holm(comparisons)
    return rows


#: bootstrap draws of the corrected training interval (its tails hold 0.05 / m of them)
GOAL_DRAWS = 20000


def training_against_goal(steps: Path, paired: dict, system: str, row: int,
                          level: float) -> Tuple[str, str]:
    """(cell, "met" / "missed" / "spans") of ``system``'s paired training steps in the
    ``bench_steps.py`` archive ``steps`` (read as ``paired``): its ratio with the archived 95 %
    interval and the interval at ``level`` redrawn from the archived per-batch times (GOAL_DRAWS
    draws, seeded by ``row``), which is what is read against SPEED_GOAL."""
    from ...stats.significance import paired_ratio_interval

    ratio, low, high = (archived_value(steps, "ratios", system, "train_step", key, data=paired)
                        for key in ("ratio", "low", "high"))
    times = [archived_value(steps, "times_s", name, "train_step", number=False, data=paired)
             for name in ("baseline", system)]
    try:
        _, c_low, c_high = paired_ratio_interval(*times, np.random.default_rng(row), level=level,
                                                 draws=GOAL_DRAWS)
    except (ValueError, TypeError) as err:
        raise ResultsError(f"{steps}: times_s of baseline and {system}: {err}") from None
    judged = "missed" if c_high < SPEED_GOAL else "spans" if c_low < SPEED_GOAL else "met"
    return f"{ratio:.3f} [{low:.3f}, {high:.3f}]; corrected [{c_low:.3f}, {c_high:.3f}]", judged


def steps_goal_table(steps: Path) -> str:
    """Markdown, one row per system of a ``bench_steps.py`` archive (not its baseline): the
    training steps' ratio to the baseline's, with the 95 % interval and the interval corrected
    over the table's rows (1 - 0.05 / m), and where the corrected one lies against SPEED_GOAL."""
    paired = archive_json(steps)
    systems = list(archived_value(steps, "ratios", number=False, data=paired))
    level = 1 - 0.05 / len(systems)
    out = [f"| system | training steps (paired, 95% interval; corrected over the table's "
           f"{len(systems)} systems, {1 - level:.3g} in the tails) | training speed ≥ "
           f"{SPEED_GOAL:g} |", "|---|---|---|"]
    words = {"met": "met", "missed": "missed", "spans": "interval spans the goal"}
    for row, system in enumerate(systems):
        cell, judged = training_against_goal(steps, paired, system, row, level)
        out.append(f"| {system} | {cell} | {words[judged]} |")
    return "\n".join(out)


def site_cost_goal_table(path: Path, steps: Optional[Path] = None) -> str:
    """Markdown: per selector and site of the process bench ``path`` (systems named
    ``SELECTOR_SITE``, BENCH_SITES), its training words/s, fixed-length decoding sentences/s and
    peak memory above idle over the baseline's, and which miss the goal (SPEED_GOAL,
    MEMORY_GOAL). With ``steps`` (``bench_steps.py --plan``'s JSON of the same systems), training
    is its paired-steps ratio with the archived 95 % interval and the interval corrected over
    the table's systems (level 1 - 0.05 / m, Bonferroni; the bootstrap over the archived
    per-batch times redrawn, GOAL_DRAWS draws, seeded per row): met when the corrected interval
    lies at or above the goal, missed when below, unsettled when it spans the goal."""
    record = archive_json(path)
    paired = archive_json(steps) if steps is not None else None
    systems = list(archived_value(path, "ratios_by_system", number=False, data=record))
    level = 1 - 0.05 / len(systems)
    measures = (("gen_sps_fixed_len", "decoding", False), ("peak_rss_above_idle", "memory", True))
    training = (f"training steps (paired, 95% interval; corrected over the table's {len(systems)} "
                f"systems, {1 - level:.3g} in the tails)" if paired is not None else "training words/s")
    out = [f"| selector | where | {training} | decoding sentences/s (fixed length) | "
           f"peak memory above idle | goal: speed ≥ {SPEED_GOAL:g}, memory ≤ {MEMORY_GOAL:g} |",
           "|---|---|---|---|---|---|"]
    for row, system in enumerate(systems):
        selector, _, suffix = system.rpartition("_")
        where = dict(BENCH_SITES).get(suffix)
        if where is None:
            raise ResultsError(f"{path}: bench system {system!r} is not SELECTOR_SITE "
                               f"(sites {', '.join(s for s, _ in BENCH_SITES)})")
        missed, unsettled = [], []
        if paired is not None:
            cell, judged = training_against_goal(steps, paired, system, row, level)
            cells = [cell]
            if judged == "missed":
                missed.append("training")
            elif judged == "spans":
                unsettled.append("training")
        else:
            ratio = archived_value(path, "ratios_by_system", system, "train_wps", data=record)
            cells = [f"{ratio:.3f}"]
            if ratio < SPEED_GOAL:
                missed.append("training")
        for key, name, upper in measures:
            ratio = archived_value(path, "ratios_by_system", system, key, data=record)
            cells.append(f"{ratio:.3f}")
            if (ratio > MEMORY_GOAL) if upper else (ratio < SPEED_GOAL):
                missed.append(name)
        parts = (["missed: " + ", ".join(missed)] if missed else []) + \
            (["interval spans the goal: " + ", ".join(unsettled)] if unsettled else [])
        out.append(f"| {selector} | {where} | " + " | ".join(cells) + f" | {'; '.join(parts) or 'met'} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- cross site alone
#: flags that say where a selective system selects, each followed by its value; the cross-site
#: system keeps ``--cross-selector-args`` (the cross site's own option values)
SITE_FLAGS = ("--encoder-selector", "--decoder-selector", "--cross-selector",
              "--decoder-selector-args", "--selector-layers", "--ssan-selection", "--ssan-layers")
CROSS_ALONE_FAMILY = "selective_transformer"


def _flag_values(flags: Sequence[str], where: str) -> Tuple[Dict[str, str], List[str]]:
    """({site flag: value}, the other flags in order) of a system's flags (``--flag value`` or
    ``--flag=value``)."""
    values, rest, i = {}, [], 0
    while i < len(flags):
        flag, _, inline = flags[i].partition("=")
        if flag in SITE_FLAGS:
            if not inline and i + 1 >= len(flags):
                raise ResultsError(f"{where}: {flag} has no value")
            values[flag] = inline or flags[i + 1]
            i += 1 if inline else 2
        else:
            rest.append(flags[i])
            i += 1
    return values, rest


def _family(arch: str) -> Optional[Tuple[str, str]]:
    """(selective family, shape suffix) of an architecture name, None for one that does not
    select (``selective_transformer_small`` -> ``("selective_transformer", "_small")``)."""
    for family in ("ssan_transformer", CROSS_ALONE_FAMILY):
        if arch == family or arch.startswith(family + "_"):
            return family, arch[len(family):]
    return None


def cross_alone_systems(plan, study: str) -> List[System]:
    """The cross site alone for every selector of ``study`` (:func:`cross_alone_of` each of its
    selecting systems, in the study's order; the baseline and other systems that do not select
    are passed over). Two systems with the same selector must derive the same definition
    (``ssan_encoder`` and ``ssan_all`` both give ``gumbel_cross``), else ResultsError."""
    out: Dict[str, System] = {}
    for name in _study(plan, study).systems:
        if _family(plan.systems[name].arch) is None:
            continue
        derived = cross_alone_of(plan, name)
        first = out.setdefault(derived.name, derived)
        if system_entry(first) != system_entry(derived):
            raise ResultsError(f"study {study!r}: {name!r} derives {derived.name!r} as "
                               f"{system_entry(derived)}, an earlier system as "
                               f"{system_entry(first)}")
    return list(out.values())


def cross_alone_of(plan, name: str) -> System:
    """The cross site alone for plan system ``name``: its selector (for ``ssan_transformer``:
    gumbel, or soft under ``--ssan-selection soft``; for ``selective_transformer``: its cross
    site's, else its encoder's) at the cross site alone, named ``SELECTOR_cross``:
    ``selective_transformer`` of the same shape, the same criterion, ``--encoder-selector none
    --cross-selector SELECTOR`` and the system's other flags (its selector's options,
    ``--cross-selector-args`` included). ResultsError for a system that does not select, or
    selects in only some encoder layers (no cross-site counterpart)."""
    source = plan.systems[name]
    where = f"system {source.name!r}"
    values, rest = _flag_values(source.flags, where)
    found = _family(source.arch)
    if found is None:
        raise ResultsError(f"{where} ({source.arch}) does not select: no cross site alone")
    family, shape = found
    layers = values.get("--ssan-layers", values.get("--selector-layers", "all"))
    if layers != "all":
        raise ResultsError(f"{where} selects in encoder layers {layers} only: its selector has "
                           f"no cross-site counterpart")
    if family == "ssan_transformer":
        selector = "soft" if values.get("--ssan-selection") == "soft" else "gumbel"
    else:
        selector = values.get("--cross-selector", "none")
        if selector == "none":
            selector = values.get("--encoder-selector", "gumbel")  # the family's default
    if selector == "none":
        raise ResultsError(f"{where} selects at no site: no cross site alone")
    return System(name=f"{selector}_cross", arch=CROSS_ALONE_FAMILY + shape,
                  criterion=source.criterion,
                  flags=["--encoder-selector", "none", "--cross-selector", selector, *rest])
