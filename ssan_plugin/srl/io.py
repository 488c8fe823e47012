"""Opening CoNLL text files: UTF-8, transparently gunzipped when the name ends in ``.gz``."""

import gzip
import io


def open_text(path: str, mode: str = "r"):
    if str(path).endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, mode.replace("t", "") + "b"), encoding="utf-8")
    return open(path, mode, encoding="utf-8")
