"""scripts/demo.py end to end on a tiny built-in corpus: a quiet screen, the phase logs, the
report and its figures, reuse on a second run; a failing phase; --verbose; its input check."""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli
from helpers.translation_testlib import load_script

DEMO = ROOT / "scripts" / "demo.py"
TINY = ["--train-size", 300, "--valid-size", 20, "--test-size", 12, "--max-update", 4,
        "--vocab-size", 200]
PNG = b"\x89PNG\r\n\x1a\n"
FAIRSEQ_LOG_LINE = re.compile(r"\| (INFO|WARNING|DEBUG) \||^(INFO|WARNING|DEBUG):")


def demo(*args, check=True):
    """The demo as a user runs it: warnings not silenced by the environment."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.pop("PYTHONWARNINGS", None)
    proc = subprocess.run([sys.executable, str(DEMO), *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"demo failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def screen_lines(proc):
    return (proc.stdout + proc.stderr).splitlines()


def test_demo_quiet_screen_logs_report_and_reuse(tmp_path):
    out = tmp_path / "demo"
    proc = demo("--out", out, *TINY)
    lines = screen_lines(proc)
    assert len(lines) < 40, "\n".join(lines)
    assert not [l for l in lines if FAIRSEQ_LOG_LINE.search(l) or "Warning" in l], "\n".join(lines)
    for phase in ("corpus", "preparation", "train baseline", "train ssan", "decode baseline",
                  "decode ssan", "scoring", "selection"):
        assert any(l.startswith(phase) and "100%" in l for l in lines), phase
    assert any(l.startswith("train ssan") and "4/4 updates" in l for l in lines)
    assert any(l.startswith("decode ssan") and "12/12 sentences" in l for l in lines)

    # the table
    table = proc.stdout[proc.stdout.rindex("| system | BLEU | Δ BLEU"):]
    rows = [l for l in table.splitlines() if l.startswith(("| baseline", "| ssan"))]
    base, ssan = (row.split("|")[1:-1] for row in rows)
    assert base[4].strip() == "1 (all pairs)" and 0 <= float(ssan[4]) <= 1
    assert re.match(r" [+-]\d+\.\d\d \(\d\.\d{3}\) ", ssan[2])  # p of this seed's sentences
    assert "Δ BLEU (p, sentences, this seed)" in table
    assert int(ssan[6].strip().replace(",", "")) > int(base[6].strip().replace(",", ""))
    # the content/filler figure, from the generator's labels
    m = re.search(r"SSAN selects (\d\.\d\d) of content-word keys and (\d\.\d\d) of filler keys", proc.stdout)
    assert m, proc.stdout
    selection = json.loads((out / "selection.json").read_text())
    assert f"{selection['rates']['all']['content']:.2f}" == m.group(1)
    assert set(selection["rates"]["layers"]) == {"0", "1", "2"}
    # the generator's labels: one per source word
    for split in ("train", "valid", "test"):
        src = (out / "raw" / f"{split}.src").read_text().splitlines()
        labels = (out / "raw" / f"{split}.src.labels").read_text().splitlines()
        assert [len(l.split()) for l in src] == [len(l.split()) for l in labels]

    # phase logs hold the children's output
    logs = out / "logs"
    for name in ("corpus", "prepare", "train_baseline", "train_ssan", "decode_baseline",
                 "decode_ssan", "score", "selection"):
        assert (logs / f"{name}.log").is_file(), name
    train_log = (logs / "train_ssan.log").read_text()
    assert "fairseq-train" in train_log.splitlines()[0] and "| valid | {" in train_log
    assert "Warning" not in train_log  # fairseq's stack warnings are filtered at the source
    assert "H-0\t" in (logs / "decode_ssan.log").read_text()

    # the report and its figures
    report = (out / "report.md").read_text()
    assert report.count("| ssan |") == 1
    assert len(re.findall(r"^OMP_NUM_THREADS=\d+ fairseq-train \S+ --user-dir \S+ .*--arch "
                          r"(transformer_small|ssan_transformer_small) ", report, re.M)) == 2
    assert len(re.findall(r"^OMP_NUM_THREADS=\d+ fairseq-generate .*--path \S+checkpoint_best\.pt .*"
                          r"--required-batch-size-multiple 1", report, re.M)) == 2
    for figure in re.findall(r"!\[[^]]*\]\(([^)]+)\)", report):
        assert (out / figure).read_bytes()[:8] == PNG, figure
    assert "training_curves.png" in report and "selection_heatmap.png" in report
    # the commands name the project's files as typed from its root, --hyp NAME=PATH included
    assert f"{ROOT}/" not in report
    assert re.search(r"^ssan-evaluate-bleu .*--hyp baseline=\S+baseline\.test\.tgt", report, re.M)
    assert "report: " in proc.stdout and "report.md" in proc.stdout.splitlines()[-2]

    # a second run reuses everything that is done
    again = demo("--out", out, *TINY)
    for phase in ("corpus", "preparation", "train baseline", "train ssan", "decode baseline", "decode ssan"):
        assert any(l.startswith(phase) and "reused" in l for l in screen_lines(again)), phase
    assert again.stdout[again.stdout.rindex("| system"):].split("\n\n")[0] == table.split("\n\n")[0]


def broken_corpus(tmp_path):
    data = tmp_path / "raw"
    data.mkdir()
    for split in ("train", "valid", "test"):
        (data / f"{split}.en").write_text("a b\nc d\ne f\n")
        (data / f"{split}.de").write_text("a b\nc d\n" + ("e f\n" if split != "train" else ""))
    return data


def test_demo_failing_phase_shows_its_log_tail_and_exits_nonzero(tmp_path):
    data = broken_corpus(tmp_path)
    proc = demo("--out", tmp_path / "out", "--data", data, "--src", "en", "--tgt", "de", check=False)
    assert proc.returncode != 0
    assert "preparation failed (exit status 2)" in proc.stderr
    assert "line counts differ" in proc.stderr  # the log's tail
    log = tmp_path / "out" / "logs" / "prepare.log"
    assert str(log) in proc.stderr and "line counts differ" in log.read_text()
    assert len(screen_lines(proc)) < 45
    assert not (tmp_path / "out" / "checkpoints").exists()


def test_demo_verbose_streams_the_children(tmp_path):
    data = broken_corpus(tmp_path)
    proc = demo("--out", tmp_path / "out", "--data", data, "--src", "en", "--tgt", "de",
                "--verbose", check=False)
    assert proc.returncode != 0
    assert "[preparation] prepare_translation.py: error: train split: line counts differ" in proc.stdout
    assert "== preparation: ssan-prepare-translation" in proc.stdout


def test_demo_refuses_incomplete_data(tmp_path):
    (tmp_path / "train.en").write_text("a\n")
    proc = run_cli(DEMO, "--out", tmp_path / "out", "--data", tmp_path, "--src", "en", "--tgt", "de",
                   check=False)
    assert proc.returncode != 0
    assert "missing:" in proc.stderr and "train.de" in proc.stderr
    assert not (tmp_path / "out" / "checkpoints").exists()


def test_demo_never_writes_into_or_deletes_a_folder_it_did_not_make(tmp_path):
    """--out on the user's own folder, with or without --fresh, is refused before anything is
    written (no marker, nothing deleted); a file as --out is refused; bad --data stops before
    the output folder is even made."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    for extra in ([], ["--fresh"]):
        proc = demo("--out", mine, *extra, *TINY, check=False)
        assert proc.returncode != 0 and "was not made by the demo" in proc.stderr
        assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
        assert (mine / "notes.txt").read_text() == "keep me"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    proc = demo("--out", a_file, *TINY, check=False)
    assert proc.returncode != 0 and "is a file" in proc.stderr and a_file.read_text() == "x"
    new = tmp_path / "new"
    proc = demo("--out", new, "--data", tmp_path / "nowhere", check=False)
    assert proc.returncode != 0 and "--data must hold" in proc.stderr and not new.exists()


