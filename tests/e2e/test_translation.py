"""End to end on the synthetic corpus: prepare_translation.py -> tiny transformer and
ssan_transformer (20 updates) -> evaluate_bleu.py; plus evaluate's refusals (wrong reference
length, checkpoint on another dictionary, short hypothesis file) and the dropped-batch guard.

The test set has 37 sentences on purpose: not a multiple of 8 (fairseq's dropped last batch).
"""

import shutil
from pathlib import Path

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU, CHRF
from helpers.translation_testlib import (PY, SCRIPTS, evaluate, generate_sources, lines, load_script,
                                         prepare, read_json, run, train_tiny)

N_TEST = 37
EVALUATE = load_script("evaluate_bleu")


def refused(capsys, data, ref, systems, json_out):
    """Run evaluate_bleu.main in-process (no fairseq start-up); return its stderr, asserting
    a non-zero exit status."""
    argv = ["--data", str(data), "--ref", str(ref), "--json", str(json_out)]
    for kind, name, path in systems:
        argv += [f"--{kind}", f"{name}={path}"]
    code = EVALUATE.main(argv)
    err = capsys.readouterr().err
    assert code != 0, err
    return err


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("translation_e2e")
    raw = tmp / "raw"
    run([PY, SCRIPTS / "make_synthetic_corpus.py", "--out", raw, "--train", 300,
         "--valid", 40, "--test", N_TEST])
    data = tmp / "bin"
    prepare("src", "tgt", raw, data, 100)
    other = tmp / "bin_other"  # same corpus, another (smaller) vocabulary
    prepare("src", "tgt", raw, other, 40)
    base = train_tiny(data, "transformer", tmp / "ck_base")
    ssan = train_tiny(data, "ssan_transformer", tmp / "ck_ssan")
    # a third system of detokenised hypotheses with a known, non-trivial BLEU
    ref = raw / "test.tgt"
    noisy = [(" ".join(x.split()[:-1]) if i % 3 else x) for i, x in enumerate(lines(ref))]
    (tmp / "noisy.txt").write_text("".join(x + "\n" for x in noisy), "utf-8")
    out = tmp / "eval"
    out.mkdir()
    result = evaluate(data, ref, [("system", "base", base), ("system", "ssan", ssan),
                                  ("hyp", "noisy", tmp / "noisy.txt")], out / "result.json")
    return dict(tmp=tmp, raw=raw, data=data, other=other, base=base, ssan=ssan, ref=ref,
                out=out, result=result, report=read_json(out / "result.json"))


def test_json_schema(setup):
    report = setup["report"]
    assert set(report) == {"signature", "significance", "systems", "source"}
    assert report["source"] == str((setup["raw"] / "test.src").resolve())  # the manifest's raw input
    assert report["significance"]["test"] == "paired bootstrap"
    assert "tok:13a" in report["signature"] and "version:2.6.0" in report["signature"]
    assert [s["name"] for s in report["systems"]] == ["base", "ssan", "noisy"]
    for i, s in enumerate(report["systems"]):
        required = {"name", "bleu", "chrf", "tok_bleu", "n", "by_length"} | (
            {"delta", "p_value", "compared_with", "identical"} if i else set())
        assert required <= set(s), s
        assert set(s) - required <= {"bleu_ci", "sent_per_s", "hyp_file"}
        assert s["n"] == N_TEST
        if i:
            assert s["delta"] == pytest.approx(s["bleu"] - report["systems"][0]["bleu"])
            assert 0 <= s["p_value"] <= 1
        else:
            assert "delta" not in s and "p_value" not in s
    assert report["systems"][0]["sent_per_s"] > 0 and report["systems"][1]["sent_per_s"] > 0
    assert report["systems"][2]["sent_per_s"] is None


def test_markdown_table_printed(setup):
    out = setup["result"].stdout
    assert "| system | BLEU ± 95% CI | Δ | vs | p-value | chrF |" in out
    for name in ("base", "ssan", "noisy"):
        assert f"| {name} |" in out
    assert "BLEU signature: nrefs:1|case:mixed|eff:no|tok:13a" in out
    assert "significance: paired bootstrap (two-sided, ties counted" in out
    assert "BLEU by length: " in out and "1-10 words" in out


