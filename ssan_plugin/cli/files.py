"""Files a command reads and writes: checked before any work starts, one line naming the
file on failure; UTF-8 text with a leading byte-order mark dropped the same way everywhere.
Standard library only."""

import gzip
import os
import zlib
from pathlib import Path

from .errors import InputError

BOM = "\ufeff"


def check_input_file(path, what: str = "", nonempty: bool = False) -> Path:
    """``path`` exists, is a regular file (not a directory), is readable and, with
    ``nonempty``, has at least one byte; InputError naming ``what`` and the path otherwise."""
    path = Path(path)
    label = f"{what} {path}".strip()
    if not path.exists():
        raise InputError(f"{label}: no such file")
    if path.is_dir():
        raise InputError(f"{label} is a directory; a file is expected here")
    if not path.is_file():
        raise InputError(f"{label} is not a regular file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{label} is not readable (permission denied)")
    try:
        with open(path, "rb"):
            pass
    except OSError as err:
        raise InputError(f"{label} cannot be opened: {err.strerror}") from None
    if nonempty and path.stat().st_size == 0:
        raise InputError(f"{label} is empty")
    return path


def check_input_dir(path, what: str = "") -> Path:
    path = Path(path)
    label = f"{what} {path}".strip()
    if not path.exists():
        raise InputError(f"{label}: no such directory")
    if not path.is_dir():
        raise InputError(f"{label} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise InputError(f"{label} is not readable (permission denied)")
    return path



def decode_utf8(data: bytes, name: str) -> str:
    """UTF-8 bytes -> text, a leading byte-order mark dropped. Invalid UTF-8 raises InputError
    naming ``name``, the 1-based line, the bytes and their byte offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        bad = data[err.start:err.end]
        raise InputError(f"{name}: line {line} is not valid UTF-8 (bytes {bad!r} at byte offset "
                         f"{err.start}); convert the file to UTF-8 first") from None
    return text[1:] if text.startswith(BOM) else text


def read_bytes(path, what: str = "", nonempty: bool = False) -> bytes:
    """The bytes of a checked input file, gunzipped when its name ends in ``.gz``."""
    path = check_input_file(path, what, nonempty)
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError, zlib.error) as err:
        raise InputError(f"{f'{what} {path}'.strip()} cannot be read: {err}") from None


def read_text(path, what: str = "", nonempty: bool = False) -> str:
    """A checked UTF-8 text file (``.gz`` gunzipped), its byte-order mark dropped."""
    return decode_utf8(read_bytes(path, what, nonempty), str(path))


# ---------------------------------------------------------------- outputs

def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_creatable(path: Path, label: str) -> None:
    """The missing directories up to ``path`` can be created: the nearest existing ancestor
    is a writable directory."""
    ancestor = _nearest_existing(path.parent)
    if not ancestor.is_dir():
        raise InputError(f"{label}: {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"{label}: directory {ancestor} is not writable")


def check_output_file(path, what: str = "") -> Path:
    """``path`` can be written as a file (checked before any work starts): not a directory;
    if it exists, writable; otherwise its parent exists or can be created."""
    path = Path(path)
    label = f"{what} {path}".strip()
    if path.is_dir():
        raise InputError(f"{label} is a directory; a file name is expected here")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise InputError(f"{label} is not writable (permission denied)")
    else:
        _check_creatable(path, label)
    return path


def check_output_dir(path, what: str = "") -> Path:
    """``path`` can be used as an output directory: not an existing file; if it exists,
    writable; otherwise its parent exists or can be created."""
    path = Path(path)
    label = f"{what} {path}".strip()
    if path.exists():
        if not path.is_dir():
            raise InputError(f"{label} exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise InputError(f"{label} is not writable (permission denied)")
    else:
        _check_creatable(path, label)
    return path
