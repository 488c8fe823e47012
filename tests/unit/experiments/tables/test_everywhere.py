"""ssan_plugin/experiments/tables/everywhere.py on made archives: each site's rate is the mean of
its layers' valid_sel at the best validation, then over seeds; the alignment table reads the
rule's layer of each run's alignment.MAP.json and the peer's runs; the alignment verdicts test
each system and map against the baseline's weights by seed on the archived per-sentence counts
(AER recomputed by hand, lower is better, interim until the planned seeds); the cost goal table
reads each selector and site's ratios and names what misses the goal; the gold-words table gives
each side's counts and shares as the peer archived them; damaged archives are one line. En-Ro runs, besides the rule's two choices, every pre-norm selector at the cross site alone,
derived from its plan entry exactly as the cost bench's hand-written cross-site systems are."""

import json

import numpy as np
import pytest

from helpers.experiment_plans import fake_decoded, plan_file
from ssan_plugin.experiments.plan import Plan
from ssan_plugin.experiments.tables.blocks import ResultsError
from conftest import ROOT
from ssan_plugin.experiments.tables.everywhere import (alignment_rows, alignment_table,
                                                       alignment_verdict_table, cross_alone_of,
                                                       cross_alone_systems, gold_words_table,
                                                       site_cost_goal_table, site_of, site_rates,
                                                       site_rates_table)
from ssan_plugin.experiments.tables.selectors import check_carried_forward, system_entry


def curve(directory, *records):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_site_rates_are_the_mean_of_each_sites_layers_at_the_best_validation(tmp_path):
    run = tmp_path / "run"
    curve(run, {"kind": "valid", "valid_loss": 5.0, "valid_sel_0": 0.1, "valid_sel_dec0": 0.1},
          {"kind": "valid", "valid_loss": 4.0, "valid_sel_0": 0.5, "valid_sel_1": 0.7,
           "valid_sel_dec0": 0.2, "valid_sel_cross0": 0.9, "valid_sel_cross1": 0.7, "valid_sel": 0.4})
    assert site_rates(run) == pytest.approx({"encoder self-attention": 0.6, "decoder self-attention": 0.2,
                                             "cross attention": 0.8})
    assert [site_of(label) for label in ("3", "dec3", "cross12")] == \
        ["encoder self-attention", "decoder self-attention", "cross attention"]
    curve(run, {"kind": "valid", "valid_loss": 4.0, "valid_sel_dec0": "nan"})
    with pytest.raises(ResultsError, match="valid_sel_dec0 'nan' is not a finite number"):
        site_rates(run)


