"""ssan_plugin.experiments.plan.Plan without a runner: seeds per plan, study, pair and system; the
order of runs; bad seed lists; wrongly typed plans; names that cannot name a directory; borrowed
runs (loading checks that they are the same runs, commands compared)."""

import json
from pathlib import Path

import pytest

from conftest import ROOT
from helpers.experiment_plans import fake_decoded, plan_file, source_and_borrower
from ssan_plugin.experiments.archive import relativize_text
from ssan_plugin.experiments.plan import Plan
from ssan_plugin.translation.textio import PipelineError


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


def test_a_study_is_found_by_name_or_named_as_missing(tmp_path):
    plan = Plan.load(plan_file(tmp_path))
    assert plan.study("s") is plan.studies[0]
    with pytest.raises(PipelineError, match=r"plan.json: no study 'x' \(it has s\)"):
        plan.study("x")


def test_a_made_corpus_is_one_command_for_the_plan_and_the_runner(tmp_path):
    spec = json.loads(plan_file(tmp_path).read_text())
    spec["pairs"]["a"]["make"] = ["scripts/make_synthetic_corpus.py", "--seed", "3"]
    (tmp_path / "made.json").write_text(json.dumps(spec))
    plan = Plan.load(tmp_path / "made.json")
    run = next(r for r in plan.runs() if r.pair.name == "a")
    (corpus,) = [c for c in plan.planned_commands(run, tmp_path / "out", "py") if c[0] == "corpus"]
    made = plan.make_command(run.pair, Path(run.pair.raw), "py")
    assert made == ["py", ROOT / "scripts" / "make_synthetic_corpus.py", "--seed", "3", "--out",
                    Path(run.pair.raw)]
    assert corpus[1:] == [str(arg) for arg in made]  # the command the borrow check compares


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
    # a study, system, pair or seed listed twice would make its runs twice
    (lambda p: p["studies"].append(dict(p["studies"][0])), r"studies lists the study 's' twice"),
    (lambda p: p["studies"][0].update(systems=["base", "ssan", "base"]),
     r"study 's' lists system 'base' twice"),
    (lambda p: p["studies"][0].update(pairs=["a", "a"]), r"study 's' lists pair 'a' twice"),
    (lambda p: p["studies"][0].update(seeds=[2, 2]), r"study 's' lists seed 2 twice"),
    (lambda p: p.update(seeds=[1, 2, 1]), r"seeds lists seed 1 twice"),
    (lambda p: p["systems"]["few"].update(seeds=[1, 1]), r"systems.few.seeds lists seed 1 twice"),
    # a study without systems has no baseline (once an IndexError)
    (lambda p: p["studies"][0].update(systems=[]),
     r"study 's' has no systems \(a study needs one at least; the first is its baseline\)"),
    (lambda p: (p["studies"][0].update(pairs=[]), p["studies"][0].pop("seeds")),
     r"study 's' has no pairs"),
    # an archive that is a file (relative to the project root: README.md)
    (lambda p: p.update(archive="README.md"),
     r"plan.json: archive \S*README.md exists and is not a directory"),
])
def test_wrongly_typed_plans_name_the_file_and_key(tmp_path, edit, match):
    path = plan_file(tmp_path)
    spec = json.loads(path.read_text())
    edit(spec)
    path.write_text(json.dumps(spec))
    with pytest.raises(PipelineError, match=match):
        Plan.load(path)


@pytest.mark.parametrize("edit,match", [
    (lambda text: text[:-20], r"plan.json:1:\d+: not valid JSON"),
    # a key twice in one object: json would keep the second silently
    (lambda text: text.replace('"systems": {"base": {', '"systems": {"ssan": {"arch": "x", '
                               '"criterion": "y"}, "base": {'),
     r"plan.json: systems has the key 'ssan' twice \(JSON would keep only the last, "
     r"silently\)"),
    (lambda text: text.replace('"name": "s",', '"name": "s", "name": "t",'),
     r"plan.json: studies\[0\] has the key 'name' twice"),
    (lambda text: text.replace('"seeds": [1, 2],', '"seeds": [1, 2], "seeds": [3],', 1),
     r"plan.json: the plan has the key 'seeds' twice"),
])
def test_a_plan_that_json_would_misread_names_the_file(tmp_path, edit, match):
    """Truncated text (file, line and column), or a key twice in one object (file and where)."""
    path = plan_file(tmp_path)
    path.write_text(edit(path.read_text()))
    with pytest.raises(PipelineError, match=match) as err:
        Plan.load(path)
    assert "\n" not in str(err.value)


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


# ------------------------------------------------------------------ borrowed runs
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



