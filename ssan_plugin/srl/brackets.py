"""The CoNLL Start-End bracket notation of argument columns, and BIO tags.

A column holds one tag per word: ``(TYPE`` opens a phrase (repeatable), then exactly one
``*``, then ``)`` or ``TYPE)`` closes the innermost open phrase (repeatable). Examples:
``(ARG0*``, ``*``, ``*)``, ``(V*)``, ``(A1(R-A1*)``. Types are kept verbatim (``C-``/``R-``
prefixes included). Positions are 0-based word indices; spans are inclusive ``(start, end)``.

BIO tags: ``B-TYPE`` on the first word of a phrase, ``I-TYPE`` on the others, ``O`` outside.
BIO cannot express embedded phrases; :func:`brackets_to_bio` keeps the outermost ones.
"""

import re
from dataclasses import dataclass, field
from typing import List, Sequence, Tuple

_OPEN = re.compile(r"\(([^*()\s]+)")
_CLOSE = re.compile(r"([^*()\s]*)\)")


class BracketError(ValueError):
    """A malformed bracket column; ``position`` is the 0-based word index of the bad tag."""

    def __init__(self, position: int, message: str):
        super().__init__(message)
        self.position = position
        self.message = message


@dataclass(eq=False)
class Phrase:
    """A bracketed phrase: inclusive word span, type, directly embedded phrases."""

    start: int
    end: int
    type: str
    children: List["Phrase"] = field(default_factory=list)

    def dfs(self) -> List["Phrase"]:
        """This phrase, then its embedded phrases depth first (srl-eval's ``dfs``)."""
        out = [self]
        for child in self.children:
            out.extend(child.dfs())
        return out


def parse_brackets(tags: Sequence[str]) -> List[Phrase]:
    """Start-End tags -> top-level phrases (each holding its embedded phrases, in closing order).

    Raises :class:`BracketError` for a tag that does not follow the grammar above, a closing
    bracket without an open phrase, a closing type that differs from the open phrase's type,
    or phrases still open after the last word.
    """
    stack: List[Phrase] = []
    top: List[Phrase] = []
    for i, tag in enumerate(tags):
        pos = 0
        while not tag.startswith("*", pos):
            m = _OPEN.match(tag, pos)
            if m is None:
                raise BracketError(i, f"malformed argument tag {tag!r}: expected '(TYPE' or '*'")
            stack.append(Phrase(i, -1, m.group(1)))
            pos = m.end()
        pos += 1  # the single '*'
        while pos < len(tag):
            m = _CLOSE.match(tag, pos)
            if m is None:
                raise BracketError(i, f"malformed argument tag {tag!r}: expected ')' after '*'")
            if not stack:
                raise BracketError(i, f"argument tag {tag!r} closes a phrase that was never opened")
            phrase = stack.pop()
            if m.group(1) and m.group(1) != phrase.type:
                raise BracketError(
                    i, f"argument tag {tag!r} closes {m.group(1)!r} but {phrase.type!r} is open"
                )
            phrase.end = i
            (stack[-1].children if stack else top).append(phrase)
            pos = m.end()
    if stack:
        raise BracketError(
            stack[-1].start, f"argument phrase '({stack[-1].type}*' is never closed"
        )
    return top


def brackets_to_bio(tags: Sequence[str]) -> Tuple[List[str], int]:
    """Start-End tags -> (BIO tags of the outermost phrases, number of embedded phrases dropped)."""
    bio = ["O"] * len(tags)
    dropped = 0
    for phrase in parse_brackets(tags):
        bio[phrase.start] = "B-" + phrase.type
        for j in range(phrase.start + 1, phrase.end + 1):
            bio[j] = "I-" + phrase.type
        dropped += len(phrase.dfs()) - 1
    return bio, dropped


def bio_to_spans(bio: Sequence[str]) -> List[Tuple[int, int, str]]:
    """Valid BIO tags -> [(start, end, type)] in order. ``I-X`` must follow ``B-X``/``I-X``."""
    spans: List[Tuple[int, int, str]] = []
    for i, tag in enumerate(bio):
        if tag == "O":
            continue
        prefix, _, role = tag.partition("-")
        if prefix == "B" and role:
            spans.append((i, i, role))
        elif prefix == "I" and role and spans and spans[-1][1] == i - 1 and spans[-1][2] == role:
            spans[-1] = (spans[-1][0], i, role)
        else:
            raise ValueError(f"invalid BIO tag {tag!r} at position {i} in {list(bio)}")
    return spans


def spans_to_brackets(length: int, spans: Sequence[Tuple[int, int, str]]) -> List[str]:
    """Non-overlapping [(start, end, type)] -> Start-End tags ``(T*``, ``*``, ``*)``, ``(T*)``."""
    tags = ["*"] * length
    for start, end, role in spans:
        if tags[start] != "*" or tags[end] != "*":
            raise ValueError(f"overlapping spans at {start}..{end}: {list(spans)}")
        if start == end:
            tags[start] = f"({role}*)"
        else:
            tags[start] = f"({role}*"
            tags[end] = "*)"
    return tags


def bio_to_brackets(bio: Sequence[str]) -> List[str]:
    return spans_to_brackets(len(bio), bio_to_spans(bio))