def test_the_tables_read_the_archives(tmp_path):
    path = plan_file(tmp_path, studies=[{"name": "s", "pairs": ["a"], "systems": ["base", "ssan"]}])
    spec = json.loads(path.read_text())
    spec.update(archive=str(tmp_path / "archive"), seeds=[1, 2],
                alignment={"bitext": "x.a-b", "gold": "x.gold", "pairs": ["a"]})
    path.write_text(json.dumps(spec))
    plan = Plan.load(path)
    for seed, (rate, aer) in ((1, (0.4, 0.30)), (2, (0.6, 0.40))):
        run = tmp_path / "archive" / "s" / "a" / f"ssan@{seed}"
        fake_decoded(run, f"ssan@{seed}")
        curve(run, {"kind": "valid", "valid_loss": 4.0, "valid_sel_cross0": rate})
        layers = [{"layer": 0, "aer": 0.9, "precision": 0.1, "recall": 0.1},
                  {"layer": 1, "aer": aer, "precision": 0.7, "recall": 0.6}]
        shifted = [{"layer": 0, "aer": 0.2, "precision": 0.8, "recall": 0.8}, layers[0]]
        held = {"aer": aer - 0.2, "precision": 0.8, "recall": 0.7,
                "choices": [{"fold": 0, "reading": "shifted", "layer": 0},
                            {"fold": 1, "reading": "shifted" if seed == 1 else "predicted", "layer": seed - 1}]}
        (run / "alignment.weights.json").write_text(json.dumps(
            {"rule_reading": "predicted", "rule_layer": 1, "readings": {"predicted": layers, "shifted": shifted},
             "held_apart": held}))
    table = site_rates_table(plan, "s", "a")
    assert "| ssan | 1 2 | — | — | 0.500 ± 0.141 |" in table
    peer = tmp_path / "peer.json"
    peer.write_text(json.dumps({"peer": "eflomal", "runs": 2, "directions": [
        {"direction": "forward", "aer_runs": [0.3, 0.5], "precision_runs": [0.8, 0.8],
         "recall_runs": [0.5, 0.7]}]}))
    diagonal = tmp_path / "diagonal.json"
    diagonal.write_text(json.dumps({"peer": "diagonal", "runs": 1, "directions": [
        {"direction": "union", "aer_runs": [0.708], "precision_runs": [0.299], "recall_runs": [0.285]}]}))
    table = alignment_table(plan, "s", "a", peers=[peer, tmp_path / "not-archived.json", diagonal])
    assert ("| ssan | weights | 1 2 | 35.0 ± 7.1 | 70.0 ± 0.0 | 60.0 ± 0.0 | 15.0 ± 7.1 | 80.0 ± 0.0 "
            "| 70.0 ± 0.0 | predicted 1 ×1, shifted 0 ×3 |") in table
    assert ("| eflomal (peer) | forward | (2 runs) | 40.0 ± 14.1 | 80.0 ± 0.0 | 60.0 ± 14.1 "
            "| — | — | — | — |") in table
    assert table.splitlines()[-1] == ("| diagonal (reference, no training) | union | (1 run) | 70.8 | "
                                      "29.9 | 28.5 | — | — | — | — |")
    diagonal.write_text(json.dumps({"peer": "fast_align", "runs": 1, "directions": []}))
    with pytest.raises(ResultsError, match="key 'peer' 'fast_align' is not one of"):
        alignment_table(plan, "s", "a", peers=[diagonal])
    (tmp_path / "archive" / "s" / "a" / "ssan@2" / "alignment.weights.json").write_text(
        json.dumps({"rule_reading": "predicted", "rule_layer": 5, "readings": {"predicted": []}}))
    with pytest.raises(ResultsError, match="key 'rule_layer' 5 is not one of its layers"):
        alignment_table(plan, "s", "a")


def test_the_cost_goal_table_names_what_misses_the_goal(tmp_path):
    path = tmp_path / "process.news.json"
    ratios = {"gumbel_decoder": {"train_wps": 0.93, "gen_sps_fixed_len": 0.95, "peak_rss_above_idle": 1.08},
              "topk_all": {"train_wps": 0.899, "gen_sps_fixed_len": 0.91, "peak_rss_above_idle": 1.31}}
    path.write_text(json.dumps({"ratios_by_system": ratios}))
    rows = site_cost_goal_table(path).splitlines()[2:]
    assert rows == ["| gumbel | decoder self-attention | 0.930 | 0.950 | 1.080 | met |",
                    "| topk | every site | 0.899 | 0.910 | 1.310 | missed: training, memory |"]
    ratios["topk_somewhere"] = ratios.pop("topk_all")
    path.write_text(json.dumps({"ratios_by_system": ratios}))
    with pytest.raises(ResultsError, match="bench system 'topk_somewhere' is not SELECTOR_SITE"):
        site_cost_goal_table(path)
    del ratios["topk_somewhere"]
    del ratios["gumbel_decoder"]["train_wps"]
    path.write_text(json.dumps({"ratios_by_system": ratios}))
    with pytest.raises(ResultsError, match="key 'ratios_by_system.gumbel_decoder.train_wps' is missing"):
        site_cost_goal_table(path)


