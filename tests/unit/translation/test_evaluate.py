"""ssan_plugin/translation/evaluate.py and languages.py scoring rules, through
ssan-evaluate-bleu's main in-process: hypothesis files scored without --data, the
compound-split (##AT##) tokenised BLEU for German, Japanese always on ja-mecab."""

import pytest
from sacrebleu.metrics import BLEU
from helpers.translation_testlib import load_script, read_json

from ssan_plugin.translation.languages import (LanguageConfig, compound_split,
                                               require_sacrebleu_tokenizer)
from ssan_plugin.translation.textio import PipelineError

EVALUATE = load_script("evaluate_bleu")

REF_DE = ["Ein Boston Terrier läuft über saftig-grünes Gras vor einem weißen Zaun.",
          "Ein Mann mit einem orange-farbenen Hut, der etwas anstarrt.",
          "Zwei Hunde spielen im Schnee."]
HYP_A = ["Ein Boston Terrier läuft über saftig-grünes Gras.",
         "Ein Mann mit einem orange-farbenen Hut.",
         "Zwei Hunde spielen im Schnee."]
HYP_B = ["Ein Terrier läuft über saftig grünes Gras vor einem Zaun.",
         "Ein Mann mit einem orangen Hut, der anstarrt.",
         "Zwei Hunde im Schnee."]


def write(path, lines):
    path.write_text("".join(x + "\n" for x in lines), "utf-8")
    return path


def test_compound_split_matches_the_perl_one_liner():
    # outputs of: perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'
    assert compound_split("Ein saftig-grünes Gras a-b-c -x y- 3-4") == \
        "Ein saftig ##AT##-##AT## grünes Gras a ##AT##-##AT## b-c -x y- 3 ##AT##-##AT## 4"
    de = LanguageConfig.create("de", segmented=False, aggressive_dash_splits=True)
    assert de.compound_split_bleu() and not LanguageConfig.create("en", False).compound_split_bleu()
    # Moses tokenisation first (never the aggressive -a splits), then the compound split
    assert de.bleu_tokenise_compound_split("über saftig-grünes Gras, vor.") == \
        "über saftig ##AT##-##AT## grünes Gras , vor ."


