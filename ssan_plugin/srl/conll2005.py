"""Reader for the CoNLL-2005 words/props layout.

Two parallel files, one word per line, sentences separated by a blank line:

- words: the word in the first column (further columns, if any, are ignored);
- props: column 0 the target column (the predicate lemma on predicate rows, ``-`` elsewhere),
  then one argument column per predicate, in bracket notation, in the order of the
  predicate rows. The predicate row lies inside its column's ``(V*)`` phrase.

A split is named either by a prefix P (files ``P.words`` and ``P.props``, each optionally
``.gz``) or by the two paths joined with a comma, ``WORDS,PROPS`` (the official release keeps
them in different folders, e.g. ``test.wsj/words/test.wsj.words.gz``).
"""

import os
from typing import List, Tuple

from .corpus import CoNLLFormatError, Sentence, match_propositions
from .io import sentence_blocks


def resolve_conll2005(spec: str) -> Tuple[str, str]:
    """``P`` or ``WORDS,PROPS`` -> (words path, props path); raises FileNotFoundError."""
    if "," in spec:
        words, props = spec.split(",", 1)
    else:
        found = []
        for kind in ("words", "props"):
            candidates = [f"{spec}.{kind}", f"{spec}.{kind}.gz"]
            hit = next((c for c in candidates if os.path.exists(c)), None)
            if hit is None:
                raise FileNotFoundError(
                    f"CoNLL-2005 split {spec!r}: neither {candidates[0]} nor {candidates[1]} "
                    "exists (give a prefix P with P.words and P.props, or WORDS,PROPS)"
                )
            found.append(hit)
        words, props = found
    for p in (words, props):
        if not os.path.exists(p):
            raise FileNotFoundError(f"CoNLL-2005 split {spec!r}: {p} does not exist")
    return words, props


def read_conll2005(words_path: str, props_path: str) -> List[Sentence]:
    """All sentences of a words/props file pair, one :class:`Proposition` per predicate."""
    sentences: List[Sentence] = []
    word_blocks = sentence_blocks(words_path)
    for index, (prows, plines) in enumerate(sentence_blocks(props_path)):
        block = next(word_blocks, None)
        if block is None:
            raise CoNLLFormatError(
                props_path, plines[0], f"sentence {index + 1} has no counterpart in "
                f"{words_path} (that file has only {index} sentences)",
            )
        wrows, wlines = block
        if len(wrows) != len(prows):
            raise CoNLLFormatError(
                props_path, plines[0], f"sentence {index + 1} has {len(prows)} rows here but "
                f"{len(wrows)} words in {words_path} (line {wlines[0]})",
            )
        sentences.append(_sentence(props_path, [r[0] for r in wrows], prows, plines))
    extra = next(word_blocks, None)
    if extra is not None:
        raise CoNLLFormatError(
            words_path, extra[1][0], f"sentence {len(sentences) + 1} has no counterpart in "
            f"{props_path} (that file has only {len(sentences)} sentences)",
        )
    return sentences


def _sentence(path: str, words: List[str], rows: List[List[str]], lines: List[int]) -> Sentence:
    predicates = [i for i, row in enumerate(rows) if row[0] != "-"]
    columns = list(zip(*rows))[1:]
    props = match_propositions(
        path, lines, predicates, columns, [rows[i][0] for i in predicates],
        describe=lambda i: repr(rows[i][0]), marked_by="predicates in its target column")
    return Sentence(tuple(words), props, path, lines[0])
