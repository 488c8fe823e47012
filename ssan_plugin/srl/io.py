"""Opening CoNLL text files: UTF-8, transparently gunzipped when the name ends in ``.gz``.

Reading goes through ``ssan_plugin.cli.files.read_text``: the file is checked (exists, a regular
readable file), a byte-order mark is dropped, invalid UTF-8 is an InputError naming the file,
line and byte offset."""

import gzip
import io

from ..cli.files import read_text


def open_text(path: str, mode: str = "r"):
    if "r" in mode:
        return io.StringIO(read_text(path), newline=None)  # universal newlines, as open()
    if str(path).endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, mode.replace("t", "") + "b"), encoding="utf-8")
    return open(path, mode, encoding="utf-8")
