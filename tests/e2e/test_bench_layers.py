"""scripts/bench_encoder_layers.py end to end at a toy size: every kind asked for is measured
(time and memory, each in its own worker), the CSV has one row per (kind, T) with the medians,
and the ratio table against SAN is printed."""

import csv
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_layer_bench_toy_size(tmp_path):
    proc = subprocess.run(
        [sys.executable, ROOT / "scripts" / "bench_encoder_layers.py", "--kinds", "san,ssan,resa",
         "--lengths", "4,8", "--batch", "2", "--width", "16", "--heads", "2", "--min-time", "0.01",
         "--repeats", "1", "--out", tmp_path],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "bench_encoder_layers.csv")))
    assert sorted((r["kind"], int(r["length"])) for r in rows) == [
        (k, t) for k in ("resa", "san", "ssan") for t in (4, 8)]
    for r in rows:
        assert r["status"] == "ok", r
        assert float(r["time_s"]) > 0 and float(r["peak_mb"]) >= 0
        assert r["reps"].startswith("1 x ")
    assert all(0 <= float(r["selection_rate"]) <= 1 for r in rows if r["kind"] in ("ssan", "resa"))
    assert "| ssan | 8 |" in proc.stdout and "| resa | 4 |" in proc.stdout
    assert (tmp_path / "bench_encoder_layers.png").stat().st_size > 0


def test_model_bench_toy_size(tmp_path):
    """scripts/bench_ssan.py on a small built-in corpus: the baseline, SSAN and an extra SSAN
    system (--ssan-system) trained, every decoding mode timed --decode-repeats times per system
    (alternating), ratios printed and in the JSON."""
    import json

    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, ROOT / "scripts" / "bench_ssan.py", "--workdir", tmp_path / "work",
         "--train-pairs", "300", "--updates", "20", "--repeats", "1", "--decode-repeats", "2",
         "--ssan-system", "narrow=--ssan-policy-dim 64", "--json", out],
        capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["systems"]["narrow"][-2:] == ["--ssan-policy-dim", "64"]
    for name in ("baseline", "ssan", "narrow"):
        runs = result["runs"][name]
        assert len(runs["train_wps"]) == 1 and len(runs["peak_rss_mib"]) == 1
        for mode in ("gen_sps", "gen_sps_fixed_len", "score_sps"):
            assert len(runs[mode]) == 2 and all(v > 0 for v in runs[mode])
    med = result["median"]
    assert result["ratios"]["score_sps"] == med["ssan"]["score_sps"] / med["baseline"]["score_sps"]
    narrow = result["ratios_by_system"]["narrow"]
    assert narrow["train_wps"] == med["narrow"]["train_wps"] / med["baseline"]["train_wps"]
    assert "| measure | baseline | ssan | narrow | ssan / baseline | narrow / baseline |" in proc.stdout
    assert "| teacher-forced scoring sentences/s (train split) |" in proc.stdout
    assert not list((tmp_path / "work").rglob("*.pt"))  # checkpoints removed
