"""Seeds of one system pooled into a group: the naming convention of every comparison script.

A system named ``GROUP@SEED`` (``ssan@1``, ``ssan@2``) belongs to group ``GROUP``; a name
without ``@`` is a group of one. Groups keep the order of their first system, and the first
group is the baseline that the others are compared with. Two tests per group:

- the verdict, ``significance.seed_level_test`` (seeds and test items resampled; needs two
  seeds or more per group), with Holm's correction over the groups one table compares;
- a description of these seeds, ``significance.paired_bootstrap`` with one statistics array
  per seed (test items resampled, the same for every seed, seeds held fixed): the
  sentence-level p, labelled as such.

Used by ``ssan-evaluate-bleu`` (translation.comparison), ``ssan-evaluate-srl``
(srl.compare) and ``ssan-evaluate-pairs`` (pairs.evaluate).
"""

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputError
from .significance import (
    PairedResult,
    ScoreFn,
    SeedLevelResult,
    almost_stochastic_order,
    holm,
    paired_bootstrap,
    sd_ratio_interval,
    seed_level_test,
)


class SeedGroupError(InputError, ValueError):
    """A system name that breaks the GROUP@SEED convention (one line, exit 2 in the scripts)."""


@dataclass
class GroupMember:
    group: str
    seed: Optional[str]  # None: a name without "@"


def parse_member(name: str) -> GroupMember:
    """``GROUP@SEED`` -> (GROUP, SEED); a name without ``@`` -> (name, None). The last ``@``
    separates the seed."""
    group, sep, seed = name.rpartition("@")
    if not sep:
        return GroupMember(group=name, seed=None)
    if not group or not seed:
        raise SeedGroupError(f"system name {name!r}: expected GROUP@SEED (e.g. ssan@1), with "
                             f"a non-empty group and seed")
    return GroupMember(group=group, seed=seed)


def has_groups(names: Sequence[str]) -> bool:
    """Whether any name is GROUP@SEED (every name is checked)."""
    return any([parse_member(n).seed is not None for n in names])


def group_order(names: Sequence[str]) -> Dict[str, List[int]]:
    """Group name -> indices of its systems, groups in order of first appearance. A seed may
    appear once per group, and a group is either one name without seed or all GROUP@SEED."""
    groups: Dict[str, List[int]] = {}
    seeds: Dict[str, set] = {}
    for i, name in enumerate(names):
        member = parse_member(name)
        seen = seeds.setdefault(member.group, set())
        if seen and (member.seed is None or None in seen):
            raise SeedGroupError(f"group {member.group!r} mixes a system without a seed with "
                                 f"others: name every system of a group GROUP@SEED")
        if member.seed in seen:
            raise SeedGroupError(f"group {member.group!r} has seed {member.seed} twice")
        seen.add(member.seed)
        groups.setdefault(member.group, []).append(i)
    return groups


def same_seed_baseline(names: Sequence[str]) -> List[int]:
    """For each system, the index it is compared with: the baseline group's system of the same
    seed when there is one, else the first system."""
    base_group = parse_member(names[0]).group
    by_seed = {parse_member(n).seed: i for i, n in enumerate(names)
               if parse_member(n).group == base_group}
    out = []
    for i, name in enumerate(names):
        seed = parse_member(name).seed
        j = by_seed.get(seed, 0) if seed is not None else 0
        out.append(0 if j == i else j)  # the baseline group's own seeds: against the first
    return out


@dataclass
class PooledGroup:
    """One group of seeds: its name, the indices of its systems and, for every group after the
    first, against the first group: ``test``, the sentence-level pooled bootstrap (seeds held
    fixed); ``seed_level``, the seed-level test (None when a group has fewer than two seeds);
    ``p_holm``, the seed-level p after Holm's correction over every group of the table;
    ``spread``, how much more its seeds spread than the first group's
    (``significance.sd_ratio_interval``: ratio, low, high; None without two seeds a side or
    when the first group's seeds all score the same)."""
    name: str
    members: List[int]
    test: Optional[PairedResult] = None
    seed_level: Optional[SeedLevelResult] = None
    p_holm: Optional[float] = None
    spread: Optional[Tuple[float, float, float]] = None


def pooled_groups(names: Sequence[str], stats: Sequence, score: ScoreFn, n_samples: int,
                  seed: int, aso: bool = False) -> List[PooledGroup]:
    """The groups of ``names`` (:func:`group_order`), each after the first tested against the
    first: ``stats[i]`` is system i's (N, k) per-item statistics, ``score`` maps summed
    statistics to the corpus score. ``aso``: also Almost Stochastic Order over the seeds'
    scores (``seed_level.aso``)."""
    groups: List[PooledGroup] = []
    for name, members in group_order(names).items():
        group = PooledGroup(name=name, members=members)
        if groups:
            base = groups[0].members
            group.test = paired_bootstrap([stats[i] for i in base], [stats[i] for i in members],
                                          score, n_samples, seed)
            if len(base) >= 2 and len(members) >= 2:
                group.seed_level = seed_level_test(
                    [stats[i] for i in base], [stats[i] for i in members], score,
                    [parse_member(names[i]).seed for i in base],
                    [parse_member(names[i]).seed for i in members], n_samples, seed)
                base_scores = [score(stats[i].sum(0)) for i in base]
                scores = [score(stats[i].sum(0)) for i in members]
                if aso:
                    group.seed_level.aso = almost_stochastic_order(base_scores, scores, seed)
                if np.std(base_scores) > 0:
                    group.spread = sd_ratio_interval(scores, base_scores)
        groups.append(group)
    tested = [g for g in groups if g.seed_level is not None]
    for group, adjusted in zip(tested, holm([g.seed_level.p_value for g in tested])):
        group.p_holm = adjusted
    return groups