def test_with_paired_steps_training_is_judged_on_their_interval(tmp_path):
    """Training is read on the paired steps: the archived 95 % interval is shown, and the goal
    is judged on the interval corrected over the table's rows (1 - 0.05 / 3), redrawn from the
    archived per-batch times. Constant per-batch ratios give a point interval; a row whose
    archived 95 % interval clears the goal but whose batches alternate between 0.8 and 1.0
    times the baseline's speed spans it once corrected."""
    from ssan_plugin.stats.significance import paired_ratio_interval

    path = tmp_path / "process.news.json"
    ratios = {f"topk_{site}": {"train_wps": 0.5, "gen_sps_fixed_len": 0.95, "peak_rss_above_idle": 1.1}
              for site in ("decoder", "cross", "all")}
    path.write_text(json.dumps({"ratios_by_system": ratios}))
    steps = tmp_path / "steps.news.json"
    intervals = {"topk_decoder": (0.95, 0.95, 0.95), "topk_cross": (0.9, 0.91, 0.93),
                 "topk_all": (0.85, 0.85, 0.85)}
    base = [1.0] * 60
    times = {"baseline": base, "topk_decoder": [1 / 0.95] * 60,
             "topk_cross": [1 / 0.8, 1.0] * 30, "topk_all": [1 / 0.85] * 60}
    steps.write_text(json.dumps({
        "ratios": {n: {"train_step": dict(zip(("ratio", "low", "high"), r))} for n, r in intervals.items()},
        "times_s": {n: {"train_step": t} for n, t in times.items()}}))
    table = site_cost_goal_table(path, steps)
    assert "corrected over the table's 3 systems, 0.0167 in the tails" in table.splitlines()[0]
    rows = table.splitlines()[2:]
    assert rows[0] == ("| topk | decoder self-attention | 0.950 [0.950, 0.950]; corrected [0.950, 0.950] "
                       "| 0.950 | 1.100 | met |")
    assert rows[2] == ("| topk | every site | 0.850 [0.850, 0.850]; corrected [0.850, 0.850] | 0.950 | "
                       "1.100 | missed: training |")
    cross = rows[1].split(" | ")
    low, high = map(float, cross[2].split("corrected [")[1].rstrip("]").split(", "))
    ratio = sum(base) / sum(times["topk_cross"])
    _, low95, high95 = paired_ratio_interval(base, times["topk_cross"], np.random.default_rng(1), draws=20000)
    assert low < low95 < ratio < high95 < high and low < 0.9 < high  # wider than 95 %, across 0.9
    assert rows[1].endswith("| interval spans the goal: training |")
    del times["topk_all"]
    steps.write_text(json.dumps({
        "ratios": {n: {"train_step": dict(zip(("ratio", "low", "high"), r))} for n, r in intervals.items()},
        "times_s": {n: {"train_step": t} for n, t in times.items()}}))
    with pytest.raises(ResultsError, match="key 'times_s.topk_all' is missing"):
        site_cost_goal_table(path, steps)
    # every system of a paired-steps archive alone (the native kernel's), corrected over its rows
    from ssan_plugin.experiments.tables.everywhere import steps_goal_table

    times["topk_all"] = [1 / 0.85] * 60
    steps.write_text(json.dumps({
        "ratios": {n: {"train_step": dict(zip(("ratio", "low", "high"), r))} for n, r in intervals.items()},
        "times_s": {n: {"train_step": t} for n, t in times.items()}}))
    lines = steps_goal_table(steps).splitlines()
    assert "corrected over the table's 3 systems, 0.0167 in the tails" in lines[0]
    assert lines[2] == "| topk_decoder | 0.950 [0.950, 0.950]; corrected [0.950, 0.950] | met |"
    assert lines[3].startswith(f"| topk_cross | 0.900 [0.910, 0.930]; corrected [{low:.3f}, {high:.3f}]")
    assert lines[3].endswith("| interval spans the goal |")
    assert lines[4].endswith("| missed |")


def aer_by_hand(counts):
    """AER in percent from per-sentence (|A|, |S|, |P|, |A&S|, |A&P|), summed first."""
    a, s, _, a_s, a_p = (sum(c[i] for c in counts) for i in range(5))
    return 100 * (1 - (a_s + a_p) / (a + s))


def alignment_archive(path, counts, held_counts):
    def entry(c):
        return {"aer": aer_by_hand(c) / 100, "precision": 0.5, "recall": 0.5, "sentence_counts": c}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rule_reading": "predicted", "rule_layer": 1,
                                "readings": {"predicted": [entry(held_counts), entry(counts)]},
                                "held_apart": entry(held_counts)}))


def aligned_plan(tmp_path):
    """A plan of base and ssan on pair a, seeds 1-3, aligned, archived under tmp_path: (plan,
    the pair's archive folder)."""
    path = plan_file(tmp_path, studies=[{"name": "s", "pairs": ["a"], "systems": ["base", "ssan"]}])
    spec = json.loads(path.read_text())
    spec.update(archive=str(tmp_path / "archive"), seeds=[1, 2, 3],
                alignment={"bitext": "x.a-b", "gold": "x.gold", "pairs": ["a"]})
    path.write_text(json.dumps(spec))
    return Plan.load(path), tmp_path / "archive" / "s" / "a"


