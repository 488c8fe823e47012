"""ssan_plugin/analysis/report.py and ssan-analysis-report: the tables show exactly the
numbers of hand-made JSON files, distance buckets pool the counts, files out of step or missing
are refused with the file named, the figure is a readable PNG."""

import json

import matplotlib.image
import pytest
from helpers.translation_testlib import load_script

from ssan_plugin.analysis.report import (DISTANCE_BUCKETS, AnalysisResults, distance_bucket, distance_rates,
                                         plot_probing, probing_table, report_markdown,
                                         selection_table, trees_table)
from ssan_plugin.translation.textio import PipelineError

SYSTEMS = ["san", "ssan"]


def probe_json(accs, n_test=200, majority=0.5):
    return {"task": "bigram_shift", "n_test": n_test, "majority": majority, "classifier": "logreg",
            "layers": [{"layer": i, "accuracy": a, "correct": round(a * n_test), "ci95": [a - 0.05, a + 0.04]}
                       for i, a in enumerate(accs)]}


def trees_json(f1s):
    return {"n_sentences": 7,
            "layers": [{"layer": i + 1, "f1": f, "precision": f + 1, "recall": f - 1} for i, f in enumerate(f1s)],
            "right_branching": {"f1": 30.0, "precision": 31.0, "recall": 29.0}}


def stats_json():
    by_class = {"content": {"rate": 0.75, "selected": 3, "possible": 4},
                "function": {"rate": 0.5, "selected": 1, "possible": 2}}
    distance = [{"distance": d, "selected": s, "possible": p, "rate": s / p}
                for d, s, p in ((0, 4, 4), (1, 3, 6), (3, 1, 2), (5, 1, 2), (12, 0, 8))]
    return {"n_sentences": 7, "layers": [{"layer": 1, "keys": {"by_class": by_class},
                                          "queries": {"by_class": {"content": {"rate": 0.25, "selected": 1, "possible": 4}}},
                                          "distance": distance}]}


@pytest.fixture
def analysis_dir(tmp_path):
    for name, accs in (("san", [0.5, 0.6]), ("ssan", [0.55, 0.7])):
        (tmp_path / f"probe_bshift.{name}.json").write_text(json.dumps(probe_json(accs)))
    (tmp_path / "trees.san.json").write_text(json.dumps(trees_json([20.0, 21.5])))
    (tmp_path / "trees.ssan.json").write_text(json.dumps(trees_json([22.25, 19.0])))
    (tmp_path / "selection_stats.ssan.json").write_text(json.dumps(stats_json()))
    return tmp_path


def read(directory):
    return AnalysisResults.read(directory, SYSTEMS, probing_sets=["bshift"])


def test_probing_table_shows_each_systems_accuracy_and_interval(analysis_dir):
    table = probing_table(read(analysis_dir), "bshift")
    assert "n_test = 200, majority class 50.0%" in table
    assert "| 1 | 60.0 [55.0, 64.0] | 70.0 [65.0, 74.0] |" in table
    assert "| 0 | 50.0 [45.0, 54.0] | 55.0 [50.0, 59.0] |" in table


def test_probing_files_out_of_step_are_refused(analysis_dir):
    (analysis_dir / "probe_bshift.ssan.json").write_text(json.dumps(probe_json([0.5, 0.6], n_test=199)))
    with pytest.raises(PipelineError, match=r"probe_bshift.ssan.json: 199 test examples"):
        probing_table(read(analysis_dir), "bshift")


def test_trees_table_and_right_branching(analysis_dir):
    table = trees_table(read(analysis_dir))
    assert "| 1 | 20.00 (21.00 / 19.00) | 22.25 (23.25 / 21.25) |" in table
    assert "| right-branching | 30.00 (31.00 / 29.00)" in table


def test_distance_buckets_pool_counts():
    rates = distance_rates(stats_json()["layers"][0])
    labels = [b[0] for b in DISTANCE_BUCKETS]
    expected = {"0": 1.0, "1": 0.5, "2–3": 1 / 2, "4–7": 1 / 2, "8–15": 0.0, "≥ 16": None}
    assert dict(zip(labels, rates)) == expected


def test_distance_bucket_edges():
    assert [distance_bucket(d) for d in (0, 1, 2, 3, 4, 7, 8, 15, 16, 500)] == [
        "0", "1", "2–3", "2–3", "4–7", "4–7", "8–15", "8–15", "≥ 16", "≥ 16"]
    with pytest.raises(ValueError, match="negative"):
        distance_bucket(-1)


def test_selection_table_rates(analysis_dir):
    table = selection_table(read(analysis_dir))
    row = [line for line in table.splitlines() if line.startswith("| ssan |")]
    assert row == ["| ssan | 1 | 75.0 | 50.0 | – | 25.0 | – | – | 100.0 | 50.0 | 50.0 | 50.0 | 0.0 | – |"]


def test_missing_file_is_named(analysis_dir):
    (analysis_dir / "trees.ssan.json").unlink()
    with pytest.raises(PipelineError, match=r"trees.ssan.json: missing"):
        read(analysis_dir)


def test_report_and_figure(analysis_dir, tmp_path):
    results = read(analysis_dir)
    md = report_markdown(results)
    assert md.index("## Probing") < md.index("## Tree induction") < md.index("## Selection by word class")
    nested = report_markdown(results, level=3)
    assert nested.startswith("### Probing") and "\n#### bigram shift" in nested
    assert "\n## " not in nested and nested.replace("#### ", "### ").replace("### ", "## ") == \
        md.replace("### ", "## ")
    with pytest.raises(ValueError, match="heading level 0"):
        report_markdown(results, level=0)
    png = tmp_path / "probing.png"
    plot_probing(results, png)
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def test_cli(analysis_dir, tmp_path, capsys):
    module = load_script("analysis_report")
    md = tmp_path / "out" / "report.md"
    # every probing set is expected by default: a missing one is one error line, exit 2
    assert module.main(["--dir", str(analysis_dir), "--systems", *SYSTEMS, "--md", str(md)]) == 2
    assert "analysis_report.py: error:" in capsys.readouterr().err
    for s in ("wrd", "wrd_shared", "tree_depth", "top_const"):
        for name in SYSTEMS:
            (analysis_dir / f"probe_{s}.{name}.json").write_text(json.dumps(probe_json([0.4, 0.45])))
    assert module.main(["--dir", str(analysis_dir), "--systems", *SYSTEMS, "--md", str(md),
                        "--png", str(tmp_path / "p.png")]) == 0
    assert "### tree depth (EWT)" in md.read_text() and (tmp_path / "p.png").stat().st_size > 0
