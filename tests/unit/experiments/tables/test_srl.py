"""ssan_plugin.experiments.tables.srl: a tiny archive of run_srl.py's layout whose every cell is
counted by hand here; a damaged archive, or one whose result.json does not match its
predictions, is refused naming the file."""

import gzip
import json

import pytest
from helpers.srl_props import column

from ssan_plugin.experiments.tables import srl
from ssan_plugin.experiments.tables.blocks import ResultsError
from ssan_plugin.experiments.tables.verdicts import verdict_table
from ssan_plugin.srl.props import write_props


def sentence(n, position, lemma, spans):
    targets = ["-"] * n
    targets[position] = lemma
    return targets, [column(n, spans + [(position, position, "V")])]


# S1: 6 words, eat@2: A0 0-1, A1 3-3, AM-TMP 5-5 (distance 2).  S2: 12 words, go@0: A0 1-1, A1 4-5.
S1 = sentence(6, 2, "eat", [(0, 1, "A0"), (3, 3, "A1"), (5, 5, "AM-TMP")])
S2 = sentence(12, 0, "go", [(1, 1, "A0"), (4, 5, "A1")])
GOLD = [S1, S2]
# (sentences, correct / excess / missed counted by hand)
SYSTEMS = {
    "perfect": ([S1, S2], (5, 0, 0)),
    # S1: A0 0-0 instead of 0-1 (one excess, one missed)
    "wrong": ([sentence(6, 2, "eat", [(0, 0, "A0"), (3, 3, "A1"), (5, 5, "AM-TMP")]), S2],
              (4, 1, 1)),
    # S1 without AM-TMP
    "miss_tmp": ([sentence(6, 2, "eat", [(0, 1, "A0"), (3, 3, "A1")]), S2], (4, 0, 1)),
    # S2: only the predicate
    "only_v": ([S1, sentence(12, 0, "go", [])], (3, 0, 2)),
}
F1 = {"perfect": 100.0, "wrong": 80.0, "miss_tmp": 800 / 9, "only_v": 75.0}
P = {"perfect": 100.0, "wrong": 80.0, "miss_tmp": 100.0, "only_v": 100.0}
R = {"perfect": 100.0, "wrong": 80.0, "miss_tmp": 80.0, "only_v": 60.0}
RUNS = {"cfg_san_s1": "wrong", "cfg_san_s2": "miss_tmp", "cfg_ssan_s1": "perfect",
        "cfg_ssan_s2": "only_v"}


def curve(gnorms, valid):
    """curve.jsonl text: train records every 100 updates, valid records {update: (f1, sel)}."""
    lines = [{"kind": "train_inner", "num_updates": str(100 * (i + 1)), "gnorm": str(g),
              "accuracy": str(90 + i)} for i, g in enumerate(gnorms)]
    for update, (f1, sel) in sorted(valid.items()):
        record = {"kind": "valid", "valid_num_updates": str(update), "valid_f1": str(f1),
                  "valid_loss": "1.0"}
        if sel is not None:
            record["valid_sel"] = str(sel)
        lines.append(record)
    return "\n".join(json.dumps(r) for r in lines) + "\n"


def write_run(archive, name, system, flags=("--a", "1"), **extra):
    d = archive / name
    d.mkdir(parents=True)
    write_props(str(d / "dev.pred.props.gz"), SYSTEMS[system][0])
    c, e, m = SYSTEMS[system][1]
    result = {"name": name, "flags": list(flags), "updates": 300, "minutes": 2.5,
              "dev": {"precision": P[system], "recall": R[system], "f1": F1[system],
                      "correct": c, "excess": e, "missed": m}, **extra}
    (d / "result.json").write_text(json.dumps(result))
    sel = None if "_san_" in name else 0.5
    (d / "curve.jsonl").write_text(curve([1.5, 41026800.0, 2.0],
                                         {100: (10.0, sel), 200: (F1[system], sel),
                                          300: (F1[system] - 1, sel)}))
    return d


@pytest.fixture
def archive(tmp_path):
    gold = tmp_path / "gold.props"
    write_props(str(gold), GOLD)
    root = tmp_path / "experiments"
    for name, system in RUNS.items():
        write_run(root, name, system)
    write_run(root, "cfg2_san_s1", "perfect", flags=("--a", "1", "--b", "x", "y"))
    return srl.SrlArchive(root, gold)


