"""ssan_plugin.experiments.runner.Plan without training: seeds per plan, study, pair and system; the
order of runs; bad seed lists; a pair whose raw corpus a project script makes; the decoding
flags that reach evaluate_bleu.py (dry runs print the commands)."""

import json
from pathlib import Path

import pytest

from conftest import ROOT
from ssan_plugin.experiments.runner import Plan, Runner
from ssan_plugin.translation.textio import PipelineError


def plan_file(tmp_path, **override):
    plan = {
        "seeds": [1, 2], "updates": {"base": 4, "more": 2}, "train": ["--max-tokens", "500"],
        "pairs": {"a": {"raw": str(tmp_path / "a"), "src": "src", "tgt": "tgt"},
                  "b": {"raw": str(tmp_path / "b"), "src": "src", "tgt": "tgt"}},
        "systems": {"base": {"arch": "transformer", "criterion": "cross_entropy"},
                    "ssan": {"arch": "ssan_transformer", "criterion": "cross_entropy"},
                    "few": {"arch": "ssan_transformer", "criterion": "cross_entropy",
                            "seeds": [1]}},
        "studies": [{"name": "s", "pairs": ["a", "b"], "systems": ["base", "ssan", "few"],
                     "seeds": {"a": [1, 2, 3]}}],
    }
    plan.update(override)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return path


def test_seeds_per_study_pair_and_system(tmp_path):
    plan = Plan.load(plan_file(tmp_path))
    keys = [run.key for run in plan.runs()]
    assert keys == ["s/a/base@1", "s/a/ssan@1", "s/a/few@1", "s/b/base@1", "s/b/ssan@1",
                    "s/b/few@1", "s/a/base@2", "s/a/ssan@2", "s/b/base@2", "s/b/ssan@2",
                    "s/a/base@3", "s/a/ssan@3"]
    assert plan.all_seeds() == [1, 2, 3]
    # a study's own list applies to every pair
    plan = Plan.load(plan_file(tmp_path, studies=[{"name": "s", "pairs": ["a"],
                                                   "systems": ["base"], "seeds": [5]}]))
    assert [run.key for run in plan.runs()] == ["s/a/base@5"]


@pytest.mark.parametrize("study_seeds,match", [
    ({"c": [1]}, "lists seeds for pair 'c'"),
    ([], "non-empty list of integers"),
    (["1"], r"studies\[0\].seeds must be a list of integers or \{pair"),
    ({"a": [1.5]}, r"studies\[0\].seeds must be a list of integers or \{pair"),
])
def test_bad_study_seeds(tmp_path, study_seeds, match):
    path = plan_file(tmp_path, studies=[{"name": "s", "pairs": ["a", "b"], "systems": ["base"],
                                         "seeds": study_seeds}])
    with pytest.raises(PipelineError, match=match):
        Plan.load(path)


def test_bad_system_seeds(tmp_path):
    path = plan_file(tmp_path, systems={"base": {"arch": "transformer", "criterion": "x",
                                                 "seeds": "1,2"}})
    path.write_text(path.read_text().replace('"few"]', '"base"]').replace('"ssan", ', ""))
    with pytest.raises(PipelineError, match="systems.base.seeds must be a list of integers"):
        Plan.load(path)


def test_a_made_corpus_and_decoding_flags_reach_the_commands(tmp_path, capsys):
    path = plan_file(tmp_path, decode=["--max-len-a", "1", "--max-len-b", "10"],
                     studies=[{"name": "s", "pairs": ["a"], "systems": ["base"]}])
    spec = json.loads(path.read_text())
    spec["pairs"]["a"]["make"] = ["scripts/make_synthetic_corpus.py", "--seed", "3"]
    path.write_text(json.dumps(spec))
    runner = Runner(Plan.load(path), tmp_path / "out", dry_run=True)
    runner.run(limit=1)
    printed = capsys.readouterr().out
    make = [line for line in printed.splitlines() if "make_synthetic_corpus.py" in line]
    assert make and make[0].endswith(f"--seed 3 --out {tmp_path / 'a'}")
    assert str(ROOT / "scripts" / "make_synthetic_corpus.py") in make[0]
    decode = [line for line in printed.splitlines() if "ssan_plugin.commands.evaluate_bleu" in line]
    assert decode and "--beam 5 --max-len-a 1 --max-len-b 10" in decode[0]


