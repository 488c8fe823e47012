"""Hostile input to every script: exit status 2, ONE message line naming the option or the file,
no Python traceback on either stream (ssan_plugin/cli/, README "Errors").

The table runs each script once per kind of bad input (out-of-range option, missing /
directory / empty / invalid UTF-8 / byte-order-marked file, unwritable output, foreign, empty or
directory checkpoint, unprepared split, gold props out of step with the data): a few cases as
real processes, the others through the script's main(argv) in-process with argparse's program
name set as the process would have it (a subprocess costs seconds of torch/fairseq import); the
remaining out-of-range options are checked in-process too. Also here: fairseq-generate and
fairseq-interactive on sentences longer than the model's positions (one line, the plugin's hook
over fairseq's exception), and how preparation and decoding report them. The table
also holds the experiment runner's plan mistakes (a key or a study twice, a study without
systems, an archive that is OUT or a file) and scripts/make_results.py on a damaged copy of the
committed archives (``--root``: a truncated or invalid file, a NaN or infinite BLEU).
"""

import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

import ssan_plugin  # noqa: F401
from conftest import PLUGIN_DIR, ROOT, SHARED_DATA, TINY_MODEL, message_lines, require_shared, run_cli
from helpers.srl_cli import PROPS, WORDS
from helpers.srl_cli import prepare as prepare_srl
from helpers.translation_testlib import ENV, load_script, script_command, script_file, train_tiny

# stderr lines that are log records of the libraries, not messages of the script
LOG_LINE = re.compile(r"^(INFO|WARNING|DEBUG):|^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\S* \| (INFO|WARNING) \|")


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_bin):
    """Hostile files, an SRL data dir, a translation checkpoint."""
    d = tmp_path_factory.mktemp("bad")
    (d / "dir").mkdir()
    (d / "no_dict").mkdir()  # a language pair in the file names, no dictionaries
    (d / "no_dict" / "train.src-tgt.src.idx").write_bytes(b"")
    (d / "empty.pt").write_bytes(b"")
    (d / "file").write_text("x\n")
    (d / "latin1.txt").write_bytes("gr\u00fcn\n".encode() + b"gr\xfcn\n")
    raw = d / "raw"
    raw.mkdir()
    for split in ("train", "valid", "test"):
        (raw / f"{split}.en").write_text("a house .\n")
        (raw / f"{split}.de").write_text("ein Haus .\n")
    (raw / "valid.de").write_bytes(b"ein Haus\n\xff .\n")  # invalid UTF-8, line 2
    (raw / "valid.en").write_text("a house .\nb\n")
    (d / "t.words").write_text(WORDS)
    (d / "t.props").write_text(PROPS)
    srl = d / "srl"
    prepare_srl("conll2005", srl, d / "t", test=d / "t")
    props = (srl / "test.props").read_text()
    sentences = props.strip("\n").split("\n\n")
    for name, text in (("fewer", "\n\n".join(sentences[:-1]) + "\n\n"),
                       ("more", props + sentences[-1] + "\n\n"),
                       ("bom", "\ufeff" + props)):
        copy = d / f"srl_{name}"
        copy.mkdir()
        for f in srl.iterdir():
            (copy / f.name).write_bytes(f.read_bytes())
        (copy / "test.props").write_text(text, encoding="utf-8")
    latin = d / "srl_latin1"
    latin.mkdir()
    for f in srl.iterdir():
        (latin / f.name).write_bytes(f.read_bytes())
    (latin / "test.props").write_bytes(props.replace("leave", "l\xe9ave", 1).encode("latin-1"))
    mt_ckpt = train_tiny(tiny_bin, "transformer", d / "mt", 2)
    return {"d": d, "raw": raw, "srl": srl, "mt": mt_ckpt}


def srl_eval(data, checkpoint, d, subset="test", json_out=None):
    return ["evaluate_srl.py", "--data", data, "--checkpoint", checkpoint, "--subset", subset,
            "--gold-props", d / "g.props", "--pred-props", d / "p.props",
            "--json", json_out or d / "r.json"]


def prep_mt(f, *extra, dest=None):
    raw = f["raw"]
    return ["prepare_translation.py", "--src", "en", "--tgt", "de", "--train", raw / "train",
            "--valid", raw / "valid", "--test", raw / "test",
            "--dest", dest or f["d"] / "mt_bin", "--vocab-size", "30", *extra]


