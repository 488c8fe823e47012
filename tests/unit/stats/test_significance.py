"""ssan_plugin.stats.significance against direct computations: exact permutation p-values, a plain
loop bootstrap, sacrebleu's own corpus BLEU, and the p = 1 convention for identical outputs."""

import itertools
import json
import subprocess
import sys

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from conftest import ROOT, cli_env
from ssan_plugin.stats.calibration import null_rejection_rate
from ssan_plugin.stats.significance import (
    paired_bootstrap,
    paired_randomization,
    sacrebleu_score_fn,
    sacrebleu_stats,
)


def mean_score(sums):  # statistics (value, 1) per sentence: the corpus score is the mean value
    return float(sums[0] / sums[1])


def stats_of(values):
    return np.stack([np.asarray(values, float), np.ones(len(values))], axis=1)


def test_identical_outputs_get_p_one():
    a = stats_of([0.1, 0.5, 0.9, 0.3])
    for result in (paired_bootstrap(a, a.copy(), mean_score, 200),
                   paired_randomization(a, a.copy(), mean_score, 200)):
        assert result.delta == 0 and result.p_value == 1.0 and result.identical


def test_randomization_matches_exact_permutation_test():
    base = stats_of([0.2, 0.4, 0.1, 0.7, 0.3, 0.5])
    sys_ = stats_of([0.3, 0.6, 0.1, 0.9, 0.2, 0.8])
    observed = abs(mean_score(sys_.sum(0)) - mean_score(base.sum(0)))
    hits = 0
    for swaps in itertools.product([0, 1], repeat=6):  # every assignment, equally likely
        s = np.array(swaps, bool)[:, None]
        a, b = np.where(s, sys_, base), np.where(s, base, sys_)
        hits += abs(mean_score(b.sum(0)) - mean_score(a.sum(0))) >= observed - 1e-12
    exact = hits / 64
    result = paired_randomization(base, sys_, mean_score, n_trials=40000, seed=1)
    assert result.delta == pytest.approx(mean_score(sys_.sum(0)) - mean_score(base.sum(0)))
    assert result.p_value == pytest.approx(exact, abs=0.01)
    assert not result.identical


def test_bootstrap_matches_a_plain_loop():
    rng = np.random.default_rng(0)
    base = stats_of(rng.random(60))
    sys_ = stats_of(rng.random(60) + 0.01)  # a p of a few tenths: a wrong p would show
    d = mean_score(sys_.sum(0)) - mean_score(base.sum(0))
    loop = np.random.default_rng(7)
    deltas, system_scores = [], []
    for _ in range(20000):
        idx = loop.integers(0, 60, 60)
        system_scores.append(mean_score(sys_[idx].sum(0)))
        deltas.append(system_scores[-1] - mean_score(base[idx].sum(0)))
    deltas = np.array(deltas)
    low, high = np.percentile(system_scores, [2.5, 97.5])
    p_loop = (np.sum(np.abs(deltas - d) >= abs(d)) + 1) / (len(deltas) + 1)
    result = paired_bootstrap(base, sys_, mean_score, n_samples=20000, seed=3)
    assert result.delta == pytest.approx(d)
    assert 0.1 < p_loop < 0.9 and result.p_value == pytest.approx(p_loop, rel=0.05)
    assert result.ci == pytest.approx((high - low) / 2, rel=0.05)  # the system's own interval


def test_p_values_count_the_observed_statistic_add_one():
    """p = (exceedances + 1) / (samples + 1): a system better by 1 on every sentence is exceeded
    by no bootstrap resample (every resampled delta is 1) and, but for the one swap of all 20
    sentences (2^-20), by no random swap; its p is 1 / (n + 1), neither 0 nor 1 / n."""
    base, sys_ = stats_of(np.zeros(20)), stats_of(np.ones(20))
    assert paired_bootstrap(base, sys_, mean_score, n_samples=99, seed=1).p_value == 1 / 100
    assert paired_randomization(base, sys_, mean_score, n_trials=99, seed=1).p_value == 1 / 100


def test_pooled_seeds_average_the_seeds():
    rng = np.random.default_rng(1)
    b1, b2, s1, s2 = (stats_of(rng.random(40)) for _ in range(4))
    pooled = paired_bootstrap([b1, b2], [s1, s2], mean_score, 500)
    expected = (mean_score(s1.sum(0)) + mean_score(s2.sum(0))) / 2 - \
        (mean_score(b1.sum(0)) + mean_score(b2.sum(0))) / 2
    assert pooled.delta == pytest.approx(expected)
    # one sentence multiset for every seed of both groups: with system seeds base + e and
    # base - e + 0.1, the seed-mean delta is 0.05 on every resample, so none strays by it;
    # a multiset drawn per seed would let the e's stray
    e = stats_of(rng.normal(0, 0.3, 40))
    shifted = [stats_of(b1[:, 0] + e[:, 0]), stats_of(b1[:, 0] - e[:, 0] + 0.1)]
    locked = paired_bootstrap([b1, b1.copy()], shifted, mean_score, 300, seed=4)
    assert locked.delta == pytest.approx(0.05) and locked.p_value == 1 / 301
    same = paired_bootstrap([b1, b2], [b1.copy(), b2.copy()], mean_score, 500)
    assert same.p_value == 1.0 and same.identical
    # groups of different sizes are allowed; different sentence sets are not
    assert paired_bootstrap([b1], [s1, s2], mean_score, 100).delta == pytest.approx(
        expected + (mean_score(b1.sum(0)) + mean_score(b2.sum(0))) / 2 - mean_score(b1.sum(0)))
    with pytest.raises(ValueError, match="different sentence sets"):
        paired_bootstrap(b1, stats_of(rng.random(39)), mean_score, 10)