def test_alignment_verdicts_test_each_system_against_the_baselines_weights_by_seed(tmp_path):
    plan, root = aligned_plan(tmp_path)
    made = {}
    # the weights' AER differs by seed (the same for both systems at a seed, so a system paired
    # with another seed of the baseline would show per-seed deltas); each system's held-apart
    # counts are its own
    for seed in (1, 2, 3):
        for system, kind, hits, held_hits in (("base", "weights", 1, 2), ("ssan", "weights", 1, 3),
                                              ("ssan", "selection", 4, 2)):
            extra = [int(kind == "weights" and k < seed) for k in range(20)]  # seed s: s more hits
            counts = [[5, 5, 5, hits + (k + seed) % 2 + extra[k], hits + (k + seed) % 2 + extra[k]]
                      for k in range(20)]
            held = [[5, 5, 5, held_hits, held_hits] for _ in range(20)]
            made[system, kind, seed] = counts
            alignment_archive(root / f"{system}@{seed}" / f"alignment.{kind}.json", counts, held)
    rows = alignment_rows(plan, "s", "a", n_samples=200)
    assert [(r.reading, r.system, r.map) for r in rows] == [
        (reading, system, kind) for reading in ("rule fixed in advance", "held-apart choice")
        for system, kind in (("base", "weights"), ("ssan", "weights"), ("ssan", "selection"))]
    rule = {(r.system, r.map): r for r in rows[:3]}
    for key, row in rule.items():
        assert row.aer == pytest.approx([aer_by_hand(made[key + (s,)]) for s in (1, 2, 3)])
    selection = rule["ssan", "selection"].comparison
    per_seed = [aer_by_hand(made["ssan", "selection", s]) - aer_by_hand(made["base", "weights", s])
                for s in (1, 2, 3)]
    assert len(set(per_seed)) == 3 and selection.result.per_seed == pytest.approx(per_seed)
    assert selection.result.delta == pytest.approx(sum(per_seed) / 3)
    assert rule["ssan", "selection"].verdict == "**better**"
    assert rule["ssan", "weights"].comparison.result.per_seed == pytest.approx([0.0] * 3)
    assert len(set(rule["base", "weights"].aer)) == 3  # the seeds differ
    assert rule["ssan", "weights"].verdict == "no difference shown"
    assert rows[0].comparison is None and rows[0].baseline
    table = alignment_verdict_table(rows)
    assert "p (Holm, 4 tests)" in table
    assert f"| rule fixed in advance | ssan | selection | 1 2 3 | 10.0 ± 0.0 | {sum(per_seed) / 3:+.1f} [" in table
    assert "| held-apart choice | base | weights | 1 2 3 | 60.0 ± 0.0 |  |" in table
    assert "| held-apart choice | ssan | weights | 1 2 3 | 40.0 ± 0.0 | -20.0 [" in table

    # two seeds of three: the test is shown, the verdict waits
    for kind in ("weights", "selection"):
        (root / "ssan@3" / f"alignment.{kind}.json").unlink()
    rows = alignment_rows(plan, "s", "a", n_samples=200)
    assert rows[2].verdict == "interim: 2 of 3 seeds" and rows[2].comparison is not None

    # counts that do not give the archived AER
    damaged = json.loads((root / "ssan@1" / "alignment.selection.json").read_text())
    damaged["held_apart"]["sentence_counts"][0][3] = 5
    (root / "ssan@1" / "alignment.selection.json").write_text(json.dumps(damaged))
    with pytest.raises(ResultsError, match="held_apart sentence_counts give AER .* the archive says"):
        alignment_rows(plan, "s", "a", n_samples=200)


def test_the_cross_site_alone_is_each_systems_selector_at_the_cross_site_only():
    plan = Plan.load(ROOT / "examples" / "everywhere" / "experiments.json")
    bench = Plan.load(ROOT / "examples" / "everywhere" / "bench_plan.json")
    # the bench's cross-site systems were written by hand: the derivation must give them back
    for source, expected in (("topk_all", "topk_cross"), ("ssan_all", "gumbel_cross"),
                             ("ssan_encoder", "gumbel_cross")):
        derived = cross_alone_of(plan, source)
        assert derived.name == expected
        assert system_entry(derived) == system_entry(bench.systems[expected])
    entmax = cross_alone_of(plan, "entmax_all")
    assert (entmax.name, entmax.arch, entmax.flags) == (
        "entmax_cross", "selective_transformer_small",
        ["--encoder-selector", "none", "--cross-selector", "entmax", "--entmax-alpha", "1.5"])
    # the plan's pre-norm study: three selectors (SSAN in the encoder and at every site agree)
    assert [s.name for s in cross_alone_systems(plan, "prenorm")] == [
        "gumbel_cross", "topk_cross", "entmax_cross"]
    # and En-Ro runs each exactly as derived
    for system in cross_alone_systems(plan, "prenorm"):
        assert system_entry(plan.systems[system.name]) == system_entry(system)


