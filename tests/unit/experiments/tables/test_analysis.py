"""ssan_plugin.experiments.tables.analysis on a tiny synthetic archive: run_analysis.sh's
systems.json and JSON files, and a translation archive with the two models' runs. Expected
cells are written here from the values the test put in the files."""

import json

import pytest

from ssan_plugin.analysis.report import AnalysisResults, report_markdown
from ssan_plugin.experiments.tables.analysis import (
    analysis_blocks,
    analysis_systems,
    models_table,
    translation_run,
)
from ssan_plugin.experiments.tables.blocks import ResultsError

SETS = ("bshift", "wrd", "wrd_shared", "tree_depth", "top_const")


def probe(acc):
    return {"n_test": 100, "majority": 0.5, "classifier": "logreg",
            "layers": [{"layer": k, "accuracy": a, "ci95": [a - 0.1, a + 0.1]}
                       for k, a in enumerate(acc)]}


def trees(f1s):
    return {"n_sentences": 3, "right_branching": {"f1": 30.0, "precision": 31.0, "recall": 29.0},
            "layers": [{"layer": k, "f1": f, "precision": f + 1, "recall": f - 1}
                       for k, f in enumerate(f1s)]}


def stats():
    by_class = {"content": {"rate": 0.75, "selected": 3, "possible": 4}}
    return {"n_sentences": 3, "layers": [{
        "layer": 0, "keys": {"by_class": by_class}, "queries": {"by_class": by_class},
        "distance": [{"distance": 0, "selected": 1, "possible": 2, "rate": 0.5}]}]}


def write_archive(root):
    archive = root / "examples" / "analysis" / "archive"
    archive.mkdir(parents=True)
    systems = [{"name": "san", "checkpoint": "runs/experiments/pn/en-de/base@5/checkpoint_best.pt"},
               {"name": "ssan", "checkpoint": "runs/experiments/pn/en-de/ssan@5/checkpoint_best.pt"}]
    (archive / "systems.json").write_text(json.dumps({"systems": systems}))
    for name, accs, f1s in (("san", [0.5, 0.6], [20.0, 21.5]), ("ssan", [0.55, 0.7], [18.0, 23.25])):
        for s in SETS:
            (archive / f"probe_{s}.{name}.json").write_text(json.dumps(probe(accs)))
        (archive / f"trees.{name}.json").write_text(json.dumps(trees(f1s)))
    (archive / "selection_stats.ssan.json").write_text(json.dumps(stats()))
    translation = root / "examples" / "translation" / "experiments"
    for run, bleu, chrf, curve in (
            ("base@5", 32.6, 57.1, [{"kind": "valid", "valid_loss": "3.0"}]),
            ("ssan@5", 33.06, 57.8, [{"kind": "valid", "valid_loss": "3.2", "valid_sel": "0.7"},
                                     {"kind": "valid", "valid_loss": "3.1", "valid_sel": "0.812"},
                                     {"kind": "valid", "valid_loss": "3.15", "valid_sel": "0.9"}])):
        d = translation / "pn" / "en-de" / run
        d.mkdir(parents=True)
        (d / "test.json").write_text(json.dumps({"systems": [{"name": run, "bleu": bleu,
                                                              "chrf": chrf}]}))
        (d / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in curve))
    return archive, translation


def test_blocks_are_the_report_and_the_models(tmp_path):
    archive, translation = write_archive(tmp_path)
    blocks = analysis_blocks(archive, translation)
    assert set(blocks) == {"analysis-models", "analysis-report"}
    rows = blocks["analysis-models"].splitlines()[2:]
    assert rows == [
        "| `san` | `runs/experiments/pn/en-de/base@5/checkpoint_best.pt` | 32.60 | 57.10 | 1 (every pair) |",
        # the selection rate of the lowest valid loss (3.1), not the last or the highest
        "| `ssan` | `runs/experiments/pn/en-de/ssan@5/checkpoint_best.pt` | 33.06 | 57.80 | 0.812 |"]
    expected = report_markdown(AnalysisResults.read(archive, ["san", "ssan"]), level=3)
    assert blocks["analysis-report"] == expected.rstrip("\n")
    assert blocks["analysis-report"].startswith("### Probing")
    # the systems in systems.json's order, each with its own files: written out by hand
    report = blocks["analysis-report"].splitlines()
    assert "| 0 | 20.00 (21.00 / 19.00) | 18.00 (19.00 / 17.00) |" in report
    assert "| 1 | 21.50 (22.50 / 20.50) | 23.25 (24.25 / 22.25) |" in report


def test_nothing_archived_gives_no_block(tmp_path):
    assert analysis_blocks(tmp_path, tmp_path) == {}


def test_checkpoint_elsewhere_has_no_scores(tmp_path):
    assert translation_run("models/x.pt", tmp_path) is None
    assert translation_run("runs/experiments/a/b/c@1/checkpoint_best.pt", tmp_path) == \
        tmp_path / "a" / "b" / "c@1"
    assert models_table([("mine", "models/x.pt")], tmp_path).splitlines()[2] == \
        "| `mine` | `models/x.pt` | — | — | — |"


@pytest.mark.parametrize("systems, message", [
    ([], "non-empty list"),
    ([{"name": "san"}], "systems.0.checkpoint' is missing"),
    ([{"name": "san", "checkpoint": "/abs/ck.pt"}], "must be relative"),
    ([{"name": "a", "checkpoint": "x.pt"}, {"name": "a", "checkpoint": "y.pt"}], "appears twice"),
])
def test_bad_systems_json_is_refused(tmp_path, systems, message):
    (tmp_path / "systems.json").write_text(json.dumps({"systems": systems}))
    with pytest.raises(ResultsError, match=message):
        analysis_systems(tmp_path)


def test_missing_tool_output_is_named(tmp_path):
    archive, translation = write_archive(tmp_path)
    (archive / "trees.ssan.json").unlink()
    with pytest.raises(ResultsError, match=r"trees.ssan.json: missing"):
        analysis_blocks(archive, translation)
    (archive / "trees.ssan.json").write_text('{"systems": [')  # truncated
    with pytest.raises(ResultsError, match=r"trees.ssan.json: not JSON \(.*, line 1\)"):
        analysis_blocks(archive, translation)


def test_missing_translation_run_is_named(tmp_path):
    archive, translation = write_archive(tmp_path)
    (translation / "pn" / "en-de" / "ssan@5" / "test.json").unlink()
    with pytest.raises(ResultsError, match=r"ssan@5/test.json"):
        analysis_blocks(archive, translation)
