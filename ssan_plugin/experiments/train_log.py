"""Reading fairseq-train's ``--log-format json`` output: progress while it runs, records after.

fairseq writes one JSON record per ``train_inner`` interval, per ``valid`` run and per epoch
(``train``), e.g. ``... | valid | {"epoch": 2, "valid_loss": "3.51", ...}``; values are strings.
"""

import json
import re
import statistics
from pathlib import Path
from typing import Optional, Tuple

JSON_RECORD = re.compile(r"\| (train_inner|valid|train) \| (\{.*\})\s*$")
PARAMS = re.compile(r"num\. (?:shared )?model params: ([0-9,]+)")


def parse_record(line: str) -> Optional[Tuple[str, dict]]:
    """(kind, record) of a fairseq json log line, kind in train_inner | valid | train."""
    m = JSON_RECORD.search(line)
    if not m:
        return None
    return m.group(1), json.loads(m.group(2))


def record_updates(kind: str, record: dict) -> int:
    """The update count a record was logged at."""
    key = {"train_inner": "num_updates", "train": "train_num_updates",
           "valid": "valid_num_updates"}[kind]
    return int(float(record[key]))


def read_training_log(path):
    """(train_inner records, valid records, parameters) from a fairseq-train json log."""
    inner, valid, params = [], [], None
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        parsed = parse_record(line)
        if parsed and parsed[0] == "train_inner":
            inner.append(parsed[1])
        elif parsed and parsed[0] == "valid":
            valid.append(parsed[1])
        m = PARAMS.search(line)
        if m:
            params = int(m.group(1).replace(",", ""))
    return inner, valid, params


def training_summary(path) -> dict:
    """Median training words/s over logged intervals (first one skipped), parameters, the
    best valid loss and the last validation selection rate (selective models only)."""
    inner, valid, params = read_training_log(path)
    wps = [float(r["wps"]) for r in inner if "wps" in r]
    sel = [float(r["valid_sel"]) for r in valid if "valid_sel" in r]
    losses = [float(r["valid_loss"]) for r in valid if "valid_loss" in r]
    return {"train_wps": statistics.median(wps[1:] or wps) if wps else float("nan"),
            "params": params, "sel": sel[-1] if sel else None,
            "best_valid_loss": min(losses) if losses else None}


def write_curve(log_path, out_path) -> int:
    """The learning curve of a fairseq-train json log: its ``train_inner`` and ``valid`` records,
    one JSON object a line with ``kind`` first, written to ``out_path``; returns how many."""
    rows = []
    with open(log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parsed = parse_record(line)
            if parsed and parsed[0] in ("train_inner", "valid"):
                rows.append(json.dumps({"kind": parsed[0], **parsed[1]}) + "\n")
    Path(out_path).write_text("".join(rows), encoding="utf-8")
    return len(rows)
