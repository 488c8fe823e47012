"""ssan_plugin.experiments.tables.selectors on tiny synthetic archives: a head-to-head plan that
borrows its baseline and SSAN from another plan's archive and trains two selectors. Every
expected cell is computed here from the files the test wrote (sacrebleu called directly for
BLEU), with no run, some runs and a bench archive."""

import json

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from ssan_plugin.experiments.plan import Plan
from ssan_plugin.experiments.tables.blocks import ResultsError
from ssan_plugin.experiments.tables.verdicts import SPLIT_VERDICT
from ssan_plugin.experiments.tables.selectors import (
    best_validation,
    carried_forward,
    cost_table,
    development_table,
    learnt_table,
    pooled_rates,
    selection_table,
    selector_blocks,
    selector_power_table,
    selector_rows,
    verdict_table,
)

REFS = ["der hund läuft schnell über die grüne wiese", "ein kleines kind spielt im park",
        "die frau liest ein buch am fenster", "zwei männer reparieren das alte auto",
        "eine katze schläft auf dem warmen sofa", "der junge wirft einen roten ball",
        "menschen warten an der haltestelle auf den bus", "ein mann fährt fahrrad in der stadt"]


def hypotheses(seed: int, quality: int):
    """Deterministic outputs: each reference with some of its words dropped or replaced."""
    rng = np.random.default_rng(seed * 100 + quality)
    out = []
    for ref in REFS:
        words = ref.split()
        kept = [w if rng.random() < 0.5 + 0.1 * quality else "etwas" for w in words]
        out.append(" ".join(kept[: max(2, len(kept) - int(rng.integers(0, 2)))]))
    return out


def bleu(hyps):
    return BLEU(tokenize="13a").corpus_score(hyps, [REFS]).score


def write_run(directory, name, hyps, chrf, curve):
    directory.mkdir(parents=True)
    (directory / f"{name}.test.de").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    (directory / "test.json").write_text(json.dumps(
        {"systems": [{"name": name, "bleu": bleu(hyps), "chrf": chrf}]}))
    (directory / "train.json").write_text(json.dumps({"best_valid_loss": 1.0}))
    (directory / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in curve))


def valid(loss, sel=None, update=250):
    record = {"kind": "valid", "valid_loss": f"{loss:.3f}", "valid_num_updates": str(update)}
    if sel is not None:
        record["valid_sel"] = f"{sel:.3f}"
    return record


