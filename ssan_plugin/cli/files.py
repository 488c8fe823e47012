"""Files a command reads and writes: checked before any work starts, one line naming the
file on failure; UTF-8 text with a leading byte-order mark dropped the same way everywhere.
Standard library only.

Outputs are guarded in one place, :func:`guard_outputs`, which every command calls with its
outputs and its inputs before any work starts (README, "Errors"): it refuses, in one line
naming the option and the path,

- an output that is one of the inputs (the same file after resolving links), an output file
  that would replace a file of an input directory (a data-bin), and an output folder holding
  an input among the files the command writes there;
- an existing output file, or a non-empty output folder, without ``--overwrite`` (a folder
  the command is designed to add into, ``Output.adds``, is taken as it is);
- a folder where a file is expected and the reverse, two outputs on the same path;
- a parent folder that cannot be created (missing parents are created once every check has
  passed, when the work starts).
"""

import gzip
import os
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable, List, Optional, Sequence, Union

from ..errors import InputError

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
    if it exists, writable; otherwise its parent exists or can be created. Whether it may be
    replaced is :func:`guard_outputs`' question."""
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


#: which files a command writes (or replaces) inside an output folder: relative paths (POSIX
#: form, e.g. ``text/train.spm.en``), as a collection or a predicate; None: any file
Writes = Union[None, Iterable[str], Callable[[str], bool]]


@dataclass(frozen=True)
class Output:
    """One output of a command. ``option`` names it in messages (``--json``, or a phrase for an
    output derived from another: ``the by-length figure beside --json``). A folder
    (``kind="dir"``) that the command is designed to add files into (``adds``: hypothesis
    folders, a resumable experiment folder) may be non-empty without ``--overwrite``;
    ``writes`` says which files the command writes or replaces there (an input among them is
    refused)."""

    option: str
    path: Path
    kind: str = "file"
    adds: bool = False
    writes: Writes = None

    def __post_init__(self):
        if self.path is not None:
            object.__setattr__(self, "path", Path(self.path))
        if self.kind not in ("file", "dir"):
            raise ValueError(f"Output kind must be 'file' or 'dir', got {self.kind!r}")

    @property
    def label(self) -> str:
        return f"{self.option} {self.path}"

    def replaces(self, relative: str) -> bool:
        """Whether the command writes or replaces ``relative`` (a POSIX path) in the folder."""
        if self.writes is None:
            return True
        if callable(self.writes):
            return bool(self.writes(relative))
        return relative in {str(PurePosixPath(w)) for w in self.writes}


@dataclass(frozen=True)
class Input:
    """One input of a command: a file, or a folder every file under which is read (a data-bin);
    a path that does not exist is left to the command's own input checks."""

    option: str
    path: Path
    shown: Optional[str] = None  # how messages name it, if not "OPTION PATH" (NAME=PATH)

    def __post_init__(self):
        if self.path is not None:
            object.__setattr__(self, "path", Path(self.path))

    @property
    def label(self) -> str:
        return self.shown or f"{self.option} {self.path}"


def output_file(option: str, path) -> Output:
    return Output(option, path)