def run_plan(f, name, edit=None, text=None, out="runner_out"):
    """ssan-run-experiments (dry run) on a plan of the tiny corpus, edited as a dict (``edit``)
    or as text (``text``), written as ``d/NAME.json``."""
    plan = {"seeds": [1], "updates": {"base": 2, "more": 1}, "train": ["--max-tokens", "100"],
            "pairs": {"a": {"raw": str(f["raw"]), "src": "en", "tgt": "de"}},
            "systems": {"base": {"arch": "transformer", "criterion": "cross_entropy"},
                        "ssan": {"arch": "ssan_transformer", "criterion": "cross_entropy"}},
            "studies": [{"name": "s", "pairs": ["a"], "systems": ["base", "ssan"]}]}
    if edit is not None:
        edit(plan)
    path = f["d"] / f"{name}.json"
    path.write_text((text or (lambda t: t))(json.dumps(plan)))
    return ["run_experiments.py", "--plan", path, "--out", f["d"] / out, "--dry-run"]


def damaged_results(f, name, only, copied, damage, shared=None):
    """scripts/make_results.py --check on a copy of the committed archives (``copied``, paths
    under the project root) in ``d/NAME/main``, ``damage(root)`` done to it; the shared data
    beside the copy (a link) when the tables need it."""
    if shared is not None:
        require_shared(shared)
    root = f["d"] / name / "main"
    if root.parent.exists():  # built again for each call
        shutil.rmtree(root.parent)
    for relative in copied:
        source, target = ROOT / relative, root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copyfile(source, target)
    if shared is not None:
        (root.parent / "shared").symlink_to(SHARED_DATA.parent, target_is_directory=True)
    damage(root)
    return ["make_results.py", "--check", "--root", root, "--only", only]


def edit_json(path, edit):
    record = json.loads(path.read_text(encoding="utf-8"))
    edit(record)
    path.write_text(json.dumps(record), encoding="utf-8")  # NaN, Infinity as json writes them


def truncate(path, keep=0.5):
    text = path.read_text(encoding="utf-8")
    path.write_text(text[:int(len(text) * keep)], encoding="utf-8")


STABILITY_RUN = "examples/stability/experiments/start/builtin/baseline@1"


def stability(f, name, damage):
    """make_results.py on the stability page, ``damage(run)`` done to its first run."""
    return damaged_results(f, name, "examples/stability/RESULTS.md", ["examples/stability"],
                           lambda root: damage(root / STABILITY_RUN))


def set_bleu(value):
    return lambda run: edit_json(run / "test.json",
                                 lambda r: r["systems"][0].update(bleu=value))


def demo_record(f, name, damage):
    return damaged_results(f, name, "README.md", ["README.md", "examples/stability/demo_run.json",
                                                  "examples/significance"],
                           lambda root: damage(root / "examples/stability/demo_run.json"))


