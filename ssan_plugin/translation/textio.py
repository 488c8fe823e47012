"""Reading parallel text strictly: UTF-8 errors, missing files and line counts are user errors."""

import hashlib
from pathlib import Path
from typing import List, Tuple

from ..errors import InputError, PipelineError  # noqa: F401 (PipelineError: re-exported)
from ..cli.files import check_input_file, decode_utf8


def require_file(path) -> Path:
    """An existing, readable regular file (ssan_plugin.cli.files.check_input_file)."""
    try:
        return check_input_file(path)
    except InputError as err:
        raise PipelineError(str(err)) from None


def read_lines(path) -> List[str]:
    """All lines of a UTF-8 file without their line ends (``\\n`` or ``\\r\\n``).

    Invalid UTF-8 raises PipelineError naming the file, the 1-based line and the bytes.
    """
    path = require_file(path)
    return split_lines(path.read_bytes(), str(path))[0]


def split_lines(data: bytes, name: str) -> Tuple[List[str], int]:
    """UTF-8 bytes -> (lines without line ends, number of lines that ended in ``\\r\\n``).

    Only ``\\n`` ends a line (never the other characters ``str.splitlines`` splits on), a
    last line without ``\\n`` counts, a leading BOM is dropped. Invalid UTF-8 raises
    PipelineError naming ``name``, the 1-based line and the bytes (``cli.decode_utf8``)."""
    try:
        text = decode_utf8(data, name)
    except InputError as err:
        raise PipelineError(str(err)) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    crlf = sum(1 for line in lines if line.endswith("\r"))
    return [line[:-1] if line.endswith("\r") else line for line in lines], crlf


def write_lines(path, lines) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")


def sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