def output_dir(option: str, path, adds: bool = False, writes: Writes = None) -> Output:
    return Output(option, path, "dir", adds, writes)


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: compare as written
        return path.absolute()


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file: the same path after resolving links, or the same
    inode (a hard link)."""
    if _resolved(a) == _resolved(b):
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _inside(path: Path, folder: Path) -> Optional[str]:
    """``path`` relative to ``folder`` (POSIX form) if it lies inside it (both resolved),
    else None."""
    try:
        relative = _resolved(path).relative_to(_resolved(folder))
    except ValueError:
        return None
    return relative.as_posix() if relative.parts else None


def _files_under(folder: Path):
    for root, _dirs, names in os.walk(folder):
        for name in names:
            yield Path(root) / name


def _check_kind(out: Output) -> None:
    if out.kind == "file":
        check_output_file(out.path, out.option)
    else:
        check_output_dir(out.path, out.option)


def _check_against_input(out: Output, inp: Input) -> None:
    """One line if writing ``out`` would replace ``inp`` or a file of it."""
    if not inp.path.exists():
        return
    if inp.path.is_file():
        if out.kind == "file":
            if _same_file(out.path, inp.path):
                how = ("" if os.path.normpath(out.path.absolute()) ==
                       os.path.normpath(inp.path.absolute())
                       else " (the same file, after resolving links)")
                raise InputError(f"{out.label} is the input {inp.label}{how}; an output never "
                                 f"replaces an input: choose another path")
            return
        relative = _inside(inp.path, out.path)
        if relative is not None and out.replaces(relative):
            raise InputError(f"{out.label} holds the input {inp.label}, which this command "
                             f"would replace; choose another folder")
        return
    # a folder, every file of which is an input
    if out.kind == "file":
        if out.path.is_file() and _inside(out.path, inp.path) is not None:
            raise InputError(f"{out.label} would replace a file of the input {inp.label}; "
                             f"choose a path outside it")
        return
    same = _resolved(out.path) == _resolved(inp.path)
    input_inside = _inside(inp.path, out.path) is not None
    if not (same or input_inside or _inside(out.path, inp.path) is not None):
        return
    if out.writes is None and (same or input_inside):
        raise InputError(f"{out.label} {'is' if same else 'holds'} the input {inp.label}; "
                         f"choose another folder")
    if not out.path.is_dir():
        return
    # the folders overlap: no file the command writes there may be a file of the input
    for file in _files_under(inp.path if input_inside else out.path):
        relative = _inside(file, out.path)
        if relative is not None and out.replaces(relative):
            raise InputError(f"{out.label} would replace {file}, a file of the input "
                             f"{inp.label}; choose another folder")


def _check_replace(out: Output, overwrite: bool, overwrite_option: str) -> None:
    if overwrite or not out.path.exists():
        return
    if out.kind == "file":
        raise InputError(f"{out.label} exists; pass {overwrite_option} to replace it, or "
                         f"choose another path")
    if out.adds:
        return
    if any(out.path.iterdir()):
        raise InputError(f"{out.label} is not empty; pass {overwrite_option} to replace what "
                         f"this command writes there, or choose a new folder")


def guard_outputs(outputs: Sequence[Output], inputs: Sequence[Input] = (),
                  overwrite: bool = False, overwrite_option: str = "--overwrite",
                  create_parents: bool = True) -> List[Path]:
    """Refuse, before any work starts, every way an output could lose data (module docstring):
    InputError, one line naming the option and the path, the first problem found. Outputs
    given as None are skipped. When every check passes, the missing parent folders of the
    outputs are created (``create_parents``). Returns the outputs' paths."""
    outputs = [o for o in outputs if o and o.path is not None]  # `args.png and output_file(...)`
    inputs = [i for i in inputs if i and i.path is not None]
    for out in outputs:
        _check_kind(out)
    for out in outputs:
        for inp in inputs:
            _check_against_input(out, inp)
    seen = {}
    for out in outputs:
        key = _resolved(out.path)
        if key in seen:
            raise InputError(f"{seen[key].label} and {out.label} are the same path; give each "
                             f"output its own")
        seen[key] = out
    for out in outputs:
        _check_replace(out, overwrite, overwrite_option)
    if create_parents:
        for out in outputs:
            try:
                out.path.absolute().parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise InputError(f"{out.label}: cannot create its folder "
                                 f"{out.path.absolute().parent}: {err.strerror}") from None
    return [o.path for o in outputs]


def remove_own_files(folder, relative_paths: Iterable[str]) -> List[Path]:
    """Remove the files ``relative_paths`` (POSIX paths inside ``folder``, what a command wrote
    there) that exist, then the folders among their parents left empty; nothing else. A path
    that leaves the folder (``..``, absolute) is refused. Returns the files removed."""
    folder = Path(folder)
    removed, parents = [], set()
    for relative in sorted(set(relative_paths)):
        rel = PurePosixPath(relative)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise InputError(f"{folder}: refusing to remove {relative!r}, which is not a path "
                             f"inside the folder")
        path = folder.joinpath(*rel.parts)
        if path.is_symlink() or path.is_file():
            path.unlink()
            removed.append(path)
        for k in range(1, len(rel.parts)):
            parents.add(folder.joinpath(*rel.parts[:k]))
    for parent in sorted(parents, key=lambda p: len(p.parts), reverse=True):
        try:
            parent.rmdir()  # only when empty
        except OSError:
            pass
    return removed