def plans(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir(exist_ok=True)
    (raw / "test.de").write_text("\n".join(REFS) + "\n", encoding="utf-8")
    common = {"seeds": [1, 2, 3], "updates": {"base": 4, "more": 2}, "train": ["--t"],
              "pairs": {"en-de": {"raw": str(raw), "src": "en", "tgt": "de"}}}
    source = {**common, "archive": str(tmp_path / "src_archive"),
              "systems": {"base": {"arch": "transformer", "criterion": "ce"},
                          "ssan": {"arch": "ssan_transformer", "criterion": "sce"}},
              "studies": [{"name": "pn", "pairs": ["en-de"], "systems": ["base", "ssan"]}]}
    (tmp_path / "source.json").write_text(json.dumps(source))
    borrow = {name: {"plan": str(tmp_path / "source.json"), "study": "pn", "system": system,
                     "out": str(tmp_path / "src_out")}
              for name, system in (("baseline", "base"), ("gumbel", "ssan"))}
    plan = {**common, "archive": str(tmp_path / "archive"),
            "selection": {"conll": str(tmp_path / "dev.conll")},
            "systems": {"baseline": {"arch": "transformer", "criterion": "ce"},
                        "gumbel": {"arch": "ssan_transformer", "criterion": "sce"},
                        "topk": {"arch": "selective_transformer", "criterion": "sce",
                                 "flags": ["--encoder-selector", "topk"]},
                        "gate": {"arch": "selective_transformer", "criterion": "sce",
                                 "flags": ["--encoder-selector", "gate"]}},
            "studies": [{"name": "pn", "pairs": ["en-de"],
                         "systems": ["baseline", "gumbel", "topk", "gate"], "borrow": borrow}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    return Plan.load(tmp_path / "plan.json")


@pytest.fixture
def archive(tmp_path):
    """base@1-3 and ssan@1-2 in the source archive; topk@1-3 and gate@2 in the plan's. Each
    run's curve: the lowest loss appears twice (the later one chose checkpoint_best.pt)."""
    plan = plans(tmp_path)
    runs = {}
    sources = {"baseline": ("src_archive", "base", 0, [1, 2, 3]),
               "gumbel": ("src_archive", "ssan", 1, [1, 2]),
               "topk": ("archive", "topk", 2, [1, 2, 3]), "gate": ("archive", "gate", 1, [2])}
    for system, (where, name, quality, seeds) in sources.items():
        for seed in seeds:
            hyps = hypotheses(seed, quality)
            sel = None if system == "baseline" else 0.1 * quality + 0.01 * seed
            curve = [valid(5.0, None if sel is None else 0.9, 100),
                     valid(4.0, None if sel is None else 0.2, 200),
                     {"kind": "train_inner", "loss": "3.9"},
                     valid(4.0, sel, 300), valid(4.2, None if sel is None else 0.3, 400)]
            chrf = 40.0 + quality + seed
            write_run(tmp_path / where / "pn" / "en-de" / f"{name}@{seed}", f"{name}@{seed}",
                      hyps, chrf, curve)
            runs[(system, seed)] = {"bleu": bleu(hyps), "chrf": chrf, "sel": sel}
    return plan, runs


def table_row(table, system):
    (line,) = [row for row in table.splitlines() if row.startswith(f"| {system}")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_verdict_table_from_borrowed_and_own_runs(archive, tmp_path):
    plan, runs = archive
    rows = selector_rows(plan, "pn", "en-de", n_samples=200)
    table = verdict_table(rows)
    assert "p (Holm, 2 tests)" in table  # gumbel and topk; gate has one seed

    def bleus(system, seeds):
        return [runs[(system, s)]["bleu"] for s in seeds]

    base = table_row(table, "baseline")
    assert base[0] == f"baseline (borrowed: {tmp_path / 'source.json'} pn/base)"
    assert base[1] == "1 2 3"
    b = bleus("baseline", [1, 2, 3])
    assert base[2] == f"{np.mean(b):.2f} ± {np.std(b, ddof=1):.2f}"
    assert base[3] == f"{np.mean([runs[('baseline', s)]['chrf'] for s in (1, 2, 3)]):.2f}"
    assert base[4:11] == [""] * 7 and base[11] == "— (no selection: every pair)"

    gumbel = table_row(table, "gumbel")
    assert gumbel[0].endswith("(borrowed: " + str(tmp_path / "source.json") + " pn/ssan)")
    deltas = [runs[("gumbel", s)]["bleu"] - runs[("baseline", s)]["bleu"] for s in (1, 2)]
    assert gumbel[1] == "1 2"
    assert gumbel[4].startswith(f"{np.mean(deltas):+.2f} [")  # paired on seeds 1 and 2
    # the interval corrected over the table's two tests: Student t at 1 - 0.05 / 4 each side
    from scipy.stats import t as student

    res = next(r for r in rows if r.system == "gumbel").comparison.result
    half = student.ppf(1 - 0.05 / 4, res.df) * res.se
    assert gumbel[5] == f"[{res.delta - half:+.2f}, {res.delta + half:+.2f}]"
    assert gumbel[8] == " ".join(f"{d:+.2f}" for d in deltas)
    assert gumbel[9] == f"{sum(np.sign(d) == np.sign(np.mean(deltas)) for d in deltas)}/2"
    # the selection rate of the validation that chose the best checkpoint: the later of the
    # two lowest losses, not the first of them (0.2) nor the last record (0.3)
    sels = [runs[("gumbel", s)]["sel"] for s in (1, 2)]
    assert gumbel[11] == f"{np.mean(sels):.3f} ± {np.std(sels, ddof=1):.3f}"

    topk = table_row(table, "topk")
    t = bleus("topk", [1, 2, 3])
    assert topk[2] == f"{np.mean(t):.2f} ± {np.std(t, ddof=1):.2f}"
    deltas = [a - c for a, c in zip(t, b)]
    assert topk[4].startswith(f"{np.mean(deltas):+.2f} [")
    # Holm over the table's two p-values, by hand
    raw = {r.system: r.comparison.result.p_value for r in rows if r.comparison is not None}
    assert gumbel[6] == f"{raw['gumbel']:.3g}" and topk[6] == f"{raw['topk']:.3g}"
    p = sorted((value, name) for name, value in raw.items())
    holm = {p[0][1]: min(1.0, 2 * p[0][0])}
    holm[p[1][1]] = min(1.0, max(holm[p[0][1]], p[1][0]))
    row_p = {r.system: r.comparison.p_holm for r in rows if r.comparison is not None}
    assert row_p == pytest.approx(holm)
    assert topk[7] == f"{holm['topk']:.3g}" and gumbel[7] == f"{holm['gumbel']:.3g}"
    # topk has every planned seed: its verdict; gumbel has 2 of the plan's 3: no verdict yet,
    # whatever its p (the plan is read at its seeds, not at each look)
    # a comparative word needs Holm's p below 0.05 and the interval corrected over the two
    # tests clear of 0
    t_res = next(r for r in rows if r.system == "topk").comparison.result
    t_half = student.ppf(1 - 0.05 / 4, t_res.df) * t_res.se
    expected = ("no difference shown" if holm["topk"] >= 0.05 else
                SPLIT_VERDICT if abs(t_res.delta) <= t_half else
                "**better**" if np.mean(deltas) > 0 else "**worse**")
    assert topk[10] == expected
    assert gumbel[10] == "interim: 2 of 3 seeds"
    interim = next(r for r in rows if r.system == "gumbel")
    interim.comparison.p_holm = 0.001  # even a tiny p is no verdict while seeds are missing
    assert table_row(verdict_table(rows), "gumbel")[10] == "interim: 2 of 3 seeds"
    interim.interim = None  # as if its plan were seeds 1 and 2
    assert table_row(verdict_table(rows), "gumbel")[10] == (
        SPLIT_VERDICT if abs(res.delta) <= half else  # its corrected interval holds 0
        "**better**" if interim.comparison.result.delta > 0 else "**worse**")

    gate = table_row(table, "gate")
    assert gate[1] == "2" and gate[2] == f"{runs[('gate', 2)]['bleu']:.2f}"
    assert gate[4] == "— (fewer than two seeds a side)"
    assert gate[11] == f"{runs[('gate', 2)]['sel']:.3f}"

    # power is planned at the level the finished table will need: Holm over the three planned
    # comparisons (gumbel, topk, gate), though gate has no comparison yet
    power = selector_power_table(rows)
    assert "0.05 / 3 = 0.0167 at Holm's first step" in power
    assert [line.split(" | ")[1] for line in power.splitlines() if line.startswith("| ")][1:] == \
        ["gumbel", "topk"]


def set_best_loss(run_dir, loss):
    """Rewrite a run's curve so that its best validation loss is ``loss`` (a worse one later)."""
    (run_dir / "curve.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (
        valid(loss + 0.5, 0.5, 100), valid(loss, 0.4, 200), valid(loss + 0.1, 0.3, 300))))


def test_the_rule_for_the_next_pair_reads_validation_losses_only(archive, tmp_path):
    plan, runs = archive
    own = tmp_path / "archive" / "pn" / "en-de"
    losses = {("topk", 1): 4.10, ("topk", 2): 4.30, ("topk", 3): 4.20, ("gate", 2): 3.90}
    for (system, seed), loss in losses.items():
        set_best_loss(own / f"{system}@{seed}", loss)
    # gate lacks seeds 1 and 3: no choice yet, whatever the losses so far
    assert carried_forward(plan, "pn", "en-de", keep=("gumbel",), choose=1) == (None, ["gate"])
    table = development_table(plan, "pn", "en-de", keep=("gumbel",), choose=1)
    topk = table_row(table, "topk")
    assert topk == ["topk", "1 2 3", f"{np.mean([4.1, 4.3, 4.2]):.3f} ± "
                    f"{np.std([4.1, 4.3, 4.2], ddof=1):.3f}", "4.100 4.300 4.200"]
    assert table_row(table, "gate")[1:3] == ["2", "3.900"]
    assert table_row(table, "baseline")[2:4] == ["4.000 ± 0.000", "4.000 4.000 4.000"]
    assert table.endswith("still missing seeds: gate.")
    # gate's other seeds land: its mean (4.3) is now above topk's (4.2), so topk is chosen
    for seed, loss in ((1, 4.50), (3, 4.50)):
        write_run(own / f"gate@{seed}", f"gate@{seed}", hypotheses(seed, 1), 40.0, [])
        set_best_loss(own / f"gate@{seed}", loss)
    assert carried_forward(plan, "pn", "en-de", keep=("gumbel",), choose=1) == (
        ["gumbel", "topk"], [])
    assert carried_forward(plan, "pn", "en-de", keep=("gumbel",), choose=2) == (
        ["gumbel", "topk", "gate"], [])
    # the test set plays no part: make topk's test output empty, the choice stays
    (own / "topk@1" / "topk@1.test.de").write_text("\n" * len(REFS))
    assert carried_forward(plan, "pn", "en-de", keep=("gumbel",), choose=1)[0] == [
        "gumbel", "topk"]
    assert development_table(plan, "pn", "en-de", ("gumbel",), 1).endswith(
        "Carried forward by the rule: gumbel, topk.")
    with pytest.raises(ResultsError, match="no system nosuch"):
        carried_forward(plan, "pn", "en-de", keep=("nosuch",), choose=1)
    with pytest.raises(ResultsError, match="cannot choose 3 of 2"):
        carried_forward(plan, "pn", "en-de", keep=("gumbel",), choose=3)


def test_a_plan_without_runs_gets_its_tables(tmp_path):
    plan = plans(tmp_path)
    blocks = selector_blocks(plan, "pn", "en-de", tmp_path / "no_bench")
    table = blocks["selectors-verdicts"]
    assert table_row(table, "baseline")[1:4] == ["none yet", "—", "—"]
    assert table_row(table, "topk")[4] == "— (fewer than two seeds a side)"
    assert blocks["selectors-cost"].startswith("No cost archive yet")
    assert blocks["selectors-development"].endswith("still missing seeds: topk, gate.")
    assert table_row(blocks["selectors-development"], "topk")[1:3] == ["none yet", "—"]
    assert blocks["selectors-selection"] == "No selection statistics archived yet."
    assert blocks["selectors-learnt"] == "No learnt selector values archived yet."
    assert "selectors-layers" not in blocks  # no layer bench: no block to fill


def with_next_study(tmp_path, systems):
    """The archive fixture's plan with a second study, ``nx`` on the same pair, running
    ``systems``."""
    raw = json.loads((tmp_path / "plan.json").read_text())
    raw["studies"] = raw["studies"][:1] + [{"name": "nx", "pairs": ["en-de"],
                                            "systems": systems}]
    (tmp_path / "plan.json").write_text(json.dumps(raw))
    return Plan.load(tmp_path / "plan.json")


def test_the_next_pair_runs_what_the_rule_carries_forward(archive, tmp_path):
    plan, runs = archive
    bench = tmp_path / "no_bench"
    write_run(tmp_path / "archive" / "nx" / "en-de" / "gumbel@1", "gumbel@1",
              hypotheses(1, 2), 41.0, [valid(4.0, 0.5)])
    plan = with_next_study(tmp_path, ["baseline", "gumbel"])
    blocks = selector_blocks(plan, "pn", "en-de", bench, keep=("gumbel",), choose=1,
                             next_pair=("nx", "en-de"))
    assert blocks["selectors-en-de-verdicts"] == verdict_table(selector_rows(plan, "nx", "en-de"))
    assert table_row(blocks["selectors-en-de-verdicts"], "gumbel")[1:3] == [
        "1", f"{bleu(hypotheses(1, 2)):.2f}"]
    assert blocks["selectors-en-de-selection"] == selection_table(plan, "nx", "en-de")
    assert not any("-en-de-" in key for key in selector_blocks(plan, "pn", "en-de", bench))
    # a selector added by hand before the rule has chosen (gate lacks seeds 1 and 3)
    plan = with_next_study(tmp_path, ["baseline", "gumbel", "topk"])
    with pytest.raises(ResultsError, match="runs gumbel, topk; it must run gumbel: the rule "
                                           "of study 'pn' has not chosen yet"):
        selector_blocks(plan, "pn", "en-de", bench, keep=("gumbel",), choose=1,
                        next_pair=("nx", "en-de"))
    # gate's seeds land with higher losses than topk's: the rule chooses topk, not gate
    own = tmp_path / "archive" / "pn" / "en-de"
    for seed in (1, 3):
        write_run(own / f"gate@{seed}", f"gate@{seed}", hypotheses(seed, 1), 40.0, [])
        set_best_loss(own / f"gate@{seed}", 4.5)
    set_best_loss(own / "gate@2", 4.5)
    selector_blocks(plan, "pn", "en-de", bench, keep=("gumbel",), choose=1,
                    next_pair=("nx", "en-de"))
    plan = with_next_study(tmp_path, ["baseline", "gumbel", "gate"])
    with pytest.raises(ResultsError, match="it must run gumbel, topk: the rule of study 'pn' "
                                           "chose topk"):
        selector_blocks(plan, "pn", "en-de", bench, keep=("gumbel",), choose=1,
                        next_pair=("nx", "en-de"))
    with pytest.raises(ResultsError, match="no study 'nope'"):
        selector_blocks(plan, "pn", "en-de", bench, next_pair=("nope", "en-de"))


def test_the_layer_bench_becomes_a_block(tmp_path):
    layers = tmp_path / "bench" / "layers" / "bench_encoder_layers.csv"
    layers.parent.mkdir(parents=True)
    layers.write_text("kind,length,batch,width,time_s,peak_mb,reps,selection_rate,status\n"
                      "san,64,8,512,0.010,100,3,,ok\n"
                      "sel_topk,64,8,512,0.012,150,3,0.1,ok\n")
    table = selector_blocks(plans(tmp_path), "pn", "en-de", tmp_path / "bench")["selectors-layers"]
    assert table.splitlines()[0] == "| kind | time / SAN, T = 64 | memory / SAN, T = 64 |"
    assert table.splitlines()[2] == "| sel_topk | 1.20 | 1.50 |"


@pytest.mark.parametrize("edit, message", [
    (lambda bleu: bleu + 1, r"ssan@1: BLEU .* recomputed, .* archived"),
    # a BLEU that is no number would otherwise pass the check (NaN compares unequal to nothing)
    (lambda bleu: float("nan"), r"ssan@1/test.json: key 'systems.0.bleu' must be a finite "
                                r"number, found nan"),
    (lambda bleu: float("inf"), r"ssan@1/test.json: key 'systems.0.bleu' must be a finite "
                                r"number, found inf"),
    (lambda bleu: None, r"ssan@1/test.json is not valid JSON \(.*line 1 column \d+"),
])
def test_a_hand_edited_or_damaged_bleu_is_refused(archive, tmp_path, edit, message):
    plan, _ = archive
    path = tmp_path / "src_archive" / "pn" / "en-de" / "ssan@1" / "test.json"
    record = json.loads(path.read_text())
    record["systems"][0]["bleu"] = edit(record["systems"][0]["bleu"])
    text = json.dumps(record)
    path.write_text(text if record["systems"][0]["bleu"] is not None else text[:30])  # truncated
    with pytest.raises(ResultsError, match=message):
        selector_rows(plan, "pn", "en-de", n_samples=50)


def test_best_validation_needs_one(tmp_path):
    (tmp_path / "curve.jsonl").write_text(json.dumps({"kind": "train_inner"}) + "\n")
    with pytest.raises(ResultsError, match="no validation record"):
        best_validation(tmp_path)


def bench_json(path, medians, idle=300.0, corpus="news", pieces=29.94, settings=None):
    record = {"corpus": corpus, "mean_source_pieces": pieces, "idle_rss_mib": idle,
              "median": medians}
    if settings is not None:
        record["settings"] = settings
    path.write_text(json.dumps(record))
    return path


def test_the_cost_table_is_each_system_against_the_same_files_baseline(tmp_path):
    one = bench_json(tmp_path / "a.json", {
        "baseline": {"train_wps": 4000.0, "score_sps": 200.0, "peak_rss_mib": 900.0},
        "topk": {"train_wps": 3000.0, "score_sps": 150.0, "peak_rss_mib": 1000.0},
        "unplanned": {"train_wps": 1.0, "score_sps": 1.0, "peak_rss_mib": 1.0},
        "gumbel": {"train_wps": 3600.0, "score_sps": 190.0, "peak_rss_mib": 950.0}},
        settings={"repeats": 2, "updates": 200})
    two = bench_json(tmp_path / "b.json", {  # without scoring (--modes)
        "baseline": {"train_wps": 5000.0, "peak_rss_mib": 800.0},
        "gate": {"train_wps": 4900.0, "peak_rss_mib": 820.0}}, idle=400.0, corpus="builtin",
        pieces=8.0)
    table = cost_table([one, two], ["baseline", "gumbel", "topk", "gate"])
    lines = [line for line in table.splitlines()[2:]]
    assert [line.split("|")[2].strip() for line in lines] == ["baseline", "gumbel", "topk",
                                                              "baseline", "gate"]
    topk = [c.strip() for c in lines[2].strip("|").split("|")]
    assert topk == ["a.json (news, 29.9 source pieces, 2 x 200 updates)", "topk", "3000",
                    f"{3000 / 4000:.3f}", "150.0", f"{150 / 200:.3f}", "1000", f"{1000 / 900:.3f}",
                    f"{(1000 - 300) / (900 - 300):.3f}"]
    gate = [c.strip() for c in lines[4].strip("|").split("|")]
    assert gate == ["b.json (builtin, 8.0 source pieces)", "gate", "4900", f"{4900 / 5000:.3f}",
                    "—", "—", "820", f"{820 / 800:.3f}", f"{(820 - 400) / (800 - 400):.3f}"]
    bad = bench_json(tmp_path / "c.json", {"topk": {"train_wps": 1.0}})
    with pytest.raises(ResultsError, match="'baseline' among them"):
        cost_table([bad], ["topk"])


def selection_json(path, layers, sentences=5, learnt=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = {} if learnt is None else {"learnt": learnt}
    path.write_text(json.dumps({"run": "x", "n_sentences": sentences, **extra, "layers": [
        {"layer": k, "keys": {"by_class": {c: {"rate": s / p, "selected": s, "possible": p}
                                           for c, (s, p) in classes.items()}},
         "distance": [{"distance": d, "rate": s / p, "selected": s, "possible": p}
                      for d, (s, p) in distance.items()]}
        for k, (classes, distance) in enumerate(layers)]}))
    return path


def test_selection_rates_pool_layers_then_average_seeds(archive, tmp_path):
    plan, _ = archive
    layer0 = ({"content": (30, 40), "function": (10, 40), "punctuation": (1, 4)},
              {0: (5, 10), 1: (6, 10), 2: (2, 10), 3: (4, 10), 9: (1, 4), 20: (0, 2)})
    layer1 = ({"content": (10, 40), "function": (30, 40)},
              {0: (7, 10), 1: (2, 10), 2: (3, 10), 17: (1, 2)})
    first = selection_json(tmp_path / "archive" / "pn" / "en-de" / "topk@1" / "selection.json",
                           [layer0, layer1])
    rates = pooled_rates(first)
    assert rates["content"] == pytest.approx(40 / 80)
    assert rates["function"] == pytest.approx(40 / 80)
    assert rates["punctuation"] == pytest.approx(1 / 4)
    assert rates["2–3"] == pytest.approx((2 + 4 + 3) / 30)
    assert rates["8–15"] == pytest.approx(1 / 4) and rates["≥ 16"] == pytest.approx(1 / 4)
    assert np.isnan(rates["4–7"])
    # a second seed of topk, and a borrowed gumbel run kept under this plan's name
    selection_json(tmp_path / "archive" / "pn" / "en-de" / "topk@3" / "selection.json",
                   [({"content": (20, 40), "function": (10, 40)}, {0: (1, 10), 5: (3, 4)})])
    selection_json(tmp_path / "archive" / "pn" / "en-de" / "gumbel@2" / "selection.json",
                   [({"content": (8, 10), "function": (2, 10)}, {1: (1, 2)})])
    table = selection_table(plan, "pn", "en-de")
    assert [line.split("|")[1].strip() for line in table.splitlines()[2:]] == ["gumbel", "topk"]
    topk = table_row(table, "topk")
    assert topk[:3] == ["topk", "1 3", "5"]
    assert topk[3] == f"{np.mean([40 / 80, 20 / 40]):.3f}"  # content, mean over seeds
    assert topk[4] == f"{np.mean([40 / 80, 10 / 40]):.3f}"
    assert topk[5] == f"{1 / 4:.3f}"  # punctuation: seed 1 only
    assert topk[6] == f"{np.mean([1.0, 2.0]):.3f}"  # content / function per seed, then mean
    assert topk[7] == f"{np.mean([12 / 20, 1 / 10]):.3f}"  # distance 0
    assert topk[9] == f"{(2 + 4 + 3) / 30:.3f}" and topk[10] == f"{3 / 4:.3f}"
    assert table_row(table, "gumbel")[3:7] == ["0.800", "0.200", "—", "4.000"]
    # the baseline is never analysed: its selection.json, if any, is not read
    selection_json(tmp_path / "archive" / "pn" / "en-de" / "baseline@1" / "selection.json",
                   [layer0])
    assert "| baseline" not in selection_table(plan, "pn", "en-de")


def test_a_truncated_selection_json_names_the_file(archive, tmp_path):
    plan, _ = archive
    path = tmp_path / "archive" / "pn" / "en-de" / "topk@1" / "selection.json"
    selection_json(path, [({"content": (1, 2)}, {})])
    path.write_text(path.read_text()[:-10])
    with pytest.raises(ResultsError, match=r"topk@1/selection.json is not valid JSON"):
        selection_table(plan, "pn", "en-de")


def test_learnt_values_per_seed_layer_and_head(archive, tmp_path):
    """Rows per (system, quantity, seed) in the study's system order, heads sorted within each
    layer, a layer a seed lacks shown as —, then the row over all seeds; files without learnt
    values (written before the entry existed, or a selector that learns none) add no row."""
    plan, _ = archive
    where = tmp_path / "archive" / "pn" / "en-de"
    one = ({"content": (1, 2)}, {0: (1, 2)})
    selection_json(where / "topk@3" / "selection.json", [one, one],
                   learnt={"0": {"alpha": [1.9, 1.2]}, "1": {"alpha": [1.5, 1.25]}})
    selection_json(where / "topk@1" / "selection.json", [one], learnt={"0": {"alpha": [1.1, 1.4]}})
    selection_json(where / "gate@2" / "selection.json", [one])  # no entry at all
    selection_json(where / "gumbel@1" / "selection.json", [one], learnt={})
    table = learnt_table(plan, "pn", "en-de")
    lines = table.splitlines()
    assert lines[0].split("|")[4:6] == [" layer 0: heads, increasing ", " layer 1: heads, increasing "]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert rows[0] == ["topk", "1", "alpha", "1.100 1.400", "—", "1.250", "1.100", "1.400"]
    assert rows[1] == ["topk", "3", "alpha", "1.200 1.900", "1.250 1.500",
                       f"{np.mean([1.9, 1.2, 1.5, 1.25]):.3f}", "1.200", "1.900"]
    every = [1.1, 1.4, 1.9, 1.2, 1.5, 1.25]
    assert rows[2] == ["topk", "1 3", "alpha", "(all seeds)", "(all seeds)",
                       f"{np.mean(every):.3f} ± {np.std(every, ddof=1):.3f}", "1.100", "1.900"]
    assert len(rows) == 3
    assert selector_blocks(plan, "pn", "en-de", tmp_path / "no_bench")["selectors-learnt"] == table


@pytest.mark.parametrize("learnt, message", [
    ({"0": {"alpha": [1.5, "x"]}}, r"key 'learnt.0.alpha.1' must be a number"),
    ({"0": {"alpha": []}}, r"learnt.0.alpha must be a non-empty list"),
    ({"first": {"alpha": [1.5]}}, r"learnt.first: a 0-based layer"),
    ([1.5], r"key 'learnt' must map layers"),
])
def test_a_malformed_learnt_entry_names_the_file_and_key(archive, tmp_path, learnt, message):
    plan, _ = archive
    path = tmp_path / "archive" / "pn" / "en-de" / "topk@1" / "selection.json"
    selection_json(path, [({"content": (1, 2)}, {})], learnt=learnt)
    with pytest.raises(ResultsError, match=r"topk@1/selection.json: " + message):
        learnt_table(plan, "pn", "en-de")