# (id, argv builder, what the message must name)
CASES = [
    ("prep_mt_coverage", lambda f: prep_mt(f, "--character-coverage", "2.0"),
     "argument --character-coverage: must be a number in [0.98, 1], got '2.0'"),
    ("prep_mt_threads", lambda f: prep_mt(f, "--threads", "0"),
     "argument --threads: must be an integer >= 1"),
    ("prep_mt_invalid_utf8", lambda f: prep_mt(f),
     "valid.de: line 2 is not valid UTF-8 (bytes b'\\xff' at byte offset 9)"),
    ("prep_mt_dest_is_file", lambda f: prep_mt(f, dest=f["d"] / "file"),
     "--dest {d}/file exists and is not a directory"),
    ("bleu_beam", lambda f: ["evaluate_bleu.py", "--ref", f["d"] / "file", "--hyp",
                             f"a={f['d'] / 'file'}", "--beam", "0"],
     "argument --beam: must be an integer >= 1, got '0'"),
    ("bleu_paired_n", lambda f: ["evaluate_bleu.py", "--ref", f["d"] / "file", "--hyp",
                                 f"a={f['d'] / 'file'}", "--paired-n", "-5"],
     "argument --paired-n: must be an integer >= 1, got '-5'"),
    ("prep_srl_dir", lambda f: ["prepare_srl.py", "--format", "conll2012", "--train", f["d"] / "dir",
                                "--dest", f["d"] / "o1"],
     "CoNLL-2012 file {d}/dir is a directory"),
    ("prep_srl_utf8", lambda f: ["prepare_srl.py", "--format", "conll2012", "--train",
                                 f["d"] / "latin1.txt", "--dest", f["d"] / "o2"],
     "latin1.txt: line 2 is not valid UTF-8"),
    ("prep_srl_dest_file", lambda f: ["prepare_srl.py", "--format", "conll2005", "--train",
                                      f["d"] / "t", "--dest", f["d"] / "file"],
     "--dest {d}/file exists and is not a directory"),
    ("srl_ckpt_dir", lambda f: srl_eval(f["srl"], f["d"] / "dir", f["d"]),
     "--checkpoint {d}/dir is a directory"),
    ("srl_ckpt_empty", lambda f: srl_eval(f["srl"], f["d"] / "empty.pt", f["d"]),
     "--checkpoint {d}/empty.pt is empty"),
    ("srl_ckpt_translation", lambda f: srl_eval(f["srl"], f["mt"], f["d"]),
     "expected a checkpoint of task 'srl', arch 'srl_tagger*', found task 'translation', "
     "arch 'transformer'"),
    ("srl_subset", lambda f: srl_eval(f["srl"], f["mt"], f["d"], subset="valid"),
     "--subset valid: {d}/srl has no prepared 'valid' split"),
    ("srl_gold_fewer", lambda f: srl_eval(f["d"] / "srl_fewer", f["mt"], f["d"]),
     "srl_fewer/test.props has 2 sentences, but the prepared 'test' split has 3"),
    ("srl_gold_more", lambda f: srl_eval(f["d"] / "srl_more", f["mt"], f["d"]),
     "srl_more/test.props has 4 sentences, but the prepared 'test' split has 3"),
    # a BOM is not an error: the props pass, the checkpoint is what is refused
    ("srl_gold_bom", lambda f: srl_eval(f["d"] / "srl_bom", f["d"] / "empty.pt", f["d"]),
     "--checkpoint {d}/empty.pt is empty"),
    ("srl_gold_utf8", lambda f: srl_eval(f["d"] / "srl_latin1", f["mt"], f["d"]),
     "srl_latin1/test.props: line 4 is not valid UTF-8"),
    ("srl_json_unwritable", lambda f: srl_eval(f["srl"], f["mt"], f["d"],
                                               json_out=f["d"] / "file" / "r.json"),
     "--json {d}/file/r.json: {d}/file is not a directory"),
    ("translate_input_dir", lambda f: ["translate.py", "--data", f["d"], "--checkpoint", f["mt"],
                                       "--input", f["d"] / "dir"],
     "argument --input: {d}/dir is a directory"),
    ("average_empty", lambda f: ["average_checkpoints.py", "--inputs", f["mt"], f["d"] / "empty.pt",
                                 "--output", f["d"] / "avg.pt"],
     "checkpoint {d}/empty.pt is empty"),
    ("warm_start_dir", lambda f: ["warm_start.py", "--base", f["d"] / "dir", "--arch",
                                  "ssan_transformer", "--out", f["d"] / "w.pt"],
     "--base {d}/dir is a directory"),
    ("warm_start_empty_data", lambda f: ["warm_start.py", "--base", f["mt"], "--arch",
                                         "ssan_transformer", "--out", f["d"] / "w.pt", "--data",
                                         f["d"] / "dir"],
     "--data {d}/dir is not a fairseq data-bin: no SPLIT.SRC-TGT.LANG.idx file gives the "
     "language pair; give the data-bin the base was trained on"),
    ("warm_start_data_no_dict", lambda f: ["warm_start.py", "--base", f["mt"], "--arch",
                                           "ssan_transformer", "--out", f["d"] / "w.pt", "--data",
                                           f["d"] / "no_dict"],
     "--data {d}/no_dict has no dict.src.txt or dict.tgt.txt"),
    ("corpus_size", lambda f: ["make_synthetic_corpus.py", "--out", f["d"] / "c", "--train", "0"],
     "argument --train: must be an integer >= 1, got '0'"),
    # ssan-run-experiments: plans that would train the wrong runs, or crash later
    ("runner_system_twice", lambda f: run_plan(f, "twice", text=lambda t: t.replace(
        '"ssan": {', '"ssan": {"arch": "x", "criterion": "y"}, "ssan": {')),
     "{d}/twice.json: systems has the key 'ssan' twice (JSON would keep only the last, "
     "silently)"),
    ("runner_study_twice", lambda f: run_plan(f, "study_twice", lambda p: p["studies"].append(
        p["studies"][0])), "{d}/study_twice.json: studies lists the study 's' twice"),
    ("runner_no_systems", lambda f: run_plan(f, "no_systems", lambda p: p["studies"][0].update(
        systems=[])), "{d}/no_systems.json: study 's' has no systems"),
    ("runner_archive_is_out", lambda f: run_plan(f, "archive_out", lambda p: p.update(
        archive=str(f["d"] / "runner_out"))),
     "--out {d}/runner_out and the plan's archive {d}/runner_out are the same path"),
    ("runner_archive_is_file", lambda f: run_plan(f, "archive_file", lambda p: p.update(
        archive=str(f["d"] / "file"))),
     "{d}/archive_file.json: archive {d}/file exists and is not a directory"),
    # scripts/make_results.py on a damaged copy of the committed archives
    ("results_demo_truncated", lambda f: demo_record(f, "demo_truncated", truncate),
     "{d}/demo_truncated/main/examples/stability/demo_run.json is not valid JSON ("),
    ("results_demo_minutes_nan", lambda f: demo_record(
        f, "demo_nan", lambda path: edit_json(path, lambda r: r.update(minutes=float("nan")))),
     "demo_run.json: key 'minutes' must be a finite number, found nan"),
    ("results_bleu_nan", lambda f: stability(f, "bleu_nan", set_bleu(float("nan"))),
     f"{STABILITY_RUN}/test.json: key 'systems.0.bleu' must be a finite number, found nan"),
    ("results_bleu_inf", lambda f: stability(f, "bleu_inf", set_bleu(float("inf"))),
     f"{STABILITY_RUN}/test.json: key 'systems.0.bleu' must be a finite number, found inf"),
    ("results_test_json_truncated", lambda f: stability(
        f, "test_truncated", lambda run: truncate(run / "test.json")),
     f"{STABILITY_RUN}/test.json is not valid JSON (Expecting"),
    ("results_curve_truncated", lambda f: stability(
        f, "curve_truncated", lambda run: truncate(run / "curve.jsonl", 0.3)),
     f"{STABILITY_RUN}/curve.jsonl:"),
    ("results_train_json_invalid", lambda f: stability(
        f, "train_invalid", lambda run: (run / "train.json").write_text("{'best_valid_loss': 2}")),
     f"{STABILITY_RUN}/train.json is not valid JSON (Expecting property name"),
    ("results_analysis_truncated", lambda f: damaged_results(
        f, "analysis", "examples/analysis/RESULTS.md",
        ["examples/analysis", "examples/translation/experiments"],
        lambda root: truncate(root / "examples/analysis/archive/probe_wrd.ssan.json")),
     "examples/analysis/archive/probe_wrd.ssan.json: not JSON ("),
    ("results_result_json_truncated", lambda f: damaged_results(
        f, "pairs", "examples/pairs/RESULTS.md", ["examples/pairs"],
        lambda root: truncate(root / "examples/pairs/experiments/entailment_scratch_san_s1/"
                                     "result.json"), shared="nli/sick/valid.tsv"),
     "entailment_scratch_san_s1/result.json is not valid JSON ("),
]


