"""ssan_plugin.experiments.tables.stability: the seed-spread table's cells, computed here from
the values the test gives it, and the first validation record of an archived curve."""

import json

import numpy as np
import pytest

from ssan_plugin.experiments.tables.blocks import ResultsError
from ssan_plugin.experiments.tables.stability import (
    SeedSpread,
    calibration_table,
    first_validation,
    spread_table,
)


def spread(system, bleu, loss, sel=None):
    first = [{"update": 150, "loss": 3.0, **({"sel_0": s, "sel_1": s + 0.5} if s is not None
                                             else {})} for s in (sel or [None] * len(bleu))]
    return SeedSpread(system, list(range(1, len(bleu) + 1)), bleu, loss, first,
                      [1.5] * len(bleu))


def row(table, system):
    return next(line for line in table.splitlines() if line.startswith(f"| {system} |"))


def test_spread_table_ratio_interval_goal_and_first_selection():
    base = spread("baseline", [48.01, 47.36, 43.57, 37.95, 37.82], [2.3, 2.2, 2.4, 2.3, 2.35])
    cap0 = spread("ssan_cap0", [47.97, 44.65, 43.36, 43.10, 43.33], [2.25, 2.26, 2.2, 2.3, 2.27],
                  sel=[0.2, 0.0, 0.3, 0.1, 0.4])
    table = spread_table([base, cap0])
    ratio = np.std(cap0.bleu, ddof=1) / np.std(base.bleu, ddof=1)
    f = 9.605  # F(4, 4) upper 2.5 % point, from printed tables
    cells = [c.strip() for c in row(table, "ssan_cap0").strip("|").split("|")]
    assert cells[3] == f"{np.mean(cap0.bleu):.2f} ± {np.std(cap0.bleu, ddof=1):.2f}"
    interval = f"[{ratio / f ** 0.5:.2f}, {ratio * f ** 0.5:.2f}]"
    assert cells[4] == f"{ratio:.2f} {interval}; corrected {interval}, within 1.5x"  # one ratio
    assert "corrected over the table's 1 ratios (0.05 in the tails)" in table.splitlines()[0]
    # five ratios: each interval at 1 - 0.05 / 5, the F(4, 4) upper 0.5 % point 23.15 (printed
    # tables); the goal is read on the corrected interval, which now crosses 1.5
    five = spread_table([base] + [spread(f"s{k}", cap0.bleu, cap0.valid_loss) for k in range(5)])
    wide = 23.15
    assert row(five, "s0").strip("|").split("|")[4].strip() == (
        f"{ratio:.2f} {interval}; corrected [{ratio / wide ** 0.5:.2f}, "
                        f"{ratio * wide ** 0.5:.2f}], cannot tell at these seeds")
    assert cells[6] == f"{np.std(cap0.valid_loss, ddof=1) / np.std(base.valid_loss, ddof=1):.2f}"
    assert cells[7] == "0.00 (update 150)"  # the lowest layer rate over every seed
    base_cells = [c.strip() for c in row(table, "baseline").strip("|").split("|")]
    assert base_cells[4] == "1" and base_cells[7] == "— (no selection)"


def test_one_seed_has_no_ratio():
    table = spread_table([spread("baseline", [40.0, 41.0], [2.0, 2.1]),
                          spread("ssan", [30.0], [2.5], sel=[0.1])])
    assert [c.strip() for c in row(table, "ssan").strip("|").split("|")][4] == "—"


