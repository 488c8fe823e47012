"""Compare SRL systems on existing CoNLL-2005 props files, with the project's paired test.

``compare_props(gold, [(name, pred), ...])`` scores every predicted props file against the gold
one with ``scorer`` (srl-eval.pl's numbers: precision, recall, F1 in percent, ``V`` excluded)
and compares each system with the first by ``significance.paired_bootstrap`` over sentences:

- per-sentence statistics: the scorer's (correct, excess, missed) of each sentence
  (``scorer.sentence_counts``; a sentence without gold propositions counts (0, 0, 0));
- score of summed statistics: F1 = 200 c / (2 c + e + m) (= 2PR / (P + R) in percent, 0 when
  c = 0);
- convention (README, "Significance"): two-sided, ties counted, add-one,
  ``p = (#{|d* - d| >= |d|} + 1) / (n + 1)``; 1000 resamples, seed 12345 by default. Two
  systems with identical outputs get p = 1 and ``identical``.

``identical``: the two props files hold the same sentences, targets and argument columns, tag
for tag (spacing aside). Two different outputs with the same per-sentence counts also get
p = 1, but are not ``identical``.

Seeds pooled: systems named ``GROUP@SEED`` (``ssan_plugin.stats.seed_groups``; e.g. ``san@1``,
``san@2``, ``ssan@1``, ``ssan@2``) are each compared with the first group's system of the same
seed (else with the first system), and the report gains ``groups``: per group the mean and
standard deviation over seeds of P, R and F1, and for each group after the first the delta of
the seed-mean F1 and the p-value of the paired bootstrap that resamples the same sentences for
every seed (``pooled_groups``).

Breakdowns, per system (each bucket's precision / recall / F1 from the counts summed over it,
as the scorer computes them overall):

- ``per_label``: the scorer's table (``C-X`` counted under X, ``V`` excluded);
- ``by_length``: by sentence length in words, buckets 1-10, 11-20, 21-30, 31-40, 41+; a
  sentence's counts go to its length's bucket (``sentences``: how many sentences, with or
  without propositions);
- ``by_distance``: by the argument's distance from its predicate, buckets 0, 1-2, 3-5, 6-10,
  11+. The distance of an argument spanning words ``start..end`` (inclusive; a discontinuous
  argument spans from its first piece's start to its last piece's end, as in the scorer) from
  the predicate at word ``p`` is the number of words strictly between them:
  ``start - p - 1`` when ``start > p``, ``p - end - 1`` when ``end < p``, and 0 when the span
  contains ``p``. So bucket 0 holds the arguments adjacent to the predicate or containing it.
  Correct and excess arguments are predicted ones (precision: correct / predicted arguments of
  the bucket), missed ones are gold (recall: correct / gold arguments of the bucket); a correct
  argument has its gold's span, hence its distance. ``V`` is excluded.

Inputs are checked before scoring (``CompareError``, one line, exit 2 in the scripts): every
file readable UTF-8 props with well-formed bracket columns; each predicted file with the gold's
number of sentences and, sentence by sentence, its number of words and of predicates
(target-column entries other than ``-``). Messages count sentences from 1 and give the line
where the sentence starts. Predicates at other positions or with another lemma are scored as
srl-eval.pl does (their gold arguments missed) and listed in the system's ``warnings`` (the
scorer's wording; it counts sentences from 0).
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputError
from ..cli.files import check_input_file, check_output_file
from ..stats import seed_groups
from ..stats.buckets import LENGTH_BUCKETS, bucket_index, bucket_label
from ..stats.seed_groups import SeedGroupError, group_order, has_groups, same_seed_baseline
from ..stats.significance import DEFAULT_BOOTSTRAP_SAMPLES, DEFAULT_SEED, paired_bootstrap
from .brackets import BracketError, Phrase, parse_brackets
from .props import PropsSentence, read_props
from .scorer import EXCLUDED, Counts, PropositionMatch, evaluate, sentence_counts

#: (first, last) distances in words of each argument-distance bucket
DISTANCE_BUCKETS: Tuple[Tuple[int, Optional[int]], ...] = ((0, 0), (1, 2), (3, 5), (6, 10),
                                                            (11, None))

SIGNIFICANCE = {
    "test": "paired bootstrap over sentences (ssan_plugin.stats.significance.paired_bootstrap)",
    "statistics": "per-sentence (correct, excess, missed) of the scorer, V excluded",
    "score": "F1 = 200 c / (2 c + e + m)",
    "convention": "two-sided, ties counted, add-one: p = (#{|d* - d| >= |d|} + 1) / "
                  "(samples + 1); identical outputs get p = 1",
}
DEFINITIONS = {
    "by_length": "sentence length in words; a bucket's P/R/F1 from the counts of its sentences",
    "by_distance": "words strictly between the predicate and the nearest word of the argument's "
                   "span (first piece's start to last piece's end), 0 when adjacent or "
                   "containing the predicate; precision over predicted arguments (correct + "
                   "excess), recall over gold arguments (correct + missed) of the bucket",
    "identical": "the predicted props hold the same sentences, targets and argument columns "
                 "as the first system's, tag for tag",
}


class CompareError(InputError, ValueError):
    """Props files that cannot be compared (unreadable, malformed, out of step with the gold)."""


def argument_distance(argument: Phrase, position: int) -> int:
    """Words strictly between the predicate at ``position`` and the argument's span; 0 when the
    span is adjacent to the predicate or contains it."""
    if argument.start > position:
        return argument.start - position - 1
    if argument.end < position:
        return position - argument.end - 1
    return 0


def f1_score(sums: np.ndarray) -> float:
    """Summed (correct, excess, missed) -> F1 in percent (the bootstrap's score function)."""
    c, e, m = (float(x) for x in sums[:3])
    denominator = 2 * c + e + m
    return 200.0 * c / denominator if c > 0 else 0.0


# ---------------------------------------------------------------- reading and checking

@dataclass
class PropsFile:
    path: str
    what: str  # how messages name it: "--gold-props G", "--pred-props NAME=P"
    sentences: List[PropsSentence]
    lines: List[int]  # 1-based line where each sentence starts

    def where(self, index: int) -> str:
        return f"{self.what}: sentence {index + 1} (line {self.lines[index]})"


def read_checked(path: str, option: str, what: str) -> PropsFile:
    """A props file read as srl-eval.pl reads it, every bracket column checked; CompareError
    naming the file (``option``: "--gold-props"; ``what``: "--gold-props PATH"), the sentence
    and the line otherwise."""
    try:
        check_input_file(path, option)
        sentences = read_props(path)
    except InputError as err:
        raise CompareError(str(err)) from None
    except ValueError as err:  # rows with different numbers of columns: "path:line: ..."
        raise CompareError(f"{option}: {err}") from None
    lines, line = [], 1
    for targets, _ in sentences:
        lines.append(line)
        line += len(targets) + 1  # one row per word, one blank line after the sentence
    props = PropsFile(str(path), what, sentences, lines)
    for k, (targets, columns) in enumerate(sentences):
        for c, column in enumerate(columns):
            try:
                parse_brackets(column)
            except BracketError as err:
                raise CompareError(f"{props.where(k)}: argument column {c + 1}, line "
                                   f"{lines[k] + err.position}: {err.message}") from None
    return props


def _predicates(targets: Sequence[str]) -> int:
    return sum(t != "-" for t in targets)


def check_aligned(gold: PropsFile, pred: PropsFile) -> None:
    """``pred`` has the gold's sentences: as many, each with the same numbers of words and of
    predicates; CompareError naming the file and the first sentence out of step otherwise."""
    ng, npred = len(gold.sentences), len(pred.sentences)
    if ng != npred:
        k = min(ng, npred)
        extra = (f"its sentence {k + 1} (line {pred.lines[k]}) has no gold counterpart"
                 if npred > ng else
                 f"gold sentence {k + 1} (line {gold.lines[k]}) has no counterpart")
        raise CompareError(f"{pred.what} has {npred} sentences, the gold {gold.path} has {ng}: "
                           f"{extra}")
    for k, ((gt, _), (pt, _)) in enumerate(zip(gold.sentences, pred.sentences)):
        if len(gt) != len(pt):
            raise CompareError(f"{pred.where(k)} has {len(pt)} words, the gold sentence "
                               f"(line {gold.lines[k]}) has {len(gt)}")
        if _predicates(gt) != _predicates(pt):
            raise CompareError(f"{pred.where(k)} has {_predicates(pt)} predicates, the gold "
                               f"sentence (line {gold.lines[k]}) has {_predicates(gt)}")


# ---------------------------------------------------------------- scoring

def _counts_entry(counts: Counts, **extra) -> dict:
    return {**extra, **counts.to_dict()}


def by_length(gold: Sequence[PropsSentence], per_sentence: Sequence[Counts]) -> List[dict]:
    """F1 by sentence length (``LENGTH_BUCKETS``): counts summed over each bucket's sentences."""
    totals = [Counts() for _ in LENGTH_BUCKETS]
    sentences = [0] * len(LENGTH_BUCKETS)
    for (targets, _), counts in zip(gold, per_sentence):
        k = bucket_index(len(targets), LENGTH_BUCKETS)
        totals[k].add(counts)
        sentences[k] += 1
    return [_counts_entry(totals[k], bucket=bucket_label(lo, hi), min=lo, max=hi,
                          sentences=sentences[k])
            for k, (lo, hi) in enumerate(LENGTH_BUCKETS)]


def by_distance(matches: Sequence[PropositionMatch]) -> List[dict]:
    """F1 by the argument's distance from its predicate (``DISTANCE_BUCKETS``,
    ``argument_distance``), ``V`` excluded: correct and excess arguments are predicted ones,
    missed ones gold."""
    totals = [Counts() for _ in DISTANCE_BUCKETS]
    for match in matches:
        for args, kind in ((match.correct, "correct"), (match.excess, "excess"),
                           (match.missed, "missed")):
            for a in args:
                if a.type in EXCLUDED:
                    continue
                counts = totals[bucket_index(argument_distance(a, match.position),
                                                   DISTANCE_BUCKETS)]
                setattr(counts, kind, getattr(counts, kind) + 1)
    return [_counts_entry(c, bucket=bucket_label(lo, hi), min=lo, max=hi,
                          gold_arguments=c.correct + c.missed,
                          predicted_arguments=c.correct + c.excess)
            for c, (lo, hi) in zip(totals, DISTANCE_BUCKETS)]


@dataclass
class SystemScore:
    name: str
    props: PropsFile
    entry: dict  # the system's JSON entry (without the comparison)
    stats: np.ndarray  # (sentences, 3): correct, excess, missed


def score_system(gold: PropsFile, name: str, pred: PropsFile) -> SystemScore:
    """One system against the gold: the scorer's totals and per-label table, per-sentence
    statistics, F1 by length and by distance (``pred`` already checked against ``gold``)."""
    matches: List[PropositionMatch] = []
    try:
        result = evaluate(gold.sentences, pred.sentences, matches)
    except ValueError as err:  # not expected after check_aligned; named all the same
        raise CompareError(f"{pred.what}: {err}") from None
    per_sentence = sentence_counts(matches, len(gold.sentences))
    entry = {"name": name, "path": pred.path, **result.overall.to_dict(),
             "propositions": result.propositions,
             "perfect_propositions": (100 * result.perfect / result.propositions
                                      if result.propositions else 0)}
    entry["per_label"] = {k: result.per_label[k].to_dict() for k in sorted(result.per_label)}
    entry["by_length"] = by_length(gold.sentences, per_sentence)
    entry["by_distance"] = by_distance(matches)
    entry["warnings"] = list(result.warnings)
    stats = np.array([[c.correct, c.excess, c.missed] for c in per_sentence],
                     dtype=np.float64).reshape(-1, 3)
    return SystemScore(name, pred, entry, stats)


def compare_props(gold_path: str, systems: Sequence[Tuple[str, str]],
                  n_samples: int = DEFAULT_BOOTSTRAP_SAMPLES, seed: int = DEFAULT_SEED,
                  json_path: Optional[str] = None) -> dict:
    """Score each (name, props file) against the gold and compare each with the first (module
    docstring); the report (written to ``json_path`` as JSON when given, its folder created).
    Every input and the output are checked before any scoring (CompareError)."""
    if json_path is not None:
        try:
            check_output_file(json_path, "--json")
        except InputError as err:
            raise CompareError(str(err)) from None
    if not systems:
        raise CompareError("no system to score: give --pred-props NAME=FILE")
    names = [name for name, _ in systems]
    for name in names:
        if names.count(name) > 1:
            raise CompareError(f"--pred-props: system name {name!r} is given twice")
    try:  # every name checked before any scoring
        grouped = has_groups(names)
        if grouped:
            group_order(names)
    except SeedGroupError as err:
        raise CompareError(f"--pred-props: {err}") from None
    gold = read_checked(gold_path, "--gold-props", f"--gold-props {gold_path}")
    if not gold.sentences:
        raise CompareError(f"--gold-props {gold_path} has no sentences")
    preds = []
    for name, path in systems:
        pred = read_checked(path, f"--pred-props {name}", f"--pred-props {name}={path}")
        check_aligned(gold, pred)
        preds.append((name, pred))
    scored = [score_system(gold, name, pred) for name, pred in preds]
    against = same_seed_baseline(names) if grouped else [0] * len(names)
    out = []
    for k, system in enumerate(scored):
        entry = dict(system.entry)
        if k > 0:
            base = scored[against[k]]
            result = paired_bootstrap(base.stats, system.stats, f1_score, n_samples, seed)
            identical = system.props.sentences == base.props.sentences
            entry.update(compared_with=base.name, delta=result.delta, p_value=result.p_value,
                         identical=identical)
        out.append(entry)
    first = scored[0].entry
    report = {
        "gold": str(gold_path),
        "sentences": len(gold.sentences),
        "propositions": first["propositions"],
        "gold_arguments": first["correct"] + first["missed"],
        "significance": {**SIGNIFICANCE, "samples": n_samples, "seed": seed},
        "definitions": DEFINITIONS,
        "systems": out,
    }
    if grouped:
        report["groups"] = pooled_groups(scored, n_samples, seed)
    if json_path is not None:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    return report


def pooled_groups(scored: Sequence[SystemScore], n_samples: int, seed: int) -> List[dict]:
    """Seeds pooled (``ssan_plugin.stats.seed_groups``): per group ``name``, ``systems``,
    ``n_seeds``, ``mean`` and ``std`` (sample standard deviation, 0 for one seed) of
    precision, recall and F1 over its seeds; each group after the first also ``delta`` (mean
    F1 minus the first group's), ``p_value``: the paired bootstrap over sentences of the
    seed-mean F1, the same resampled sentences for every seed, seeds held fixed (a
    sentence-level p), and the verdict: ``seed_level`` (``seed_groups.seed_level_entry``, F1,
    Holm over the groups) and ``verdict``."""
    names = [s.name for s in scored]
    groups = seed_groups.pooled_groups(names, [s.stats for s in scored], f1_score, n_samples,
                                       seed)
    entries = []
    for group in groups:
        systems = [scored[i] for i in group.members]
        entry = {"name": group.name, "systems": [s.name for s in systems],
                 "n_seeds": len(systems), "mean": {}, "std": {}}
        for metric in ("precision", "recall", "f1"):
            entry["mean"][metric], entry["std"][metric] = seed_groups.mean_std(
                [s.entry[metric] for s in systems])
        if group.test is not None:
            entry.update(compared_with=groups[0].name, delta=group.test.delta,
                         p_value=group.test.p_value, identical=group.test.identical)
            entry["seed_level"] = seed_groups.seed_level_entry(group)
            entry["verdict"] = seed_groups.verdict(entry["seed_level"])
        entries.append(entry)
    return entries


# ---------------------------------------------------------------- report

def _p_cell(s: dict) -> str:
    return "identical" if s.get("identical") else f"{s['p_value']:.4f}"


def _f1_cell(bucket: dict) -> str:
    """A bucket's F1, or a dash when it holds no gold and no predicted argument."""
    if bucket["correct"] + bucket["excess"] + bucket["missed"] == 0:
        return "—"
    return f"{bucket['f1']:.2f}"


def markdown(report: dict) -> str:
    """The systems table, then F1 per label, by sentence length and by argument distance
    (``—``: a bucket without gold or predicted arguments)."""
    systems = report["systems"]
    lines = [f"{report['sentences']} sentences, {report['propositions']} propositions, "
             f"{report['gold_arguments']} gold arguments (V excluded); p: "
             f"{report['significance']['convention']} "
             f"({report['significance']['samples']} resamples)", "",
             f"| system | P | R | F1 | Δ F1 | vs | "
             f"{'p (sentences, this seed)' if report.get('groups') else 'p-value'} | correct | "
             f"excess | missed |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for k, s in enumerate(systems):
        delta = "(baseline)" if k == 0 else f"{s['delta']:+.2f}"
        vs = "" if k == 0 else s["compared_with"]
        p = "" if k == 0 else _p_cell(s)
        lines.append(f"| {s['name']} | {s['precision']:.2f} | {s['recall']:.2f} | "
                     f"{s['f1']:.2f} | {delta} | {vs} | {p} | {s['correct']} | {s['excess']} | "
                     f"{s['missed']} |")
    if report.get("groups"):
        lines += ["", "Seed groups (mean ± sd over seeds; the verdict is the seed-level test, "
                      "Holm-corrected over the groups; the last column describes these seeds "
                      "only):", "",
                  seed_groups.group_table(report["groups"], "F1",
                                          lambda g: (g["mean"]["f1"], g["std"]["f1"]))]
    labels = sorted({label for s in systems for label in s["per_label"]})
    if labels:
        gold_n = {}
        for label in labels:
            c = systems[0]["per_label"].get(label)
            gold_n[label] = c["correct"] + c["missed"] if c else 0
        lines += ["", "F1 per label:", "",
                  "| label | gold | " + " | ".join(s["name"] for s in systems) + " |",
                  "|---|---|" + "---|" * len(systems)]
        for label in labels:
            cells = [f"{s['per_label'][label]['f1']:.2f}" if label in s["per_label"] else "—"
                     for s in systems]
            lines.append(f"| {label} | {gold_n[label]} | " + " | ".join(cells) + " |")
    for key, title, n_key, unit in (
            ("by_length", "F1 by sentence length", "sentences", "words"),
            ("by_distance", "F1 by argument distance from the predicate", "gold_arguments",
             "words between")):
        buckets = systems[0][key]
        lines += ["", f"{title}:", "",
                  "| system | " + " | ".join(f"{b['bucket']} {unit} (n={b[n_key]})"
                                            for b in buckets) + " |",
                  "|---|" + "---|" * len(buckets)]
        for s in systems:
            lines.append(f"| {s['name']} | " + " | ".join(_f1_cell(b) for b in s[key]) + " |")
    return "\n".join(lines) + "\n"