def test_demo_never_overwrites_a_data_bin_it_did_not_make(tmp_path):
    """--data-bin on the user's own data-bin is refused in one line before anything is written:
    its manifest, dictionaries and sentencepiece model stay, OUT is not made."""
    mine = tmp_path / "mine"
    mine.mkdir()
    files = {"manifest.json": "{}\n", "dict.en.txt": "a 1\n", "spm.model": "model"}
    for name, text in files.items():
        (mine / name).write_text(text)
    out = tmp_path / "out"
    proc = demo("--out", out, "--data-bin", mine, *TINY, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (f"demo: --data-bin {mine} is not empty and was not made by the demo; "
                           f"give a new or empty directory, or --overwrite to replace its "
                           f"data-bin files (nothing was written)\n")
    assert not out.exists() and {p.name: p.read_text() for p in mine.iterdir()} == files


@pytest.mark.parametrize("case, refusal", [
    ("new", None), ("empty", None),
    ("inside OUT", None),  # OUT/NAME: OUT is checked to be the demo's first
    ("marked", None),  # a data-bin the demo prepared outside OUT
    ("recorded", None),  # OUT's recorded preparation wrote it (before the mark existed)
    ("prepared", "is not empty and was not made by the demo"),  # the user's ssan-prepare-translation
    ("plain", "is not empty and was not made by the demo"),  # the user's fairseq-preprocess
    ("prepared --overwrite", None),
    ("a file", "is a file"),
])
def test_which_data_bins_the_demo_writes(tmp_path, case, refusal):
    demo_script = load_script("demo")
    out = tmp_path / "out"
    out.mkdir()
    (out / demo_script.MARKER).touch()
    data_bin = out / "bin" if case == "inside OUT" else tmp_path / "bin"
    if case == "a file":
        data_bin.write_text("x")
    elif case != "new":
        data_bin.mkdir()
        names = {"empty": [], "marked": ["manifest.json", demo_script.DATA_BIN_MARKER],
                 "plain": ["dict.en.txt", "train.en-de.en.bin", "train.en-de.en.idx"]}
        for name in names.get(case, ["manifest.json", "dict.en.txt", "spm.model"]):
            (data_bin / name).write_text("x")
    if case == "recorded":
        demo_script.State(out).put("prepare", {"cmd": ["prepare", "--dest", str(data_bin)]})
    check = lambda: demo_script.check_data_bin(data_bin, out, case.endswith("--overwrite"))
    if refusal is None:
        check()
    else:
        with pytest.raises(SystemExit) as err:
            check()
        assert str(err.value).startswith(f"demo: --data-bin {data_bin} {refusal}")
