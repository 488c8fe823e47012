"""Span F1 during fairseq validation, equal to ``ssan-evaluate-srl`` on the same split.

srl-eval.pl scores every proposition on its own (``scorer.match_propositions``: gold and
predicted arguments of one predicate are matched with each other only), and the overall
counts are the sums of the propositions' (correct, excess, missed). So a split can be scored
instance by instance, batch by batch, and the counts summed: each instance becomes a
one-proposition props sentence (its gold target at the predicate, ``-`` elsewhere; the gold
argument column from the split's ``S.props``; the predicted column ``bio_to_brackets`` of the
constrained-Viterbi tags, as ``evaluate.predicted_props`` builds it) and goes through
``scorer.evaluate``. The summed counts give exactly ``ssan-evaluate-srl``'s overall precision,
recall and F1 (``scorer.Counts.prf``), provided every instance of the split is validated.

No fairseq dependency (the task ``srl`` uses it; ``tests/unit/srl/test_validation.py``).
"""

from typing import List, NamedTuple, Sequence

from . import datadir
from .brackets import bio_to_brackets
from .props import read_props
from .scorer import Counts, evaluate


class GoldInstance(NamedTuple):
    """The gold proposition of one instance: targets (the lemma at the predicate, ``-`` at
    every other word) and its argument column (bracket notation, one tag per word)."""

    targets: List[str]
    column: List[str]


def gold_instances(props: Sequence, instances: Sequence[datadir.Instance],
                   where: str = "gold props") -> List[GoldInstance]:
    """Per instance id (list index), its gold proposition from the split's props sentences and
    instances table; ValueError when they disagree (``where`` names the props file)."""
    out = []
    for inst in instances:
        if not 0 <= inst.sentence < len(props):
            raise ValueError(f"{where}: instance {inst.instance} refers to sentence "
                             f"{inst.sentence}, the props have {len(props)} sentences")
        targets, columns = props[inst.sentence]
        positions = [i for i, t in enumerate(targets) if t != "-"]
        if inst.predicate not in positions or len(columns) != len(positions):
            raise ValueError(f"{where}: sentence {inst.sentence}: no argument column for the "
                             f"predicate of instance {inst.instance} (word {inst.predicate})")
        only = ["-"] * len(targets)
        only[inst.predicate] = targets[inst.predicate]
        out.append(GoldInstance(only, list(columns[positions.index(inst.predicate)])))
    return out


def read_gold_instances(data: str, split: str) -> List[GoldInstance]:
    """``gold_instances`` of a prepared split (``S.props`` + ``S.instances.tsv`` of ``data``)."""
    path = datadir.props_path(data, split)
    return gold_instances(read_props(path), datadir.read_instances(datadir.instances_path(data, split)),
                          path)


def instance_counts(gold: Sequence[GoldInstance], predicted: Sequence[Sequence[str]]) -> Counts:
    """Summed (correct, excess, missed) of instances scored by ``scorer.evaluate``: ``gold[k]``
    against the BIO tags ``predicted[k]`` (``V`` excluded, as in the overall counts)."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold instances, {len(predicted)} predicted")
    gold_props, pred_props = [], []
    for g, tags in zip(gold, predicted):
        if len(tags) != len(g.targets):
            raise ValueError(f"{len(tags)} tags for {len(g.targets)} words")
        gold_props.append((g.targets, [g.column]))
        pred_props.append((g.targets, [bio_to_brackets(list(tags))]))
    return evaluate(gold_props, pred_props).overall
