"""benchmarks/bench_encoder_layers.py end to end at a toy size: every kind asked for is measured
(time and memory, each in its own worker; selectors built by the registry), the CSV has one row
per (kind, T) with the medians, and the ratio table against SAN is printed."""

import csv
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_layer_bench_toy_size(tmp_path):
    """SAN, SSAN, ReSA and two selectors of the registry (sel_topk: k = 8 keeps every key of
    these short rows; sel_fixed_mask: a mask as long as the row)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_encoder_layers import KIND_GROUPS, KINDS, SELECTOR_KINDS

    from ssan_plugin.modules.selectors import SELECTORS

    # a kind sel_NAME for every registered selector (no line needed), all in the "selectors"
    # group of --kinds
    assert {f"sel_{name}" for name in SELECTORS} <= set(SELECTOR_KINDS)
    assert {name for name, _ in SELECTOR_KINDS.values()} == set(SELECTORS)
    assert KIND_GROUPS["selectors"] == list(SELECTOR_KINDS) and set(SELECTOR_KINDS) <= set(KINDS)
    proc = subprocess.run(
        [sys.executable, ROOT / "benchmarks" / "bench_encoder_layers.py", "--kinds",
         "san,ssan,resa,sel_topk,sel_fixed_mask", "--lengths", "4,8", "--batch", "2", "--width", "16",
         "--heads", "2", "--min-time", "0.01", "--repeats", "1", "--out", tmp_path],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # quiet libraries: fairseq leaves the root logger at DEBUG, matplotlib's font search fills it
    assert "DEBUG:" not in proc.stderr, proc.stderr[:2000]
    rows = list(csv.DictReader(open(tmp_path / "bench_encoder_layers.csv")))
    kinds = ("resa", "san", "sel_fixed_mask", "sel_topk", "ssan")
    assert sorted((r["kind"], int(r["length"])) for r in rows) == [(k, t) for k in kinds for t in (4, 8)]
    for r in rows:
        assert r["status"] == "ok", r
        assert float(r["time_s"]) > 0 and float(r["peak_mb"]) >= 0
        assert r["reps"].startswith("1 x ")
    assert all(0 <= float(r["selection_rate"]) <= 1 for r in rows if r["kind"] != "san")
    assert all(float(r["selection_rate"]) == 1 for r in rows if r["kind"] == "sel_topk")
    # the RESULTS table's form: a row per kind, its time and memory against SAN's per length
    assert "| kind | time / SAN, T = 4 | time / SAN, T = 8 |" in proc.stdout, proc.stdout
    for kind in ("ssan", "resa", "sel_topk", "sel_fixed_mask"):
        assert f"\n| {kind} | " in proc.stdout, proc.stdout
    assert (tmp_path / "bench_encoder_layers.png").stat().st_size > 0


def test_layer_bench_eval_mode_toy_size(tmp_path):
    """--mode eval: an evaluation-mode forward with pads, every point measured (a selector of
    the registry too), the mode in the CSV; the pads it uses are every other sentence's last
    quarter."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_encoder_layers import padding_mask

    pad = padding_mask(3, 8)
    assert pad.tolist() == [[False] * 8, [False] * 6 + [True] * 2, [False] * 8]
    proc = subprocess.run(
        [sys.executable, ROOT / "benchmarks" / "bench_encoder_layers.py", "--mode", "eval", "--kinds",
         "san,ssan,sel_topk", "--lengths", "8", "--batch", "2", "--width", "16", "--heads", "2",
         "--min-time", "0.01", "--out", tmp_path],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "bench_encoder_layers.csv")))
    assert sorted(r["kind"] for r in rows) == ["san", "sel_topk", "ssan"]
    assert all(r["status"] == "ok" and r["mode"] == "eval" and float(r["time_s"]) > 0 for r in rows)
    assert "\n| ssan | " in proc.stdout and "\n| sel_topk | " in proc.stdout


