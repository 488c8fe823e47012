"""The demo says what is true: its recipe is pinned against the one the README's figures were
measured with (examples/stability/demo_run.json), the README shows that run's printed table,
and the committed seeds it compares a run with were trained with the same recipe
(examples/stability/rerun_plan.json, borrowing demo_plan.json's baseline)."""

import importlib.util
import json

import pytest

from conftest import ROOT

SSAN_OPTION_PREFIX = "--ssan-"


@pytest.fixture(scope="module")
def demo():
    spec = importlib.util.spec_from_file_location("demo_script", ROOT / "scripts" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_run_was_measured_with_todays_recipe(demo):
    record = json.loads(demo.README_RUN.read_text())
    assert record["recipe"] == json.loads(json.dumps(demo.recipe())), (
        "the demo's recipe (its flags or a default of an option it leaves unset) changed since "
        "the README's figures were measured: run `scripts/demo.py --out runs/demo_readme --fresh "
        "--record examples/stability/demo_run.json` on an idle machine, then "
        "`scripts/make_results.py`")


def test_the_readme_shows_what_that_run_printed(demo):
    record = json.loads(demo.README_RUN.read_text())
    readme = (ROOT / "README.md").read_text()
    for line in record["printed"]:
        assert line in readme, f"README lacks the demo's printed line: {line}"


def test_the_committed_seeds_are_the_demo_recipe(demo):
    """The plan whose archive gives the demo's seed spread trains and decodes as the demo does:
    same model and optimiser flags, budget, beam and decoding limits; its system for each demo
    system has the same arch and criterion, and every SSAN option it sets equals the default the
    demo runs with."""
    plan = json.loads(demo.SPREAD_PLAN.read_text())
    assert plan["train"] == demo.MODEL + demo.OPTIM
    assert plan["updates"] == {"base": demo.recipe()["max_update"], "more": 0}
    assert plan["beam"] == demo.BEAM
    assert plan["decode"] == ["--max-len-a", f"{demo.BUILTIN_MAX_LEN['max_len_a']:g}",
                              "--max-len-b", str(demo.BUILTIN_MAX_LEN["max_len_b"])]
    corpus = demo.recipe()["corpus"]
    pair = plan["pairs"]["builtin"]
    assert pair["make"] == ["scripts/make_synthetic_corpus.py", "--seed", str(corpus["seed"])]
    assert pair["prepare"] == ["--vocab-size", str(corpus["vocab_size"])]
    defaults = demo.recipe()["ssan_defaults"]
    for name, system in demo.SPREAD_SYSTEMS.items():
        spec = plan["systems"][system]
        assert ["--arch", spec["arch"], "--criterion", spec["criterion"]] == demo.SYSTEMS[name]
        flags = spec.get("flags", [])
        for option, value in zip(flags[::2], flags[1::2]):
            assert option.startswith(SSAN_OPTION_PREFIX), option
            key = option[2:].replace("-", "_")
            assert float(value) == float(defaults[key]), (system, option, value, defaults[key])


def test_the_spread_line_places_this_run(demo):
    report = {"systems": [{"name": "baseline", "bleu": 47.0}, {"name": "ssan", "bleu": 40.0}]}
    line = demo.spread_line(report, {"baseline": [46.0, 47.0, 48.0], "ssan": [30.0, 40.0, 50.0]})
    assert "over 3 committed seeds" in line
    assert "baseline 47.00 ± 1.00 [46.00, 48.00] (this run 47.00)" in line
    assert "ssan 40.00 ± 10.00 [30.00, 50.00] (this run 40.00)" in line


def test_the_committed_spread_is_every_archived_seed(demo):
    """What the demo's report compares a run with: each archived seed's test BLEU of the
    current code's seeds (the rerun study's SSAN, the start study's baseline, whose code did
    not change), read here from the archive's files directly."""
    archive = ROOT / "examples" / "stability" / "experiments"
    where = {"baseline": archive / "start" / "builtin", "ssan": archive / "rerun" / "builtin"}
    spread = demo.committed_spread()
    assert set(spread) == set(demo.SPREAD_SYSTEMS)
    for name, system in demo.SPREAD_SYSTEMS.items():
        reports = sorted(where[name].glob(f"{system}@*/test.json"),
                         key=lambda p: int(p.parent.name.split("@")[1]))
        assert len(reports) >= 5
        assert spread[name] == [json.loads(p.read_text())["systems"][0]["bleu"] for p in reports]


def test_a_command_shows_project_paths_from_the_root(demo):
    """The report's commands, --hyp NAME=PATH included: paths inside the project relative to
    its root, others as they are."""
    cmd = [demo.BIN / "fairseq-train", demo.ROOT / "runs" / "demo" / "data-bin", "--hyp",
           f"baseline={demo.ROOT / 'runs' / 'demo' / 'hyps' / 'baseline.test.tgt'}",
           "--note", "a=b", "--other", "/elsewhere/x=/y"]
    shown = demo.display_command(cmd, {"OMP_NUM_THREADS": "1"})
    assert shown == ("OMP_NUM_THREADS=1 fairseq-train runs/demo/data-bin --hyp "
                     "baseline=runs/demo/hyps/baseline.test.tgt --note a=b --other /elsewhere/x=/y")


def test_the_record_keeps_what_rescores_it(demo, tmp_path):
    """--record copies each system's hypotheses beside the record (FILE without .json), names
    them and the commands that score them again relative to the project, and keeps the
    reference's checksum and the command that makes it again, not the file."""
    import hashlib
    import shlex

    run = tmp_path / "runs" / "demo"
    (run / "hyps").mkdir(parents=True)
    (run / "raw").mkdir()
    hyps = {}
    for name in demo.SYSTEMS:
        hyps[name] = run / "hyps" / f"{name}.test.tgt"
        hyps[name].write_text(f"{name} one\n{name} two\n")
    (run / "raw" / "test.tgt").write_text("ref one\nref two\n")
    report = {"systems": [{"name": "baseline", "bleu": 40.0, "chrf": 60.0},
                          {"name": "ssan", "bleu": 41.0, "chrf": 61.0, "delta": 1.0,
                           "p_value": 0.2}]}
    corpus = ["python", "scripts/make_synthetic_corpus.py", "--out", "CORPUS", "--seed", "1"]
    path = tmp_path / "examples" / "stability" / "demo_run.json"
    path.parent.mkdir(parents=True)
    record = demo.write_record(path, report, ["| table |"], 6.04, hyps, run / "raw" / "test.tgt",
                               corpus, root=tmp_path)
    assert record == json.loads(path.read_text())
    assert record["minutes"] == 6.0 and record["printed"] == ["| table |"]
    assert record["systems"][1] == {"name": "ssan", "bleu": 41.0, "chrf": 61.0, "delta": 1.0,
                                    "p_value": 0.2}
    assert record["hypotheses"] == {name: f"examples/stability/demo_run/{name}.test.tgt"
                                    for name in demo.SYSTEMS}
    for name, copy in record["hypotheses"].items():
        assert (tmp_path / copy).read_text() == hyps[name].read_text()
    assert record["reference"] == {
        "made_by": shlex.join(corpus), "file": "CORPUS/test.tgt",
        "sha256": hashlib.sha256(b"ref one\nref two\n").hexdigest()}
    assert record["rescore"] == [
        shlex.join(corpus),
        "ssan-evaluate-bleu --ref CORPUS/test.tgt "
        + " ".join(f"--hyp {n}=examples/stability/demo_run/{n}.test.tgt" for n in demo.SYSTEMS)]
    assert str(tmp_path) not in path.read_text()


def test_the_committed_record_can_be_rescored_or_says_it_cannot(demo):
    """The README's demo figures: their hypotheses committed beside the record (and the README
    showing how to score them again), or the README saying the record has none."""
    record = json.loads(demo.README_RUN.read_text())
    readme = (ROOT / "README.md").read_text()
    if "hypotheses" not in record:
        assert "This record keeps no hypotheses" in readme
        assert not demo.README_RUN.with_suffix("").exists()  # nothing that looks like them
        return
    for name, copy in record["hypotheses"].items():
        assert not copy.startswith("/") and copy.startswith("examples/stability/demo_run/")
        lines = (ROOT / copy).read_text().splitlines()
        assert len(lines) == record["recipe"]["corpus"]["test"], name
    for command in record["rescore"]:
        assert command in readme
