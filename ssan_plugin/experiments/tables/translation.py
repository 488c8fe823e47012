"""Translation tables of a runner plan's archive (``examples/translation``, ``examples/stability``):
every archived run's BLEU recomputed from its hypotheses, seed-level comparisons against the
study's baseline, and the per-run table."""

import functools
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import numpy as np

from .archives import archive_json, archived_value
from .blocks import ResultsError
from .verdicts import Comparison, apply_holm, seed_comparison


STUDY_LABELS = {"postnorm": "post-norm", "prenorm": "pre-norm"}
PAIR_LABELS = {"en-de": "En-De", "en-ro": "En-Ro", "en-ja": "En-Ja", "builtin": "built-in"}


@functools.lru_cache(maxsize=None)
def bleu_scorer(ref_path: Path, tgt: str):
    """(per-sentence statistics of a hypothesis list, score function) for one test set, as
    ``ssan-evaluate-bleu`` scores it without a data-bin (the reference's language rules)."""
    from sacrebleu.metrics import BLEU

    from ...stats.significance import sacrebleu_score_fn, sacrebleu_stats
    from ...translation.languages import LanguageConfig, looks_segmented
    from ...translation.textio import read_lines

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
    from ...translation.textio import read_lines

    stats_of, score, n = bleu_scorer(ref, tgt)
    hyps = read_lines(run_dir / hyp_name)
    if len(hyps) != n:
        raise ResultsError(f"{run_dir}: {len(hyps)} hypotheses for {n} references")
    stats = stats_of(hyps)
    recorded = archived_value(run_dir / "test.json", "systems", 0, "bleu")
    computed = score(stats.sum(0))
    if abs(recorded - computed) > 1e-6:
        raise ResultsError(f"{run_dir}: BLEU {computed:.4f} recomputed, {recorded:.4f} archived")
    return stats


def hypotheses_stats(ref: Path, tgt: str) -> Callable[[Tuple[Path, str]], np.ndarray]:
    """:func:`run_stats` of a run given as (archive directory, hypotheses file name)."""
    return lambda run: run_stats(run[0], run[1], ref, tgt)


def test_reference(pair) -> Path:
    ref = Path(pair.raw) / f"test.{pair.tgt}"
    if not ref.is_file():
        raise ResultsError(f"{ref}: the test reference is missing (the shared data)")
    return ref


def archived_outputs(plan) -> Dict[tuple, Dict[str, Dict[int, Tuple[Path, str]]]]:
    """{(study, pair): {system: {seed: (archived run directory, hypotheses file name)}}} of a
    runner plan's archive (a borrowed run's in the lending plan's archive, under the name its
    own plan gave it: :meth:`Plan.archived_outputs`)."""
    found: Dict[tuple, Dict[str, Dict[int, Tuple[Path, str]]]] = {}
    for run in plan.runs():
        outputs = plan.archived_outputs(run)
        if outputs is not None:
            found.setdefault((run.study.name, run.pair.name), {}).setdefault(
                run.system.name, {})[run.seed] = outputs
    return found


def archived_runs(plan) -> Dict[tuple, Dict[str, Dict[int, Path]]]:
    """{(study, pair): {system: {seed: archived run directory}}}: :func:`archived_outputs`'
    directories."""
    return {key: {system: {seed: d for seed, (d, _) in by_seed.items()}
                  for system, by_seed in by_system.items()}
            for key, by_system in archived_outputs(plan).items()}


def translation_comparisons(plan, table: str, n_samples: int = 1000,
                            seed: int = 12345) -> List[Comparison]:
    """Every (study, pair, system) of a plan's archive against the study's baseline, seed
    level, with two seeds or more a side (:func:`run_stats` checks each run's BLEU)."""
    rows = []
    for (study_name, pair_name), runs in archived_outputs(plan).items():
        study = plan.study(study_name)
        pair = plan.pairs[pair_name]
        ref = test_reference(pair)
        score = bleu_scorer(ref, pair.tgt)[1]
        base_name = study.systems[0]
        for system in study.systems[1:]:
            row = seed_comparison(
                runs.get(base_name, {}), runs.get(system, {}), hypotheses_stats(ref, pair.tgt),
                score, table=table, label=f"{STUDY_LABELS.get(study_name, study_name)} "
                                          f"{PAIR_LABELS.get(pair_name, pair_name)}",
                system=system, baseline=base_name, n_samples=n_samples, seed=seed)
            if row is not None:
                rows.append(row)
    apply_holm(rows)
    return rows


def _number(text):
    """A number of fairseq's log (a string there) as a float; the text as it is otherwise."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return text


def runs_table(plan) -> str:
    """Markdown: every archived run of a plan (study, pair, system, seed order): BLEU, chrF,
    best valid loss, validation selection rate, and against the same seed's baseline the
    difference and the sentence-level paired bootstrap p (it describes that seed only)."""
    from ...stats.significance import paired_bootstrap

    out = ["| study, pair | run | BLEU | chrF | Δ vs same-seed baseline | p (sentences, this "
           "seed) | best valid loss | valid selection rate |", "|---|---|---|---|---|---|---|---|"]
    found = archived_outputs(plan)
    for study in plan.studies:
        for pair in study.pairs:
            by_system = found.get((study.name, pair), {})
            base_name = study.systems[0]
            base = by_system.get(base_name, {})
            tgt = plan.pairs[pair].tgt
            for system in study.systems:
                for seed, (d, hyp) in sorted(by_system.get(system, {}).items()):
                    test = archive_json(d / "test.json")
                    entry = {key: archived_value(d / "test.json", "systems", 0, key, data=test)
                             for key in ("bleu", "chrf")}
                    summary = archive_json(d / "train.json")
                    archived_value(d / "train.json", "best_valid_loss", data=summary)
                    delta = p = ""
                    if system != base_name and seed in base:
                        base_dir, base_hyp = base[seed]
                        b = {"bleu": archived_value(base_dir / "test.json", "systems", 0, "bleu")}
                        delta = f"{entry['bleu'] - b['bleu']:+.2f}"
                        ref = test_reference(plan.pairs[pair])
                        result = paired_bootstrap(
                            run_stats(base_dir, base_hyp, ref, tgt), run_stats(d, hyp, ref, tgt),
                            bleu_scorer(ref, tgt)[1])
                        p = "identical" if result.identical else f"{result.p_value:.3f}"
                    sel = summary.get("sel")
                    if sel is not None:  # fairseq's string, or a number
                        sel = archived_value(d / "train.json", "sel", data={"sel": _number(sel)})
                    out.append(f"| {STUDY_LABELS.get(study.name, study.name)} "
                               f"{PAIR_LABELS.get(pair, pair)} | {system}@{seed} | "
                               f"{entry['bleu']:.2f} | {entry['chrf']:.2f} | {delta} | {p} | "
                               f"{summary['best_valid_loss']:.3f} | "
                               f"{'1 (all pairs)' if sel is None else f'{float(sel):.3f}'} |")
    return "\n".join(out)