def test_bleu_from_sacrebleu_statistics():
    refs = ["the cat sat on the mat", "a dog ran in the park", "it is raining today"]
    hyps = ["the cat sat on a mat", "a dog ran in a park", "it rains today"]
    bleu = BLEU()
    stats = sacrebleu_stats(bleu, hyps, refs)
    assert stats.shape[0] == 3
    assert sacrebleu_score_fn(bleu)(stats.sum(0)) == pytest.approx(
        bleu.corpus_score(hyps, [refs]).score)


def test_calibration_under_the_null():
    """Systems that are random per-sentence swaps of the same two outputs: the share of
    p < 0.05 stays near 5% (randomisation is exact under this null; the bootstrap close)."""
    rng = np.random.default_rng(5)
    x, y = rng.random(150), rng.random(150)
    rejections = {"ar": 0, "bs": 0}
    trials = 150
    for t in range(trials):
        swap = rng.random(150) < 0.5
        a, b = stats_of(np.where(swap, x, y)), stats_of(np.where(swap, y, x))
        rejections["ar"] += paired_randomization(a, b, mean_score, 500, seed=t).p_value < 0.05
        rejections["bs"] += paired_bootstrap(a, b, mean_score, 500, seed=t).p_value < 0.05
    assert 0.01 <= rejections["ar"] / trials <= 0.10
    assert 0.01 <= rejections["bs"] / trials <= 0.12


def test_bad_arguments():
    a = stats_of([0.1, 0.2])
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        paired_bootstrap(a, a, mean_score, 0)
    with pytest.raises(ValueError, match="n_trials must be >= 1"):
        paired_randomization(a, a, mean_score, -5)
    with pytest.raises(ValueError, match="zero sentences"):
        paired_randomization(np.zeros((0, 2)), np.zeros((0, 2)), mean_score, 5)


def test_null_rejection_rate():
    rng = np.random.default_rng(2)
    x, y = stats_of(rng.random(120)), stats_of(rng.random(120))
    assert null_rejection_rate(x, x.copy(), mean_score, "bootstrap", 20, 100) == 0.0
    rate = null_rejection_rate(x, y, mean_score, "randomization", 100, 300)
    assert 0.0 <= rate <= 0.12
    # the same swaps and tests written out: the share with p < 0.05
    swaps = np.random.default_rng(12345)
    by_hand = 0
    for k in range(30):
        swap = (swaps.random(120) < 0.5)[:, None]
        a, b = np.where(swap, y, x), np.where(swap, x, y)
        by_hand += paired_bootstrap(a, b, mean_score, 200, 12345 + 1 + k).p_value < 0.05
    assert null_rejection_rate(x, y, mean_score, "bootstrap", 30, 200, seed=12345) == by_hand / 30
    with pytest.raises(ValueError, match="must be 'bootstrap' or 'randomization'"):
        null_rejection_rate(x, y, mean_score, "t-test")


