"""Bad data in fairseq-generate: sentences longer than the model's maximum positions and empty
source lines. (Bad options: tests/unit/models/test_variant_transformer.py, in-process, and
tests/e2e/test_cli.py; non-UTF-8 input to the preparation scripts:
tests/unit/translation/test_prepare.py.)
"""

import re

import pytest

import ssan_plugin  # noqa: F401
from conftest import PLUGIN_DIR, TINY_MODEL, run_cli


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
    words = "kane tupego pegotu kahaha".split()
    sources = [" ".join(words[:3]), " ".join(words * 5), " ".join(words[:2]), ""]  # 3, 20 (> 12), 2, 0 words
    data = write_bin(tmp_path, tiny_bin, sources)
    gen = ["fairseq-generate", data, "--user-dir", PLUGIN_DIR, "--cpu", "--path", model_with_short_positions,
           "--gen-subset", "test", "--beam", 1, "--max-len-b", 5, "--batch-size", 4,
           "--required-batch-size-multiple", 1]
    # default: fairseq refuses the whole run, naming the sentence and the limit
    proc = run_cli(*gen, check=False)
    assert proc.returncode != 0
    assert re.search(r"Size of sample #1 is invalid .*max_positions=\(12, 64\)", proc.stderr), proc.stderr[-2000:]
    # --skip-invalid-size-inputs-valid-test: skipped with a count and a warning; the empty source
    # line (just </s>) is translated; nothing is truncated to fit
    proc = run_cli(*gen, "--skip-invalid-size-inputs-valid-test")
    assert re.search(r"WARNING\S* ?.*1 samples have invalid sizes and will be skipped, "
                     r"max_positions=\(12, 64\), first few sample ids=\[1\]", proc.stderr), proc.stderr[-2000:]
    ids = sorted(int(i) for i in re.findall(r"^H-(\d+)\t", proc.stdout, re.M))
    assert ids == [0, 2, 3]
    assert re.search(r"^S-3\t$", proc.stdout, re.M)  # the empty line, decoded as such
    assert "Translated 3 sentences" in proc.stderr  # the total says 3, not "3 of 4": the warning is the count
