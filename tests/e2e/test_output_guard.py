"""Every command guards its outputs (ssan_plugin/cli/files.py guard_outputs, README "Errors"):
fed any of its inputs as an output it refuses with exit status 2 and ONE line naming the option,
and every file stays byte for byte as it was; existing outputs need --overwrite, a folder where a
file belongs (or the reverse) and a parent that is a file are refused, a missing parent folder
is created; prepare_* --overwrite rebuilds its own data directory whole. Also here: structured
inputs (a data-bin's manifest.json, an SRL manifest, a pairs gold file, run archives) named with
the key, decoding limits fairseq asserts on, and checkpoints of another task or dictionary.

Each command runs in-process through its main(argv), as its process would (argparse's program
name set from sys.argv[0]); the checkpoints are stand-ins (torch.save of a state naming a task,
or bytes): a refusal comes before any model is loaded, so no model is trained here. One real
data-bin is prepared (prepare_translation, with fairseq-preprocess as a child process).
"""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.tree_snapshot import snapshot
import torch

import ssan_plugin  # noqa: F401
from conftest import message_lines
from helpers.srl_cli import PROPS, WORDS
from helpers.translation_testlib import load_script, script_file, small_corpus

COMMANDS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "ssan_plugin"
                                   / "commands").glob("*.py") if p.stem != "__init__")


def run(command, argv, capsys, monkeypatch):
    """main(argv) of the command as its process would run it: (exit status, messages, stdout)."""
    monkeypatch.setattr(sys, "argv", [str(script_file(command))])  # argparse's prog
    module = load_script(command)
    capsys.readouterr()
    try:
        code = module.main([str(a) for a in argv])
    except SystemExit as exit_info:  # argparse
        code = exit_info.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, err[-3000:]
    return SimpleNamespace(code=code, messages=message_lines(err), out=out, err=err)


def refused(command, argv, capsys, monkeypatch, *expected):
    """Exit status 2, one line ``command.py: error: ...`` holding every ``expected`` text."""
    result = run(command, argv, capsys, monkeypatch)
    assert result.code == 2, result.err[-3000:]
    assert len(result.messages) == 1, result.err[-3000:]
    line = result.messages[0]
    assert line.startswith(f"{command}.py: error: "), line
    for text in expected:
        assert str(text) in line, (text, line)
    return line


def fake_checkpoint(path, task="translation", arch="transformer", rows=None):
    """A checkpoint state torch's safe loader reads, naming its task and architecture (and,
    with ``rows``, an encoder embedding of that many rows)."""
    model = {"w": torch.zeros(2)}
    if rows is not None:
        model["encoder.embed_tokens.weight"] = torch.zeros(rows, 4)
    torch.save({"model": model, "cfg": {"task": {"_name": task}, "model": {"_name": arch}}},
               path)
    return path


# ---------------------------------------------------------------- the world: every kind of input

@pytest.fixture(scope="module")
def w(tmp_path_factory):
    """Small inputs of every kind the commands read (the guard reads none of them)."""
    d = tmp_path_factory.mktemp("guard")
    (d / "text.en").write_text("a house .\nthe cat .\n")
    (d / "bitext.en-de").write_text("a house . ||| ein Haus .\n")
    (d / "gold.txt").write_text("1-1 2-2 3-3\n")
    (d / "ref.de").write_text("ein Haus .\ndie Katze .\n")
    (d / "hyp_a.de").write_text("ein Haus .\ndie Katze .\n")
    (d / "hyp_b.de").write_text("ein Hund .\ndie Katze .\n")
    (d / "ck.pt").write_bytes(b"a stand-in checkpoint: refused before it is read\n")
    fake_checkpoint(d / "base.pt")
    bin_ = d / "bin"
    bin_.mkdir()
    (bin_ / "manifest.json").write_text("{}\n")
    (bin_ / "dict.en.txt").write_text("a 1\n")
    (d / "t.gold_conll").write_text("#begin document (x); part 000\n")
    (d / "probe.txt").write_text("tr\tI\ta b\n")
    raw = d / "raw"
    raw.mkdir()
    for split in ("train", "valid", "test"):
        (raw / f"{split}.en").write_text("a house .\n")
        (raw / f"{split}.de").write_text("ein Haus .\n")
    pairs = d / "pairs"
    pairs.mkdir()
    (pairs / "test.gold.tsv").write_text("pair_ID\tlabel\tscore\n1\tentailment\t4.5\n")
    (pairs / "dict.s1.txt").write_text("a 1\n")
    (d / "pred_a.tsv").write_text("1\tentailment\t4.5000\n")
    sick = "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\n"
    for split in ("train", "valid", "test"):
        (d / f"{split}.tsv").write_text(sick + "1\tA man\tA man\tENTAILMENT\t5.0\n")
    srl = d / "srl"
    srl.mkdir()
    (srl / "test.props").write_text(PROPS)
    (srl / "manifest.json").write_text("{}\n")
    (d / "srl_t.words").write_text(WORDS)
    (d / "srl_t.props").write_text(PROPS)
    (d / "gold.props").write_text(PROPS)
    (d / "pred_a.props").write_text(PROPS)
    analysis = d / "analysis"
    analysis.mkdir()
    (analysis / "trees.a.json").write_text("{}\n")
    (analysis / "probe_bshift.a.json").write_text("{}\n")
    ckdir = d / "ckdir"
    ckdir.mkdir()
    for k in (10, 20):
        (ckdir / f"checkpoint_1_{k}.pt").write_bytes(b"x")
    plan = {"seeds": [1], "updates": {"base": 2, "more": 1}, "train": [],
            "pairs": {"p": {"raw": str(raw), "src": "en", "tgt": "de"}},
            "systems": {"base": {"arch": "transformer", "criterion": "cross_entropy"}},
            "studies": [{"name": "s", "pairs": ["p"], "systems": ["base"]}]}
    (d / "plan.json").write_text(json.dumps(plan))
    (d / "outs").mkdir()
    return d