def test_every_test_sentence_translated_in_corpus_order(setup):
    data, out = setup["data"], setup["out"]
    expected_sources = lines(data / "text" / "test.spm.src")
    for name in ("base", "ssan"):
        assert len(lines(out / f"{name}.test.tgt")) == N_TEST
        log = out / f"{name}.test.generate.log"
        sources = generate_sources(log)
        assert sorted(sources) == list(range(N_TEST))
        # fairseq numbers sentences in corpus order; the source it decoded for id i is line i
        for i, src in sources.items():
            assert src.split() == expected_sources[i].split() or "<unk>" in src, i


def test_scores_equal_sacrebleu_on_the_same_files(setup):
    ref = setup["ref"]
    refs = lines(ref)
    for s in setup["report"]["systems"]:
        hyps = lines(s["hyp_file"])
        assert s["bleu"] == BLEU().corpus_score(hyps, [refs]).score
        assert s["chrf"] == CHRF().corpus_score(hyps, [refs]).score
        # synthetic text is whitespace-segmented: tokenised BLEU = tokenize none
        assert s["tok_bleu"] == BLEU(tokenize="none", force=True).corpus_score(hyps, [refs]).score
        cli = run([PY, "-m", "sacrebleu", ref, "-i", s["hyp_file"], "-m", "bleu", "-b", "-w", 4])
        assert float(cli.stdout.strip()) == pytest.approx(s["bleu"], abs=1e-4)
    noisy = setup["report"]["systems"][2]
    assert 20 < noisy["bleu"] < 100  # a real, non-degenerate score went through the same path
    assert noisy["bleu"] == pytest.approx(sacrebleu.corpus_bleu(lines(noisy["hyp_file"]),
                                                                [refs]).score)


def test_reference_with_wrong_line_count_refused_before_decoding(setup, tmp_path, capsys):
    short_ref = tmp_path / "ref36"
    short_ref.write_text("".join(x + "\n" for x in lines(setup["ref"])[:-1]), "utf-8")
    err = refused(capsys, setup["data"], short_ref, [("system", "base", setup["base"])],
                  tmp_path / "r.json")
    assert f"reference {short_ref} has 36 lines, but the test set" in err
    assert "has 37 sentences" in err
    assert not list(tmp_path.glob("*.generate.log")) and not (tmp_path / "r.json").exists()


def test_checkpoint_on_another_dictionary_refused_before_decoding(setup, tmp_path, capsys):
    assert (setup["other"] / "dict.src.txt").read_text() != \
        (setup["data"] / "dict.src.txt").read_text()
    err = refused(capsys, setup["other"], setup["ref"], [("system", "base", setup["base"])],
                  tmp_path / "r.json")
    assert "was trained on another dictionary" in err and "embedding has" in err
    assert not list(tmp_path.glob("*.generate.log"))


def test_same_size_other_dictionary_caught_through_recorded_data_dir(setup, tmp_path, capsys):
    # a copy of the data-bin whose dictionary has the same size but other symbols
    fake = tmp_path / "fake_bin"
    shutil.copytree(setup["data"], fake)
    dict_lines = lines(fake / "dict.src.txt")
    dict_lines[0] = "zzzz" + dict_lines[0][dict_lines[0].index(" "):]
    for lang in ("src", "tgt"):
        (fake / f"dict.{lang}.txt").write_text("".join(x + "\n" for x in dict_lines), "utf-8")
    err = refused(capsys, fake, setup["ref"], [("system", "base", setup["base"])],
                  tmp_path / "r.json")
    assert f"was trained on {setup['data']}, whose dict.src.txt differs" in err


def test_hypothesis_file_with_wrong_line_count_refused(setup, tmp_path, capsys):
    hyp = tmp_path / "short.txt"
    hyp.write_text("a\nb\n", "utf-8")
    err = refused(capsys, setup["data"], setup["ref"], [("hyp", "short", hyp)],
                  tmp_path / "r.json")
    assert f"--hyp short={hyp} has 2 lines" in err


def test_dropped_last_batch_is_detected(setup, tmp_path):
    # force fairseq-fixed's upstream behaviour back on: the last 5 sentences are dropped
    result = evaluate(setup["data"], setup["ref"], [("system", "base", setup["base"])],
                      tmp_path / "r.json", "--batch-size", 16, "--generate-args",
                      "--required-batch-size-multiple 8", check=False)
    assert result.returncode != 0
    assert "returned 32 hypotheses for a split of 37 sentences" in result.stderr


