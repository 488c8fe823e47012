#!/usr/bin/env python
"""A small deterministic parallel corpus where selection can matter (the demo's default).

Source sentences are verb-final (S PP O ADV V, nouns before their adjectives, postpositions,
a clause-final conjunction between two clauses) and carry many *fillers*: words with no
translation, either plain filler words or *distractors* (a marker followed by a real content
word, e.g. a noun, that must not be translated). Targets are S V ADV O PP with adjectives
before nouns and prepositions, the two clauses of a sentence in the opposite order, fillers and
distractors dropped. A model must find the sparse content words among look-alikes, decide from
context which of them count, and reorder them.

Writes OUT/{train,valid,test}.{src,tgt}, one sentence per line, and OUT/{split}.src.labels:
one label per source word, aligned with the words of the .src line: ``filler`` for every word
without a translation (filler words, distractor markers and the distracted content words),
otherwise the word's part of speech (``noun``, ``adj``, ``verb``, ``adv``, ``prep``,
``conj``). The same seed gives byte-identical files.
"""

import argparse
import os
import random
import sys

from ssan_plugin.cli.arguments import (
    ArgumentParser,
    float_arg,
    nonnegative_int,
    positive_int,
    script_main,
)
from ssan_plugin.cli.files import check_output_dir

SRC_SYLLABLES = ["ka", "lo", "mi", "tu", "ra", "ne", "so", "vi", "pe", "du", "go", "ha"]
TGT_SYLLABLES = ["bel", "dor", "fin", "gar", "hum", "jol", "kir", "lun", "mar", "nop", "sut", "wex"]
FILLER = "filler"
#: lexicon sizes: (source, target) word pairs per part of speech
LEXICON_SIZES = (("noun", 160), ("verb", 50), ("adj", 50), ("adv", 20), ("prep", 8), ("conj", 4))


def make_words(rng, syllables, count, lengths, taken):
    """`count` new words of rng.choice(lengths) syllables each, none in `taken`."""
    words = []
    while len(words) < count:
        w = "".join(rng.choice(syllables) for _ in range(rng.choice(lengths)))
        if w not in taken:
            taken.add(w)
            words.append(w)
    return words


def make_lexicon(seed: int):
    """({pos: [(src, tgt), ...]}, filler words, distractor markers); deterministic in seed."""
    rng = random.Random(seed)
    src_taken, tgt_taken = set(), set()
    markers = make_words(rng, SRC_SYLLABLES, 3, (2,), src_taken)  # first: short words left
    lex = {}
    for kind, count in LEXICON_SIZES:
        src = make_words(rng, SRC_SYLLABLES, count, (2, 3), src_taken)
        tgt = make_words(rng, TGT_SYLLABLES, count, (1, 2, 2, 3), tgt_taken)
        lex[kind] = list(zip(src, tgt))
    fillers = make_words(rng, SRC_SYLLABLES, 60, (2, 3), src_taken)
    return lex, fillers, markers


class Sentence:
    """A source under construction: words and their labels, plus the target words."""

    def __init__(self):
        self.src, self.labels = [], []

    def add(self, word, label):
        self.src.append(word)
        self.labels.append(label)


def noun_phrase(rng, lex):
    """(source [(word, pos)], target words): source noun adj adj, target adj adj noun."""
    noun = rng.choice(lex["noun"])
    adjs = []
    if rng.random() < 0.5:
        adjs.append(rng.choice(lex["adj"]))
        if rng.random() < 0.3:
            adjs.append(rng.choice(lex["adj"]))
    src = [(noun[0], "noun")] + [(a[0], "adj") for a in adjs]
    tgt = [a[1] for a in reversed(adjs)] + [noun[1]]
    return src, tgt


def clause(rng, lex):
    """(source [(word, pos)], target words) of one clause: S PP O ADV V -> S V ADV O PP."""
    subj_s, subj_t = noun_phrase(rng, lex)
    obj_s, obj_t = noun_phrase(rng, lex)
    verb = rng.choice(lex["verb"])
    pp_s, pp_t = [], []
    if rng.random() < 0.5:
        prep = rng.choice(lex["prep"])
        np_s, np_t = noun_phrase(rng, lex)
        pp_s, pp_t = np_s + [(prep[0], "prep")], [prep[1]] + np_t  # postposition -> preposition
    adv_s, adv_t = [], []
    if rng.random() < 0.4:
        adv = rng.choice(lex["adv"])
        adv_s, adv_t = [(adv[0], "adv")], [adv[1]]
    source = subj_s + pp_s + obj_s + adv_s + [(verb[0], "verb")]
    target = subj_t + [verb[1]] + adv_t + obj_t + pp_t
    return source, target


def sentence(rng, lex, fillers, markers, filler_rate: float, distractor_rate: float,
             two_clause_rate: float):
    """(source, target, labels) strings; labels aligned with the source words."""
    content, target = clause(rng, lex)
    if rng.random() < two_clause_rate:
        second_s, second_t = clause(rng, lex)
        conj = rng.choice(lex["conj"])
        content = content + second_s + [(conj[0], "conj")]  # C1 C2 conj -> C2 conj C1
        target = second_t + [conj[1]] + target
    out = Sentence()

    def fill():
        while rng.random() < filler_rate:
            if rng.random() < distractor_rate:  # a marker and a content word to skip
                out.add(rng.choice(markers), FILLER)
                kind = rng.choice(("noun", "noun", "adj", "verb"))
                out.add(rng.choice(lex[kind])[0], FILLER)
            else:
                out.add(rng.choice(fillers), FILLER)

    for word, pos in content:
        fill()
        out.add(word, pos)
    fill()
    return " ".join(out.src), " ".join(target), " ".join(out.labels)


def write_corpus(out: str, sizes, seed: int = 1, filler_rate: float = 0.5,
                 distractor_rate: float = 0.3, two_clause_rate: float = 0.5):
    lex, fillers, markers = make_lexicon(seed)
    os.makedirs(out, exist_ok=True)
    for split_index, (split, n) in enumerate(sizes.items()):
        rng = random.Random(seed * 1000 + split_index)
        triples = [sentence(rng, lex, fillers, markers, filler_rate, distractor_rate,
                            two_clause_rate) for _ in range(n)]
        for suffix, column in (("src", 0), ("tgt", 1), ("src.labels", 2)):
            with open(os.path.join(out, f"{split}.{suffix}"), "w", encoding="utf-8") as f:
                f.writelines(t[column] + "\n" for t in triples)


def main():
    ap = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--train", type=positive_int, default=20000)
    ap.add_argument("--valid", type=positive_int, default=500)
    ap.add_argument("--test", type=positive_int, default=500)
    ap.add_argument("--seed", type=nonnegative_int, default=1)
    ap.add_argument("--filler-rate", type=float_arg(0.0, 1.0, hi_open=True), default=0.5,
                    help="probability of one more filler before each content word (0.5)")
    ap.add_argument("--distractor-rate", type=float_arg(0.0, 1.0, hi_open=True), default=0.3,
                    help="fraction of fillers that are a marker + a content word to skip (0.3)")
    ap.add_argument("--two-clause-rate", type=float_arg(0.0, 1.0, hi_open=True), default=0.5,
                    help="fraction of sentences with two clauses, reversed in the target (0.5)")
    args = ap.parse_args()
    check_output_dir(args.out, "--out")
    write_corpus(args.out, {"train": args.train, "valid": args.valid, "test": args.test},
                 args.seed, args.filler_rate, args.distractor_rate, args.two_clause_rate)


if __name__ == "__main__":
    sys.exit(script_main(main, prog="make_synthetic_corpus.py")())