# (command, argv builder taking the world and the outputs, {output option: default},
#  inputs fed as outputs, input folders fed to the folder outputs)
def _a(d, o):
    return ["--dir", d / "analysis", "--systems", "a", "--md", o["--md"], "--png", o["--png"]]


SPECS = [
    ("align",
     lambda d, o: ["--data", d / "bin", "--checkpoint", d / "ck.pt", "--bitext", d / "bitext.en-de",
                   "--gold", d / "gold.txt", "--out", o["--out"], "--links", o["--links"]],
     {"--out": "a.json", "--links": "a.links"},
     ["bitext.en-de", "gold.txt", "ck.pt", "bin/manifest.json", "bin"], []),
    ("align",
     lambda d, o: ["--eflomal-train", d / "raw" / "train", "--bitext", d / "bitext.en-de",
                   "--out", o["--out"]],
     {"--out": "a.json"}, ["bitext.en-de", "raw/train.en", "raw/train.de"], []),
    ("analysis_report", _a, {"--md": "r.md", "--png": "r.png"},
     ["analysis/trees.a.json", "analysis/probe_bshift.a.json", "analysis"], []),
    ("average_checkpoints",
     lambda d, o: ["--inputs", d / "ckdir" / "checkpoint_1_10.pt",
                   d / "ckdir" / "checkpoint_1_20.pt", "--output", o["--output"]],
     {"--output": "avg.pt"}, ["ckdir/checkpoint_1_10.pt", "ckdir/checkpoint_1_20.pt", "ckdir"], []),
    ("average_checkpoints",
     lambda d, o: ["--last", "2", d / "ckdir", "--output", o["--output"]],
     {"--output": "avg.pt"}, ["ckdir/checkpoint_1_20.pt"], []),
    ("evaluate_bleu",
     lambda d, o: ["--ref", d / "ref.de", "--hyp", f"a={d / 'hyp_a.de'}", "--hyp",
                   f"b={d / 'hyp_b.de'}", "--json", o["--json"], "--by-length-png",
                   o["--by-length-png"], "--hyp-dir", o["--hyp-dir"]],
     {"--json": "b.json", "--by-length-png": "b.png", "--hyp-dir": "hyps"},
     ["ref.de", "hyp_a.de", "hyp_b.de"], []),
    ("evaluate_bleu",
     lambda d, o: ["--data", d / "bin", "--ref", d / "ref.de", "--source", d / "text.en",
                   "--system", f"s={d / 'ck.pt'}", "--json", o["--json"]],
     {"--json": "b.json"}, ["ref.de", "text.en", "ck.pt", "bin/manifest.json", "bin"], []),
    ("evaluate_pairs",
     lambda d, o: ["--data", d / "pairs", "--pred", f"a={d / 'pred_a.tsv'}", "--json", o["--json"]],
     {"--json": "p.json"}, ["pred_a.tsv", "pairs/test.gold.tsv", "pairs"], []),
    ("evaluate_pairs",
     lambda d, o: ["--data", d / "pairs", "--checkpoint", f"a={d / 'ck.pt'}", "--json",
                   o["--json"], "--predictions", o["--predictions"]],
     {"--json": "p.json", "--predictions": "p.tsv"},
     ["ck.pt", "pairs/test.gold.tsv", "pairs/dict.s1.txt"], []),
    ("evaluate_srl",
     lambda d, o: ["--data", d / "srl", "--checkpoint", d / "ck.pt", "--gold-props",
                   o["--gold-props"], "--pred-props", o["--pred-props"], "--json", o["--json"]],
     {"--gold-props": "g.props", "--pred-props": "p.props", "--json": "s.json"},
     ["srl/test.props", "srl/manifest.json", "ck.pt", "srl"], []),
    ("evaluate_srl",
     lambda d, o: ["--gold-props", d / "gold.props", "--pred-props", f"a={d / 'pred_a.props'}",
                   "--json", o["--json"]],
     {"--json": "s.json"}, ["gold.props", "pred_a.props"], []),
    ("induce_trees",
     lambda d, o: ["--data", d / "bin", "--checkpoint", d / "ck.pt", "--conll",
                   d / "t.gold_conll", "--json", o["--json"]],
     {"--json": "t.json"}, ["bin/manifest.json", "ck.pt", "t.gold_conll", "bin"], []),
    ("make_probing_data",
     lambda d, o: ["--task", "bigram_shift", "--input", d / "text.en", "--out", o["--out"]],
     {"--out": "bshift.txt"}, ["text.en"], []),
    ("make_probing_data",
     lambda d, o: ["--task", "tree_depth", "--conll", d / "t.gold_conll", "--out", o["--out"]],
     {"--out": "depth.txt"}, ["t.gold_conll"], []),
    ("prepare_pairs",
     lambda d, o: ["--format", "sick", "--train", d / "train.tsv", "--valid", d / "valid.tsv",
                   "--test", d / "test.tsv", "--dest", o["--dest"]],
     {"--dest": "pairs_bin"}, ["train.tsv", "valid.tsv", "test.tsv"], []),
    ("prepare_pairs",
     lambda d, o: ["--format", "sick", "--train", d / "train.tsv", "--valid", d / "valid.tsv",
                   "--test", d / "test.tsv", "--translation-data", d / "bin", "--dest",
                   o["--dest"], "--overwrite"],
     {"--dest": "pairs_bin"}, [], ["bin"]),
    ("prepare_srl",
     lambda d, o: ["--format", "conll2005", "--train", d / "srl_t", "--dest", o["--dest"]],
     {"--dest": "srl_bin"}, ["srl_t.words", "srl_t.props"], []),
    ("prepare_srl",
     lambda d, o: ["--format", "conll2005", "--train", d / "srl" / "test",
                   "--valid", f"{d / 'srl_t.words'},{d / 'srl' / 'test.props'}",
                   "--dest", o["--dest"], "--overwrite"],
     {"--dest": "srl_bin"}, ["srl/test.props"], ["srl"]),
    ("prepare_translation",
     lambda d, o: ["--src", "en", "--tgt", "de", "--train", d / "raw" / "train", "--valid",
                   d / "raw" / "valid", "--test", d / "raw" / "test", "--dest", o["--dest"],
                   "--vocab-size", "30"],
     {"--dest": "mt_bin"}, ["raw/train.en", "raw/test.de"], ["raw"]),
    ("probe",
     lambda d, o: ["--data", d / "bin", "--checkpoint", d / "ck.pt", "--task", "bigram_shift",
                   "--probing-file", d / "probe.txt", "--json", o["--json"]],
     {"--json": "pr.json"}, ["bin/manifest.json", "ck.pt", "probe.txt", "bin"], []),
    ("run_experiments",
     lambda d, o: ["--plan", d / "plan.json", "--out", o["--out"]],
     {"--out": "exp"}, ["plan.json"], []),
    ("selection_stats",
     lambda d, o: ["--data", d / "bin", "--checkpoint", d / "ck.pt", "--conll",
                   d / "t.gold_conll", "--json", o["--json"], "--png", o["--png"]],
     {"--json": "ss.json", "--png": "ss.png"},
     ["bin/dict.en.txt", "ck.pt", "t.gold_conll", "bin"], []),
    ("show_selection",
     lambda d, o: ["--data", d / "bin", "--checkpoint", d / "ck.pt", "--input", d / "text.en",
                   "--out", o["--out"]],
     {"--out": "maps"}, ["text.en", "ck.pt", "bin/manifest.json"], ["bin"]),
    ("translate",
     lambda d, o: ["--data", d / "bin", "--checkpoint", d / "ck.pt", "--input", d / "text.en",
                   "--output", o["--output"]],
     {"--output": "tr.de"}, ["text.en", "ck.pt", "bin/manifest.json", "bin"], []),
    ("warm_start",
     lambda d, o: ["--base", d / "base.pt", "--arch", "ssan_transformer", "--data", d / "bin",
                   "--out", o["--out"]],
     {"--out": "w.pt"}, ["base.pt", "bin/manifest.json", "bin"], []),
]

