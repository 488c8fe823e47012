"""ssan-prepare-translation end to end on a tiny corpus: the exit status of the command
line, and training-only filtering with the manifest (sentencepiece + fairseq-preprocess)."""

import json
from pathlib import Path

from helpers.translation_testlib import call_prepare, lines, prepare, small_corpus


def test_prepare_cli_exit_status_is_nonzero(tmp_path):
    raw = tmp_path / "raw"
    small_corpus(raw)
    (raw / "train.en").unlink()
    result = prepare("en", "ro", raw, tmp_path / "bin", 60, check=False)
    assert result.returncode != 0
    assert "missing input file(s)" in result.stderr and "Traceback" not in result.stderr


def test_prepare_filters_training_split_only_and_writes_manifest(tmp_path):
    raw = tmp_path / "raw"
    long_side = " ".join(["house"] * 80)  # >= 80 pieces
    bad = [("", "Gol."), ("Empty target.", ""), (long_side, long_side),
           ("A.", " ".join(["verde"] * 15))]  # <= 3 pieces vs 15..45 pieces
    small_corpus(raw, bad_train=bad)
    code, dest = call_prepare(tmp_path, raw, "--max-len", "60", "--ratio", "3",
                              "--romanian-remove-diacritics")
    assert code == 0
    manifest = json.loads((dest / "manifest.json").read_text())
    train = manifest["counts"]["train"]
    assert train == {"input": 44, "dropped_empty": 2, "dropped_too_long": 1,
                     "dropped_ratio": 1, "kept": 40}
    assert manifest["counts"]["test"]["kept"] == 3  # the empty test source line is kept
    assert manifest["counts"]["test"]["empty_side_kept"] == 1
    # valid/test: every line, in order, normalised (cedilla -> comma, no diacritics, Moses)
    assert lines(dest / "text" / "test.norm.ro") == ["Stiinta casei .", "Ceva .", "O casa verde ."]
    assert lines(dest / "text" / "test.norm.en") == ["Ştiinţa house .", "", "A green house ."]
    assert len(lines(dest / "text" / "train.spm.en")) == 40
    assert manifest["languages"]["ro"]["moses_tokenized"]
    assert manifest["languages"]["ro"]["romanian_remove_diacritics"]
    assert manifest["inputs"]["train"]["en"]["sha256"] and \
        Path(manifest["sentencepiece"]["model"]).is_file()
    assert "--joined-dictionary" in manifest["commands"]["fairseq_preprocess"]
    assert (dest / "dict.en.txt").read_text() == (dest / "dict.ro.txt").read_text()
    # a second run into the same --dest is refused instead of mixing two corpora
    code, _ = call_prepare(tmp_path, raw)
    assert code != 0