def test_every_run_rescored_from_its_predictions(archive):
    for name, system in RUNS.items():
        entry = archive.score(name).entry
        assert (entry["correct"], entry["excess"], entry["missed"]) == SYSTEMS[system][1]
        assert entry["f1"] == pytest.approx(F1[system])
        assert archive.score(name).stats.sum(0).tolist() == list(SYSTEMS[system][1])


def test_runs_table_cells(archive):
    table = srl.runs_table(archive, [("w", "cfg_san_s1"), ("x", "cfg2_san_s1")],
                           [srl.flags_column(base="cfg_san_s1"), srl.P, srl.R, srl.F1,
                            srl.COUNTS, srl.BEST_UPDATE, srl.MAX_GNORM, srl.SELECTION,
                            srl.MINUTES])
    lines = table.splitlines()
    assert lines[0].startswith("| run | flags added to cfg_san_s1's | dev P | dev R | dev F1 |")
    assert lines[2] == ("| w | (none) | 80.00 | 80.00 | 80.00 | 4 / 1 / 1 | 200 | 4.1e7 | "
                        "1 (all pairs) | 2.5 |")
    assert lines[3] == ("| x | `--b x y` | 100.00 | 100.00 | 100.00 | 5 / 0 / 0 | 200 | 4.1e7 | "
                        "1 (all pairs) | 2.5 |")


def test_seeds_table_means_and_per_run_cells(archive):
    table = srl.seeds_table(archive, [("san", "cfg_san"), ("ssan", "cfg_ssan")],
                            [srl.SELECTION, srl.MINUTES])
    lines = table.splitlines()
    assert lines[0] == ("| runs | seed 1 | seed 2 | dev P (mean) | dev R (mean) | "
                        "dev F1, mean ± sd | dev selection rate (last validation) | "
                        "minutes (whole run) |")
    # san: F1 80 and 88.89, P (80 + 100) / 2, R 80; sd of (80, 800/9) = (800/9 - 80) / sqrt 2
    assert lines[2] == ("| san | 80.00 | 88.89 | 90.00 | 80.00 | 84.44 ± 6.29 | 1 (all pairs) | "
                        "2.5 |")
    assert lines[3] == "| ssan | 100.00 | 75.00 | 100.00 | 80.00 | 87.50 ± 17.68 | 0.50 | 2.5 |"


def test_curve_table_reads_validations_and_leaves_later_updates_blank(archive):
    table = srl.curve_table(archive, [("san@1", "cfg_san_s1", "f1", 1),
                                      ("ssan@1", "cfg_ssan_s1", "sel", 3)], (100, 300, 400))
    assert table.splitlines()[2:] == ["| san@1 | 10.0 | 79.0 |  |", "| ssan@1 | 0.500 | 0.500 |  |"]
    with pytest.raises(ResultsError, match=r"cfg_san_s1/curve.jsonl: no validation at 150"):
        srl.curve_table(archive, [("san@1", "cfg_san_s1", "f1", 1)], (150,))
    assert archive.train_last("cfg_san_s1", "accuracy") == (300, 92.0)


def test_breakdown_table_is_the_seed_mean_of_each_runs_buckets(archive):
    table = srl.breakdown_table(archive, [("san", "cfg_san"), ("ssan", "cfg_ssan")], "by_length")
    lines = table.splitlines()
    assert lines[0] == ("| sentence length (words) | 1-10 (n=1) | 11-20 (n=1) | 21-30 (n=0) | "
                        "31-40 (n=0) | 41+ (n=0) |")
    # S1 (6 words): wrong 2/1/1 -> 66.67, miss_tmp 2/0/1 -> 80; perfect and only_v 100.
    # S2 (12 words): 100 for both san runs; perfect 100, only_v 0 (nothing predicted)
    assert lines[2] == "| san | 73.33 | 100.00 | — | — | — |"
    assert lines[3] == "| ssan | 100.00 | 50.00 | — | — | — |"
    assert lines[4] == "| Δ | +26.67 | -50.00 | — | — | — |"


