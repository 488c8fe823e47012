"""The three real pairs in ../shared/data/mt (skipped when absent): a slice of each is prepared
through its per-setting wrapper script, a tiny transformer and ssan_transformer are trained for
a few updates, and evaluate_bleu.py decodes and scores the sliced test set. Data is copied to a
temporary directory, never into the repository."""

import pytest
from conftest import require_shared
from helpers.translation_testlib import ROOT, evaluate, lines, read_json, run, train_tiny

PAIRS = {
    # pair: (target, wrapper, checks on the manifest's language handling)
    "en-de": ("de", "prepare_wmt14_en_de.sh",
              {"en": dict(kind="moses", segmented=False, moses_tokenized=True),
               "de": dict(kind="moses", segmented=False, moses_tokenized=True)}),
    "en-ro": ("ro", "prepare_wmt16_en_ro.sh",
              {"en": dict(kind="moses", segmented=False, moses_tokenized=True),
               "ro": dict(kind="moses", segmented=False, moses_tokenized=True)}),
    "en-ja": ("ja", "prepare_wat_en_ja.sh",
              {"en": dict(kind="moses", segmented=True, moses_tokenized=False),
               "ja": dict(kind="cjk", segmented=True, moses_tokenized=False)}),
}
N_TRAIN, N_EVAL = 2000, 60


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_pair_prepares_trains_and_evaluates(pair, tmp_path):
    source = require_shared(f"mt/{pair}")
    tgt, wrapper, expected_languages = PAIRS[pair]
    raw = tmp_path / "raw"
    raw.mkdir()
    for split, n in (("train", N_TRAIN), ("valid", N_EVAL), ("test", N_EVAL)):
        for lang in ("en", tgt):
            text = lines(source / f"{split}.{lang}")[:n]
            (raw / f"{split}.{lang}").write_text("".join(x + "\n" for x in text), "utf-8")
    data = tmp_path / "bin"
    run(["bash", ROOT / "scripts" / wrapper, "--raw-dir", raw, "--dest", data,
         "--vocab-size", 1000])
    manifest = read_json(data / "manifest.json")
    assert manifest["counts"]["test"]["kept"] == N_EVAL
    assert manifest["counts"]["valid"]["kept"] == N_EVAL
    assert 0.9 * N_TRAIN <= manifest["counts"]["train"]["kept"] <= N_TRAIN
    for lang, expected in expected_languages.items():
        got = manifest["languages"][lang]
        assert {k: got[k] for k in expected} == expected, (lang, got)
    if tgt == "ro":  # no cedilla forms survive in what the model sees
        assert not any(ch in "\u015e\u015f\u0162\u0163"
                       for line in lines(data / "text" / "test.norm.ro") for ch in line)

    base = train_tiny(data, "transformer", tmp_path / "ck_base", updates=10)
    ssan = train_tiny(data, "ssan_transformer", tmp_path / "ck_ssan", updates=10)
    out = tmp_path / "eval"
    out.mkdir()
    evaluate(data, raw / f"test.{tgt}", [("system", "base", base), ("system", "ssan", ssan)],
             out / "result.json", "--beam", 1, "--max-len-b", 3)
    report = read_json(out / "result.json")
    assert [s["name"] for s in report["systems"]] == ["base", "ssan"]
    for s in report["systems"]:
        assert s["n"] == N_EVAL and len(lines(s["hyp_file"])) == N_EVAL
        assert 0 <= s["bleu"] <= 100 and 0 <= s["chrf"] <= 100
    assert "p_value" in report["systems"][1]
    if tgt == "ja":  # Japanese is scored on characters unless MeCab is installed
        assert "tok:char" in report["signature"] or "tok:ja-mecab" in report["signature"]
    else:
        assert "tok:13a" in report["signature"]