def test_the_committed_plans_load():
    for plan in ("examples/translation/experiments.json", "examples/stability/demo_plan.json"):
        loaded = Plan.load(ROOT / plan)
        assert loaded.runs()


@pytest.mark.parametrize("edit,match", [
    (lambda p: p.update(seeds="1,2"), r"the plan.seeds must be a list of integers"),
    (lambda p: p["updates"].update(base="1000"), r"updates.base must be an integer"),
    (lambda p: p.update(pairs=[1, 2]), r"pairs must be a mapping of names, got list"),
    (lambda p: p["pairs"]["a"].update(src=3), r"pairs.a.src must be a string"),
    (lambda p: p["pairs"]["a"].pop("tgt"), r"pairs.a lacks the key 'tgt'"),
    (lambda p: p["systems"]["ssan"].update(flag=["--x"]), r"systems.ssan has an unknown key 'flag'"),
    (lambda p: p["studies"][0].update(seeds={"a": "1"}), r"studies\[0\].seeds must be a list"),
    (lambda p: p.update(studies={"name": "s"}), r"studies must be a list"),
    (lambda p: p.pop("train"), r"the plan lacks the key 'train'"),
])
def test_wrongly_typed_plans_name_the_file_and_key(tmp_path, edit, match):
    path = plan_file(tmp_path)
    spec = json.loads(path.read_text())
    edit(spec)
    path.write_text(json.dumps(spec))
    with pytest.raises(PipelineError, match=match):
        Plan.load(path)


def test_a_truncated_plan_names_the_file_and_line(tmp_path):
    path = plan_file(tmp_path)
    path.write_text(path.read_text()[:-20])
    with pytest.raises(PipelineError, match=r"plan.json:1:\d+: not valid JSON"):
        Plan.load(path)


@pytest.mark.parametrize("section,name", [("pairs", ".."), ("pairs", "a/b"), ("systems", "."),
                                          ("systems", ""), ("studies", "../x")])
def test_names_that_would_leave_the_output_folder_are_refused(tmp_path, section, name):
    """A pair named '..' once made the runner delete OUT itself (OUT/data/..)."""
    path = plan_file(tmp_path)
    spec = json.loads(path.read_text())
    if section == "studies":
        spec["studies"][0]["name"] = name
    else:
        spec[section][name] = spec[section].pop("a" if section == "pairs" else "base")
    path.write_text(json.dumps(spec))
    with pytest.raises(PipelineError, match="cannot name a directory"):
        Plan.load(path)


def test_a_dry_run_deletes_nothing(tmp_path):
    path = plan_file(tmp_path, studies=[{"name": "s", "pairs": ["a"], "systems": ["base"]}])
    half_prepared = tmp_path / "out" / "data" / "a"
    half_prepared.mkdir(parents=True)
    (half_prepared / "keep").write_text("x")
    Runner(Plan.load(path), tmp_path / "out", dry_run=True).run(limit=1)
    assert (half_prepared / "keep").is_file()


# ------------------------------------------------------------------ borrowed runs
def source_and_borrower(tmp_path, source_edit=None, borrow_edit=None, borrower_edit=None):
    """A source plan (study s: base, ssan on pair a, seeds 1-3, archived) and a plan that runs
    the same study with a third system, borrowing base and ssan (as 'gumbel') from it."""
    source = json.loads(plan_file(tmp_path).read_text())
    source.update(archive=str(tmp_path / "src_archive"),
                  studies=[{"name": "s", "pairs": ["a"], "systems": ["base", "ssan"],
                            "flags": ["--x"], "seeds": [1, 2, 3]}])
    borrower = json.loads(json.dumps(source))
    if source_edit:
        source_edit(source)
    (tmp_path / "source.json").write_text(json.dumps(source))
    borrower["systems"]["gumbel"] = borrower["systems"]["ssan"]
    borrower["systems"]["other"] = {"arch": "selective_transformer", "criterion": "cross_entropy"}
    borrow = {"base": {"plan": str(tmp_path / "source.json"), "study": "s", "system": "base",
                       "out": str(tmp_path / "src_out")},
              "gumbel": {"plan": str(tmp_path / "source.json"), "study": "s", "system": "ssan",
                         "out": str(tmp_path / "src_out")}}
    if borrow_edit:
        borrow_edit(borrow)
    borrower.update(archive=str(tmp_path / "archive"), seeds=[1, 2],
                    selection={"conll": str(tmp_path / "dev.conll")},
                    studies=[{"name": "s", "pairs": ["a"], "systems": ["base", "gumbel", "other"],
                              "flags": ["--x"], "borrow": borrow}])
    if borrower_edit:
        borrower_edit(borrower)
    path = tmp_path / "borrower.json"
    path.write_text(json.dumps(borrower))
    return path