FOLDER_OUTPUTS = {"--hyp-dir", "--dest", "--out"}


def _is_folder_output(command, option):
    return option in FOLDER_OUTPUTS and command not in ("make_probing_data", "warm_start")


def guard_cases():
    """(id, command, argv builder, fed output option, input) for every output of every spec and
    every input it is fed; folder outputs get the input files (a file where a folder belongs)
    and the input folders listed for them."""
    cases = []
    for k, (command, build, defaults, inputs, folder_inputs) in enumerate(SPECS):
        for option in defaults:
            fed = inputs + (folder_inputs if _is_folder_output(command, option) else [])
            for name in fed:
                cases.append((f"{command}[{k}]{option}={name}", command, build, defaults,
                              option, name))
    return cases


CASES = guard_cases()


def test_every_command_is_in_the_table():
    assert sorted({spec[0] for spec in SPECS}) == COMMANDS


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_an_input_as_output_is_refused_and_nothing_changes(case, w, capsys, monkeypatch):
    _, command, build, defaults, option, name = case
    outputs = {opt: w / "outs" / "sub" / value for opt, value in defaults.items()}
    outputs[option] = w / name
    before = snapshot(w)
    line = refused(command, build(w, outputs), capsys, monkeypatch, option, w / name)
    assert snapshot(w) == before, line  # no file written, changed or removed; no folder made