def test_a_corpus_made_inside_the_lenders_out_is_the_same_path_for_both(tmp_path):
    """A pair whose ``raw`` the plan makes inside the lender's out (a built-in corpus): both
    plans' commands are compared as a runner on that out would run them, so the same corpus is
    the same run, and another corpus is not."""
    lender_out = tmp_path / "src_out"

    def make_inside(p, raw=lender_out / "corpus"):
        p["pairs"]["a"].update(raw=str(raw), make=["scripts/make_synthetic_corpus.py", "--seed", "1"])

    path = source_and_borrower(tmp_path, source_edit=make_inside, borrower_edit=make_inside)
    assert [r.key for r in Plan.load(path).runs() if r.borrowed] == ["s/a/base@1", "s/a/gumbel@1",
                                                                      "s/a/base@2", "s/a/gumbel@2"]
    path = source_and_borrower(tmp_path, source_edit=make_inside, borrower_edit=lambda p: make_inside(
        p, tmp_path / "elsewhere" / "corpus"))
    with pytest.raises(PipelineError, match=r"corpus: this plan has '.*elsewhere/corpus' where "
                                            r"the other has '<out>/corpus'"):
        Plan.load(path)


def test_the_rerun_of_ssans_default_start_borrows_the_demo_plans_baseline():
    """examples/stability/rerun_plan.json trains the default start again with the current code
    and takes the baseline's runs from demo_plan.json, whose commands it checks on loading."""
    plan = Plan.load(ROOT / "examples" / "stability" / "rerun_plan.json")
    (study,) = plan.studies
    assert {n: (b.study, b.system) for n, b in study.borrow.items()} == {
        "baseline": ("start", "baseline")}
    source = plan.studies[0].borrow["baseline"].source
    assert plan.systems["ssan_cap0"] == source.systems["ssan_cap0"]
    assert [r.key for r in plan.runs() if not r.borrowed] == [
        f"rerun/builtin/ssan_cap0@{seed}" for seed in (1, 2, 3, 4, 5)]

def test_the_committed_selector_plan_borrows_the_translation_runs():
    """The head-to-head takes its baseline and SSAN (gumbel) from the translation plan's
    pre-norm study on En-De and its post-norm study on En-Ro; loading it checks that they are
    the very runs it would train."""
    plan = Plan.load(ROOT / "examples" / "selectors" / "experiments.json")
    prenorm, postnorm = plan.studies
    assert (prenorm.name, prenorm.pairs, postnorm.name, postnorm.pairs) == (
        "prenorm", ["en-de"], "postnorm", ["en-ro"])
    for study in plan.studies:
        assert {name: (b.study, b.system) for name, b in study.borrow.items()} == {
            "baseline": (study.name, "baseline"), "gumbel": (study.name, "ssan_cap0")}
        assert all(b.out == str(ROOT / "runs" / "experiments") for b in study.borrow.values())
    assert plan.selection.conll == str(ROOT.parent / "shared" / "data" / "srl" / "ewt" /
                                       "dev.gold_conll")


def test_plan_paths_keep_links_so_archives_name_them_from_the_root(tmp_path):
    """A checkout whose ``runs/`` is a link to another checkout's: the borrowed runs' folder
    stays ``ROOT/runs/...`` (not the link's target), so archived paths read ``runs/...``
    rather than a sibling checkout's ``../other/runs/...``."""
    root, other = tmp_path / "checkout", tmp_path / "other"
    (other / "runs").mkdir(parents=True)
    root.mkdir()
    (root / "runs").symlink_to(other / "runs")
    path = source_and_borrower(root, borrow_edit=lambda b: [
        spec.update(out="runs/experiments", plan="source.json") for spec in b.values()])
    plan = Plan.load(path, root=root)
    outs = {b.out for b in plan.studies[0].borrow.values()}
    assert outs == {str(root / "runs" / "experiments")}
    assert relativize_text(f"checkpoint {outs.pop()}/s/a/ssan@1/checkpoint_best.pt",
                           root) == "checkpoint runs/experiments/s/a/ssan@1/checkpoint_best.pt"


def test_a_run_is_decoded_when_its_report_and_hypotheses_exist(tmp_path):
    plan = Plan.load(plan_file(tmp_path))
    run = plan.runs()[0]
    root = tmp_path / "root"
    assert not run.decoded_in(root)
    fake_decoded(run.directory(root), f"{run.system.name}@{run.seed}")
    assert run.decoded_in(root)
    (run.directory(root) / run.hyp_name).unlink()  # a report without hypotheses: not decoded
    assert not run.decoded_in(root)
