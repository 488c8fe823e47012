"""ssan_plugin.experiments.tables.calibration: the README's calibration tables from the JSON of
scripts/calibrate_significance.py, row by row, and damaged archives refused by name."""

import json

import pytest

from ssan_plugin.experiments.tables.blocks import ResultsError
from ssan_plugin.experiments.tables.calibration import sentence_level_table, simulated_table


def simulated_record():
    return {"simulated": True, "nulls": 400, "samples": 200, "alpha": 0.05, "n_sentences": 150,
            "cells": [{"scenario": "seeds dominate", "n_seeds": 3, "spreads": {},
                       "rejection_rate": {"seed_level": 0.0425, "pooled_sentences": 0.33,
                                          "seeds_only": 0.06},
                       "sentence_to_seed": {"median": 0.071, "mean": 0.152, "q1": 0.021,
                                            "q3": 0.148, "nulls": 400}},
                      {"scenario": "sentences dominate", "n_seeds": 6, "spreads": {},
                       "rejection_rate": {"seed_level": 0.0125, "pooled_sentences": 0.1,
                                          "seeds_only": 0.26},
                       "sentence_to_seed": {"median": 1.5, "mean": 2.25, "q1": 0.5, "q3": 3.0,
                                            "nulls": 398}}]}


def test_simulated_table_one_row_per_cell(tmp_path):
    path = tmp_path / "simulated.json"
    path.write_text(json.dumps(simulated_record()))
    lines = simulated_table(path).splitlines()
    assert lines[0].startswith("| scenario | seeds a side | nulls | test sentences | "
                               "seed-level test: p < 0.05 |")
    assert lines[0].endswith("| seed-level test: sentence part / seed part (variances), "
                             "median (quartiles) |")
    assert lines[2:] == ["| seeds dominate | 3 | 400 | 150 | 4.2% | 33.0% | 6.0% | 0.07 (0.02 to "
                         "0.15) |",
                         "| sentences dominate | 6 | 400 | 150 | 1.2% | 10.0% | 26.0% | 1.50 "
                         "(0.50 to 3.00, over 398 nulls) |"]


def test_an_archive_without_the_parts_is_replayed(tmp_path):
    """A simulated archive made before the cells held sentence_to_seed: the parts are measured
    on its own nulls, replayed (calibration.variance_parts with the cell's seeds, the archive's
    nulls, samples and sentences, and the cell's seed: as archived, else n_seeds). Every count
    differs from the others, so an argument passed in another's place shows."""
    from ssan_plugin.stats.calibration import SCENARIOS, variance_parts

    record = simulated_record()
    record.update(nulls=5, samples=30, n_sentences=40)
    for cell in record["cells"]:
        del cell["sentence_to_seed"]
        cell["spreads"] = SCENARIOS[cell["scenario"]]
    record["cells"][1]["seed"] = 9
    path = tmp_path / "simulated.json"
    path.write_text(json.dumps(record))
    rows = simulated_table(path).splitlines()
    for row, (scenario, seeds, seed) in zip(rows[2:], (("seeds dominate", 3, 3), ("sentences dominate", 6, 9))):
        parts = variance_parts(seeds, SCENARIOS[scenario], 5, 30, 40, seed=seed)
        assert row.endswith(f"| {parts['median']:.2f} ({parts['q1']:.2f} to {parts['q3']:.2f}) |"), row
    record["cells"][0]["spreads"] = {}
    path.write_text(json.dumps(record))
    with pytest.raises(ResultsError, match="'cells.0.spreads' must name"):
        simulated_table(path)


def test_simulated_table_refuses_a_damaged_archive(tmp_path):
    path = tmp_path / "simulated.json"
    record = simulated_record()
    del record["cells"][1]["rejection_rate"]["seeds_only"]
    path.write_text(json.dumps(record))
    with pytest.raises(ResultsError, match="cells.1.rejection_rate.seeds_only' is missing"):
        simulated_table(path)
    record = simulated_record()
    record["simulated"] = False  # a file-based calibration is not a simulated one
    path.write_text(json.dumps(record))
    with pytest.raises(ResultsError, match="not a --simulate archive"):
        simulated_table(path)
    record["simulated"], record["cells"] = True, []
    path.write_text(json.dumps(record))
    with pytest.raises(ResultsError, match="'cells' must list"):
        simulated_table(path)


def test_sentence_level_table_rows_and_bad_records(tmp_path):
    path = tmp_path / "sentences.en-de.json"
    record = {"ref": "../shared/data/mt/en-de/test.de", "hyp": ["a/base.de", "b/ssan.de"],
              "n_sentences": 1000, "nulls": 200, "samples": 1000, "alpha": 0.05,
              "bleu": [32.0, 31.5], "rejection_rate": {"bootstrap": 0.05, "randomization": 0.045}}
    path.write_text(json.dumps(record))
    assert sentence_level_table([path]).splitlines()[2] == (
        "| `../shared/data/mt/en-de/test.de` | `a/base.de`, `b/ssan.de` | 1000 | 200 | 1000 | "
        "5.0% | 4.5% |")
    path.write_text(json.dumps(dict(record, alpha=0.01)))
    with pytest.raises(ResultsError, match="alpha must be 0.05"):
        sentence_level_table([path])
    path.write_text(json.dumps(dict(record, hyp=["only-one.de"])))
    with pytest.raises(ResultsError, match="'hyp' must name the two outputs"):
        sentence_level_table([path])