# ---------------------------------------------------------------- targeted refusals

def test_hypotheses_of_a_checkpoint_never_replace_an_input(w, tmp_path, capsys, monkeypatch):
    """--hyp-dir collects hypotheses (may hold other files) but never replaces an input: a
    checkpoint's hypotheses NAME.LABEL.LANG over a --hyp file of that name are refused."""
    hyps = tmp_path / "hyps"
    hyps.mkdir()
    mine = hyps / "s.text.en.de"
    mine.write_text("ein Haus .\ndie Katze .\n")
    before = snapshot(tmp_path)
    refused("evaluate_bleu", ["--data", w / "bin", "--ref", w / "ref.de", "--source",
                              w / "text.en", "--hyp", f"a={mine}", "--system", f"s={w / 'ck.pt'}",
                              "--hyp-dir", hyps], capsys, monkeypatch,
            f"--hyp-dir {hyps} holds the input --hyp a={mine}, which this command would replace")
    assert snapshot(tmp_path) == before


def test_gold_and_predicted_props_on_one_path(w, tmp_path, capsys, monkeypatch):
    same = tmp_path / "x.props"
    refused("evaluate_srl", ["--data", w / "srl", "--checkpoint", w / "ck.pt", "--gold-props",
                             same, "--pred-props", same, "--json", tmp_path / "s.json"],
            capsys, monkeypatch, f"--gold-props {same} and --pred-props {same} are the same path")
    assert not same.exists()


def test_the_plan_where_the_runner_writes(w, tmp_path, capsys, monkeypatch):
    out = tmp_path / "exp"
    (out / "logs").mkdir(parents=True)
    plan = out / "logs" / "plan.json"
    plan.write_bytes((w / "plan.json").read_bytes())
    refused("run_experiments", ["--plan", plan, "--out", out, "--status"], capsys, monkeypatch,
            f"--out {out} holds the input --plan {plan}")
    # OUT is added to: a plan beside the runner's folders is fine, and so is earlier work
    beside = out / "plan.json"
    beside.write_bytes(plan.read_bytes())
    result = run("run_experiments", ["--plan", beside, "--out", out, "--status"], capsys,
                 monkeypatch)
    assert result.code == 0 and "0/1 runs done" in result.out


