"""ssan_plugin.experiments.tables.pairs: a tiny archive of run_pairs.py's layout on a tiny SICK
file, every cell counted by hand here; damaged predictions, or a result.json its predictions
do not give, are refused naming the file."""

import json

import numpy as np
import pytest
from scipy.stats import spearmanr

from ssan_plugin.experiments.tables import pairs
from ssan_plugin.experiments.tables.blocks import ResultsError

GOLD = [  # pair_ID, label, relatedness
    ("4", "neutral", 3.0), ("7", "entailment", 4.5), ("9", "contradiction", 2.0),
    ("12", "neutral", 3.5), ("15", "entailment", 4.0), ("20", "neutral", 1.5),
    ("21", "contradiction", 2.5), ("30", "neutral", 3.0),
]
LABELS = [g[1] for g in GOLD]
SCORES = [g[2] for g in GOLD]


def flip(labels, *positions):
    """labels with the given positions made wrong."""
    other = {"neutral": "entailment", "entailment": "contradiction", "contradiction": "neutral"}
    return [other[x] if i in positions else x for i, x in enumerate(labels)]


# entailment runs: (start, encoder, seed) -> predicted labels (accuracy = share right, by hand)
ENTAILMENT = {
    ("scratch", "san", 1): flip(LABELS, 0, 1, 2),        # 5/8 = 62.5
    ("scratch", "san", 2): flip(LABELS, 3, 4),           # 6/8 = 75.0
    ("scratch", "ssan", 1): flip(LABELS, 0),             # 7/8 = 87.5
    ("scratch", "ssan", 2): flip(LABELS, 5, 6, 7),       # 5/8 = 62.5
    ("translation", "san", 1): flip(LABELS),             # 8/8 = 100
    ("translation", "san", 2): flip(LABELS, 1),          # 7/8 = 87.5
}
ACCURACY = {("scratch", "san", 1): 62.5, ("scratch", "san", 2): 75.0,
            ("scratch", "ssan", 1): 87.5, ("scratch", "ssan", 2): 62.5,
            ("translation", "san", 1): 100.0, ("translation", "san", 2): 87.5}
RELATEDNESS = {
    ("scratch", "san", 1): [3.1, 4.0, 2.5, 3.3, 3.9, 2.0, 2.4, 3.2],
    ("scratch", "san", 2): [2.9, 4.4, 2.2, 3.0, 3.5, 1.9, 2.8, 2.7],
    ("scratch", "ssan", 1): [3.0, 4.3, 2.1, 3.6, 4.1, 1.6, 2.6, 3.1],
    ("scratch", "ssan", 2): [3.4, 3.9, 2.6, 3.2, 3.8, 2.2, 2.3, 3.3],
}


def macro_f1(gold, predicted):
    """Mean over the three labels of F1 in percent (0 for a label never right)."""
    out = []
    for label in ("entailment", "neutral", "contradiction"):
        tp = sum(g == p == label for g, p in zip(gold, predicted))
        fp = sum(p == label != g for g, p in zip(gold, predicted))
        fn = sum(g == label != p for g, p in zip(gold, predicted))
        out.append(200.0 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(out) / len(out)


def write_gold(path):
    lines = ["pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tSemEval_set"]
    lines += [f"{i}\ta man sings {i}\ta person sings\t{label.upper()}\t{score}\tTRIAL"
              for i, label, score in GOLD]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_run(root, target, start, encoder, seed, minutes=1.5):
    d = root / f"{target}_{start}_{encoder}_s{seed}"
    d.mkdir(parents=True)
    key = (start, encoder, seed)
    if target == "entailment":
        labels = ENTAILMENT[key]
        rows = [f"{g[0]}\t{x}\t-" for g, x in zip(GOLD, labels)]
        right = sum(a == b for a, b in zip(labels, LABELS))
        test = {"entailment": {"accuracy": 100.0 * right / len(GOLD),
                               "macro_f1": macro_f1(LABELS, labels)}}
    else:
        scores = RELATEDNESS[key]
        rows = [f"{g[0]}\t-\t{x:.4f}" for g, x in zip(GOLD, scores)]
        x, y = np.array(scores), np.array(SCORES)
        test = {"relatedness": {"pearson": float(np.corrcoef(x, y)[0, 1]),
                                "spearman": float(spearmanr(x, y)[0]),
                                "mse": float(np.mean((x - y) ** 2))}}
    (d / "test.predictions.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (d / "result.json").write_text(json.dumps({"name": d.name, "target": target, "test": test,
                                               "minutes": minutes}))
    return d


