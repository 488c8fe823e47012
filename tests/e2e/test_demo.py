"""scripts/demo.py end to end on a tiny built-in corpus, and its input check."""

import re

from conftest import ROOT, run_cli

DEMO = ROOT / "scripts" / "demo.py"


def test_demo_prints_the_comparison_table(tmp_path):
    proc = run_cli(DEMO, "--out", tmp_path / "demo", "--train-size", 300, "--max-update", 6,
                   "--vocab-size", 200)
    table = proc.stdout[proc.stdout.rindex("| system | BLEU | Δ BLEU"):]
    rows = [line for line in table.splitlines() if line.startswith("| baseline") or line.startswith("| ssan")]
    assert len(rows) == 2
    base, ssan = (row.split("|")[1:-1] for row in rows)
    assert base[4].strip() == "1 (all pairs)" and 0 <= float(ssan[4]) <= 1
    assert re.match(r" [+-]\d+\.\d\d \(p=\d\.\d{3}\) ", ssan[2])
    assert int(ssan[6].strip().replace(",", "")) > int(base[6].strip().replace(",", ""))
    assert (tmp_path / "demo" / "RESULTS.md").read_text().count("| ssan |") == 1


def test_demo_refuses_incomplete_data(tmp_path):
    (tmp_path / "train.en").write_text("a\n")
    proc = run_cli(DEMO, "--out", tmp_path / "out", "--data", tmp_path, "--src", "en", "--tgt", "de",
                   check=False)
    assert proc.returncode != 0
    assert "missing:" in proc.stderr and "train.de" in proc.stderr
    assert not (tmp_path / "out" / "checkpoints").exists()