def test_comparison_is_paired_by_seed_with_the_hand_deltas(archive):
    rows = srl.srl_comparisons(archive, [("SAN vs SSAN", "cfg_san", "cfg_ssan")], n_samples=200)
    (row,) = rows
    assert row.result.paired
    assert row.result.per_seed == pytest.approx([20.0, 75.0 - 800 / 9])
    assert row.result.delta == pytest.approx((20.0 + 75.0 - 800 / 9) / 2)
    assert row.baseline_scores == pytest.approx([80.0, 800 / 9])
    assert row.p_holm == pytest.approx(row.result.p_value)  # one comparison: Holm changes nothing
    table = verdict_table(rows, metric="dev F1")
    assert "| SAN vs SSAN | cfg_ssan | 2 | 84.44 ± 6.29 | 87.50 ± 17.68 | +3.06 [" in table
    assert "| +20.00 -13.89 | 1/2 | no difference shown |" in table


def test_fewer_than_two_seeds_is_refused(archive):
    with pytest.raises(ResultsError, match="fewer than two archived seeds of cfg_san or cfg2_san"):
        srl.srl_comparisons(archive, [("x", "cfg_san", "cfg2_san")])


def test_an_archived_score_that_the_predictions_do_not_give_is_refused(archive):
    path = archive.archive / "cfg_san_s2" / "result.json"
    result = json.loads(path.read_text())
    result["dev"]["correct"] = 5
    path.write_text(json.dumps(result))
    with pytest.raises(ResultsError, match=r"cfg_san_s2/result.json: dev correct 5 archived, "
                                           r"4 recomputed from .*cfg_san_s2/dev.pred.props.gz"):
        archive.score("cfg_san_s2")


@pytest.mark.parametrize("damage", ["truncated", "misaligned", "brackets", "missing"])
def test_damaged_predictions_are_refused_naming_the_file(archive, damage):
    path = archive.archive / "cfg_ssan_s1" / "dev.pred.props.gz"
    if damage == "truncated":
        path.write_bytes(gzip.compress(b"x" * 1000)[:30])
    elif damage == "misaligned":
        write_props(str(path), [S1])
    elif damage == "brackets":
        path.write_bytes(gzip.compress(b"-   (A0*\neat (V*)\n\n"))
    else:
        path.unlink()
    with pytest.raises(ResultsError, match=r"cfg_ssan_s1/dev.pred.props.gz"):
        archive.score("cfg_ssan_s1")


def test_damaged_result_json_and_curve_are_refused_naming_the_file(archive):
    (archive.archive / "cfg_san_s1" / "result.json").write_text('{"dev": ')
    with pytest.raises(ResultsError, match=r"cfg_san_s1/result.json is not valid JSON"):
        archive.score("cfg_san_s1")
    (archive.archive / "cfg_ssan_s2" / "curve.jsonl").write_text('{"kind": "valid"}\n')
    with pytest.raises(ResultsError, match=r"cfg_ssan_s2/curve.jsonl:1: key "
                                           r"'valid_num_updates' missing"):
        archive.validations("cfg_ssan_s2", "f1")
    with pytest.raises(ResultsError, match=r"nope_s1/result.json: no archived run nope_s1"):
        archive.score("nope_s1")
    (archive.archive / "cfg_ssan_s1" / "curve.jsonl").write_text(
        '{"kind": "valid", "valid_num_updates": "150", "valid_f1": "nan"}\n')
    with pytest.raises(ResultsError, match=r"cfg_ssan_s1/curve.jsonl:1: key 'valid_f1' must be a "
                                           r"finite number, found 'nan'"):
        archive.validations("cfg_ssan_s1", "f1")
    (archive.archive / "cfg_san_s2" / "curve.jsonl").write_text('{"kind": "valid", "valid_f')
    with pytest.raises(ResultsError, match=r"cfg_san_s2/curve.jsonl:1 is not valid JSON"):
        archive.validations("cfg_san_s2", "f1")


def test_missing_gold_dev_file_is_refused(tmp_path):
    with pytest.raises(ResultsError, match="dev.gold_conll: the gold dev file is missing"):
        srl.srl_gold_props(tmp_path / "dev.gold_conll", tmp_path / "gold.props")