# run as real processes (the exit status and streams of the interpreter itself); the other
# cases call the script's main(argv) in-process, which is the same code without seconds of
# torch/fairseq import per case
SUBPROCESS_CASES = {"prep_mt_invalid_utf8", "srl_ckpt_translation", "translate_input_dir",
                    "corpus_size", "runner_system_twice", "results_demo_truncated"}


def run_script(argv):
    cmd = [sys.executable, *script_command(argv[0]), *map(str, argv[1:])]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)


def run_in_process(argv, capsys, monkeypatch):
    """main(argv) of the script, as its process would run it: (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", [str(script_file(argv[0]))])  # argparse's prog
    module = load_script(argv[0][:-len(".py")])
    try:
        code = module.main([str(a) for a in argv[1:]])
    except SystemExit as exit_info:  # argparse
        code = exit_info.code
    out, err = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


@pytest.fixture(scope="module")
def subprocess_results(files):
    """The subprocess cases, two at a time (each mostly imports torch and fairseq)."""
    cases = [c for c in CASES if c[0] in SUBPROCESS_CASES]
    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = pool.map(lambda case: run_script(case[1](files)), cases)
        return dict(zip((c[0] for c in cases), procs))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gives_one_line_and_exit_2(case, subprocess_results, files, capsys,
                                             monkeypatch):
    name, argv, expected = case
    script = argv(files)[0]
    if name in SUBPROCESS_CASES:
        proc = subprocess_results[name]
    else:
        proc = run_in_process(argv(files), capsys, monkeypatch)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    messages = [x for x in proc.stderr.splitlines() if x.strip() and not LOG_LINE.match(x)]
    assert len(messages) == 1, proc.stderr[-3000:]
    assert messages[0].startswith(f"{script}: error: "), messages
    assert expected.format(d=files["d"]) in messages[0], messages[0]
    assert proc.returncode == 2, proc.stderr[-2000:]


@pytest.mark.parametrize("script,argv,expected", [
    ("prepare_translation", ["--workers", "0"], "argument --workers: must be an integer >= 1"),
    ("evaluate_bleu", ["--beam", "-1"], "argument --beam: must be an integer >= 1, got '-1'"),
    ("evaluate_bleu", ["--max-len-b", "-5"], "argument --max-len-b: must be an integer >= 0"),
    ("evaluate_bleu", ["--lenpen", "nan"], "argument --lenpen: must be a finite number, got 'nan'"),
    ("translate", ["--max-len-a", "-1"], "argument --max-len-a: must be a number >= 0"),
    ("evaluate_srl", ["--batch-size", "0"], "argument --batch-size: must be an integer >= 1"),
])
def test_out_of_range_options_in_process(script, argv, expected, capsys):
    module = load_script(script)
    required = {"prepare_translation": ["--src", "a", "--tgt", "b", "--train", "x", "--valid",
                                        "x", "--test", "x", "--dest", "x", "--vocab-size", "8"],
                "evaluate_bleu": ["--ref", "x", "--hyp", "a=x"],
                "translate": ["--data", "x", "--checkpoint", "x"],
                "evaluate_srl": ["--data", "x", "--checkpoint", "x", "--gold-props", "x",
                                 "--pred-props", "x", "--json", "x"]}[script]
    entry = module.parse_args if hasattr(module, "parse_args") else module.main
    with pytest.raises(SystemExit) as exit_info:
        entry(required + argv)
    assert exit_info.value.code == 2
    err = message_lines(capsys.readouterr().err)
    assert len(err) == 1 and expected in err[0], err


def test_prepare_srl_strips_a_byte_order_mark(tmp_path):
    """A BOM at the start of a CoNLL-2012 file is dropped, not read as a column."""
    row = "doc 0 {i} {w} NN * {lemma} {fs} - - * {arg} -\n"
    text = (row.format(i=0, w="Rain", lemma="-", fs="-", arg="(A0*)") +
            row.format(i=1, w="fell", lemma="fall", fs="01", arg="(V*)"))
    (tmp_path / "a_conll").write_text("\ufeff#begin document (x); part 000\n" + text, "utf-8")
    proc = run_script(["prepare_srl.py", "--format", "conll2012", "--train",
                       tmp_path / "a_conll", "--dest", tmp_path / "bin"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "train: 1 sentences, 1 instances" in proc.stdout


# ---------------------------------------------------------------- sentences longer than the positions

@pytest.fixture(scope="module")
def model_with_short_positions(tiny_bin, tmp_path_factory):
    """An SSAN whose encoder takes at most 12 source positions."""
    save = tmp_path_factory.mktemp("short_positions")
    run_cli("fairseq-train", tiny_bin, "--user-dir", PLUGIN_DIR, "--cpu", *TINY_MODEL, "--arch", "ssan_transformer",
            "--criterion", "selective_label_smoothed_cross_entropy", "--optimizer", "adam", "--lr", "1e-3",
            "--max-tokens", "300", "--max-update", "2", "--save-dir", save, "--disable-validation",
            "--max-source-positions", "12", "--max-target-positions", "64", "--skip-invalid-size-inputs-valid-test",
            "--no-epoch-checkpoints", "--no-progress-bar")
    return save / "checkpoint_last.pt"


def write_bin(tmp_path, tiny_bin, sources):
    """A test split with the given source lines (targets: one word), in tiny_bin's dictionary."""
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "test.src").write_text("".join(s + "\n" for s in sources))
    (raw / "test.tgt").write_text("".join("kane\n" for _ in sources))
    dest = tmp_path / "bin"
    run_cli("fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--testpref", raw / "test",
            "--destdir", dest, "--srcdict", tiny_bin / "dict.src.txt", "--tgtdict", tiny_bin / "dict.tgt.txt",
            "--workers", 1)
    return dest