def fake_decoded(directory, name, tgt="tgt"):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "test.json").write_text("{}")
    (directory / f"{name}.test.{tgt}").write_text("x\n")


def test_a_borrowing_plan_loads_and_its_borrowed_runs_are_the_sources(tmp_path):
    plan = Plan.load(source_and_borrower(tmp_path))
    runs = {run.key: run for run in plan.runs()}
    assert list(runs) == ["s/a/base@1", "s/a/gumbel@1", "s/a/other@1", "s/a/base@2",
                          "s/a/gumbel@2", "s/a/other@2"]
    gumbel = runs["s/a/gumbel@2"]
    assert gumbel.borrowed.system == "ssan" and runs["s/a/other@2"].borrowed is None
    assert plan.source_run(gumbel).key == "s/a/ssan@2"
    assert plan.archived_outputs(gumbel) is None
    fake_decoded(tmp_path / "src_archive" / "s" / "a" / "ssan@2", "ssan@2")
    assert plan.archived_outputs(gumbel) == (tmp_path / "src_archive" / "s" / "a" / "ssan@2",
                                             "ssan@2.test.tgt")
    # selection statistics: every system but the baseline, kept in this plan's archive
    assert [plan.analysed(r) for r in runs.values()][:3] == [False, True, True]
    assert plan.selection_file(gumbel) == tmp_path / "archive" / "s" / "a" / "gumbel@2" / \
        "selection.json"


@pytest.mark.parametrize("source_edit,borrow_edit,match", [
    # the study's flags differ: this plan would train with --x, the other with --y
    (lambda p: p["studies"][0].update(flags=["--y"]), None,
     r"borrows 'base' .*, but s/a/base@1 would not be the same run: training to updates.base: "
     r"this plan has '--x' where the other has '--y'"),
    # the borrowed system's flags differ
    (lambda p: p["systems"]["ssan"].update(flags=["--ssan-tau", "1"]), None,
     r"s/a/gumbel@1 would not be the same run: training: this plan has 'nothing' where the "
     r"other has '--ssan-tau 1'"),
    # the budget, the decoding, the threads, the preparation
    (lambda p: p["updates"].update(more=3), None,
     r"training: this plan has '6' where the other has '7'"),
    (lambda p: p.update(beam=4), None, r"decoding: this plan has '5' where the other has '4'"),
    (lambda p: p.update(threads=1), None, r"threads: this plan has 'OMP_NUM_THREADS=2' where"),
    (lambda p: p["pairs"]["a"].update(prepare=["--vocab-size", "9"]), None,
     r"preparation: this plan has 'nothing' where the other has '--vocab-size 9'"),
    # the borrowed system is the other study's baseline (two training stages) but not here
    (None, lambda b: b["gumbel"].update(system="base"),
     r"this plan runs threads, preparation, training, decoding; the other runs threads, "
     r"preparation, training to updates.base, training, decoding"),
    # a seed the other plan does not run
    (lambda p: p["studies"][0].update(seeds=[1]), None, r"that plan does not run seed 2 of 'base'"),
    # unknown plan, study, system; a pair the other study does not run
    (None, lambda b: b["base"].update(plan="/nonexistent/plan.json"), r"no such plan file"),
    (None, lambda b: b["base"].update(study="t"), r"that plan has no study 't' \(it has s\)"),
    (None, lambda b: b["base"].update(system="nope"),
     r"that plan's study 's' has no system 'nope' \(it has base, ssan\)"),
    (lambda p: p.pop("archive"), None, r"that plan has no archive"),
    (lambda p: p["studies"][0].update(pairs=["b"]), None, r"that study does not run pair 'a'"),
])
def test_a_borrow_that_is_not_the_same_run_is_refused(tmp_path, source_edit, borrow_edit, match):
    path = source_and_borrower(tmp_path, source_edit, borrow_edit)
    with pytest.raises(PipelineError, match=match) as err:
        Plan.load(path)
    assert "\n" not in str(err.value) and str(err.value).startswith(f"{path}: study 's'")