@pytest.fixture
def archive(tmp_path):
    gold = tmp_path / "sick" / "valid.tsv"
    gold.parent.mkdir()
    write_gold(gold)
    root = tmp_path / "experiments"
    for start, encoder, seed in ENTAILMENT:
        write_run(root, "entailment", start, encoder, seed, minutes=1.0 + seed)
    for start, encoder, seed in RELATEDNESS:
        write_run(root, "relatedness", start, encoder, seed)
    return pairs.PairsArchive(root, gold)


def test_every_run_rescored_from_its_predictions(archive):
    for (start, encoder, seed), accuracy in ACCURACY.items():
        name = archive.seeds("entailment", start, encoder)[seed]
        assert archive.metric(name, "entailment") == pytest.approx(accuracy)
    name = archive.seeds("relatedness", "scratch", "ssan")[2]
    expected = np.corrcoef(RELATEDNESS[("scratch", "ssan", 2)], SCORES)[0, 1]
    assert archive.metric(name, "relatedness") == pytest.approx(expected)


def test_runs_table_cells_and_majority_class(archive):
    table = pairs.runs_table(archive, ["entailment"], ["scratch", "translation"],
                             ["san", "ssan", "resa"])
    lines = table.splitlines()
    assert lines[0] == ("| target (test metric) | start | encoder | seed 1 | seed 2 | "
                        "mean ± sd | minutes per run |")
    # sd of (62.5, 75) = 12.5 / sqrt 2 = 8.84; no resa runs and no translation ssan: no rows
    assert lines[2] == "| entailment (accuracy %) | scratch | san | 62.50 | 75.00 | " \
                       "68.75 ± 8.84 | 2.0 / 3.0 |"
    assert lines[3] == "| entailment (accuracy %) | scratch | ssan | 87.50 | 62.50 | " \
                       "75.00 ± 17.68 | 2.0 / 3.0 |"
    assert lines[4] == "| entailment (accuracy %) | translation | san | 100.00 | 87.50 | " \
                       "93.75 ± 8.84 | 2.0 / 3.0 |"
    assert len([line for line in lines if line.startswith("| entailment")]) == 3
    assert lines[-1] == ("Majority class of the test split (neutral, 4 of 8 pairs): 50.00 % "
                         "accuracy.")


def test_comparisons_paired_by_seed_with_holm_over_the_table(archive):
    specs = [("entailment, scratch", ("entailment", "scratch", "san"),
              ("entailment", "scratch", "ssan")),
             ("entailment, san", ("entailment", "scratch", "san"),
              ("entailment", "translation", "san")),
             ("relatedness, scratch", ("relatedness", "scratch", "san"),
              ("relatedness", "scratch", "ssan"))]
    rows = pairs.pair_comparisons(archive, specs, "t", n_samples=200)
    assert [r.result.per_seed for r in rows[:2]] == [pytest.approx([25.0, -12.5]),
                                                      pytest.approx([37.5, 12.5])]
    r = [np.corrcoef(RELATEDNESS[("scratch", e, s)], SCORES)[0, 1]
         for e in ("san", "ssan") for s in (1, 2)]
    assert rows[2].result.per_seed == pytest.approx([r[2] - r[0], r[3] - r[1]], abs=1e-4)
    raw = sorted(row.result.p_value for row in rows)
    holm = sorted(row.p_holm for row in rows)
    assert holm[0] == pytest.approx(min(1.0, 3 * raw[0]))
    assert all(h >= p for h, p in zip(holm, raw))
    table = pairs.pair_verdict_table(rows)
    lines = table.splitlines()
    assert "p (Holm, 3 tests)" in lines[0] and "p (test pairs, seeds fixed; not the verdict)" \
        in lines[0]
    assert lines[2].startswith("| entailment, scratch | accuracy % | san, scratch | ssan | 2 | "
                               "68.75 ± 8.84 | 75.00 ± 17.68 | +6.25 [")
    assert "| +25.00 -12.50 | 1/2 |" in lines[2]
    assert lines[3].startswith("| entailment, san | accuracy % | san, scratch | "
                               "san, translation | 2 |")
    assert "| Pearson r | san, scratch | ssan | 2 |" in lines[4]
    pooled = rows[0].extra["pooled"]
    assert pooled.delta == pytest.approx(6.25) and lines[2].endswith(
        f"| {pooled.p_value:.3g} |")


