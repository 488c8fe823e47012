"""ssan_plugin.experiments.tables.bench: the cost tables read the benchmarks' outputs, compute
every ratio against the baseline of the same invocation, and name the file of a damaged
archive."""

import json

import pytest

from ssan_plugin.experiments.tables.bench import layers_table, process_table, steps_table
from ssan_plugin.experiments.tables.blocks import ResultsError


def cells(table: str, first: str):
    """The cells of the row whose first cell is ``first``."""
    for line in table.splitlines():
        parts = [c.strip() for c in line.strip("|").split("|")]
        if parts[0] == first:
            return parts
    raise AssertionError(f"no row {first!r} in\n{table}")


def process_record():
    keys = ("train_wps", "score_sps", "gen_sps_fixed_len", "gen_sps", "peak_rss_mib")
    runs = {"baseline": dict(zip(keys, ([1000, 1200], [50.0, 52.0], [20.0], [8.0], [900, 1000]))),
            "topk": dict(zip(keys, ([800, 900], [40.0, 44.0], [19.0], [6.0], [1000, 1100])))}
    median = {n: {k: sum(v) / len(v) for k, v in r.items()} for n, r in runs.items()}
    return {"systems": {"baseline": [], "topk": ["--encoder-selector", "topk"]}, "runs": runs,
            "median": median, "idle_rss_mib": 400.0}


def test_process_table_ratios_and_memory_above_idle(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(process_record()))
    table = process_table(path)
    row = cells(table, "training words/s")
    assert row[1:4] == ["1100", "850", f"{850 / 1100:.3f}"]
    assert row[4] == "1000, 1200 / 800, 900"
    assert cells(table, "teacher-forced scoring sentences/s")[3] == f"{42 / 51:.3f}"
    assert cells(table, "peak RSS (MiB)")[3] == f"{1050 / 950:.3f}"
    above = cells(table, "peak RSS above an idle import (400 MiB)")
    assert above[1:4] == ["550", "650", f"{650 / 550:.3f}"]


def test_steps_table_share_of_the_arithmetic_ceiling(tmp_path):
    record = {"systems": {"baseline": [], "ssan": []},
              "times_s": {"baseline": {"train_step": [0.1, 0.3, 0.2],
                                       "score_forward": [0.05, 0.05]}},
              "ratios": {"ssan": {"train_step": {"ratio": 0.9, "low": 0.85, "high": 0.95},
                                  "score_forward": {"ratio": 0.8, "low": 0.7, "high": 0.9}}},
              "flop_ceiling": {"ssan": {"train_step": 0.93, "score_forward": 0.96}}}
    path = tmp_path / "steps.json"
    path.write_text(json.dumps(record))
    row = cells(steps_table(path), "training step")
    assert row[1:] == ["200.0", "0.900 [0.850, 0.950]", "0.930", f"{0.9 / 0.93:.3f}"]
    assert cells(steps_table(path, record), "teacher-forced scoring forward")[4] == \
        f"{0.8 / 0.96:.3f}"


def test_layers_table_against_san_of_each_length(tmp_path):
    path = tmp_path / "bench_encoder_layers.csv"
    path.write_text("kind,length,batch,width,time_s,peak_mb,reps,selection_rate,status\n"
                    "san,64,8,512,0.010,100,3,,ok\n"
                    "topk,64,8,512,0.015,130,3,0.1,ok\n"
                    "san,128,8,512,0.040,200,3,,ok\n"
                    "topk,128,8,512,,,3,,timeout\n")
    table = layers_table(path)
    assert cells(table, "64")[1:] == ["1.50", "1.30"]
    assert cells(table, "128")[1] == "timeout"


@pytest.mark.parametrize("text,message", [
    ('{"systems": {"topk": []}}', "'baseline' among them"),
    ('{"systems": {"baseline": [], "topk": []}, "median": {}}', "key 'median.baseline' is missing"),
    ('{"systems": ', "is not valid JSON"),
])
def test_damaged_process_archive_names_the_file(tmp_path, text, message):
    path = tmp_path / "bench.json"
    path.write_text(text)
    with pytest.raises(ResultsError, match=message) as err:
        process_table(path)
    assert str(path) in str(err.value)


def test_layers_table_refuses_a_table_without_san_and_a_bad_number(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("kind,length,time_s,peak_mb,status\ntopk,64,0.1,10,ok\n")
    with pytest.raises(ResultsError, match="no 'san' rows"):
        layers_table(path)
    path.write_text("kind,length,time_s,peak_mb,status\nsan,64,fast,10,ok\ntopk,64,0.1,10,ok\n")
    with pytest.raises(ResultsError, match="san at T = 64: time_s 'fast' is not a number"):
        layers_table(path)