def test_model_bench_toy_size(tmp_path):
    """benchmarks/bench_ssan.py on a small built-in corpus: the baseline, SSAN and an extra SSAN
    system (--ssan-system) trained, every decoding mode timed --decode-repeats times per system
    (once here), ratios printed and in the JSON; 40 test sentences (--eval-pairs) keep the
    free decoding of these undertrained models short."""
    import json

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_ssan import prepare_corpus

    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, ROOT / "benchmarks" / "bench_ssan.py", "--workdir", tmp_path / "work",
         "--train-pairs", "300", "--eval-pairs", "40", "--updates", "20", "--repeats", "1",
         "--decode-repeats", "1",
         "--ssan-system", "narrow=--ssan-policy-dim 64", "--json", out],
        capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["systems"]["narrow"][-2:] == ["--ssan-policy-dim", "64"]
    for name in ("baseline", "ssan", "narrow"):
        runs = result["runs"][name]
        assert len(runs["train_wps"]) == 1 and len(runs["peak_rss_mib"]) == 1
        for mode in ("gen_sps", "gen_sps_fixed_len", "score_sps"):
            assert len(runs[mode]) == 1 and all(v > 0 for v in runs[mode])
    med = result["median"]
    assert result["ratios"]["score_sps"] == med["ssan"]["score_sps"] / med["baseline"]["score_sps"]
    narrow = result["ratios_by_system"]["narrow"]
    assert narrow["train_wps"] == med["narrow"]["train_wps"] / med["baseline"]["train_wps"]
    assert "| measure | baseline | ssan | narrow | ssan / baseline | narrow / baseline |" in proc.stdout
    assert "| teacher-forced scoring sentences/s |" in proc.stdout  # the RESULTS table's form
    assert not list((tmp_path / "work").rglob("*.pt"))  # checkpoints removed

    # the corpus the options asked for; a work directory built with other sizes is rebuilt
    work = tmp_path / "work" / "builtin"
    lines = {split: len((work / "raw" / f"{split}.src").read_text().splitlines())
             for split in ("train", "valid", "test")}
    assert lines == {"train": 300, "valid": 40, "test": 40}
    built = (work / "data-bin" / "manifest.json").stat().st_mtime_ns
    assert prepare_corpus("builtin", work, tmp_path, 300, 40) == work / "data-bin"
    assert (work / "data-bin" / "manifest.json").stat().st_mtime_ns == built  # reused
    prepare_corpus("builtin", work, tmp_path, 300, 30)
    assert len((work / "raw" / "test.src").read_text().splitlines()) == 30
    manifest = json.loads((work / "data-bin" / "manifest.json").read_text())
    assert manifest["counts"]["test"]["kept"] == 30, manifest["counts"]


def test_paired_steps_toy_size(tmp_path):
    """benchmarks/bench_steps.py on a small built-in corpus: every system takes the same batches
    in turn; the ratios are the summed times' ratios; the arithmetic difference between SSAN
    and the baseline is exactly the policy network's (counted by an independent formula)."""
    import json

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_ssan import prepare_corpus

    data_bin = prepare_corpus("builtin", tmp_path / "work", tmp_path, train_pairs=300)
    out = tmp_path / "steps.json"
    proc = subprocess.run(
        [sys.executable, ROOT / "benchmarks" / "bench_steps.py", data_bin, "--steps", "3",
         "--warmup", "1", "--max-tokens", "512", "--system", "narrow=--ssan-policy-dim 32",
         "--json", out],
        capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert list(result["systems"]) == ["baseline", "ssan", "narrow"]
    assert (result["steps"], result["warmup"], result["max_tokens"], result["data"]) == \
        (3, 1, 512, str(data_bin))
    times = result["times_s"]
    for name in ("baseline", "ssan", "narrow"):
        for measure in ("train_step", "score_forward"):
            assert len(times[name][measure]) == 3 and all(t > 0 for t in times[name][measure])
    for name in ("ssan", "narrow"):
        r = result["ratios"][name]["train_step"]
        assert r["ratio"] == sum(times["baseline"]["train_step"]) / sum(times[name]["train_step"])
        assert r["low"] <= r["ratio"] <= r["high"]
    assert len(result["target_tokens"]) == 3

    # the *_small models: 3 encoder layers, width 128; the counted batch is (B, T) source tokens
    B, T = result["flop_batch"]["src_tokens"]
    C, L = 128, 3

    def policy_forward(P):  # per layer: the policy projection C -> 2P and the product Q_p K_p^T
        return 2 * (B * T) * C * (2 * P) + 2 * B * T * T * P

    def policy_extra(P):
        # training: the forward and the two gradients of each (3x); minus the recomputed scores
        # (q k^T) that the baseline's fused attention does again in its backward and SSAN's
        # saved-probability backward does not
        return L * (3 * policy_forward(P) - 2 * B * T * T * C)

    flops = {m: {n: result["flops"][n][m] for n in result["systems"]}
             for m in ("train_step", "score_forward")}
    train, score = flops["train_step"], flops["score_forward"]
    assert train["ssan"] - train["baseline"] == policy_extra(128)
    assert train["narrow"] - train["baseline"] == policy_extra(32)
    # scoring (eval): both run torch's fused attention; SSAN adds exactly the policy's forward
    assert score["ssan"] - score["baseline"] == L * policy_forward(128)
    assert score["narrow"] - score["baseline"] == L * policy_forward(32)
    for m in ("train_step", "score_forward"):
        assert result["flop_ceiling"]["ssan"][m] == flops[m]["baseline"] / flops[m]["ssan"]
    assert "| training step |" in proc.stdout and "| teacher-forced scoring forward |" in proc.stdout


def test_a_newly_registered_selector_gets_its_bench_kind(monkeypatch):
    """Adding a selector is its module and one registry line: the layer bench measures it as
    sel_NAME with its declared defaults, without a line of its own."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_encoder_layers import selector_kinds

    from ssan_plugin.modules.selectors import registry

    monkeypatch.setitem(registry.SELECTORS, "window", registry.SELECTORS["topk"])
    kinds = selector_kinds()
    assert kinds["sel_window"] == ("window", {})
    assert kinds["sel_topk"] == ("topk", {"topk": 8.0})  # the bench's own setting kept
    assert list(kinds).index("sel_window") < list(kinds).index("sel_entmax15")