def test_first_validation_takes_the_first_valid_record(tmp_path):
    records = [{"kind": "train_inner", "loss": "9"},
               {"kind": "valid", "valid_num_updates": "150", "valid_loss": "4.5",
                "valid_sel_0": "0.01", "valid_sel_1": "0.35", "valid_sel": "0.2"},
               {"kind": "valid", "valid_num_updates": "300", "valid_loss": "3.9"}]
    (tmp_path / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert first_validation(tmp_path) == {"update": 150, "loss": 4.5, "sel_0": 0.01,
                                          "sel_1": 0.35}
    (tmp_path / "curve.jsonl").write_text(json.dumps(records[0]) + "\n")
    with pytest.raises(ResultsError, match="no validation record"):
        first_validation(tmp_path)
    records[1]["valid_loss"] = "inf"
    (tmp_path / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(ResultsError, match=r"curve.jsonl:2: key 'valid_loss' must be a finite "
                                           r"number, found 'inf'"):
        first_validation(tmp_path)


def test_calibration_table_reads_an_archive_of_distinct_nulls(tmp_path):
    path = tmp_path / "ssan_cap0.json"
    record = {"n_sentences": 500, "nulls": 30, "distinct_splits": 30, "test_sets": 1,
              "group_size": 2, "samples": 200, "alpha": 0.05,
              "bleu": [40.1, 41.2, 39.8, 40.5, 40.0],
              "rejection_rate": {"seed_level": 1 / 30, "pooled_sentences": 0.5}}
    path.write_text(json.dumps(record))
    assert calibration_table([path], tmp_path).splitlines()[2] == \
        "| ssan_cap0 | 5 | 2 | 30 | 500 | 1 of 30 (3.3%) | 15 of 30 (50.0%) | — |"
    path.write_text(json.dumps(dict(record, nulls=60, test_sets=2)))
    assert "| 30 x 2 | 500 | 2 of 60 (3.3%) | 30 of 60 (50.0%) |" in calibration_table(
        [path], tmp_path)
    del record["rejection_rate"]["pooled_sentences"]
    path.write_text(json.dumps(record))
    with pytest.raises(ResultsError, match="rejection_rate.pooled_sentences' is missing"):
        calibration_table([path], tmp_path)


def test_an_archive_of_random_draws_is_recomputed_over_the_distinct_nulls(tmp_path):
    """The first calibration drew its nulls at random with repeats: the table recomputes the
    rates over every distinct null from the hypotheses the archive names (their BLEU checked),
    and shows the draws beside, with how many distinct nulls were among them."""
    from sacrebleu.metrics import BLEU

    from ssan_plugin.stats.calibration import drawn_splits, seed_level_null_rates
    from ssan_plugin.stats.significance import sacrebleu_score_fn, sacrebleu_stats

    rng = np.random.default_rng(0)
    words = ["cat", "dog", "mat", "sat", "the", "a", "on", "red"]
    refs = [" ".join(rng.choice(words, 6)) for _ in range(30)]
    (tmp_path / "ref.txt").write_text("".join(r + "\n" for r in refs))
    hyps = []
    for seed in range(4):
        lines = [" ".join(w if rng.random() < 0.7 else rng.choice(words) for w in r.split())
                 for r in refs]
        (tmp_path / f"h{seed}.txt").write_text("".join(x + "\n" for x in lines))
        hyps.append(lines)
    metric = BLEU(tokenize="13a")
    stats = [sacrebleu_stats(metric, h, refs) for h in hyps]
    score = sacrebleu_score_fn(metric)
    record = {"ref": "ref.txt", "hyp": [f"h{s}.txt" for s in range(4)], "n_sentences": 30,
              "nulls": 20, "samples": 40, "alpha": 0.05, "group_size": 2,
              "bleu": [score(x.sum(0)) for x in stats],
              "rejection_rate": {"seed_level": 0.05, "pooled_sentences": 0.4}}
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(record))
    fresh = seed_level_null_rates(stats, score, 2, 1, 40, 0.05, 12345)
    seen = len(set(drawn_splits(4, 2, 20, 30)))
    line = calibration_table([path], tmp_path).splitlines()[2]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:5] == ["baseline", "4", "2", "6", "30"]
    hits = round(fresh["rejection_rate"]["seed_level"] * 6)
    assert cells[5] == f"{hits} of 6 ({hits / 6:.1%})"
    assert cells[7] == f"20 ({seen}), 5.0%, 40.0%"
    record["bleu"][1] += 0.5  # the hypotheses are not the ones the archive scored
    path.write_text(json.dumps(record))
    with pytest.raises(ResultsError, match="h1.txt scores .* BLEU, the archive"):
        calibration_table([path], tmp_path)
    (tmp_path / "h3.txt").unlink()
    with pytest.raises(ResultsError, match="h3.txt is missing"):
        calibration_table([path], tmp_path)
