"""ssan_plugin.experiments.runner.Plan without training: seeds per plan, study, pair and system; the
order of runs; bad seed lists; a pair whose raw corpus a project script makes; the decoding
flags that reach evaluate_bleu.py (dry runs print the commands)."""

import json

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