def seed_level_entry(group: PooledGroup) -> dict:
    """A group's seed-level test as a JSON-ready dict (empty when it has none): ``delta``,
    ``ci``, ``p``, ``p_holm``, ``paired``, ``per_seed`` deltas, ``same_sign``, ``se`` and its
    parts, ``df``; with a ``spread``, ``sd_ratio`` and its 95 % interval ``sd_ratio_ci``."""
    if group.seed_level is None:
        return {}
    entry = dict(group.seed_level.to_json(), p_holm=group.p_holm)
    if group.seed_level.aso is not None:
        entry["aso"] = group.seed_level.aso
    if group.spread is not None:
        entry["sd_ratio"], entry["sd_ratio_ci"] = group.spread[0], list(group.spread[1:])
    return entry


def verdict(entry: dict, alpha: float = 0.05, higher_is_better: bool = True) -> str:
    """A group's seed-level entry in words: 'better' / 'worse' when the Holm-corrected p is
    below ``alpha``, 'no difference shown' otherwise, 'too few seeds' without a test."""
    if not entry:
        return "too few seeds"
    if entry["p_holm"] < alpha:
        return "better" if (entry["delta"] > 0) == higher_is_better else "worse"
    return "no difference shown"


def interim_label(seeds: int, planned: Optional[int], baseline_seeds: int,
                  baseline_planned: Optional[int]) -> Optional[str]:
    """The verdict's stand-in while a plan's seeds are not all in: ``interim: N of M seeds``
    (the group short of its ``planned`` seeds) or ``interim: baseline N of M seeds``; None once
    both groups have their planned seeds, or where nothing is planned. A plan is read at its
    seeds, not at each look: deciding at whichever look first crosses 0.05 calls true nulls
    significant more often than the test's 5 %."""
    if planned is not None and seeds < planned:
        return f"interim: {seeds} of {planned} seeds"
    if baseline_planned is not None and baseline_seeds < baseline_planned:
        return f"interim: baseline {baseline_seeds} of {baseline_planned} seeds"
    return None


def seed_level_cells(entry: dict, digits: int = 2) -> List[str]:
    """Table cells of a seed-level entry: Δ [95 % interval], p, p Holm, per-seed Δ, same sign
    (dashes when the groups have too few seeds for the test)."""
    if not entry:
        return ["too few seeds", "—", "—", "", ""]
    low, high = entry["ci"]
    delta = f"{entry['delta']:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"
    p_holm = "—" if entry.get("p_holm") is None else f"{entry['p_holm']:.3g}"
    if entry["per_seed"] is None:
        return [delta, f"{entry['p']:.3g}", p_holm, "unpaired", ""]
    return [delta, f"{entry['p']:.3g}", p_holm,
            " ".join(f"{d:+.{digits}f}" for d in entry["per_seed"]),
            f"{entry['same_sign']}/{len(entry['per_seed'])}"]


GROUP_TABLE_HEAD = ("| group | seeds | mean {metric} ± sd | Δ vs {base} [95% seed-level interval] | "
                    "p (seeds) | p (Holm) | per-seed Δ | same sign | verdict | "
                    "p (sentences, seeds fixed) |")


def group_table(groups: Sequence[dict], metric: str, mean_std_of, digits: int = 2) -> str:
    """Markdown: each group's mean ± sd over seeds and, against the first group, the seed-level
    test (the verdict) and, labelled, the sentence-level p of the pooled bootstrap. ``groups``:
    entries with ``name``, ``n_seeds``, ``seed_level``, ``verdict``, ``p_value``, ``identical``;
    ``mean_std_of(entry) -> (mean, sd)``."""
    rows = [GROUP_TABLE_HEAD.format(metric=metric, base=groups[0]["name"]),
            "|---|---|---|---|---|---|---|---|---|---|"]
    for k, g in enumerate(groups):
        mean, sd = mean_std_of(g)
        head = f"| {g['name']} | {g['n_seeds']} | {mean:.{digits}f} ± {sd:.{digits}f} |"
        if k == 0:
            rows.append(head + " (baseline) | | | | | | |")
            continue
        sentence_p = "identical" if g.get("identical") else f"{g['p_value']:.4f}"
        rows.append(head + " " + " | ".join(seed_level_cells(g.get("seed_level") or {}, digits))
                    + f" | {g.get('verdict', '')} | {sentence_p} |")
    spread = [(g["name"], g["seed_level"]["sd_ratio"], g["seed_level"]["sd_ratio_ci"])
              for g in groups[1:] if (g.get("seed_level") or {}).get("sd_ratio") is not None]
    if spread:
        rows += ["", "Seed spread against the baseline's (standard deviation over seeds as a "
                     "multiple of the baseline's, 95 % interval taking each group's seed scores "
                     "as normal): " + ", ".join(f"{n} {r:.2f} [{lo:.2f}, {hi:.2f}]"
                                                 for n, r, (lo, hi) in spread)]
    aso = [(g["name"], g["seed_level"]["aso"]) for g in groups[1:]
           if (g.get("seed_level") or {}).get("aso") is not None]
    if aso:
        rows += ["", "Almost Stochastic Order over seeds (deepsig; eps_min: 0 = the group's seeds "
                     "dominate the baseline's, 1 = the reverse, about 0.5 = neither; a second "
                     "opinion, not the verdict): " + ", ".join(f"{n} {e:.2f}" for n, e in aso)]
    return "\n".join(rows)


def mean_std(values: Sequence[float]) -> Tuple[float, float]:
    """(mean, sample standard deviation) over seeds; the deviation of one seed is 0."""
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
