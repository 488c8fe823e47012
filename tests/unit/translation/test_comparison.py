"""ssan_plugin/translation/comparison.py: length buckets and the BLEU of each against a direct
computation (the corpus score of the bucket's summed statistics, not a mean of sentences), and
the seed groups' means, deviations and tests, on hand-made statistics with a simple score."""

import numpy as np
import pytest

from ssan_plugin.stats.buckets import LENGTH_BUCKETS
from ssan_plugin.translation.comparison import (bucket_of, by_length, length_label, plot_by_length,
                                                pooled_groups, source_lengths)
from ssan_plugin.translation.textio import PipelineError


def ratio(sums):
    """A stand-in corpus score of summed statistics (matches, total): 100 * matches / total."""
    return 100.0 * sums[0] / sums[1]


def test_buckets_and_their_edges():
    assert source_lengths(["a b  c", "", "  x  "]) == [3, 0, 1]
    expected = {0: 0, 1: 0, 10: 0, 11: 1, 20: 1, 21: 2, 30: 2, 31: 3, 40: 3, 41: 4, 10**7: 4}
    assert {n: bucket_of(n) for n in expected} == expected
    assert [length_label({"min_len": lo, "max_len": hi}) for lo, hi in LENGTH_BUCKETS] == [
        "1-10", "11-20", "21-30", "31-40", "41+"]


def test_by_length_is_the_corpus_score_of_each_bucket():
    lengths = [3, 12, 0, 45, 9, 15]
    stats = np.array([[1, 4], [3, 3], [0, 2], [5, 10], [2, 2], [0, 5]], dtype=float)
    out = by_length(lengths, stats, ratio)
    assert [(b["min_len"], b["max_len"], b["n"]) for b in out] == [
        (1, 10, 3), (11, 20, 2), (21, 30, 0), (31, 40, 0), (41, None, 1)]
    assert out[0]["bleu"] == pytest.approx(100 * (1 + 0 + 2) / (4 + 2 + 2))  # not mean of 25, 0, 100
    assert out[1]["bleu"] == pytest.approx(100 * 3 / 8)
    assert out[2]["bleu"] is None and out[3]["bleu"] is None
    assert out[4]["bleu"] == pytest.approx(50.0)
    with pytest.raises(PipelineError, match="5 source lengths for 6 sentences"):
        by_length(lengths[:5], stats, ratio)


def test_groups_of_seeds():
    rng = np.random.default_rng(0)
    total = np.full((40, 1), 10.0)
    base = [np.hstack([rng.integers(0, 6, (40, 1)), total]) for _ in range(3)]
    better = [np.hstack([rng.integers(4, 11, (40, 1)), total]) for _ in range(3)]
    names = ["base@1", "base@2", "base@3", "ssan@1", "ssan@2", "ssan@3", "copy@1"]
    stats = base + better + [base[0]]
    groups = pooled_groups(names, stats, ratio, n_samples=200, seed=1)
    assert [(g["name"], g["systems"], g["n_seeds"]) for g in groups] == [
        ("base", names[:3], 3), ("ssan", names[3:6], 3), ("copy", ["copy@1"], 1)]
    for g, arrays in zip(groups, (base, better, [base[0]])):
        scores = [ratio(a.sum(0)) for a in arrays]
        assert g["mean_bleu"] == pytest.approx(np.mean(scores))
        assert g["std_bleu"] == pytest.approx(np.std(scores, ddof=1) if len(scores) > 1 else 0.0)
    assert "delta" not in groups[0] and "verdict" not in groups[0]
    ssan, copy = groups[1], groups[2]
    assert ssan["delta"] == pytest.approx(ssan["mean_bleu"] - groups[0]["mean_bleu"])
    assert ssan["delta"] > 30 and ssan["p_value"] < 0.05 and not ssan["identical"]
    assert ssan["seed_level"]["delta"] == pytest.approx(ssan["delta"])
    assert ssan["verdict"] == "better"
    assert copy["seed_level"] == {} and copy["verdict"] == "too few seeds"
    # a plan's seeds: the verdict waits for every planned seed of the group and the baseline
    def verdicts(planned):
        return [g.get("verdict") for g in pooled_groups(names, stats, ratio, n_samples=200,
                                                         seed=1, planned=planned)]
    assert verdicts({"base": 3, "ssan": 3, "copy": 1}) == [None, "better", "too few seeds"]
    assert verdicts({"ssan": 4}) == [None, "interim: 3 of 4 seeds", "too few seeds"]
    assert verdicts({"base": 5, "ssan": 3}) == [None, "interim: baseline 3 of 5 seeds",
                                                "too few seeds"]
    with pytest.raises(PipelineError, match="planned seeds for nosuch: no such group among "
                                            "base, ssan, copy"):
        verdicts({"nosuch": 2})
    with pytest.raises(PipelineError, match="more seeds than planned: ssan has 3 seeds, 2 "
                                            "planned"):
        verdicts({"ssan": 2})


def test_plot_by_length_writes_a_png(tmp_path):
    stats = np.array([[1, 2], [2, 2]], dtype=float)
    systems = [{"name": n, "by_length": by_length([3, 15], stats * k, ratio)}
               for n, k in (("a", 1), ("b", 2))]
    path = tmp_path / "len.png"
    plot_by_length(systems, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
