"""Sentence-pair tables of ``examples/pairs/run_pairs.py``'s archive
(``TARGET_INIT_ENCODER_sSEED/`` per run): every run's test predictions rescored against the SICK
gold with the project's pair metrics (``pairs.metrics``) and checked against its
``result.json``; per-run test metrics; seed-level comparisons of the headline metric (accuracy
for entailment, Pearson r for relatedness) with Holm's correction over each table."""

from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from ...stats.significance import paired_bootstrap
from .archives import RESULT, SeedRunArchive, archived_value
from .blocks import ResultsError
from .verdicts import (Comparison, apply_holm, corrected_header, corrected_interval, mean_sd,
                       seed_comparison)

PREDICTIONS = "test.predictions.tsv"
#: target -> (result.json section, headline metric, how tables name it, digits)
HEADLINE = {"entailment": ("entailment", "accuracy", "accuracy %", 2),
            "relatedness": ("relatedness", "pearson", "Pearson r", 3)}
#: how far a metric recomputed from the predictions file may be from the archived one: the
#: file keeps relatedness scores to 4 decimals (``pairs.evaluate``), labels exactly
TOLERANCE = {"accuracy": 1e-9, "macro_f1": 1e-9, "pearson": 1e-4, "spearman": 1e-3,
             "mse": 1e-3}


class PairsArchive(SeedRunArchive):
    """The runs of a ``run_pairs.py`` archive, each rescored at most once: its test
    predictions read against the gold pairs (``pairs.evaluate.read_predictions``: the subset's
    pair ids in order, labels from the label set, finite scores), scored with
    ``pairs.metrics.system_metrics`` and refused with a :class:`ResultsError` naming the file
    when a metric differs from the one its ``result.json`` archived."""

    def __init__(self, archive: Path, gold_tsv: Path):
        super().__init__(archive)
        self.gold_tsv = Path(gold_tsv)
        self._gold = None
        self._columns: Dict[str, dict] = {}
        self._metrics: Dict[str, dict] = {}

    @property
    def gold(self):
        """The SICK pairs of the test split (TRIAL), in file order."""
        if self._gold is None:
            from ...errors import InputError
            from ...pairs.corpus import read_sick

            if not self.gold_tsv.is_file():
                raise ResultsError(f"{self.gold_tsv}: the SICK test pairs are missing (the "
                                   f"shared data)")
            try:
                self._gold = read_sick(self.gold_tsv)
            except (InputError, ValueError) as err:
                raise ResultsError(f"{self.gold_tsv}: {err}") from None
        return self._gold

    def gold_columns(self) -> Dict[str, list]:
        return {"label": [p.label for p in self.gold], "score": [p.score for p in self.gold]}

    def seeds(self, target: str, init: str, encoder: str) -> Dict[int, str]:
        """{seed: run name} of the archived runs ``TARGET_INIT_ENCODER_sSEED``."""
        return self.prefixed_seeds(f"{target}_{init}_{encoder}")

    def columns(self, name: str) -> Dict[str, list]:
        """The run's predicted labels and scores (``pairs.evaluate`` columns), checked."""
        if name not in self._columns:
            from ...pairs.evaluate import EvaluationError, read_predictions
            from ...pairs.metrics import system_metrics

            d = self.run_dir(name)
            path = d / PREDICTIONS
            try:
                columns = read_predictions(str(path), self.gold)
            except EvaluationError as err:
                text = str(err)
                raise ResultsError(text if str(path) in text else f"{path}: {text}") from None
            gold = self.gold_columns()
            metrics = system_metrics(gold, columns)
            result = self.result(name)
            for task, values in metrics.items():
                for key, computed in values.items():
                    if key not in TOLERANCE:
                        continue
                    recorded = archived_value(d / RESULT, "test", task, key, data=result)
                    if not abs(recorded - computed) <= TOLERANCE[key]:
                        raise ResultsError(f"{d / RESULT}: test {task} {key} {recorded:g} "
                                           f"archived, {computed:g} recomputed from {path}")
            self._columns[name], self._metrics[name] = columns, metrics
        return self._columns[name]

    def metric(self, name: str, target: str) -> float:
        """The run's headline test metric, recomputed from its predictions."""
        self.columns(name)
        task, metric = HEADLINE[target][:2]
        if task not in self._metrics[name]:
            raise ResultsError(f"{self.run_dir(name) / PREDICTIONS}: no {task} predictions")
        return self._metrics[name][task][metric]

    def stats(self, name: str, target: str):
        """Per-pair statistics of the headline metric (``pairs.metrics.TESTED``) and its score
        function."""
        from ...pairs.metrics import TESTED

        metric = HEADLINE[target][1]
        head, stats_of, score = TESTED[metric]
        self.metric(name, target)  # checked
        return stats_of(self.gold_columns()[head], self.columns(name)[head]), score

    def minutes(self, name: str) -> float:
        return archived_value(self.run_dir(name) / RESULT, "minutes", data=self.result(name))


