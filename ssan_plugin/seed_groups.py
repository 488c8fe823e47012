"""Seeds of one system pooled into a group: the naming convention of every comparison script.

A system named ``GROUP@SEED`` (``ssan@1``, ``ssan@2``) belongs to group ``GROUP``; a name
without ``@`` is a group of one. Groups keep the order of their first system, and the first
group is the baseline that the others are compared with (``significance.paired_bootstrap``
with one statistics array per seed: the same test items resampled for every seed, seed-mean
scores compared). Used by ``evaluate_bleu.py`` (translation.comparison), ``evaluate_srl.py``
(srl.compare) and ``evaluate_pairs.py`` (pairs.evaluate).
"""

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .cli import InputError
from .significance import PairedResult, ScoreFn, paired_bootstrap


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
    first, ``test``: the paired bootstrap of its seed-mean score against the first group's."""
    name: str
    members: List[int]
    test: Optional[PairedResult] = None


def pooled_groups(names: Sequence[str], stats: Sequence, score: ScoreFn, n_samples: int,
                  seed: int) -> List[PooledGroup]:
    """The groups of ``names`` (:func:`group_order`), each after the first tested against the
    first: ``stats[i]`` is system i's (N, k) per-item statistics, ``score`` maps summed
    statistics to the corpus score."""
    groups: List[PooledGroup] = []
    for name, members in group_order(names).items():
        test = None
        if groups:
            test = paired_bootstrap([stats[i] for i in groups[0].members],
                                    [stats[i] for i in members], score, n_samples, seed)
        groups.append(PooledGroup(name=name, members=members, test=test))
    return groups


def mean_std(values: Sequence[float]) -> Tuple[float, float]:
    """(mean, sample standard deviation) over seeds; the deviation of one seed is 0."""
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
