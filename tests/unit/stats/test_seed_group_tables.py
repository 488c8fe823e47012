"""ssan_plugin/stats/seed_groups.py, the reporting half (tests/unit/stats/test_seed_groups.py covers the
names and the tests run): Holm's correction over the groups of a table, the verdict in words,
the table cells and the markdown table, checked against hand-written expectations."""

import numpy as np
import pytest

from ssan_plugin.stats.seed_groups import (group_table, pooled_groups, seed_level_cells,
                                           seed_level_entry, verdict)


def entry(delta=1.5, p=0.01, p_holm=0.02, per_seed=(1.0, 2.5, -0.5), ci=(0.25, 2.75)):
    return {"delta": delta, "ci": list(ci), "p": p, "p_holm": p_holm,
            "per_seed": None if per_seed is None else list(per_seed),
            "same_sign": None if per_seed is None else sum((d > 0) == (delta > 0) for d in per_seed)}


def test_verdict_in_words():
    assert verdict({}) == "too few seeds"
    assert verdict(entry(delta=1.5, p_holm=0.049)) == "better"
    assert verdict(entry(delta=-1.5, p_holm=0.01)) == "worse"
    assert verdict(entry(delta=-1.5, p_holm=0.01), higher_is_better=False) == "better"  # e.g. MSE
    assert verdict(entry(delta=1.5, p_holm=0.05)) == "no difference shown"  # p < alpha, strictly
    assert verdict(entry(delta=1.5, p_holm=0.08), alpha=0.1) == "better"


def test_cells():
    assert seed_level_cells(entry()) == ["+1.50 [+0.25, +2.75]", "0.01", "0.02",
                                         "+1.00 +2.50 -0.50", "2/3"]
    assert seed_level_cells(entry(p_holm=None, per_seed=None), digits=1) == [
        "+1.5 [+0.2, +2.8]", "0.01", "—", "unpaired", ""]
    assert seed_level_cells({}) == ["too few seeds", "—", "—", "", ""]


def holm_by_hand(p):
    """Holm's step-down adjustment, written out: sort, multiply by (m - rank), running max."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def accuracy(sums):
    return 100.0 * sums[0] / sums[1]


def test_holm_over_the_groups_of_a_table():
    rng = np.random.default_rng(3)
    names = ["base@1", "base@2", "a@1", "a@2", "b@1", "b@2", "c@1"]
    stats = [np.stack([rng.integers(0, 2, 60) if not n.startswith("a") else
                       (rng.random(60) < 0.8).astype(int), np.ones(60)], 1).astype(float)
             for n in names]
    groups = pooled_groups(names, stats, accuracy, n_samples=200, seed=5)
    tested = [g for g in groups if g.seed_level is not None]
    assert [g.name for g in tested] == ["a", "b"]  # c has one seed: no seed-level test
    assert [g.p_holm for g in tested] == pytest.approx(holm_by_hand([g.seed_level.p_value
                                                                     for g in tested]))
    assert groups[0].p_holm is None and groups[3].p_holm is None
    a = seed_level_entry(groups[1])
    assert a["p_holm"] == groups[1].p_holm and a["p"] == groups[1].seed_level.p_value
    assert a["delta"] == groups[1].seed_level.delta and "aso" not in a
    assert seed_level_entry(groups[3]) == {}


def test_group_table():
    groups = [{"name": "san", "n_seeds": 3, "mean": 40.0, "sd": 1.0},
              {"name": "ssan", "n_seeds": 3, "mean": 41.5, "sd": 0.5, "p_value": 0.0123,
               "seed_level": dict(entry(), aso=0.125), "verdict": "better"},
              {"name": "copy", "n_seeds": 1, "mean": 40.0, "sd": 0.0, "identical": True,
               "seed_level": {}, "verdict": "too few seeds"}]
    table = group_table(groups, "BLEU", lambda g: (g["mean"], g["sd"]))
    lines = table.splitlines()
    assert lines[0].startswith("| group | seeds | mean BLEU ± sd | Δ vs san [95% seed-level interval] |")
    assert lines[2] == "| san | 3 | 40.00 ± 1.00 | (baseline) | | | | | | |"
    assert lines[3] == ("| ssan | 3 | 41.50 ± 0.50 | +1.50 [+0.25, +2.75] | 0.01 | 0.02 | "
                        "+1.00 +2.50 -0.50 | 2/3 | better | 0.0123 |")
    assert lines[4] == "| copy | 1 | 40.00 ± 0.00 | too few seeds | — | — |  |  | too few seeds | identical |"
    assert lines[-1].startswith("Almost Stochastic Order over seeds") and lines[-1].endswith("ssan 0.12")
    assert all(line.count("|") == lines[0].count("|") for line in lines[1:5])


def test_each_group_states_its_seed_spread_against_the_baseline():
    from ssan_plugin.stats.significance import sd_ratio_interval

    rng = np.random.default_rng(11)
    names = ["base@1", "base@2", "base@3", "a@1", "a@2", "a@3", "c@1"]
    stats = [np.stack([(rng.random(80) < 0.5 + 0.1 * k).astype(float), np.ones(80)], 1)
             for k in range(len(names))]
    groups = pooled_groups(names, stats, accuracy, n_samples=100, seed=5)
    score = [accuracy(s.sum(0)) for s in stats]
    expected = sd_ratio_interval(score[3:6], score[0:3])
    assert groups[1].spread == pytest.approx(expected)
    assert groups[2].spread is None  # one seed: no spread
    e = seed_level_entry(groups[1])
    assert (e["sd_ratio"], *e["sd_ratio_ci"]) == pytest.approx(expected)
    table = group_table([{"name": "base", "n_seeds": 3, "seed_level": {}},
                         {"name": "a", "n_seeds": 3, "seed_level": e, "verdict": "x",
                          "p_value": 0.5}], "acc", lambda g: (50.0, 1.0))
    r, lo, hi = expected
    assert f"a {r:.2f} [{lo:.2f}, {hi:.2f}]" in table.splitlines()[-1]
    # a baseline whose seeds all score the same has no spread to compare with
    same = [stats[0]] * 2 + stats[3:5]
    flat = pooled_groups(["base@1", "base@2", "a@1", "a@2"], same, accuracy, n_samples=50, seed=5)
    assert flat[1].spread is None and "sd_ratio" not in seed_level_entry(flat[1])
