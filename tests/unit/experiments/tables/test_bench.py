"""ssan_plugin.experiments.tables.bench: the cost tables read the benchmarks' outputs, compute
every ratio against the baseline of the same invocation, and name the file of a damaged
archive."""

import json
import math

import pytest

from ssan_plugin.experiments.tables.bench import (
    layers_absolute_table,
    layers_growth,
    layers_table,
    layers_table_by_kind,
    process_table,
    steps_table,
)
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


def test_a_decoding_mode_not_measured_has_no_row(tmp_path):
    record = process_record()
    for runs in (*record["runs"].values(), *record["median"].values()):
        del runs["gen_sps"], runs["gen_sps_fixed_len"]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(record))
    table = process_table(path)
    assert "generation" not in table and cells(table, "training words/s")[1] == "1100"
    del record["median"]["baseline"]["train_wps"]  # training is always measured
    path.write_text(json.dumps(record))
    with pytest.raises(ResultsError, match="median.baseline.train_wps' is missing"):
        process_table(path)


def test_process_caption_names_corpus_protocol_and_flags(tmp_path):
    record = {**process_record(), "corpus": "news", "mean_source_pieces": 45.68,
              "settings": {"repeats": 2, "updates": 200, "decode_repeats": 5, "max_tokens": 4096},
              "systems": {"baseline": ["--arch", "transformer_small", "--criterion", "ce"],
                          "topk": ["--arch", "selective_transformer_small", "--criterion",
                                   "sce", "--encoder-selector", "topk"]}}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(record))
    caption, blank, header = process_table(path).splitlines()[:3]
    assert caption == ("Corpus `news` (45.7 source pieces a test sentence); per system 2 "
                       "trainings of 200 updates (max 4096 tokens) and 5 decodings per mode, "
                       "systems alternating; `baseline` = `transformer_small`, `topk` = "
                       "`selective_transformer_small --encoder-selector topk`.")
    assert blank == "" and header.startswith("| measure | baseline | topk |")
    del record["settings"]["updates"]
    path.write_text(json.dumps(record))
    with pytest.raises(ResultsError, match="settings.updates' is missing"):
        process_table(path)


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


def layers_csv(tmp_path):
    """SAN and topk at T = 64 and 128, topk's T = 128 point timed out."""
    path = tmp_path / "bench_encoder_layers.csv"
    path.write_text("kind,length,batch,width,time_s,peak_mb,reps,selection_rate,status\n"
                    "san,64,8,512,0.010,100,3,,ok\n"
                    "topk,64,8,512,0.015,130,3,0.1,ok\n"
                    "san,128,8,512,0.040,200,3,,ok\n"
                    "topk,128,8,512,,,3,,timeout\n")
    return path


def test_layers_table_against_san_of_each_length(tmp_path):
    path = layers_csv(tmp_path)
    table = layers_table(path)
    assert cells(table, "64")[1:] == ["1.50", "1.30"]
    assert cells(table, "128")[1] == "timeout"


def damaged_process_record(edit) -> str:
    record = process_record()
    edit(record)
    return json.dumps(record)  # NaN and Infinity as Python's json writes them


@pytest.mark.parametrize("text,message", [
    ('{"systems": {"topk": []}}', "'baseline' among them"),
    ('{"systems": {"baseline": [], "topk": []}, "median": {}}', "key 'median.baseline' is missing"),
    ('{"systems": ', "is not valid JSON"),
    (damaged_process_record(lambda r: r["median"]["topk"].update(train_wps=float("nan"))),
     "key 'median.topk.train_wps' must be a finite number, found nan"),
    (damaged_process_record(lambda r: r.update(idle_rss_mib=float("-inf"))),
     "key 'idle_rss_mib' must be a finite number, found -inf"),
])
def test_damaged_process_archive_names_the_file(tmp_path, text, message):
    path = tmp_path / "bench.json"
    path.write_text(text)
    with pytest.raises(ResultsError, match=message) as err:
        process_table(path)
    assert str(path) in str(err.value)


def test_layers_table_by_kind_is_the_same_ratios_turned_round(tmp_path):
    path = layers_csv(tmp_path)
    table = layers_table_by_kind(path)
    assert table.splitlines()[0] == ("| kind | time / SAN, T = 64 | time / SAN, T = 128 | "
                                     "memory / SAN, T = 64 | memory / SAN, T = 128 |")
    assert cells(table, "topk")[1:] == ["1.50", "timeout", "1.30", "timeout"]


def test_layers_table_refuses_a_table_without_san_and_a_bad_number(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("kind,length,time_s,peak_mb,status\ntopk,64,0.1,10,ok\n")
    with pytest.raises(ResultsError, match="no 'san' rows"):
        layers_table(path)
    path.write_text("kind,length,time_s,peak_mb,status\nsan,64,fast,10,ok\ntopk,64,0.1,10,ok\n")
    with pytest.raises(ResultsError, match="san at T = 64: time_s 'fast' is not a number"):
        layers_table(path)
    path.write_text("kind,length,time_s,peak_mb,status\nsan,64,0.1,10,ok\ntopk,64,nan,10,ok\n")
    with pytest.raises(ResultsError, match="topk at T = 64: time_s 'nan' is not a number"):
        layers_table(path)


def variants_csv(tmp_path):
    path = tmp_path / "bench_encoder_layers.csv"
    path.write_text("kind,length,batch,width,mode,time_s,peak_mb,reps,selection_rate,status\n"
                    "san,128,8,300,train,0.100,30,3,,ok\n"
                    "disan_naive,128,8,300,train,1.000,600,3,,ok\n"
                    "disan_blocked,128,8,300,train,1.500,150,3,,ok\n"
                    "san,256,8,300,train,0.250,60,3,,ok\n"
                    "disan_naive,256,8,300,train,4.000,2400,3,,ok\n"
                    "disan_blocked,256,8,300,train,5.000,160,3,,ok\n"
                    "san,512,8,300,train,0.700,120,3,,ok\n"
                    "disan_naive,512,8,300,train,,,,,skipped (memory estimate)\n"
                    "disan_blocked,512,8,300,train,20.000,200,3,,ok\n")
    return path


def test_layers_absolute_table_shows_each_kinds_values_and_skips(tmp_path):
    table = layers_absolute_table(variants_csv(tmp_path))
    assert table.splitlines()[0] == "| measure | san | disan_naive | disan_blocked |"
    assert cells(table, "peak MB, T = 256")[1:] == ["60", "2400", "160"]
    assert cells(table, "ms, T = 512")[1:] == ["700", "skipped (memory estimate)", "20000"]


def test_layers_growth_lines(tmp_path):
    lines = layers_growth(variants_csv(tmp_path))
    # the naive form's longest measured length is 256 itself: one comparison line
    assert lines[0] == ("T = 256: DiSAN memory-efficient / naive peak memory "
                        f"{160 / 2400:.3f} (160 MB against 2400 MB), time {5 / 4:.2f}x")
    assert sum(line.startswith("T = ") for line in lines) == 1
    # growth from T = 256 (half of 512) to 512; the naive form has no T = 512 point
    assert lines[1] == ("san: peak memory 60 MB at T = 256, 120 MB at T = 512: growth "
                        "exponent 1.00; time 700 ms at T = 512")
    slope = math.log(200 / 160) / math.log(2)
    assert lines[2] == (f"disan_blocked: peak memory 160 MB at T = 256, 200 MB at T = 512: "
                        f"growth exponent {slope:.2f}; time 20000 ms at T = 512")
    assert len(lines) == 3
