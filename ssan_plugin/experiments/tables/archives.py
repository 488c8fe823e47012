"""Reading the committed run archives, checked: a missing, truncated or hand-edited file is a
:class:`ResultsError` naming the file and the key or line, never a traceback or a silent gap;
a number read from an archive is finite (a NaN or infinite BLEU, loss or time is a damaged
archive, never a figure of a table)."""

import json
import math
import re
from pathlib import Path
from typing import Dict, List

from .blocks import ResultsError


def archive_json(path: Path):
    """The JSON of an archived file; ResultsError naming the file when it cannot be read or
    parsed (a truncated or hand-edited archive)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path} cannot be read: {err}") from None
    try:
        return json.loads(text)
    except ValueError as err:
        raise ResultsError(f"{path} is not valid JSON ({err})") from None


def archived_value(path: Path, *keys, number: bool = True, data=None):
    """``data`` (default: the JSON of ``path``) at ``keys`` (object keys and list indices),
    checked: every key present and, with ``number``, a finite number (not a bool, not NaN or
    infinite); ResultsError naming the file and the key otherwise."""
    value = archive_json(path) if data is None else data
    walked = []
    for key in keys:
        walked.append(str(key))
        present = (isinstance(value, list) and -len(value) <= key < len(value)
                   if isinstance(key, int) else isinstance(value, dict) and key in value)
        if not present:
            raise ResultsError(f"{path}: key {'.'.join(walked)!r} is missing")
        value = value[key]
    if number and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ResultsError(f"{path}: key {'.'.join(walked)!r} must be a number, found "
                           f"{value!r}")
    if number and not math.isfinite(value):
        raise ResultsError(f"{path}: key {'.'.join(walked)!r} must be a finite number, found "
                           f"{value!r}")
    return value


def archived_record(path: Path, number: int, record, key: str) -> float:
    """``record[key]`` of line ``number`` of a JSON-lines archive, as a finite number."""
    try:
        value = float(record[key])
    except (KeyError, TypeError, ValueError):
        raise ResultsError(f"{path}:{number}: key {key!r} missing or not a number") from None
    if not math.isfinite(value):
        raise ResultsError(f"{path}:{number}: key {key!r} must be a finite number, found "
                           f"{record[key]!r}")
    return value


def curve_records(run_dir: Path) -> List[dict]:
    path = run_dir / "curve.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path} cannot be read: {err}") from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError as err:
            raise ResultsError(f"{path}:{number} is not valid JSON ({err})") from None
        if not isinstance(record, dict):
            raise ResultsError(f"{path}:{number}: expected a JSON object")
        records.append(record)
    return records


RESULT = "result.json"


class SeedRunArchive:
    """A runner's archive of run directories ``PREFIX_sSEED`` (``run_srl.py``,
    ``run_pairs.py``), each finished run holding a ``result.json``; each read at most once."""

    def __init__(self, archive: Path):
        self.archive = Path(archive)
        self._results: Dict[str, dict] = {}

    def run_dir(self, name: str) -> Path:
        d = self.archive / name
        if not (d / RESULT).is_file():
            raise ResultsError(f"{d / RESULT}: no archived run {name} ({RESULT} missing)")
        return d

    def result(self, name: str) -> dict:
        if name not in self._results:
            self._results[name] = archive_json(self.run_dir(name) / RESULT)
        return self._results[name]

    def prefixed_seeds(self, prefix: str) -> Dict[int, str]:
        """{seed: run name} of the archived runs ``PREFIX_sSEED``."""
        found = {}
        for d in sorted(self.archive.glob(f"{prefix}_s*")):
            match = re.fullmatch(rf"{re.escape(prefix)}_s(\d+)", d.name)
            if match and (d / RESULT).is_file():
                found[int(match.group(1))] = d.name
        return found
