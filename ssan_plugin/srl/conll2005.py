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
from typing import Iterator, List, Tuple

from .corpus import CoNLLFormatError, Proposition, Sentence, check_column
from .io import open_text

Block = Tuple[List[List[str]], List[int]]  # rows of fields, their 1-based line numbers


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


def _blocks(path: str) -> Iterator[Block]:
    rows: List[List[str]] = []
    lines: List[int] = []
    with open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                if rows:
                    yield rows, lines
                    rows, lines = [], []
                continue
            if rows and len(fields) != len(rows[0]):
                raise CoNLLFormatError(
                    path, lineno, f"{len(fields)} columns, but the sentence starting at line "
                    f"{lines[0]} has {len(rows[0])}",
                )
            rows.append(fields)
            lines.append(lineno)
    if rows:
        yield rows, lines


def read_conll2005(words_path: str, props_path: str) -> List[Sentence]:
    """All sentences of a words/props file pair, one :class:`Proposition` per predicate."""
    sentences: List[Sentence] = []
    word_blocks = _blocks(words_path)
    for index, (prows, plines) in enumerate(_blocks(props_path)):
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
    n_columns = len(rows[0]) - 1
    predicates = [i for i, row in enumerate(rows) if row[0] != "-"]
    if len(predicates) > n_columns:
        extra = predicates[n_columns]
        raise CoNLLFormatError(
            path, lines[extra], f"predicate {rows[extra][0]!r} has no argument column: the "
            f"sentence has {len(predicates)} predicates but {n_columns} argument columns",
        )
    if len(predicates) < n_columns:
        raise CoNLLFormatError(
            path, lines[0], f"argument column {len(predicates) + 1} has no predicate: the "
            f"sentence has {n_columns} argument columns but {len(predicates)} predicates "
            "in its target column",
        )
    props = []
    for k, position in enumerate(predicates):
        tags = tuple(row[1 + k] for row in rows)
        check_column(tags, position, lines, path, k + 1)
        props.append(Proposition(position, rows[position][0], tags))
    return Sentence(tuple(words), tuple(props), path, lines[0])
