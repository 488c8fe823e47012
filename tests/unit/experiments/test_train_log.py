"""ssan_plugin/experiments/train_log.py on a hand-written fairseq json log: records, the summary and the
learning curve kept by the experiment runners."""

import json

from ssan_plugin.experiments.train_log import (
    parse_record,
    record_updates,
    training_summary,
    write_curve,
)

LOG = """2026-11-24 01:00:00 | INFO | fairseq_cli.train | num. shared model params: 2,160,000 (num. trained: 2,160,000)
2026-11-24 01:00:05 | INFO | train_inner | {"epoch": 1, "update": 0.5, "loss": "9.1", "wps": "3000", "num_updates": "50"}
2026-11-24 01:00:10 | INFO | train_inner | {"epoch": 1, "update": 0.9, "loss": "8.2", "wps": "3100", "num_updates": "100"}
2026-11-24 01:00:11 | INFO | valid | {"epoch": 1, "valid_loss": "7.5", "valid_sel": "0.9", "valid_num_updates": "100"}
2026-11-24 01:00:12 | INFO | train | {"epoch": 1, "train_loss": "8.5", "train_num_updates": "100"}
2026-11-24 01:00:17 | INFO | train_inner | {"epoch": 2, "update": 1.4, "loss": "7.9", "wps": "3300", "num_updates": "150"}
2026-11-24 01:00:20 | INFO | valid | {"epoch": 2, "valid_loss": "7.1", "valid_sel": "0.85", "valid_num_updates": "150"}
not a record | valid | {broken
"""


def test_records_summary_and_curve(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(LOG)
    kinds = [parse_record(line) for line in LOG.splitlines()]
    assert [k[0] for k in kinds if k] == ["train_inner", "train_inner", "valid", "train",
                                          "train_inner", "valid"]
    assert [record_updates(*k) for k in kinds if k] == [50, 100, 100, 100, 150, 150]
    summary = training_summary(log)
    assert summary == {"train_wps": 3200.0, "params": 2160000, "sel": 0.85, "best_valid_loss": 7.1}
    assert write_curve(log, tmp_path / "curve.jsonl") == 5
    curve = [json.loads(x) for x in (tmp_path / "curve.jsonl").read_text().splitlines()]
    assert [(r["kind"], r.get("num_updates") or r.get("valid_num_updates")) for r in curve] == [
        ("train_inner", "50"), ("train_inner", "100"), ("valid", "100"), ("train_inner", "150"),
        ("valid", "150")]
