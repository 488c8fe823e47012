"""Checkpoints written by the code of an earlier commit still load and compute what they did then.

tests/fixtures/checkpoints/ holds one tiny checkpoint of every encoder (ssan_transformer and its
options, every selector of selective_transformer, DiSAN, Bi-BloSAN, ReSA, fairseq's transformer,
an SRL tagger and a sentence-pair classifier) and the outputs the code of that commit computed
from it (tests/fixtures/make_checkpoint_fixtures.py, which must not be rerun on newer code).
Each checkpoint is loaded through fairseq's loader (upgrade_state_dict_named, strict) by the
code under test, in-process; beam hypotheses, tags and labels must be identical, encoder states,
log-probabilities and scores equal within 1e-5. One fixture is also decoded by fairseq-generate
with ``--user-dir ssan_plugin``.
"""

import importlib.util
import json
import math
import re

import pytest
import torch

from conftest import ROOT, run_cli

FIXTURES = ROOT / "tests" / "fixtures" / "checkpoints"
LISTING = json.loads((FIXTURES / "fixtures.json").read_text(encoding="utf-8"))["fixtures"]
ATOL = 1e-5


def load_maker():
    spec = importlib.util.spec_from_file_location(
        "make_checkpoint_fixtures", ROOT / "tests" / "fixtures" / "make_checkpoint_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKER = load_maker()


def differences(want, got, where):
    """Where ``got`` differs from ``want``: floats by more than ATOL, anything else at all."""
    if isinstance(want, dict):
        if set(want) != set(got):
            return [f"{where}: keys {sorted(got)} != {sorted(want)}"]
        return [d for key in want for d in differences(want[key], got[key], f"{where}[{key!r}]")]
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return [f"{where}: {got!r} != {want!r}"]
        return [d for i, (w, g) in enumerate(zip(want, got))
                for d in differences(w, g, f"{where}[{i}]")]
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
            return [f"{where}: {got!r} != {want!r}"]
        if want.is_floating_point():
            diff = (got - want).abs().max().item() if want.numel() else 0.0
            return [] if diff <= ATOL else [f"{where}: max abs difference {diff:.3g}"]
        return [] if torch.equal(got, want) else [f"{where}: {got.tolist()} != {want.tolist()}"]
    if isinstance(want, float):
        return [] if abs(got - want) <= ATOL else [f"{where}: {got!r} != {want!r}"]
    return [] if got == want else [f"{where}: {got!r} != {want!r}"]


def test_every_fixture_is_listed():
    on_disk = {path.parent.name for path in FIXTURES.glob("*/checkpoint.pt")}
    assert on_disk == set(LISTING)
    assert set(MAKER.CONFIGS) <= set(LISTING)


@pytest.mark.parametrize("name", list(LISTING))
def test_fixture_computes_what_it_computed(name):
    entry = LISTING[name]
    want = torch.load(FIXTURES / name / "expected.pt")
    got = MAKER.expected(entry["task"], FIXTURES / name / "checkpoint.pt", FIXTURES / entry["data"])
    found = differences(want, got, name)
    assert not found, "\n".join(found[:20])


def generate_lines(text):
    """{sentence id: (hypothesis, score, positional scores)} of fairseq-generate's output."""
    hypotheses = {int(i): (hypo, float(score))
                  for i, score, hypo in re.findall(r"^H-(\d+)\t(\S+)\t(.*)$", text, re.M)}
    positional = {int(i): [float(x) for x in scores.split()]
                  for i, scores in re.findall(r"^P-(\d+)\t(.*)$", text, re.M)}
    assert hypotheses and set(hypotheses) == set(positional)
    return {i: (*hypotheses[i], positional[i]) for i in hypotheses}


@pytest.mark.parametrize("name", [n for n, e in LISTING.items() if e["task"] == "translation"])
def test_generate_txt_agrees_with_expected(name):
    """The fixture's own consistency: fairseq-generate's best hypotheses are the in-process
    search's (scores in base 2, as fairseq-generate prints them)."""
    from fairseq.data import Dictionary

    expected = torch.load(FIXTURES / name / "expected.pt")
    data = FIXTURES / LISTING[name]["data"]
    target = Dictionary.load(str(data / "dict.tgt.txt"))
    lines = generate_lines((FIXTURES / name / "generate.txt").read_text(encoding="utf-8"))
    assert sorted(lines) == sorted(expected["ids"])
    for row, sentence in enumerate(expected["ids"]):
        hypo, score, positional = lines[sentence]
        assert hypo == target.string(torch.tensor(expected["tokens"][row][0]))
        assert score == pytest.approx(expected["scores"][row][0] / math.log(2), abs=1e-4)
        best = [x / math.log(2) for x in expected["positional_scores"][row][0]]
        assert positional == pytest.approx(best, abs=1e-4)


def test_fairseq_generate_decodes_a_fixture_as_then():
    name = "ssan"
    out = run_cli("fairseq-generate", FIXTURES / LISTING[name]["data"], "--user-dir",
                  ROOT / "ssan_plugin", "--path", FIXTURES / name / "checkpoint.pt",
                  *MAKER.GENERATE).stdout
    then = generate_lines((FIXTURES / name / "generate.txt").read_text(encoding="utf-8"))
    now = generate_lines(out)
    assert sorted(now) == sorted(then)
    for sentence, (hypo, score, positional) in then.items():
        assert now[sentence][0] == hypo
        assert now[sentence][1] == pytest.approx(score, abs=1e-4)
        assert now[sentence][2] == pytest.approx(positional, abs=1e-4)


def test_no_fixture_holds_an_absolute_path():
    """The committed checkpoints name no path of the machine that wrote them (fairseq's unused
    plasma_path default included, stored as None), byte for byte."""
    machine_path = re.compile(rb"(?<![\w.~-])/(work|home|root|tmp|Users)/\w")
    found = [str(path.relative_to(ROOT)) for path in sorted(FIXTURES.rglob("*"))
             if path.is_file() and machine_path.search(path.read_bytes())]
    assert not found, found
