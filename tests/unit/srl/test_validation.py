"""ssan_plugin.srl.validation: instance-by-instance span counts, summed over any batching,
equal the scorer's corpus counts on the props files evaluate_srl.py writes."""

import random

import pytest

from ssan_plugin.srl import datadir
from ssan_plugin.srl.brackets import brackets_to_bio
from ssan_plugin.srl.evaluate import predicted_props
from ssan_plugin.srl.scorer import Counts, evaluate
from ssan_plugin.srl.validation import gold_instances, instance_counts

# two predicates in one sentence, C-/R- arguments, a sentence without predicates, embedded
# gold phrases (BIO cannot predict them: always missed), a split predicate (C-V)
GOLD = [
    (["-", "see", "-", "-", "leave", "-"],
     [["(A0*)", "(V*)", "(A1*", "*", "*)", "*"],
      ["*", "*", "(A0*", "*)", "(V*)", "(AM-TMP*)"]]),
    (["-", "-", "say", "-", "-"], [["(A1*", "*)", "(V*)", "(C-A1*)", "(R-A0*)"]]),
    (["-", "-"], []),
    (["give", "-", "-", "take"],
     [["(V*)", "(A1*", "(A0*)", "*)"], ["(A0*", "*)", "*", "(V*)"]]),
    (["-", "turn", "-", "-"], [["(A0*)", "(V*)", "(C-V*)", "(A1*)"]]),
]
TABLE = [datadir.Instance(0, 0, 1), datadir.Instance(1, 0, 4), datadir.Instance(2, 1, 2),
         datadir.Instance(3, 3, 0), datadir.Instance(4, 3, 3), datadir.Instance(5, 4, 1)]
ROLES = ["A0", "A1", "C-A1", "R-A0", "AM-TMP", "C-V"]


def _corrupt(rng, bio, predicate):
    """A valid BIO sequence near ``bio`` with B-V at the predicate (what Viterbi can emit)."""
    out = []
    for i, tag in enumerate(bio):
        if i == predicate:
            tag = "B-V"
        elif rng.random() < 0.3:
            tag = rng.choice(["O", "B-" + rng.choice(ROLES), "I-" + rng.choice(ROLES)])
        if tag.startswith("I-") and not (out and out[-1][2:] == tag[2:] and out[-1] != "O"):
            tag = "B-" + tag[2:]
        out.append(tag)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_summed_instance_counts_equal_corpus_counts(seed):
    rng = random.Random(seed)
    gold = gold_instances(GOLD, TABLE)
    decoded = {}
    for inst, g in zip(TABLE, gold):
        bio = brackets_to_bio(g.column)[0] if rng.random() < 0.7 else ["O"] * len(g.column)
        decoded[inst.instance] = _corrupt(rng, bio, inst.predicate)
    corpus = evaluate(GOLD, predicted_props(GOLD, TABLE, decoded, "gold")).overall

    order = list(range(len(TABLE)))
    rng.shuffle(order)  # batches of random sizes in a random order, as fairseq validates
    summed, start = Counts(), 0
    while start < len(order):
        batch = order[start:start + rng.randint(1, 3)]
        summed.add(instance_counts([gold[k] for k in batch], [decoded[k] for k in batch]))
        start += len(batch)
    assert summed == corpus
    assert summed.prf() == corpus.prf()


def test_gold_bio_misses_only_what_bio_cannot_express():
    gold = gold_instances(GOLD, TABLE)
    tags = [brackets_to_bio(g.column)[0] for g in gold]
    # 11 gold arguments (V and C-V excluded; A1 + C-A1 is one); the A1 holding an embedded A0
    # is discontinuous for srl-eval.pl: the flat A1 predicted is excess, A1 and A0 are missed
    assert instance_counts(gold, tags) == Counts(correct=9, excess=1, missed=2)


def test_gold_instances_disagreements():
    with pytest.raises(ValueError, match="refers to sentence 7"):
        gold_instances(GOLD, TABLE + [datadir.Instance(6, 7, 0)], "g.props")
    with pytest.raises(ValueError, match="no argument column for the predicate of instance 6"):
        gold_instances(GOLD, TABLE + [datadir.Instance(6, 0, 0)], "g.props")
    with pytest.raises(ValueError, match="3 tags for 6 words"):
        instance_counts(gold_instances(GOLD, TABLE)[:1], [["O"] * 3])
