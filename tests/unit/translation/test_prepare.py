"""ssan_plugin/translation/prepare.py (through ssan-prepare-translation's main, in-process):
refusals of missing files, mismatched line counts, an empty training split and non-UTF-8 input,
before anything is written. (Full preparation runs: tests/e2e/test_translation_prepare.py.)"""

from helpers.translation_testlib import call_prepare, small_corpus


def test_prepare_refuses_missing_files(tmp_path, capsys):
    raw = tmp_path / "raw"
    small_corpus(raw)
    (raw / "valid.ro").unlink()
    code, dest = call_prepare(tmp_path, raw)
    err = capsys.readouterr().err
    assert code != 0 and f"missing input file(s): {raw / 'valid.ro'}" in err
    assert not dest.exists()


def test_prepare_refuses_mismatched_line_counts(tmp_path, capsys):
    raw = tmp_path / "raw"
    small_corpus(raw)
    with open(raw / "test.en", "a", encoding="utf-8") as f:
        f.write("one more\n")
    code, dest = call_prepare(tmp_path, raw)
    err = capsys.readouterr().err
    assert code != 0
    assert f"test split: line counts differ: {raw / 'test.en'} has 4 lines, " \
           f"{raw / 'test.ro'} has 3" in err
    assert not dest.exists()


def test_prepare_refuses_empty_training_split(tmp_path, capsys):
    raw = tmp_path / "raw"
    small_corpus(raw)
    (raw / "train.en").write_text("")
    (raw / "train.ro").write_text("")
    code, dest = call_prepare(tmp_path, raw)
    assert code != 0 and "train split is empty" in capsys.readouterr().err
    assert not dest.exists()
    # a training split whose every pair has an empty side is refused as well
    (raw / "train.en").write_text("a\n\n")
    (raw / "train.ro").write_text("\nb\n")
    code, dest = call_prepare(tmp_path, raw)
    assert code != 0 and "no pair with both sides non-empty" in capsys.readouterr().err


def test_prepare_refuses_non_utf8(tmp_path, capsys):
    raw = tmp_path / "raw"
    small_corpus(raw)
    with open(raw / "train.ro", "ab") as f:
        f.write(b"\xff\xfe broken\n")
    with open(raw / "train.en", "a", encoding="utf-8") as f:
        f.write("broken\n")
    code, dest = call_prepare(tmp_path, raw)
    assert code != 0 and f"{raw / 'train.ro'}: line 41 is not valid UTF-8" in \
        capsys.readouterr().err
    assert not dest.exists()