@pytest.mark.parametrize("borrower_edit,match", [
    (lambda p: p["studies"][0]["borrow"].update(nope=p["studies"][0]["borrow"]["base"]),
     r"study 's' borrows 'nope', which is not one of its systems"),
    (lambda p: p["studies"][0]["borrow"]["base"].pop("out"), r"borrow.base lacks the key 'out'"),
    (lambda p: p["studies"][0]["borrow"]["base"].update(seeds=[1]),
     r"borrow.base has an unknown key 'seeds'"),
    (lambda p: p["studies"][0].update(borrow=["base"]), r"borrow must be a mapping"),
    (lambda p: p["systems"]["other"].update(warm_from="base"),
     r"'other' warm-starts from 'base', whose runs study 's' borrows"),
    (lambda p: p["selection"].update(systems=["nope"]), r"selection.systems names unknown system"),
    (lambda p: p.update(selection={"systems": ["other"]}), r"selection lacks the key 'conll'"),
])
def test_malformed_borrows_are_refused(tmp_path, borrower_edit, match):
    with pytest.raises(PipelineError, match=match):
        Plan.load(source_and_borrower(tmp_path, borrower_edit=borrower_edit))


def test_a_plan_cannot_borrow_from_itself_or_round(tmp_path):
    path = source_and_borrower(tmp_path, borrow_edit=lambda b: b["base"].update(
        plan=str(tmp_path / "borrower.json")))
    with pytest.raises(PipelineError, match="cannot borrow from itself"):
        Plan.load(path)
    # the source borrows back from the borrower
    path = source_and_borrower(tmp_path, source_edit=lambda p: p["studies"][0].update(borrow={
        "ssan": {"plan": str(tmp_path / "borrower.json"), "study": "s", "system": "gumbel",
                 "out": "x"}}))
    with pytest.raises(PipelineError, match="borrows from it"):
        Plan.load(path)


def test_borrowed_runs_are_never_trained_and_status_names_their_source(tmp_path, capsys):
    plan = Plan.load(source_and_borrower(tmp_path))
    fake_decoded(tmp_path / "src_archive" / "s" / "a" / "base@1", "base@1")
    (tmp_path / "src_out" / "s" / "a" / "ssan@1").mkdir(parents=True)
    (tmp_path / "src_out" / "s" / "a" / "ssan@1" / "checkpoint_last.pt").write_text("")
    runner = Runner(plan, tmp_path / "out", dry_run=True)
    rows = {row["run"]: row for row in runner.status()}
    assert rows["s/a/base@1"] == {"run": "s/a/base@1", "state": "borrowed",
                                  "source_state": "archived",
                                  "source": f"{tmp_path / 'source.json'} s/a/base@1"}
    assert rows["s/a/gumbel@1"]["source_state"] == "started"
    assert rows["s/a/gumbel@1"]["selection"] == "pending"  # its best is not final yet
    assert rows["s/a/other@1"] == {"run": "s/a/other@1", "state": "todo", "selection": "pending"}
    runner.run()
    printed = capsys.readouterr().out
    trained = [line for line in printed.splitlines() if "fairseq-train" in line]
    assert len(trained) == 2 and all("--arch selective_transformer" in t for t in trained)
    assert "[selection] s/a/gumbel@1" not in printed  # not decoded in its plan
    # the pooled table reads the borrowed baseline's hypotheses from the other archive
    pooled = [line for line in printed.splitlines() if "--hyp base@1=" in line]
    assert pooled and str(tmp_path / "src_archive" / "s" / "a" / "base@1" / "base@1.test.tgt") \
        in pooled[0]


