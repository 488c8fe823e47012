"""The demo says what is true: its recipe is pinned against the one the README's figures were
measured with (examples/stability/demo_run.json), the README shows that run's printed table,
and the committed seeds it compares a run with were trained with the same recipe
(examples/stability/demo_plan.json)."""

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
    stability plan's start study, read here from the archive's files directly."""
    archive = ROOT / "examples" / "stability" / "experiments" / "start" / "builtin"
    spread = demo.committed_spread()
    assert set(spread) == set(demo.SPREAD_SYSTEMS)
    for name, system in demo.SPREAD_SYSTEMS.items():
        reports = sorted(archive.glob(f"{system}@*/test.json"),
                         key=lambda p: int(p.parent.name.split("@")[1]))
        assert len(reports) >= 5
        assert spread[name] == [json.loads(p.read_text())["systems"][0]["bleu"] for p in reports]
