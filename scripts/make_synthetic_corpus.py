#!/usr/bin/env python
"""A small deterministic parallel corpus where selection can matter (the demo's default).

Source sentences (SOV, adjectives after nouns) carry a few content words; about half of
the source tokens are distractor fillers that have no translation. Targets are SVO with
adjectives before nouns and prepositional phrases moved to the end, fillers dropped: the
model must find the sparse content words and reorder them.

Writes OUT/{train,valid,test}.{src,tgt}, one sentence per line; the same seed gives
byte-identical files.
"""

import argparse
import os
import random

SRC_SYLLABLES = ["ka", "lo", "mi", "tu", "ra", "ne", "so", "vi", "pe", "du", "go", "ha"]
TGT_SYLLABLES = ["bel", "dor", "fin", "gar", "hum", "jol", "kir", "lun", "mar", "nop", "sut", "wex"]


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
    rng = random.Random(seed)
    src_taken, tgt_taken = set(), set()
    lex = {}
    for kind, count in (("noun", 80), ("verb", 30), ("adj", 30), ("prep", 6)):
        src = make_words(rng, SRC_SYLLABLES, count, (2, 3), src_taken)
        tgt = make_words(rng, TGT_SYLLABLES, count, (1, 2, 2), tgt_taken)
        lex[kind] = list(zip(src, tgt))
    fillers = make_words(rng, SRC_SYLLABLES, 40, (2, 3), src_taken)
    return lex, fillers


def noun_phrase(rng, lex):
    noun = rng.choice(lex["noun"])
    adj = rng.choice(lex["adj"]) if rng.random() < 0.5 else None
    src = [noun[0]] + ([adj[0]] if adj else [])  # source: noun adj
    tgt = ([adj[1]] if adj else []) + [noun[1]]  # target: adj noun
    return src, tgt


def sentence(rng, lex, fillers, filler_rate: float):
    subj_s, subj_t = noun_phrase(rng, lex)
    obj_s, obj_t = noun_phrase(rng, lex)
    verb = rng.choice(lex["verb"])
    pp_s, pp_t = [], []
    if rng.random() < 0.5:
        prep = rng.choice(lex["prep"])
        np_s, np_t = noun_phrase(rng, lex)
        pp_s, pp_t = np_s + [prep[0]], [prep[1]] + np_t  # postposition -> preposition
    content = subj_s + pp_s + obj_s + [verb[0]]  # S PP O V
    target = subj_t + [verb[1]] + obj_t + pp_t  # S V O PP
    source = []
    for word in content:
        while rng.random() < filler_rate:
            source.append(rng.choice(fillers))
        source.append(word)
    while rng.random() < filler_rate:
        source.append(rng.choice(fillers))
    return " ".join(source), " ".join(target)


def write_corpus(out: str, sizes, seed: int = 1, filler_rate: float = 0.5):
    lex, fillers = make_lexicon(seed)
    os.makedirs(out, exist_ok=True)
    for split_index, (split, n) in enumerate(sizes.items()):
        rng = random.Random(seed * 1000 + split_index)
        pairs = [sentence(rng, lex, fillers, filler_rate) for _ in range(n)]
        with open(os.path.join(out, f"{split}.src"), "w", encoding="utf-8") as fs, open(
            os.path.join(out, f"{split}.tgt"), "w", encoding="utf-8"
        ) as ft:
            for s, t in pairs:
                fs.write(s + "\n")
                ft.write(t + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--train", type=int, default=20000)
    ap.add_argument("--valid", type=int, default=500)
    ap.add_argument("--test", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--filler-rate", type=float, default=0.5,
                    help="probability of one more filler before each content word")
    args = ap.parse_args()
    if not 0 <= args.filler_rate < 1:
        ap.error("--filler-rate must lie in [0, 1)")
    write_corpus(args.out, {"train": args.train, "valid": args.valid, "test": args.test},
                 args.seed, args.filler_rate)


if __name__ == "__main__":
    main()