def test_every_selector_gets_one_cross_site_system_and_two_definitions_are_refused(tmp_path):
    systems = {"base": {"arch": "transformer", "criterion": "ce"},
               "enc": {"arch": "ssan_transformer", "criterion": "sce", "flags": ["--k", "1"]},
               "all": {"arch": "selective_transformer", "criterion": "sce",
                       "flags": ["--encoder-selector", "gumbel", "--cross-selector", "gumbel",
                                 "--k", "1"]},
               "other": {"arch": "selective_transformer", "criterion": "sce",
                         "flags": ["--encoder-selector", "gumbel", "--k", "2"]},
               "top": {"arch": "selective_transformer", "criterion": "sce",
                       "flags": ["--encoder-selector", "topk", "--topk", "8"]}}
    plan = Plan.load(plan_file(tmp_path, systems=systems, studies=[
        {"name": "s", "pairs": ["a"], "systems": ["base", "top", "enc", "all"]},
        {"name": "t", "pairs": ["a"], "systems": ["base", "enc", "other"]}]))
    derived = cross_alone_systems(plan, "s")
    assert [(d.name, d.flags) for d in derived] == [
        ("topk_cross", ["--encoder-selector", "none", "--cross-selector", "topk", "--topk", "8"]),
        ("gumbel_cross", ["--encoder-selector", "none", "--cross-selector", "gumbel", "--k", "1"])]
    with pytest.raises(ResultsError, match="'other' derives 'gumbel_cross' as .*--k.*2.*an "
                                           "earlier system as .*--k.*1"):
        cross_alone_systems(plan, "t")


def test_the_cross_site_alone_refuses_what_has_no_cross_site_counterpart(tmp_path):
    systems = {"base": {"arch": "transformer", "criterion": "ce"},
               "soft": {"arch": "ssan_transformer_iwslt_de_en", "criterion": "sce",
                        "flags": ["--ssan-selection", "soft", "--ssan-layers", "all", "--x", "1"]},
               "mixed": {"arch": "selective_transformer", "criterion": "sce",
                         "flags": ["--encoder-selector=gate", "--decoder-selector", "topk",
                                   "--cross-selector", "entmax", "--cross-selector-args",
                                   "entmax_alpha=2", "--decoder-selector-args", "topk=4"]},
               "encoder": {"arch": "selective_transformer", "criterion": "sce",
                           "flags": ["--encoder-selector", "gate"]},
               "default": {"arch": "selective_transformer", "criterion": "sce"},
               "part": {"arch": "selective_transformer", "criterion": "sce",
                        "flags": ["--selector-layers", "0,1"]},
               "none": {"arch": "selective_transformer", "criterion": "sce",
                        "flags": ["--encoder-selector", "none"]},
               "dangling": {"arch": "selective_transformer", "criterion": "sce",
                            "flags": ["--cross-selector"]}}
    plan = Plan.load(plan_file(tmp_path, systems=systems, studies=[
        {"name": "s", "pairs": ["a"], "systems": list(systems)}]))
    derived = {name: cross_alone_of(plan, name) for name in
               ("soft", "mixed", "encoder", "default")}
    assert (derived["soft"].name, derived["soft"].arch, derived["soft"].flags) == (
        "soft_cross", "selective_transformer_iwslt_de_en",
        ["--encoder-selector", "none", "--cross-selector", "soft", "--x", "1"])
    assert (derived["mixed"].name, derived["mixed"].flags) == (
        "entmax_cross", ["--encoder-selector", "none", "--cross-selector", "entmax",
                         "--cross-selector-args", "entmax_alpha=2"])
    assert derived["encoder"].name == "gate_cross"
    assert derived["default"].name == "gumbel_cross"  # the family's default encoder selector
    for name, message in (("base", "does not select"), ("part", "encoder layers 0,1 only"),
                          ("none", "selects at no site"), ("dangling", "--cross-selector has no value")):
        with pytest.raises(ResultsError, match=message):
            cross_alone_of(plan, name)