def test_hypothesis_files_scored_without_data(tmp_path, capsys):
    ref = write(tmp_path / "test.de", REF_DE)
    a, b = write(tmp_path / "a.de", HYP_A), write(tmp_path / "b.de", HYP_B)
    out = tmp_path / "r.json"
    assert EVALUATE.main(["--ref", str(ref), "--hyp", f"A={a}", "--hyp", f"B={b}",
                          "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| tok BLEU, compound split ##AT## |" in printed
    assert "tok BLEU, compound split: sacrebleu tokenize=none on Moses-tokenised" in printed
    report = read_json(out)
    assert "tok:13a" in report["signature"]
    de = LanguageConfig.create("de", segmented=False)
    for name, hyps, s in zip("AB", (HYP_A, HYP_B), report["systems"]):
        assert s["name"] == name and s["n"] == 3
        assert s["bleu"] == BLEU().corpus_score(hyps, [REF_DE]).score
        split = BLEU(tokenize="none", force=True).corpus_score(
            [de.bleu_tokenise_compound_split(h) for h in hyps],
            [[de.bleu_tokenise_compound_split(r) for r in REF_DE]]).score
        assert s["tok_bleu_compound_split"] == split
    # splitting compounds turns one matched token into three: A (compounds right) gains
    a_sys = report["systems"][0]
    assert a_sys["tok_bleu_compound_split"] > a_sys["tok_bleu"]
    assert "delta" in report["systems"][1] and "p_value" in report["systems"][1]


def test_planned_seeds_keep_a_verdict_interim(tmp_path, capsys):
    """Groups of seeds: with --planned-seeds a group (or the baseline) short of its plan's seeds
    gets no verdict yet; a bad --planned-seeds is a usage error, an unknown group one line."""
    ref = write(tmp_path / "test.de", REF_DE)
    hyps = {"base@1": HYP_A, "base@2": HYP_B, "x@1": REF_DE, "x@2": REF_DE}
    args = ["--ref", str(ref)]
    for name, lines in hyps.items():
        args += ["--hyp", f"{name}={write(tmp_path / (name + '.de'), lines)}"]
    out = tmp_path / "r.json"
    assert EVALUATE.main(args + ["--json", str(out), "--planned-seeds", "x=3"]) == 0
    assert read_json(out)["groups"][1]["verdict"] == "interim: 2 of 3 seeds"
    assert "| interim: 2 of 3 seeds |" in capsys.readouterr().out
    assert EVALUATE.main(args + ["--json", str(out), "--overwrite", "--planned-seeds", "x=2",
                                 "--planned-seeds", "base=2"]) == 0
    assert not read_json(out)["groups"][1]["verdict"].startswith("interim")
    for bad, message in ((["x=0"], "--planned-seeds: "), (["x"], "expected NAME=N"),
                         (["x=2", "x=3"], "--planned-seeds names x more than once")):
        with pytest.raises(SystemExit) as exit_info:
            EVALUATE.main(args + [a for b in bad for a in ("--planned-seeds", b)])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert EVALUATE.main(args + ["--planned-seeds", "y=2"]) == 2
    assert "planned seeds for y: no such group among base, x" in capsys.readouterr().err


def test_without_data_no_compound_column_for_other_languages(tmp_path):
    ref = write(tmp_path / "test.en", ["A dog runs on well-kept grass."])
    hyp = write(tmp_path / "h.en", ["A dog runs on grass."])
    out = tmp_path / "r.json"
    assert EVALUATE.main(["--ref", str(ref), "--hyp", f"h={hyp}", "--json", str(out)]) == 0
    assert "tok_bleu_compound_split" not in read_json(out)["systems"][0]


def test_checkpoint_without_data_is_refused(tmp_path, capsys):
    ref = write(tmp_path / "test.de", REF_DE)
    with pytest.raises(SystemExit) as exit_info:
        EVALUATE.main(["--ref", str(ref), "--system", f"x={tmp_path / 'c.pt'}"])
    assert exit_info.value.code == 2
    assert "--system NAME=CHECKPOINT needs --data" in capsys.readouterr().err


def test_hypothesis_with_wrong_line_count_without_data(tmp_path, capsys):
    ref = write(tmp_path / "test.de", REF_DE)
    hyp = write(tmp_path / "h.de", HYP_A[:2])
    assert EVALUATE.main(["--ref", str(ref), "--hyp", f"h={hyp}"]) == 2
    assert f"--hyp h={hyp} has 2 lines, --ref has 3" in capsys.readouterr().err


def test_japanese_always_scored_with_ja_mecab(tmp_path):
    ja = LanguageConfig.create("ja", segmented=False)
    assert ja.sacrebleu_tokenize() == "ja-mecab"
    ref = write(tmp_path / "test.ja", ["猫が大好きです。", "私はテニス部員です。"])
    hyp = write(tmp_path / "h.ja", ["猫が好きです。", "私はテニス部員です。"])
    out = tmp_path / "r.json"
    assert EVALUATE.main(["--ref", str(ref), "--hyp", f"h={hyp}", "--json", str(out)]) == 0
    # MeCab 0.996 with the IPA dictionary, as the pinned mecab-python3 and ipadic ship them
    assert "tok:ja-mecab-0.996-IPA" in read_json(out)["signature"]


def test_missing_mecab_is_an_install_hint_not_a_fallback(monkeypatch):
    import sacrebleu.tokenizers.tokenizer_ja_mecab as ja_mecab

    monkeypatch.setattr(ja_mecab, "MeCab", None)
    with pytest.raises(PipelineError, match="pip install 'mecab-python3>=1.0.9,<2' 'ipadic"):
        require_sacrebleu_tokenizer("ja-mecab")


def test_the_sentence_level_tests_are_the_librarys_on_sacrebleus_statistics(tmp_path):
    """--paired-bs / --paired-ar with --paired-n: each system's p is that test's on the two
    systems' sacrebleu statistics (randomisation for -ar, not the bootstrap), the report names
    the test and its samples, and bleu_ci is the bootstrap's half-width (its default 1000
    resamples under -ar)."""
    from ssan_plugin.stats.significance import (DEFAULT_SEED, paired_bootstrap,
                                                 paired_randomization, sacrebleu_score_fn,
                                                 sacrebleu_stats)

    ref = write(tmp_path / "test.de", REF_DE)
    a, b = write(tmp_path / "a.de", HYP_A), write(tmp_path / "b.de", HYP_B)
    bleu = BLEU(tokenize="13a")
    score = sacrebleu_score_fn(bleu)
    sa, sb = (sacrebleu_stats(bleu, hyps, REF_DE) for hyps in (HYP_A, HYP_B))
    out = tmp_path / "r.json"
    for flag, n, name, test, ci_samples in (
            ("--paired-bs", 300, "paired bootstrap", paired_bootstrap, 300),
            ("--paired-ar", 400, "paired approximate randomisation", paired_randomization, 1000)):
        assert EVALUATE.main(["--ref", str(ref), "--hyp", f"A={a}", "--hyp", f"B={b}", flag,
                              "--paired-n", str(n), "--json", str(out), "--overwrite"]) == 0
        report = read_json(out)
        assert report["significance"]["test"] == name and report["significance"]["samples"] == n
        expected = test(sa, sb, score, n, DEFAULT_SEED)
        system = report["systems"][1]
        assert system["p_value"] == expected.p_value and system["delta"] == pytest.approx(expected.delta)
        assert system["bleu_ci"] == paired_bootstrap(sa, sb, score, ci_samples, DEFAULT_SEED).ci