def _fmt(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def runs_table(runs: PairsArchive, targets: Sequence[str], inits: Sequence[str],
               encoders: Sequence[str]) -> str:
    """Markdown: per target, start and encoder the headline test metric of each seed, the mean
    ± sd over seeds and each run's minutes; then the majority class's test accuracy."""
    groups = [(t, i, e, runs.seeds(t, i, e)) for t in targets for i in inits for e in encoders]
    seeds = sorted({s for *_, g in groups for s in g})
    out = ["| target (test metric) | start | encoder | " + " | ".join(f"seed {s}" for s in seeds)
           + " | mean ± sd | minutes per run |", "|---|---|---|" + "---|" * (len(seeds) + 2)]
    for target, init, encoder, group in groups:
        if not group:
            continue
        digits = HEADLINE[target][3]
        values = {s: runs.metric(n, target) for s, n in group.items()}
        cells = [_fmt(values[s], digits) if s in values else "" for s in seeds]
        cells += [mean_sd([values[s] for s in sorted(values)], digits),
                  " / ".join(f"{runs.minutes(group[s]):.1f}" for s in sorted(group))]
        out.append(f"| {target} ({HEADLINE[target][2]}) | {init} | {encoder} | "
                   + " | ".join(cells) + " |")
    labels = [p.label for p in runs.gold]
    majority = max(sorted(set(labels)), key=labels.count)
    out += ["", f"Majority class of the test split ({majority}, {labels.count(majority)} of "
                f"{len(labels)} pairs): {100 * labels.count(majority) / len(labels):.2f} % "
                f"accuracy."]
    return "\n".join(out)


def pair_comparisons(runs: PairsArchive, specs: Sequence[Tuple[str, tuple, tuple]],
                     table: str, n_samples: int = 1000, seed: int = 12345) -> List[Comparison]:
    """Seed-level comparisons of the headline test metric: ``specs`` are (label, baseline
    (target, init, encoder), system (target, init, encoder)), both of one target; paired by
    seed when the system's seeds are among the baseline's; Holm over the specs. Each row's
    ``extra`` holds the target and the pooled sentence-level bootstrap (seeds held fixed;
    ``pooled``), which is never the verdict."""
    rows = []
    for label, base_key, sys_key in specs:
        target = base_key[0]
        if sys_key[0] != target:
            raise ResultsError(f"{label}: {base_key} and {sys_key} have different targets")
        base, sys_ = runs.seeds(*base_key), runs.seeds(*sys_key)
        if len(base) < 2 or len(sys_) < 2:
            raise ResultsError(f"{label}: fewer than two archived seeds of "
                               f"{'_'.join(base_key)} or {'_'.join(sys_key)} in {runs.archive}")
        score = runs.stats(base[min(base)], target)[1]
        rows.append(seed_comparison(
            base, sys_, lambda name: runs.stats(name, target)[0], score, table=table,
            label=label, system=sys_key[2] if sys_key[1] == base_key[1]
            else f"{sys_key[2]}, {sys_key[1]}", baseline=f"{base_key[2]}, {base_key[1]}",
            scored=lambda name: runs.metric(name, target),
            extra=lambda b_stats, s_stats: {
                "target": target,
                "pooled": paired_bootstrap(b_stats, s_stats, score, n_samples, seed)},
            n_samples=n_samples, seed=seed))
    apply_holm(rows)
    return rows


def pair_verdict_table(rows: Sequence[Comparison]) -> str:
    """Markdown: per comparison the seeds, both means ± sd over seeds, Δ with its seed-level
    95 % interval and its interval corrected over the table's tests, p and Holm-corrected p,
    per-seed deltas, how many share the sign, the verdict; last, labelled, the pooled bootstrap over test pairs with the seeds held fixed
    (it describes these seeds, not the encoders)."""
    out = [f"| comparison | metric | baseline | system | seeds | baseline mean ± sd | "
           f"system mean ± sd | Δ [95% interval, seeds and pairs] | "
           f"{corrected_header(len(rows))} | p (seeds) | p (Holm, {len(rows)} tests) | "
           f"per-seed Δ | same sign | verdict | p (test pairs, seeds fixed; not the verdict) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        _, _, name, digits = HEADLINE[r.extra["target"]]
        res = r.result
        low, high = res.ci
        per_seed = " ".join(f"{d:+.{digits}f}" for d in res.per_seed) if res.per_seed \
            else "unpaired"
        sign = f"{res.same_sign}/{len(res.per_seed)}" if res.per_seed else ""
        pooled = r.extra["pooled"]
        out.append(f"| {r.label} | {name} | {r.baseline} | {r.system} | "
                   f"{len(r.system_scores)} | {mean_sd(r.baseline_scores, digits)} | "
                   f"{mean_sd(r.system_scores, digits)} | {res.delta:+.{digits}f} "
                   f"[{low:+.{digits}f}, {high:+.{digits}f}] | "
                   f"{corrected_interval(res, len(rows), digits)} | {res.p_value:.3g} | "
                   f"{r.p_holm:.3g} | {per_seed} | {sign} | {r.verdict} | "
                   f"{'identical' if pooled.identical else f'{pooled.p_value:.3g}'} |")
    return "\n".join(out)