def test_comparing_two_targets_or_one_seed_is_refused(archive):
    with pytest.raises(ResultsError, match="different targets"):
        pairs.pair_comparisons(archive, [("x", ("entailment", "scratch", "san"),
                                          ("relatedness", "scratch", "san"))], "t")
    with pytest.raises(ResultsError, match="fewer than two archived seeds"):
        pairs.pair_comparisons(archive, [("x", ("entailment", "scratch", "san"),
                                          ("entailment", "scratch", "resa"))], "t")


def test_an_archived_metric_the_predictions_do_not_give_is_refused(archive):
    path = archive.archive / "entailment_scratch_san_s2" / "result.json"
    result = json.loads(path.read_text())
    result["test"]["entailment"]["accuracy"] = 76.0
    path.write_text(json.dumps(result))
    with pytest.raises(ResultsError, match=r"entailment_scratch_san_s2/result.json: test "
                                           r"entailment accuracy 76 archived, 75 recomputed from "
                                           r".*entailment_scratch_san_s2/test.predictions.tsv"):
        archive.metric("entailment_scratch_san_s2", "entailment")


def test_relatedness_allows_the_files_four_decimals_and_nothing_more(archive):
    name = "relatedness_scratch_san_s1"
    path = archive.archive / name / "result.json"
    result = json.loads(path.read_text())
    result["test"]["relatedness"]["pearson"] += 5e-5  # what scores kept to 4 decimals move
    path.write_text(json.dumps(result))
    archive.metric(name, "relatedness")
    result["test"]["relatedness"]["pearson"] += 0.01
    path.write_text(json.dumps(result))
    fresh = pairs.PairsArchive(archive.archive, archive.gold_tsv)
    with pytest.raises(ResultsError, match=rf"{name}/result.json: test relatedness pearson"):
        fresh.metric(name, "relatedness")


@pytest.mark.parametrize("damage,message", [
    ("order", r"pair '7' where the subset has '4'"),
    ("short", r"7 lines for the 8 pairs"),
    ("label", r"unknown label 'maybe'"),
    ("missing", r"test.predictions.tsv"),
])
def test_damaged_predictions_are_refused_naming_the_file(archive, damage, message):
    path = archive.archive / "entailment_scratch_ssan_s1" / "test.predictions.tsv"
    lines = path.read_text().splitlines()
    if damage == "order":
        lines[0], lines[1] = lines[1], lines[0]
    elif damage == "short":
        lines = lines[:-1]
    elif damage == "label":
        lines[2] = lines[2].split("\t")[0] + "\tmaybe\t-"
    if damage == "missing":
        path.unlink()
    else:
        path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultsError, match=r"entailment_scratch_ssan_s1/test.predictions.tsv"):
        archive.metric("entailment_scratch_ssan_s1", "entailment")
    with pytest.raises(ResultsError, match=message):
        pairs.PairsArchive(archive.archive, archive.gold_tsv).metric(
            "entailment_scratch_ssan_s1", "entailment")


def test_missing_or_malformed_gold_is_refused(tmp_path, archive):
    with pytest.raises(ResultsError, match="the SICK test pairs are missing"):
        pairs.PairsArchive(archive.archive, tmp_path / "nope.tsv").metric(
            "entailment_scratch_san_s1", "entailment")
    bad = tmp_path / "bad.tsv"
    bad.write_text("pair_ID\tsentence_A\n1\tx\n")
    with pytest.raises(ResultsError, match=r"bad.tsv.*header lacks"):
        pairs.PairsArchive(archive.archive, bad).metric("entailment_scratch_san_s1", "entailment")