def test_calibration_script(tmp_path):
    refs = [f"the cat number {i} sat on the mat" for i in range(40)]
    a = [f"the cat number {i} sat on a mat" for i in range(40)]
    b = [f"a cat number {i} sat on the mat" if i % 2 else f"the cat {i} sat" for i in range(40)]
    for name, lines in (("ref", refs), ("a", a), ("b", b)):
        (tmp_path / name).write_text("".join(x + "\n" for x in lines), "utf-8")
    script = [sys.executable, str(ROOT / "scripts" / "calibrate_significance.py"),
              "--ref", str(tmp_path / "ref")]
    ok = subprocess.run(script + ["--hyp", str(tmp_path / "a"), "--hyp", str(tmp_path / "b"),
                                  "--nulls", "20", "--samples", "100", "--json",
                                  str(tmp_path / "c.json")],
                        capture_output=True, text=True, env=cli_env())
    assert ok.returncode == 0, ok.stderr
    result = json.loads((tmp_path / "c.json").read_text())
    assert set(result["rejection_rate"]) == {"bootstrap", "randomization"}
    assert result["n_sentences"] == 40
    bad = subprocess.run(script + ["--hyp", str(tmp_path / "a")], capture_output=True,
                         text=True, env=cli_env())
    assert bad.returncode == 2 and "exactly two files" in bad.stderr
    assert "Traceback" not in bad.stderr
    # --seed-level: four seeds of one system (two rewordings of each output)
    for name, lines in (("c", [x.replace("cat", "kat") for x in a]),
                        ("d", [x.replace("cat", "kat") for x in b])):
        (tmp_path / name).write_text("".join(x + "\n" for x in lines), "utf-8")
    hyps = [arg for n in "abcd" for arg in ("--hyp", str(tmp_path / n))]
    seeds = subprocess.run(script + hyps + ["--seed-level", "--test-sets", "2", "--samples",
                                            "50", "--json", str(tmp_path / "s.json")],
                           capture_output=True, text=True, env=cli_env())
    assert seeds.returncode == 0, seeds.stderr
    result = json.loads((tmp_path / "s.json").read_text())
    assert result["group_size"] == 2
    assert set(result["rejection_rate"]) == {"seed_level", "pooled_sentences"}
    # four seeds in groups of two: 6 distinct nulls, each on two resampled test sets
    assert (result["distinct_splits"], result["test_sets"], result["nulls"]) == (6, 2, 12)
    assert len(result["splits"]) == 6 and "6 distinct splits" in seeds.stdout
    repeated = subprocess.run(script + hyps + ["--seed-level", "--nulls", "200"],
                              capture_output=True, text=True, env=cli_env())
    assert repeated.returncode == 2 and "give --test-sets, not --nulls" in repeated.stderr
    few = subprocess.run(script + hyps[:6] + ["--seed-level"], capture_output=True, text=True,
                         env=cli_env())
    assert few.returncode == 2 and "four or more" in few.stderr
    # the archive names its inputs, in order (relative to the project root when inside it:
    # experiments.archive.relativize_text, tested there)
    assert [h.rsplit("/", 1)[-1] for h in result["hyp"]] == list("abcd")
    assert result["ref"].endswith("/ref")


def test_calibration_script_simulated_nulls(tmp_path):
    script = [sys.executable, str(ROOT / "scripts" / "calibrate_significance.py")]
    ok = subprocess.run(script + ["--simulate", "--seeds", "2", "3", "--nulls", "4",
                                  "--samples", "20", "--json", str(tmp_path / "sim.json")],
                        capture_output=True, text=True, env=cli_env())
    assert ok.returncode == 0, ok.stderr
    result = json.loads((tmp_path / "sim.json").read_text())
    assert result["simulated"] is True and result["nulls"] == 4
    # every scenario crossed with every seed count, each with the three tests' rates
    assert [(c["scenario"], c["n_seeds"]) for c in result["cells"]] == [
        ("seeds dominate", 2), ("seeds dominate", 3), ("sentences dominate", 2),
        ("sentences dominate", 3)]
    for cell in result["cells"]:
        assert set(cell["rejection_rate"]) == {"seed_level", "pooled_sentences", "seeds_only"}
        assert cell["seed"] == cell["n_seeds"]
        assert set(cell["sentence_to_seed"]) == {"median", "mean", "q1", "q3", "nulls"}
        assert all(r in (0, 0.25, 0.5, 0.75, 1) for r in cell["rejection_rate"].values())
    for bad, message in ((["--simulate", "--ref", "x"], "takes no --ref"),
                         (["--simulate", "--seeds", "1"], "at least 2 seeds"),
                         ([], "give --ref and --hyp")):
        run = subprocess.run(script + bad, capture_output=True, text=True, env=cli_env())
        assert run.returncode == 2 and message in run.stderr, run.stderr
        assert "Traceback" not in run.stderr


def test_paired_ratio_interval_resamples_the_pairs():
    """sum(baseline) / sum(system) and the percentile interval of that ratio over batches drawn
    with replacement, pairs kept: against a loop over the same draws; wider at a higher level;
    a constant per-batch ratio gives a point interval; unpaired timings refused."""
    from ssan_plugin.stats.significance import paired_ratio_interval

    rng = np.random.default_rng(3)
    base, system = rng.uniform(1, 2, 40), rng.uniform(1, 2.5, 40)
    ratio, low, high = paired_ratio_interval(base, system, np.random.default_rng(7), draws=500)
    draws = np.random.default_rng(7).integers(0, 40, size=(500, 40))
    boot = sorted(sum(base[k] for k in d) / sum(system[k] for k in d) for d in draws)
    assert ratio == pytest.approx(base.sum() / system.sum())
    assert (low, high) == pytest.approx(tuple(np.percentile(boot, [2.5, 97.5])))
    _, wide_low, wide_high = paired_ratio_interval(base, system, np.random.default_rng(7), level=0.99,
                                                   draws=500)
    assert wide_low < low < ratio < high < wide_high
    assert paired_ratio_interval([1.0, 2.0], [2.0, 4.0], rng) == pytest.approx((0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="the same number of items"):
        paired_ratio_interval([1.0, 2.0], [1.0], rng)
