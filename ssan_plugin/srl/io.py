"""Opening CoNLL text files: UTF-8, transparently gunzipped when the name ends in ``.gz``; and
the one reader of their sentence blocks (one row of whitespace-separated columns a word,
sentences separated by blank lines), which every CoNLL layout of the package shares.

Reading goes through ``ssan_plugin.cli.files.read_text``: the file is checked (exists, a regular
readable file), a byte-order mark is dropped, invalid UTF-8 is an InputError naming the file,
line and byte offset."""

import gzip
import io
import logging
from typing import Iterator, List, Tuple

from ..cli.files import read_text
from .corpus import CoNLLFormatError

Block = Tuple[List[List[str]], List[int]]  # one sentence: rows of columns, their 1-based lines

logger = logging.getLogger("ssan_plugin.srl.io")


def open_text(path: str, mode: str = "r"):
    if "r" in mode:
        return io.StringIO(read_text(path), newline=None)  # universal newlines, as open()
    if str(path).endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, mode.replace("t", "") + "b"), encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def sentence_blocks(path: str, *, comments: bool = False, min_columns: int = 1, layout: str = "",
                    end_at_empty: bool = False) -> Iterator[Block]:
    """The sentences of ``path`` as (rows, line numbers): a sentence ends at a blank line (with
    ``comments``, a line starting with ``#`` reads as blank); blank lines in a row are one break,
    unless ``end_at_empty``, where an empty sentence (a second blank line in a row, or a blank
    first line) ends the file, as srl-eval.pl reads props files (a warning then says how many
    non-blank lines were left unread, if any). Every row of a sentence has the same number of
    columns, at least ``min_columns`` (``layout`` names the format in that
    message); anything else is a CoNLLFormatError naming the line."""
    rows: List[List[str]] = []
    lines: List[int] = []
    with open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            fields = [] if comments and line.startswith("#") else line.split()
            if not fields:
                if rows:
                    yield rows, lines
                    rows, lines = [], []
                elif end_at_empty:
                    unread = sum(1 for rest in f if rest.strip())
                    if unread:
                        logger.warning("%s:%d: an empty sentence ends the file, as srl-eval.pl "
                                       "reads it: %d later non-blank lines are not read",
                                       path, lineno, unread)
                    return
                continue
            if len(fields) < min_columns:
                raise CoNLLFormatError(
                    path, lineno, f"expected at least {min_columns} columns "
                    f"({layout} layout), found {len(fields)}",
                )
            if rows and len(fields) != len(rows[0]):
                raise CoNLLFormatError(
                    path, lineno, f"{len(fields)} columns, but the sentence starting at line "
                    f"{lines[0]} has {len(rows[0])}",
                )
            rows.append(fields)
            lines.append(lineno)
    if rows:
        yield rows, lines