def test_long_sentences_are_refused_or_skipped_with_a_count_never_truncated(
        model_with_short_positions, tiny_bin, tmp_path):
    """fairseq-generate itself: refuses the run, or skips with a count; and
    translation.decode finds the same sentence before decoding, and decodes it only when told."""
    from ssan_plugin.translation.decode import GenerateOptions, decode, too_long_sentences
    from ssan_plugin.translation.textio import PipelineError

    words = "kane tupego pegotu kahaha".split()
    sources = [" ".join(words[:3]), " ".join(words * 5), " ".join(words[:2]), ""]  # 3, 20 (> 12), 2, 0 words
    data = write_bin(tmp_path, tiny_bin, sources)
    gen = ["fairseq-generate", data, "--user-dir", PLUGIN_DIR, "--cpu", "--path", model_with_short_positions,
           "--gen-subset", "test", "--beam", 1, "--max-len-b", 5, "--batch-size", 4,
           "--required-batch-size-multiple", 1]
    # default: fairseq refuses the whole run, naming the sentence and the limit, in one line
    proc = run_cli(*gen, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = message_lines(proc.stderr)
    assert len(lines) == 1 and re.search(r"^fairseq-generate: error: Size of sample #1 is invalid "
                                         r".*max_positions=\(12, 64\)", lines[0]), proc.stderr[-2000:]
    # fairseq-interactive on a line too long: the same line, not fairseq's traceback
    proc = run_cli("fairseq-interactive", tiny_bin, "--user-dir", PLUGIN_DIR, "--cpu",
                   "--path", model_with_short_positions, "--source-lang", "src", "--target-lang", "tgt",
                   "--beam", 1, input=sources[1] + "\n", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert re.search(r"^fairseq-interactive: error: Size of sample #0 is invalid",
                     message_lines(proc.stderr)[-1]), proc.stderr[-2000:]
    # --skip-invalid-size-inputs-valid-test: skipped with a count and a warning
    proc = run_cli(*gen, "--skip-invalid-size-inputs-valid-test")
    assert re.search(r"1 samples have invalid sizes and will be skipped, "
                     r"max_positions=\(12, 64\), first few sample ids=\[1\]", proc.stderr), proc.stderr[-2000:]
    ids = sorted(int(i) for i in re.findall(r"^H-(\d+)\t", proc.stdout, re.M))
    assert ids == [0, 2, 3]

    positions, found = too_long_sentences(data, model_with_short_positions, "src", "tgt", "test")
    assert positions == (12, 64) and found == [(1, "source", 21)]
    opts = dict(beam=1, max_len_b=5, batch_size=4, cpu=True)
    with pytest.raises(PipelineError, match=r"1 sentence\(s\) of 'test' longer than the model's "
                                            r"positions .*line 2 \(source, 21 tokens\)"):
        decode(data, model_with_short_positions, "src", "tgt", "test", 4, GenerateOptions(**opts))
    empty = decode(data, model_with_short_positions, "src", "tgt", "test", 4,
                   GenerateOptions(too_long="empty", **opts))
    assert empty.pieces[1] == "" and len(empty.pieces) == 4
    truncated = decode(data, model_with_short_positions, "src", "tgt", "test", 4,
                       GenerateOptions(too_long="truncate", **opts))
    assert "--truncate-source" in truncated.command and len(truncated.pieces) == 4
    assert re.search(r"^S-1\t(\S+ ){10}\S+$", truncated.log, re.M)  # 11 pieces + </s> = 12
