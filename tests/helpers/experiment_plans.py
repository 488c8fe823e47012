"""Translation plan files for the tests of ssan_plugin/experiments/plan.py and runner.py
(tests/unit/experiments/test_plan.py, test_runner.py): a small plan, a source plan and a plan
that borrows runs from it, a run's decoded outputs faked."""

import json


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