def test_missing_manifest_and_missing_checkpoint_refused(setup, tmp_path, capsys):
    err = refused(capsys, tmp_path, setup["ref"], [("system", "base", setup["base"])],
                  tmp_path / "r.json")
    assert "manifest.json not found" in err
    err = refused(capsys, setup["data"], setup["ref"], [("system", "x", tmp_path / "no.pt")],
                  tmp_path / "r.json")
    assert f"checkpoint {tmp_path / 'no.pt'}: no such file" in err


def test_by_length_buckets_are_sacrebleu_on_the_bucket(setup):
    sources = lines(setup["raw"] / "test.src")
    refs = lines(setup["ref"])
    png = setup["out"] / "result.by_length.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for s in setup["report"]["systems"]:
        hyps = lines(s["hyp_file"])
        assert sum(b["n"] for b in s["by_length"]) == N_TEST
        assert [(b["min_len"], b["max_len"]) for b in s["by_length"]] == [
            (1, 10), (11, 20), (21, 30), (31, 40), (41, None)]  # None: open-ended
        for b in s["by_length"]:
            high = b["max_len"] if b["max_len"] is not None else float("inf")
            ids = [i for i, x in enumerate(sources) if b["min_len"] <= len(x.split()) <= high]
            assert len(ids) == b["n"]
            if ids:
                assert b["bleu"] == pytest.approx(BLEU().corpus_score(
                    [hyps[i] for i in ids], [[refs[i] for i in ids]]).score)
            else:
                assert b["bleu"] is None


def test_source_translation_equals_the_binarised_path(setup, tmp_path):
    """--source: the raw test source translated in-process with the manifest's preprocessing
    gives the hypotheses fairseq-generate gave on the binarised split."""
    out = tmp_path / "src.json"
    evaluate(setup["data"], setup["ref"], [("system", "base", setup["base"]),
                                           ("system", "ssan", setup["ssan"])], out,
             "--source", setup["raw"] / "test.src")
    report = read_json(out)
    for name, s in zip(("base", "ssan"), report["systems"]):
        assert lines(s["hyp_file"]) == lines(setup["out"] / f"{name}.test.tgt")
        assert s["decoded"].startswith("in-process from ")
    assert report["systems"][1]["bleu"] == setup["report"]["systems"][1]["bleu"]


def test_seed_groups_and_identical_systems(setup, tmp_path):
    """GROUP@SEED pooling against sacrebleu on the same files; a copy of the baseline is
    reported identical with p = 1."""
    systems = setup["report"]["systems"]
    base_h, ssan_h, noisy_h = (s["hyp_file"] for s in systems)
    copy = tmp_path / "copy.txt"
    shutil.copyfile(base_h, copy)
    out = tmp_path / "groups.json"
    evaluate(setup["data"], setup["ref"], [("hyp", "b@1", base_h), ("hyp", "b@2", noisy_h),
                                           ("hyp", "s@1", ssan_h), ("hyp", "s@2", copy)], out)
    report = read_json(out)
    refs = lines(setup["ref"])
    score = {n: BLEU().corpus_score(lines(f), [refs]).score
             for n, f in (("b1", base_h), ("b2", noisy_h), ("s1", ssan_h))}
    b, g = report["groups"]
    assert (b["name"], b["n_seeds"], g["name"], g["n_seeds"]) == ("b", 2, "s", 2)
    assert b["mean_bleu"] == pytest.approx((score["b1"] + score["b2"]) / 2)
    assert g["mean_bleu"] == pytest.approx((score["s1"] + score["b1"]) / 2)
    assert g["delta"] == pytest.approx(g["mean_bleu"] - b["mean_bleu"])
    assert b["std_bleu"] == pytest.approx(abs(score["b1"] - score["b2"]) / 2 ** 0.5)
    assert 0 < g["p_value"] <= 1
    s2 = report["systems"][3]
    assert s2["compared_with"] == "b@2"  # the same seed of the baseline group
    same = tmp_path / "same.json"
    evaluate(setup["data"], setup["ref"], [("hyp", "a", base_h), ("hyp", "a_copy", copy)], same)
    twin = read_json(same)["systems"][1]
    assert twin["identical"] and twin["p_value"] == 1.0 and twin["delta"] == 0