def test_the_next_pair_must_run_every_cross_site_system_exactly_and_the_rules_choice(tmp_path):
    systems = {"base": {"arch": "transformer", "criterion": "ce"},
               "a_all": {"arch": "selective_transformer", "criterion": "sce",
                         "flags": ["--encoder-selector", "topk", "--cross-selector", "topk",
                                   "--topk", "8"]},
               "b_all": {"arch": "selective_transformer", "criterion": "sce",
                         "flags": ["--encoder-selector", "gate", "--cross-selector", "gate"]},
               "c_all": {"arch": "selective_transformer", "criterion": "sce",
                         "flags": ["--encoder-selector", "entmax"]}}
    cross = {"topk_cross": {"arch": "selective_transformer", "criterion": "sce",
                            "flags": ["--encoder-selector", "none", "--cross-selector", "topk",
                                      "--topk", "8"]},
             "gate_cross": {"arch": "selective_transformer", "criterion": "sce",
                            "flags": ["--encoder-selector", "none", "--cross-selector", "gate"]},
             "entmax_cross": {"arch": "selective_transformer", "criterion": "sce",
                              "flags": ["--encoder-selector", "none", "--cross-selector",
                                        "entmax"]}}

    def plan_with(next_systems, extra=None):
        spec = json.loads(plan_file(tmp_path, systems={**systems, **(extra or {})}, studies=[
            {"name": "pre", "pairs": ["a"], "systems": ["base", "a_all", "b_all", "c_all"]},
            {"name": "post", "pairs": ["b"], "systems": ["base", *next_systems]}]).read_text())
        spec.update(archive=str(tmp_path / "archive"), seeds=[1, 2])
        (tmp_path / "plan.json").write_text(json.dumps(spec))
        return Plan.load(tmp_path / "plan.json")

    def check(plan):
        check_carried_forward(plan, "pre", "a", (), 2, "post", also=cross_alone_systems)

    losses = {"base": (4.0, 4.0), "a_all": (3.9, 4.1), "b_all": (3.8, 3.9), "c_all": (4.5, 3.0)}
    for system, by_seed in losses.items():
        for seed, loss in zip((1, 2), by_seed):
            if (system, seed) == ("c_all", 2):
                continue  # c_all waits for a seed: the rule has not chosen
            run = tmp_path / "archive" / "pre" / "a" / f"{system}@{seed}"
            fake_decoded(run, f"{system}@{seed}")
            curve(run, {"kind": "valid", "valid_loss": loss + 1}, {"kind": "valid", "valid_loss": loss})
    # the cross-site systems do not wait for the rule: the next pair runs them from the start,
    # and the error spells out the plan entries to add
    with pytest.raises(ResultsError) as err:
        check(plan_with([]))
    assert "it must run topk_cross, gate_cross, entmax_cross: the rule of study 'pre' has not " \
        "chosen yet" in str(err.value)
    assert ('\'entmax_cross\': {"arch": "selective_transformer", "criterion": "sce", "flags": '
            '["--encoder-selector", "none", "--cross-selector", "entmax"]}') in str(err.value)
    check(plan_with(list(cross), cross))
    with pytest.raises(ResultsError, match="has not chosen yet"):
        check(plan_with(["b_all", *cross], cross))
    run = tmp_path / "archive" / "pre" / "a" / "c_all@2"
    fake_decoded(run, "c_all@2")
    curve(run, {"kind": "valid", "valid_loss": 3.0})
    # means: c_all 3.75, b_all 3.85, a_all 4.0: the rule chooses c_all and b_all
    with pytest.raises(ResultsError, match="it must run c_all, b_all, topk_cross, gate_cross, "
                                           "entmax_cross: the rule of study 'pre' chose c_all, b_all"):
        check(plan_with(list(cross), cross))
    check(plan_with(["c_all", "b_all", *cross], cross))
    right = cross["entmax_cross"]
    for wrong in ({**right, "flags": ["--cross-selector", "entmax"]}, {**right, "seeds": [1]},
                  {**right, "arch": "selective_transformer_small"}):
        with pytest.raises(ResultsError, match="system 'entmax_cross' of study 'post' is"):
            check(plan_with(["c_all", "b_all", *cross], {**cross, "entmax_cross": wrong}))
    with pytest.raises(ResultsError, match="it must run c_all, b_all, topk_cross"):
        check(plan_with(["c_all", "a_all", *cross], cross))