def test_predictions_over_the_data_gold_file(w, capsys, monkeypatch):
    gold = w / "pairs" / "test.gold.tsv"
    before = snapshot(w)
    refused("evaluate_pairs", ["--data", w / "pairs", "--checkpoint", f"a={w / 'ck.pt'}",
                               "--json", w / "outs" / "p.json", "--predictions", gold,
                               "--overwrite"], capsys, monkeypatch,
            f"--predictions {gold} would replace a file of the input --data {w / 'pairs'}")
    assert snapshot(w) == before


@pytest.mark.parametrize("command,argv,expected", [
    ("evaluate_bleu", lambda d, t: ["--ref", d / "ref.de", "--hyp", f"a={d / 'hyp_a.de'}",
                                    "--json", t], "--json {t} is a directory"),
    ("evaluate_pairs", lambda d, t: ["--data", d / "pairs", "--pred", f"a={d / 'pred_a.tsv'}",
                                     "--json", t], "--json {t} is a directory"),
    ("translate", lambda d, t: ["--data", d / "bin", "--checkpoint", d / "ck.pt", "--output", t],
     "--output {t} is a directory"),
    ("prepare_srl", lambda d, t: ["--format", "conll2005", "--train", d / "srl_t", "--dest",
                                  t / "f"], "--dest {t}/f exists and is not a directory"),
    ("show_selection", lambda d, t: ["--data", d / "bin", "--checkpoint", d / "ck.pt",
                                     "--sentence", "a", "--out", t / "f"],
     "--out {t}/f exists and is not a directory"),
    ("run_experiments", lambda d, t: ["--plan", d / "plan.json", "--out", t / "f"],
     "--out {t}/f exists and is not a directory"),
    ("make_probing_data", lambda d, t: ["--task", "bigram_shift", "--input", d / "text.en",
                                        "--out", t / "f" / "x.txt"],
     "--out {t}/f/x.txt: {t}/f is not a directory"),
    ("induce_trees", lambda d, t: ["--data", d / "bin", "--checkpoint", d / "ck.pt", "--conll",
                                   d / "t.gold_conll", "--json", t / "f" / "deeper" / "t.json"],
     "--json {t}/f/deeper/t.json: {t}/f is not a directory"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_folder_and_file_mix_ups(command, argv, expected, w, tmp_path, capsys, monkeypatch):
    (tmp_path / "f").write_text("a file\n")
    before = snapshot(tmp_path)
    refused(command, argv(w, tmp_path), capsys, monkeypatch, expected.format(t=tmp_path))
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------- --overwrite, missing parents

def test_existing_outputs_need_overwrite(w, tmp_path, capsys, monkeypatch):
    out = tmp_path / "b.json"
    out.write_text("an earlier report\n")
    argv = ["--ref", w / "ref.de", "--hyp", f"a={w / 'hyp_a.de'}", "--hyp",
            f"b={w / 'hyp_b.de'}", "--json", out]
    refused("evaluate_bleu", argv, capsys, monkeypatch,
            f"--json {out} exists; pass --overwrite to replace it")
    assert out.read_text() == "an earlier report\n"
    assert run("evaluate_bleu", argv + ["--overwrite"], capsys, monkeypatch).code == 0
    assert [s["name"] for s in json.loads(out.read_text())["systems"]] == ["a", "b"]

    probing = tmp_path / "bshift.txt"
    probing.write_text("mine\n")
    argv = ["--task", "bigram_shift", "--input", w / "text.en", "--out", probing]
    refused("make_probing_data", argv, capsys, monkeypatch, f"--out {probing} exists")
    assert probing.read_text() == "mine\n"
    assert run("make_probing_data", argv + ["--overwrite"], capsys, monkeypatch).code == 0
    assert probing.read_text() != "mine\n"

    report = tmp_path / "c.json"
    report.write_text("{}\n")
    argv = ["--gold-props", w / "gold.props", "--pred-props", f"a={w / 'pred_a.props'}",
            "--json", report]
    refused("evaluate_srl", argv, capsys, monkeypatch, f"--json {report} exists")
    assert run("evaluate_srl", argv + ["--overwrite"], capsys, monkeypatch).code == 0
    assert json.loads(report.read_text())["systems"][0]["name"] == "a"

    maps = tmp_path / "maps"
    maps.mkdir()
    (maps / "sent1.json").write_text("{}\n")
    refused("show_selection", ["--data", w / "bin", "--checkpoint", w / "ck.pt", "--sentence",
                               "a", "--out", maps], capsys, monkeypatch,
            f"--out {maps} is not empty; pass --overwrite")


def test_missing_parent_folders_are_created_when_the_work_starts(w, tmp_path, capsys,
                                                                 monkeypatch):
    """Every check passed: the missing folders are made (the JSON with --hyp-dir elsewhere was
    written into a folder nothing created, after the work)."""
    out = tmp_path / "new" / "deeper" / "b.json"
    assert run("evaluate_bleu", ["--ref", w / "ref.de", "--hyp", f"a={w / 'hyp_a.de'}",
                                 "--json", out, "--hyp-dir", tmp_path / "hyps"],
               capsys, monkeypatch).code == 0
    assert json.loads(out.read_text())["systems"][0]["name"] == "a"
    probing = tmp_path / "a" / "b" / "x.txt"
    assert run("make_probing_data", ["--task", "bigram_shift", "--input", w / "text.en", "--out",
                                     probing], capsys, monkeypatch).code == 0
    assert probing.is_file()


# ---------------------------------------------------------------- prepare_* --overwrite

@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A translation data-bin prepared by prepare_translation (en -> ro), and its raw corpus."""
    d = tmp_path_factory.mktemp("prepared")
    raw = d / "raw"
    small_corpus(raw)
    dest = d / "bin"
    code = load_script("prepare_translation").main(
        ["--src", "en", "--tgt", "ro", "--train", str(raw / "train"), "--valid",
         str(raw / "valid"), "--test", str(raw / "test"), "--dest", str(dest),
         "--vocab-size", "60"])
    assert code == 0
    return SimpleNamespace(raw=raw, bin=dest)


def test_prepare_translation_overwrite_rebuilds_its_own_data_bin(prepared, tmp_path, capsys,
                                                                 monkeypatch):
    """--overwrite onto a data-bin it prepared: its files (per its manifest) go, then the
    preparation runs whole (fairseq-preprocess finds no dictionary of the earlier one: both
    directions write dict.en.txt and dict.ro.txt); a file of the user's stays; the other
    direction leaves nothing of the first behind. Without --overwrite: refused, untouched."""
    import shutil

    from ssan_plugin.translation.prepare import own_files

    dest = tmp_path / "bin"
    shutil.copytree(prepared.bin, dest)
    (dest / "notes.txt").write_text("mine\n")
    raw = prepared.raw

    def argv(src, tgt, *extra):
        return ["--src", src, "--tgt", tgt, "--train", raw / "train", "--valid", raw / "valid",
                "--test", raw / "test", "--dest", dest, "--vocab-size", "60", *extra]

    before = snapshot(dest)
    refused("prepare_translation", argv("ro", "en"), capsys, monkeypatch,
            f"--dest {dest} is not empty; pass --overwrite")
    assert snapshot(dest) == before
    old = json.loads((dest / "manifest.json").read_text())
    assert set(old["files"]) == set(own_files("en", "ro")) - {"text/spm_train.txt"}
    result = run("prepare_translation", argv("ro", "en", "--overwrite"), capsys, monkeypatch)
    assert result.code == 0, result.err[-3000:]
    manifest = json.loads((dest / "manifest.json").read_text())
    assert (manifest["src"], manifest["tgt"]) == ("ro", "en")
    found = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    assert found == set(manifest["files"]) | {"notes.txt"}
    assert set(manifest["files"]) == set(own_files("ro", "en")) - {"text/spm_train.txt"}
    assert (dest / "notes.txt").read_text() == "mine\n"


def test_prepare_srl_overwrite_leaves_no_split_of_the_earlier_data(w, tmp_path, capsys,
                                                                  monkeypatch):
    dest = tmp_path / "srl_bin"
    spec = str(w / "srl_t")
    assert run("prepare_srl", ["--format", "conll2005", "--train", spec, "--valid", spec,
                               "--dest", dest], capsys, monkeypatch).code == 0
    assert (dest / "valid.props").is_file()
    (dest / "notes.txt").write_text("mine\n")
    refused("prepare_srl", ["--format", "conll2005", "--train", spec, "--dest", dest], capsys,
            monkeypatch, f"--dest {dest} is not empty")
    assert run("prepare_srl", ["--format", "conll2005", "--train", spec, "--dest", dest,
                               "--overwrite"], capsys, monkeypatch).code == 0
    assert not list(dest.glob("valid.*")) and (dest / "train.props").is_file()
    assert (dest / "notes.txt").read_text() == "mine\n"
    assert list(json.loads((dest / "manifest.json").read_text())["splits"]) == ["train"]


# ---------------------------------------------------------------- structured inputs

@pytest.mark.parametrize("name,text,expected", [
    ("truncated", lambda t: t[:len(t) // 2], "manifest.json is not valid JSON"),
    ("list", lambda t: "[]", "manifest.json: expected a JSON object, found a list"),
    ("spm_number", lambda t: t.replace('"model": "', '"model": 3, "x": "', 1),
     "manifest.json: key 'sentencepiece.model' must be a path (a string), found an integer"),
    ("no_languages", lambda t: json.dumps({k: v for k, v in json.loads(t).items()
                                           if k != "languages"}),
     "manifest.json: key 'languages' must be an object, missing"),
    ("kept_text", lambda t: json.dumps({**json.loads(t), "counts": {"test": {"kept": "3"}}}),
     "manifest.json: key 'counts.test.kept' must be an integer, found a string"),
])
def test_a_damaged_manifest_names_the_file_and_the_key(prepared, tmp_path, capsys, monkeypatch,
                                                       name, text, expected):
    import shutil

    data = tmp_path / "bin"
    shutil.copytree(prepared.bin, data)
    manifest = data / "manifest.json"
    manifest.write_text(text(manifest.read_text()))
    refused("translate", ["--data", data, "--checkpoint", tmp_path / "none.pt", "--input",
                          prepared.raw / "test.en", "--output", tmp_path / "o.txt"],
            capsys, monkeypatch, data / expected)
    refused("evaluate_bleu", ["--data", data, "--ref", prepared.raw / "test.ro", "--hyp",
                              f"a={prepared.raw / 'test.ro'}"], capsys, monkeypatch,
            data / expected)


def test_a_damaged_srl_manifest_or_pairs_gold_file(w, tmp_path, capsys, monkeypatch):
    import shutil

    srl = tmp_path / "srl"
    shutil.copytree(w / "srl", srl)
    (srl / "manifest.json").write_text('{"splits": {"test": {"sentences": "three"}}}')
    refused("evaluate_srl", ["--data", srl, "--checkpoint", w / "ck.pt", "--gold-props",
                             tmp_path / "g", "--pred-props", tmp_path / "p", "--json",
                             tmp_path / "j"], capsys, monkeypatch,
            f"{srl / 'manifest.json'}: key 'splits.test.sentences' must be a non-negative integer")
    (srl / "manifest.json").write_text('{"splits": {"test"')
    refused("evaluate_srl", ["--data", srl, "--checkpoint", w / "ck.pt", "--gold-props",
                             tmp_path / "g", "--pred-props", tmp_path / "p", "--json",
                             tmp_path / "j"], capsys, monkeypatch,
            f"{srl / 'manifest.json'} is not valid JSON")
    pairs = tmp_path / "pairs"
    pairs.mkdir()
    for name in ("dict.s1.txt", "test.s1-s2.s1.bin", "test.s1-s2.s1.idx", "test.s1-s2.s2.bin",
                 "test.s1-s2.s2.idx"):
        (pairs / name).write_text("a 1\n")
    gold = pairs / "test.gold.tsv"
    gold.write_text("id\tlabel\n1\tentailment\n")
    refused("evaluate_pairs", ["--data", pairs, "--pred", f"a={w / 'pred_a.tsv'}", "--json",
                               tmp_path / "p.json"], capsys, monkeypatch,
            f"{gold}: not a gold file of prepare_pairs.py")
    gold.write_text("pair_ID\tlabel\tscore\n1\tentailment\tmany\n")
    refused("evaluate_pairs", ["--data", pairs, "--pred", f"a={w / 'pred_a.tsv'}", "--json",
                               tmp_path / "p.json"], capsys, monkeypatch,
            f"{gold}: line 2: score 'many' is not a finite number")


def test_damaged_run_archives_name_the_file_and_the_key(tmp_path):
    from ssan_plugin.experiments.tables.archives import archived_value
    from ssan_plugin.experiments.tables.blocks import ResultsError
    from ssan_plugin.experiments.tables.stability import first_validation

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "test.json").write_text('{"systems": [{"bleu": 3')
    with pytest.raises(ResultsError, match=r"test.json is not valid JSON"):
        archived_value(run_dir / "test.json", "systems", 0, "bleu")
    (run_dir / "test.json").write_text('{"systems": [{"bleu": "3"}]}')
    with pytest.raises(ResultsError, match=r"test.json: key 'systems.0.bleu' must be a number"):
        archived_value(run_dir / "test.json", "systems", 0, "bleu")
    (run_dir / "test.json").write_text('{"systems": []}')
    with pytest.raises(ResultsError, match=r"test.json: key 'systems.0' is missing"):
        archived_value(run_dir / "test.json", "systems", 0, "bleu")
    (run_dir / "curve.jsonl").write_text('{"kind": "train"}\n{"kind": "valid", "valid_loss"\n')
    with pytest.raises(ResultsError, match=r"curve.jsonl:2 is not valid JSON"):
        first_validation(run_dir)
    (run_dir / "curve.jsonl").write_text('{"kind": "valid", "valid_loss": 2.5}\n')
    with pytest.raises(ResultsError, match=r"curve.jsonl:1: key 'valid_num_updates' missing"):
        first_validation(run_dir)


# ---------------------------------------------------------------- decoding limits, checkpoints

@pytest.mark.parametrize("command", ["translate", "evaluate_bleu"])
def test_max_len_b_zero_is_refused_when_parsed(command, w, capsys, monkeypatch):
    argv = (["--data", w / "bin", "--checkpoint", w / "ck.pt"] if command == "translate" else
            ["--ref", w / "ref.de", "--hyp", f"a={w / 'hyp_a.de'}"])
    refused(command, argv + ["--max-len-b", "0"], capsys, monkeypatch,
            "argument --max-len-b: must be >= 1 when --max-len-a is below 1")
    refused(command, argv + ["--max-len-b", "0", "--max-len-a", "0.5"], capsys, monkeypatch,
            "got --max-len-a 0.5 and --max-len-b 0")


@pytest.mark.parametrize("command,extra", [
    ("show_selection", lambda t: ["--sentence", "A house.", "--out", t / "maps"]),
    ("selection_stats", lambda t: ["--conll", t / "c", "--json", t / "s.json"]),
    ("induce_trees", lambda t: ["--conll", t / "c", "--json", t / "t.json"]),
    ("probe", lambda t: ["--task", "bigram_shift", "--probing-file", t / "p", "--json",
                         t / "p.json"]),
])
def test_analysis_tools_name_the_wrong_checkpoint(command, extra, prepared, tmp_path, capsys,
                                                  monkeypatch):
    srl = fake_checkpoint(tmp_path / "srl.pt", "srl", "srl_tagger")
    refused(command, ["--data", prepared.bin, "--checkpoint", srl, *extra(tmp_path)], capsys,
            monkeypatch, f"--checkpoint {srl}: expected a checkpoint of task 'translation', "
                         f"found task 'srl', arch 'srl_tagger'")
    pair = fake_checkpoint(tmp_path / "pair.pt", "sentence_pair", "pair_classifier")
    refused(command, ["--data", prepared.bin, "--checkpoint", pair, *extra(tmp_path)], capsys,
            monkeypatch, "found task 'sentence_pair', arch 'pair_classifier'")
    other = fake_checkpoint(tmp_path / "other.pt", rows=7)
    refused(command, ["--data", prepared.bin, "--checkpoint", other, *extra(tmp_path)], capsys,
            monkeypatch, f"--checkpoint {other} was trained on another dictionary: expected an "
                         f"encoder embedding of")
    assert not (tmp_path / "maps").exists() or not any((tmp_path / "maps").iterdir())


def test_evaluate_pairs_names_another_dictionary(w, tmp_path, capsys, monkeypatch):
    pairs = tmp_path / "pairs"
    pairs.mkdir()
    for name in ("test.s1-s2.s1.bin", "test.s1-s2.s1.idx", "test.s1-s2.s2.bin",
                 "test.s1-s2.s2.idx"):
        (pairs / name).write_bytes(b"")
    (pairs / "dict.s1.txt").write_text("a 1\nb 1\n")  # + 4 specials: 6 entries
    (pairs / "test.gold.tsv").write_text("pair_ID\tlabel\tscore\n1\tentailment\t4.5\n")
    ckpt = fake_checkpoint(tmp_path / "pair.pt", "sentence_pair", "pair_classifier", rows=9)
    refused("evaluate_pairs", ["--data", pairs, "--checkpoint", f"a={ckpt}", "--json",
                               tmp_path / "p.json"], capsys, monkeypatch,
            f"--checkpoint {ckpt} was trained on another dictionary: expected a word embedding "
            f"of 6 rows ({pairs / 'dict.s1.txt'}", "found 9")
