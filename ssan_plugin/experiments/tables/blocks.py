"""Generated blocks of a RESULTS file: the text between ``<!-- begin generated: KEY -->`` and
``<!-- end generated: KEY -->`` is a table ``scripts/make_results.py`` regenerates; the prose
around the blocks is written by hand."""

import re
from typing import Dict, List, Tuple

from ...errors import PipelineError

BEGIN = "<!-- begin generated: {key} -->"
END = "<!-- end generated: {key} -->"
_BLOCK = re.compile(r"<!-- begin generated: (?P<key>[\w.-]+) -->\n.*?<!-- end generated: "
                    r"(?P=key) -->", re.S)


class ResultsError(PipelineError, ValueError):
    """An archive or a RESULTS file that does not hold what a table needs: one line naming the
    file and the key or position; a script prints it as its error (exit status 2)."""


# --------------------------------------------------------------------------- blocks
def block_keys(text: str) -> List[str]:
    return [m.group("key") for m in _BLOCK.finditer(text)]


def prose_and_generated(text: str) -> Tuple[str, str]:
    """(the hand-written text with every generated block cut out, the generated blocks joined
    by newlines)."""
    return _BLOCK.sub("", text), "\n".join(m.group(0) for m in _BLOCK.finditer(text))


def fill_blocks(text: str, blocks: Dict[str, str]) -> str:
    """``text`` with every generated block whose key is in ``blocks`` replaced (markers kept);
    a key of ``blocks`` without its markers in ``text`` is an error."""
    missing = [k for k in blocks if k not in block_keys(text)]
    if missing:
        raise ResultsError(f"no generated block for {', '.join(missing)} (add the markers "
                           f"{BEGIN.format(key=missing[0])} ... {END.format(key=missing[0])})")

    def replace(match):
        key = match.group("key")
        if key not in blocks:
            return match.group(0)
        return f"{BEGIN.format(key=key)}\n{blocks[key].rstrip()}\n{END.format(key=key)}"

    return _BLOCK.sub(replace, text)
