"""Comparing systems beyond one corpus score: seeds pooled into groups, BLEU by source length.

- Groups (``ssan_plugin.stats.seed_groups``): a system named ``GROUP@SEED`` (``ssan@1``, ``ssan@2``)
  belongs to group ``GROUP``; the first group is the baseline. Each group gets its seed-mean
  BLEU and standard deviation, and against the baseline group the seed-level test (the
  verdict: ``significance.seed_level_test``, Holm-corrected over the groups) and, labelled as
  sentence-level, the pooled paired bootstrap p-value of these seeds
  (``significance.paired_bootstrap`` with one statistics array per seed: the same sentence ids
  for every seed, seed-averaged corpus BLEU compared, seeds held fixed).
- Length buckets: source sentences by their number of whitespace-separated words, buckets
  1-10, 11-20, 21-30, 31-40, 41+ (an empty source counts in the first bucket); BLEU per bucket
  is the corpus BLEU of the sentences in it (sums of sacrebleu's statistics), not a mean of
  sentence scores.
"""

from typing import List, Mapping, Optional, Sequence

import numpy as np

from ..stats import seed_groups
from ..stats.buckets import LENGTH_BUCKETS, bucket_index, bucket_label
from ..stats.significance import ScoreFn
from .textio import PipelineError



def pooled_groups(names: Sequence[str], stats: Sequence[np.ndarray], score: ScoreFn,
                  n_samples: int, seed: int, aso: bool = False,
                  planned: Optional[Mapping[str, int]] = None) -> List[dict]:
    """One entry per group: ``name``, ``systems``, ``n_seeds``, ``mean_bleu``, ``std_bleu``
    (sample standard deviation over seeds, 0 for one seed), and for groups after the first,
    against the first group: ``delta``, ``p_value`` (sentence-level: the pooled paired
    bootstrap, seeds held fixed) and ``identical``; ``seed_level``
    (``seed_groups.seed_level_entry``; empty with fewer than two seeds a side) and ``verdict``
    (``seed_groups.verdict``); with ``aso``, ``seed_level["aso"]``: Almost Stochastic Order
    of the group's seed BLEU over the first group's (``significance.almost_stochastic_order``).
    ``planned``: {group: the seeds its plan runs}; while a tested group or the baseline has
    fewer, its verdict is ``seed_groups.interim_label``'s (a group named there but absent, or
    with more seeds than planned, is a PipelineError)."""
    planned = dict(planned or {})
    sizes = {name: len(members) for name, members in seed_groups.group_order(names).items()}
    unknown = sorted(set(planned) - set(sizes))
    if unknown:
        raise PipelineError(f"planned seeds for {', '.join(unknown)}: no such group among "
                            f"{', '.join(sizes)}")
    over = [f"{name} has {sizes[name]} seeds, {n} planned" for name, n in planned.items()
            if sizes[name] > n]
    if over:
        raise PipelineError("more seeds than planned: " + "; ".join(over))
    groups = seed_groups.pooled_groups(names, stats, score, n_samples, seed, aso)
    entries = []
    for group in groups:
        mean, std = seed_groups.mean_std([score(stats[i].sum(0)) for i in group.members])
        entry = {"name": group.name, "systems": [names[i] for i in group.members],
                 "n_seeds": len(group.members), "mean_bleu": mean, "std_bleu": std}
        if group.test is not None:
            entry.update(delta=group.test.delta, p_value=group.test.p_value,
                         identical=group.test.identical)
            entry["seed_level"] = seed_groups.seed_level_entry(group)
            base = groups[0].name
            interim = entry["seed_level"] and seed_groups.interim_label(
                sizes[group.name], planned.get(group.name), sizes[base], planned.get(base))
            entry["verdict"] = interim or seed_groups.verdict(entry["seed_level"])
        entries.append(entry)
    return entries


def source_lengths(sources: Sequence[str]) -> List[int]:
    return [len(line.split()) for line in sources]


def bucket_of(length: int) -> int:
    """The ``LENGTH_BUCKETS`` index of a source length; an empty source line (0 words) counts
    with the shortest."""
    return bucket_index(max(length, 1), LENGTH_BUCKETS)


def by_length(lengths: Sequence[int], stats: np.ndarray, score: ScoreFn) -> List[dict]:
    """Corpus score per source-length bucket: [{min_len, max_len, n, bleu}] (``max_len`` None
    for the open-ended last bucket; ``bleu`` None for an empty bucket)."""
    if len(lengths) != stats.shape[0]:
        raise PipelineError(f"{len(lengths)} source lengths for {stats.shape[0]} sentences")
    buckets = np.array([bucket_of(n) for n in lengths], dtype=np.int64)
    out = []
    for k, (low, high) in enumerate(LENGTH_BUCKETS):
        mask = buckets == k
        n = int(mask.sum())
        out.append({"min_len": low, "max_len": high, "n": n,
                    "bleu": float(score(stats[mask].sum(0))) if n else None})
    return out


def length_label(bucket: dict) -> str:
    """A ``by_length`` entry's label: ``"1-10"``, ..., ``"41+"``."""
    return bucket_label(bucket["min_len"], bucket["max_len"])


def plot_by_length(systems: Sequence[dict], path, title: str = "BLEU by source length") -> None:
    """Grouped bars: BLEU per length bucket for every system (``systems[].by_length``); the
    bucket's sentence count under its label."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buckets = systems[0]["by_length"]
    x = np.arange(len(buckets))
    width = 0.8 / max(1, len(systems))
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(buckets), 3.6))
    for k, system in enumerate(systems):
        values = [b["bleu"] if b["bleu"] is not None else np.nan for b in system["by_length"]]
        ax.bar(x + (k - (len(systems) - 1) / 2) * width, values, width, label=system["name"])
    ax.set_xticks(x, [f"{length_label(b)}\n(n={b['n']})" for b in buckets])
    ax.set_xlabel("source length (words)")
    ax.set_ylabel("BLEU")
    ax.set_title(title)
    ax.legend(fontsize="small", ncol=min(4, len(systems)))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