def test_selection_statistics_are_archived_once_with_relative_paths(tmp_path, monkeypatch):
    """A borrowed run's statistics come from the checkpoint and data in the other runner's out
    and land in this plan's archive under this plan's name; an own run's from its own."""
    from ssan_plugin.experiments import runner as runner_module

    monkeypatch.setattr(runner_module, "ROOT", tmp_path)  # paths under it become relative
    plan = Plan.load(source_and_borrower(tmp_path))
    runs = {run.key: run for run in plan.runs()}
    fake_decoded(tmp_path / "src_archive" / "s" / "a" / "ssan@1", "ssan@1")
    src = tmp_path / "src_out"
    (src / "s" / "a" / "ssan@1").mkdir(parents=True)
    (src / "s" / "a" / "ssan@1" / "checkpoint_best.pt").write_text("")
    (src / "data" / "a").mkdir(parents=True)
    (src / "data" / "a" / "manifest.json").write_text("{}")
    calls = []

    def child(self, cmd, log, progress=None):
        cmd = [str(c) for c in cmd]
        calls.append(cmd)
        log.parent.mkdir(parents=True, exist_ok=True)
        out = cmd[cmd.index("--json") + 1]
        Path(out).write_text(json.dumps({"conll": cmd[cmd.index("--conll") + 1],
                                         "n_sentences": 1, "layers": []}))

    monkeypatch.setattr(Runner, "_child", child)
    monkeypatch.setattr(runner_module, "relativize_text",
                        lambda text: text.replace(f"{tmp_path}/", ""))
    runner = Runner(plan, tmp_path / "out")
    assert runner.selection_state(runs["s/a/gumbel@1"]) == "todo"
    dest = runner.analyse(runs["s/a/gumbel@1"])
    assert dest == tmp_path / "archive" / "s" / "a" / "gumbel@1" / "selection.json"
    (cmd,) = calls
    assert cmd[cmd.index("--checkpoint") + 1] == str(src / "s" / "a" / "ssan@1" /
                                                     "checkpoint_best.pt")
    assert cmd[cmd.index("--data") + 1] == str(src / "data" / "a")
    assert cmd[cmd.index("--json") + 1] == str(tmp_path / "out" / "s" / "a" / "gumbel@1" /
                                               "selection.stats.json")
    record = json.loads(dest.read_text())
    assert record == {"run": "s/a/gumbel@1", "checkpoint": "src_out/s/a/ssan@1/checkpoint_best.pt",
                      "data": "src_out/data/a",
                      "borrowed": {"plan": "source.json", "run": "s/a/ssan@1"},
                      "conll": "dev.conll", "n_sentences": 1, "layers": []}
    assert sorted(p.name for p in dest.parent.iterdir()) == ["selection.json"]
    assert runner.analyse(runs["s/a/gumbel@1"]) == dest and len(calls) == 1  # done once
    assert runner.selection_state(runs["s/a/gumbel@1"]) == "archived"
    # a baseline is not analysed; a run without its checkpoint here is skipped
    assert runner.analyse(runs["s/a/base@1"]) is None
    fake_decoded(tmp_path / "archive" / "s" / "a" / "other@1", "other@1")
    assert runner.selection_state(runs["s/a/other@1"]) == "no checkpoint"
    assert runner.analyse(runs["s/a/other@1"]) is None and len(calls) == 1


def test_own_data_must_equal_the_data_of_borrowed_runs(tmp_path):
    from ssan_plugin.experiments.runner import data_fingerprint

    plan = Plan.load(source_and_borrower(tmp_path))
    runner = Runner(plan, tmp_path / "out")
    mine, theirs = tmp_path / "out" / "data" / "a", tmp_path / "src_out" / "data" / "a"
    for d in (mine, theirs):
        (d / "text").mkdir(parents=True)
        (d / "dict.src.txt").write_text("a 1\n")
        (d / "text" / "train.spm.src").write_text("a\n")
        (d / "manifest.json").write_text(json.dumps({"dest": str(d)}))  # paths differ: ignored
    assert sorted(data_fingerprint(mine)) == ["dict.src.txt", "text/train.spm.src"]
    runner.check_borrowed_data(plan.pairs["a"], mine)
    runner._data_checked.clear()
    (theirs / "text" / "train.spm.src").write_text("b\n")
    with pytest.raises(PipelineError, match=r"differs from .* in text/train.spm.src: the "
                                            r"borrowed runs were trained on other data"):
        runner.check_borrowed_data(plan.pairs["a"], mine)


def test_the_committed_selector_plan_borrows_the_translation_runs():
    """The head-to-head takes its baseline and SSAN (gumbel) from the translation plan's
    pre-norm study; loading it checks that they are the very runs it would train."""
    plan = Plan.load(ROOT / "examples" / "selectors" / "experiments.json")
    (study,) = plan.studies
    assert {name: (b.study, b.system) for name, b in study.borrow.items()} == {
        "baseline": ("prenorm", "baseline"), "gumbel": ("prenorm", "ssan_cap0")}
    assert all(b.out == str(ROOT / "runs" / "experiments") for b in study.borrow.values())
    assert plan.selection.conll == str((ROOT.parent / "shared" / "data" / "srl" / "ewt" /
                                        "dev.gold_conll").resolve())