def test_the_gold_words_table_reads_the_peers_counts(tmp_path):
    peer = tmp_path / "eflomal.json"
    assert gold_words_table(peer) == "No peer archived yet."
    peer.write_text(json.dumps({"gold_words": {
        "ro": {"tokens": 200, "unseen": 50, "other_marks": 33,
               "other_marks_examples": [["si", 20], ["in", 13]]},
        "en": {"tokens": 180, "unseen": 9, "other_marks": 0, "other_marks_examples": []}}}))
    assert gold_words_table(peer).splitlines()[2:] == [
        "| ro | 200 | 50 (25.0 %) | 33 (16.5 %) | si ×20, in ×13 |",
        "| en | 180 | 9 (5.0 %) | 0 (0.0 %) | — |"]
    peer.write_text(json.dumps({"gold_words": {"ro": {"tokens": 200, "unseen": 50}}}))
    with pytest.raises(ResultsError, match="key 'gold_words.ro.other_marks' is missing"):
        gold_words_table(peer)


def test_the_diagonal_is_tested_against_the_baselines_weights_paired_with_every_seed(tmp_path):
    """reference_rows: one deterministic run's directions, each paired with every seed of the
    baseline's weights (the rule's alignment): per-seed Δ = its AER minus that seed's; Holm over
    the directions; an archive whose counts disagree with its AER, or of several runs, refused."""
    from ssan_plugin.experiments.tables.everywhere import reference_rows

    plan, root = aligned_plan(tmp_path)
    base = {}
    for seed in (1, 2, 3):
        base[seed] = [[5, 5, 5, 1 + (k < seed), 1 + (k < seed)] for k in range(20)]
        alignment_archive(root / f"base@{seed}" / "alignment.weights.json", base[seed], base[seed])
    forward = [[5, 5, 5, 4, 4] for _ in range(20)]
    close = [[5, 5, 5, 1 + (k < 2), 1 + (k < 2)] for k in range(20)]  # the baseline's seed 2
    reference = tmp_path / "diagonal.json"

    def write(directions, runs=1):
        reference.write_text(json.dumps({"peer": "diagonal", "runs": runs, "directions": [
            {"direction": name, "aer_runs": [aer_by_hand(c) / 100], "sentence_counts": c}
            for name, c in directions]}))

    write([("forward", forward), ("reverse", close)])
    rows = reference_rows(plan, "s", "a", reference, n_samples=200)
    assert [(r.system, r.map) for r in rows] == [("base", "weights"), ("diagonal (reference, no training)", "forward"),
                                                 ("diagonal (reference, no training)", "reverse")]
    assert rows[0].baseline and rows[0].aer == pytest.approx([aer_by_hand(base[s]) for s in (1, 2, 3)])
    for row, counts in ((rows[1], forward), (rows[2], close)):
        assert row.aer == pytest.approx([aer_by_hand(counts)] * 3)
        assert row.comparison.result.per_seed == pytest.approx(
            [aer_by_hand(counts) - aer_by_hand(base[s]) for s in (1, 2, 3)])
    assert rows[1].verdict == "**better**" and rows[2].verdict == "no difference shown"
    p = [r.comparison.result.p_value for r in rows[1:]]  # Holm over the two, by hand
    first = min(1.0, 2 * min(p))
    assert [r.comparison.p_holm for r in rows[1:]] == pytest.approx(
        [first if q == min(p) else max(first, min(1.0, q)) for q in p])
    table = alignment_verdict_table(rows)
    assert "p (Holm, 2 tests)" in table
    assert "| — | diagonal (reference, no training) | forward | 1 2 3 | 20.0 ± 0.0 |" in table
    record = json.loads(reference.read_text())
    record["directions"][0]["aer_runs"] = [0.3]  # its counts give 20 %
    reference.write_text(json.dumps(record))
    with pytest.raises(ResultsError, match="sentence_counts give AER"):
        reference_rows(plan, "s", "a", reference)
    write([("forward", forward)], runs=5)
    with pytest.raises(ResultsError, match="one deterministic run"):
        reference_rows(plan, "s", "a", reference)
