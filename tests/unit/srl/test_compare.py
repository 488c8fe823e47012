"""Comparing SRL systems on props files (ssan_plugin.srl.compare, evaluate_srl.py without
--checkpoint): totals equal the scorer's, per-sentence counts sum to them, the paired bootstrap's
p-values (identical -> 1, clearly better -> small), F1 by length and by distance against counts
worked out by hand, and bad input (one line, exit 2)."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT, cli_env
from helpers.srl_props import column

from ssan_plugin.srl.brackets import Phrase
from ssan_plugin.srl.compare import (CompareError, argument_distance, compare_props,
                                     markdown, read_checked, score_system)
from ssan_plugin.srl.props import read_props, write_props
from ssan_plugin.srl.scorer import evaluate, evaluate_files, sentence_counts


def sentence(n, props):
    """props: {predicate position: (lemma, [(start, end, type), ...])}, V added."""
    targets = ["-"] * n
    columns = []
    for position in sorted(props):
        lemma, spans = props[position]
        targets[position] = lemma
        columns.append(column(n, spans + [(position, position, "V")]))
    return targets, columns


# Sentence lengths 5, 12, 3, 25 (line 1, 7, 20, 24 of the files). Arguments and their distance
# from the predicate (words strictly between; 0 adjacent or containing):
#   A eat@2:  A0 0-1 (d 0), A1 3-3 (d 0), AM-TMP 4-4 (d 1)
#   B say@0:  A1 1-3 (d 0), AM-LOC 5-6 (d 4), A2 11-11 (d 10);  go@8: A0 1-3 (d 4)
#   C no predicate
#   D run@0:  A0 1-1 (d 0), A1 13-14 (d 12)
GOLD = [
    sentence(5, {2: ("eat", [(0, 1, "A0"), (3, 3, "A1"), (4, 4, "AM-TMP")])}),
    sentence(12, {0: ("say", [(1, 3, "A1"), (5, 6, "AM-LOC"), (11, 11, "A2")]),
                  8: ("go", [(1, 3, "A0")])}),
    sentence(3, {}),
    sentence(25, {0: ("run", [(1, 1, "A0"), (13, 14, "A1")])}),
]
# good: everything but B say's A2 (missed): correct 8, excess 0, missed 1
GOOD = [
    GOLD[0],
    sentence(12, {0: ("say", [(1, 3, "A1"), (5, 6, "AM-LOC")]), 8: ("go", [(1, 3, "A0")])}),
    GOLD[2],
    GOLD[3],
]
# bad, by hand:
#   A: A0 0-0 excess (d 1); A1 correct (d 0); A0 0-1 (d 0) and AM-TMP (d 1) missed -> 1 1 2
#   B: say: A2 1-3 excess (d 0, the gold 1-3 is A1); A1 1-3 (d 0), AM-LOC (d 4), A2 (d 10)
#      missed; go: A0 correct (d 4)                                                 -> 1 1 3
#   C: nothing                                                                      -> 0 0 0
#   D: only V: A0 (d 0), A1 (d 12) missed                                           -> 0 0 2
BAD = [
    sentence(5, {2: ("eat", [(0, 0, "A0"), (3, 3, "A1")])}),
    sentence(12, {0: ("say", [(1, 3, "A2")]), 8: ("go", [(1, 3, "A0")])}),
    GOLD[2],
    sentence(25, {0: ("run", [])}),
]
BAD_PER_SENTENCE = [(1, 1, 2), (1, 1, 3), (0, 0, 0), (0, 0, 2)]
# (bucket, sentences, correct, excess, missed)
BAD_BY_LENGTH = [("1-10", 2, 1, 1, 2), ("11-20", 1, 1, 1, 3), ("21-30", 1, 0, 0, 2),
                 ("31-40", 0, 0, 0, 0), ("41+", 0, 0, 0, 0)]
# (bucket, correct, excess, missed)
BAD_BY_DISTANCE = [("0", 1, 1, 3), ("1-2", 0, 1, 1), ("3-5", 1, 0, 1), ("6-10", 0, 0, 1),
                   ("11+", 0, 0, 1)]
GOOD_BY_DISTANCE = [("0", 4, 0, 0), ("1-2", 1, 0, 0), ("3-5", 2, 0, 0), ("6-10", 0, 0, 1),
                    ("11+", 1, 0, 0)]


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, sentences in (("gold", GOLD), ("good", GOOD), ("bad", BAD)):
        paths[name] = tmp_path / f"{name}.props"
        write_props(str(paths[name]), sentences)
    return paths


def test_hand_made_files_read_back():
    """The helper writes what the comments above describe (a guard on the fixtures)."""
    assert GOLD[0][0] == ["-", "-", "eat", "-", "-"]
    assert GOLD[0][1] == [["(A0*", "*)", "(V*)", "(A1*)", "(AM-TMP*)"]]
    assert BAD[1][1][0][:4] == ["(V*)", "(A2*", "*", "*)"]


def test_totals_and_per_label_equal_the_scorer(files):
    report = compare_props(str(files["gold"]), [("bad", str(files["bad"])),
                                                ("good", str(files["good"]))], n_samples=200)
    for entry in report["systems"]:
        expected = evaluate_files(str(files["gold"]), str(files[entry["name"]])).to_json()
        for key in ("precision", "recall", "f1", "correct", "excess", "missed"):
            assert entry[key] == expected["overall"][key], key
        assert entry["per_label"] == expected["per_label"]
        assert "V" not in entry["per_label"]
    bad, good = report["systems"]
    assert (bad["correct"], bad["excess"], bad["missed"]) == (2, 2, 7)
    assert (good["correct"], good["excess"], good["missed"]) == (8, 0, 1)
    assert report["sentences"] == 4 and report["propositions"] == 4
    assert report["gold_arguments"] == 9
    assert bad["per_label"]["A0"]["correct"] == 1 and bad["per_label"]["A0"]["excess"] == 1
    assert bad["per_label"]["A0"]["missed"] == 2


def test_per_sentence_counts_sum_to_the_totals(files):
    gold = read_checked(str(files["gold"]), "--gold-props", "gold")
    bad = read_checked(str(files["bad"]), "--pred-props bad", "bad")
    scored = score_system(gold, "bad", bad)
    assert scored.stats.tolist() == [list(map(float, row)) for row in BAD_PER_SENTENCE]
    assert scored.stats.sum(0).tolist() == [2, 2, 7]
    matches = []
    result = evaluate(read_props(str(files["gold"])), read_props(str(files["bad"])), matches)
    per_sentence = sentence_counts(matches, 4)
    assert [(c.correct, c.excess, c.missed) for c in per_sentence] == BAD_PER_SENTENCE
    assert sum(c.correct for c in per_sentence) == result.overall.correct
    assert sum(c.excess for c in per_sentence) == result.overall.excess
    assert sum(c.missed for c in per_sentence) == result.overall.missed


def test_identical_predictions_get_p_one(files, tmp_path):
    copy = tmp_path / "copy.props"
    copy.write_text(files["bad"].read_text().replace("(", "  ("))  # other spacing, same tags
    report = compare_props(str(files["gold"]), [("a", str(files["bad"])), ("b", str(copy))])
    b = report["systems"][1]
    assert b["identical"] is True
    assert b["p_value"] == 1.0 and b["delta"] == 0.0
    assert "identical" in markdown(report)
    # the same totals from another output (other per-sentence counts): delta 0, so p = 1 too,
    # but not identical
    other = list(BAD)
    other[3] = sentence(25, {0: ("run", [(2, 2, "A3")])})  # 1 excess instead of nothing ...
    other[0] = sentence(5, {2: ("eat", [(3, 3, "A1")])})  # ... and 1 fewer in A
    write_props(str(tmp_path / "other.props"), other)
    report = compare_props(str(files["gold"]), [("a", str(files["bad"])),
                                                ("c", str(tmp_path / "other.props"))])
    c = report["systems"][1]
    assert (c["correct"], c["excess"], c["missed"]) == (2, 2, 7)
    assert c["identical"] is False and c["p_value"] == 1.0
    # the same per-sentence counts from another output (A's excess A0 moved to the AM-TMP
    # word): still not identical
    moved = list(BAD)
    moved[0] = sentence(5, {2: ("eat", [(4, 4, "A0"), (3, 3, "A1")])})
    write_props(str(tmp_path / "moved.props"), moved)
    report = compare_props(str(files["gold"]), [("a", str(files["bad"])),
                                                ("m", str(tmp_path / "moved.props"))])
    m = report["systems"][1]
    gold = read_checked(str(files["gold"]), "--gold-props", "gold")
    same_stats = [score_system(gold, n, read_checked(str(path), n, n)).stats
                  for n, path in (("a", files["bad"]), ("m", tmp_path / "moved.props"))]
    assert same_stats[0].tolist() == same_stats[1].tolist()
    assert m["identical"] is False and m["p_value"] == 1.0 and m["delta"] == 0.0


def test_a_clearly_better_system_gets_a_small_p(tmp_path):
    copies = 30  # 120 sentences; good beats bad on every sentence with arguments
    for name, sentences in (("gold", GOLD), ("good", GOOD), ("bad", BAD)):
        write_props(str(tmp_path / f"{name}.props"), sentences * copies)
    report = compare_props(str(tmp_path / "gold.props"),
                           [("bad", str(tmp_path / "bad.props")),
                            ("good", str(tmp_path / "good.props"))], n_samples=1000, seed=1)
    bad, good = report["systems"]
    assert good["delta"] == pytest.approx(good["f1"] - bad["f1"])
    assert good["delta"] > 50
    assert good["p_value"] == pytest.approx(1 / 1001)  # no resample ties or beats delta = 0
    assert good["identical"] is False
    assert "delta" not in bad and "p_value" not in bad
    # reversed: the same two-sided p, the opposite delta
    report = compare_props(str(tmp_path / "gold.props"),
                           [("good", str(tmp_path / "good.props")),
                            ("bad", str(tmp_path / "bad.props"))], n_samples=1000, seed=1)
    assert report["systems"][1]["delta"] == pytest.approx(-good["delta"])
    assert report["systems"][1]["p_value"] < 0.01


def test_by_length_and_by_distance_against_hand_counts(files):
    report = compare_props(str(files["gold"]), [("bad", str(files["bad"])),
                                                ("good", str(files["good"]))], n_samples=10)
    bad, good = report["systems"]
    assert [(b["bucket"], b["sentences"], b["correct"], b["excess"], b["missed"])
            for b in bad["by_length"]] == BAD_BY_LENGTH
    assert [(b["bucket"], b["correct"], b["excess"], b["missed"])
            for b in bad["by_distance"]] == BAD_BY_DISTANCE
    assert [(b["bucket"], b["correct"], b["excess"], b["missed"])
            for b in good["by_distance"]] == GOOD_BY_DISTANCE
    # bucket 0 of bad: P = 1/(1+1), R = 1/(1+3), F1 = 2PR/(P+R)
    zero = bad["by_distance"][0]
    assert (zero["precision"], zero["recall"]) == (50.0, 25.0)
    assert zero["f1"] == pytest.approx(2 * 50 * 25 / 75)
    assert (zero["gold_arguments"], zero["predicted_arguments"]) == (4, 2)
    assert bad["by_length"][1]["f1"] == pytest.approx(200 * 1 / (2 + 1 + 3))
    assert bad["by_length"][3]["f1"] == 0 and bad["by_length"][4]["sentences"] == 0
    for s in (bad, good):  # the buckets partition the arguments and the sentences
        for key in ("by_length", "by_distance"):
            for kind in ("correct", "excess", "missed"):
                assert sum(b[kind] for b in s[key]) == s[kind], (key, kind)
        assert sum(b["sentences"] for b in s["by_length"]) == 4
    # gold argument counts per bucket are the same for every system
    assert [b["gold_arguments"] for b in good["by_distance"]] == \
        [b["gold_arguments"] for b in bad["by_distance"]] == [4, 1, 2, 1, 1]


def test_argument_distance():
    assert argument_distance(Phrase(3, 4, "A1"), 2) == 0  # adjacent, right
    assert argument_distance(Phrase(0, 1, "A0"), 2) == 0  # adjacent, left
    assert argument_distance(Phrase(1, 5, "A1"), 3) == 0  # contains the predicate
    assert argument_distance(Phrase(7, 9, "A1"), 2) == 4  # words 3, 4, 5, 6 between
    assert argument_distance(Phrase(0, 0, "A0"), 4) == 3  # words 1, 2, 3 between


def _write(path, sentences):
    write_props(str(path), sentences)
    return str(path)


@pytest.mark.parametrize("case,expected", [
    ("fewer", "--pred-props x={p} has 3 sentences, the gold {g} has 4: gold sentence 4 (line 24) "
              "has no counterpart"),
    ("more", "--pred-props x={p} has 5 sentences, the gold {g} has 4: its sentence 5 (line 50) "
             "has no gold counterpart"),
    ("predicates", "--pred-props x={p}: sentence 2 (line 7) has 1 predicates, the gold sentence "
                   "(line 7) has 2"),
    ("words", "--pred-props x={p}: sentence 4 (line 24) has 24 words, the gold sentence "
              "(line 24) has 25"),
    ("brackets", "--pred-props x={p}: sentence 1 (line 1): argument column 1, line 2: "),
])
def test_mismatched_props_are_one_clear_error(files, tmp_path, case, expected):
    pred = list(GOOD)
    if case == "fewer":
        pred = pred[:3]
    elif case == "more":
        pred = pred + [GOLD[0]]
    elif case == "predicates":
        pred[1] = sentence(12, {0: ("say", [(1, 3, "A1")])})
    elif case == "words":
        pred[3] = sentence(24, {0: ("run", [(1, 1, "A0")])})
    path = _write(tmp_path / "x.props", pred)
    if case == "brackets":
        text = (tmp_path / "x.props").read_text().splitlines()
        text[1] = text[1].replace("*)", "*))")  # line 2 closes a phrase twice
        (tmp_path / "x.props").write_text("\n".join(text) + "\n")
    with pytest.raises(CompareError) as info:
        compare_props(str(files["gold"]), [("good", str(files["good"])), ("x", path)])
    message = str(info.value)
    assert expected.format(p=path, g=files["gold"]) in message, message
    assert "\n" not in message


def test_other_bad_inputs(files, tmp_path):
    with pytest.raises(CompareError, match="no such file"):
        compare_props(str(files["gold"]), [("a", str(tmp_path / "none.props"))])
    with pytest.raises(CompareError, match="system name 'a' is given twice"):
        compare_props(str(files["gold"]), [("a", str(files["bad"])), ("a", str(files["good"]))])
    (tmp_path / "empty.props").write_text("")
    with pytest.raises(CompareError, match="has no sentences"):
        compare_props(str(tmp_path / "empty.props"), [("a", str(files["bad"]))])


# ---------------------------------------------------------------- the script

def run_script(*args):
    return subprocess.run([sys.executable, "-m", "ssan_plugin.commands.evaluate_srl",
                           *map(str, args)], capture_output=True, text=True, env=cli_env(),
                          cwd=ROOT, timeout=300)


def _one_error_line(proc):
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("evaluate_srl.py: error: "), lines
    return lines[0]


def test_script_compares_systems_and_refuses_bad_input(files, tmp_path):
    out = tmp_path / "out" / "compare.json"
    proc = run_script("--gold-props", files["gold"], "--pred-props", f"bad={files['bad']}",
                      "--pred-props", f"good={files['good']}", "--pred-props",
                      f"same={files['bad']}", "--json", out, "--bootstrap-samples", "300")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    bad, good, same = report["systems"]
    assert [s["name"] for s in report["systems"]] == ["bad", "good", "same"]
    assert (good["correct"], good["excess"], good["missed"]) == (8, 0, 1)
    assert good["f1"] == pytest.approx(200 * 8 / (16 + 0 + 1))
    assert good["compared_with"] == "bad" and good["identical"] is False
    assert same["identical"] is True and same["p_value"] == 1.0
    assert 0 < good["p_value"] <= 1
    assert report["significance"]["samples"] == 300
    for s in report["systems"]:
        assert {"per_label", "by_length", "by_distance"} <= set(s)
    assert "| system | P | R | F1 | Δ F1 | vs | p-value |" in proc.stdout
    assert "| same |" in proc.stdout and "identical" in proc.stdout
    assert f"wrote {out}" in proc.stdout

    short = _write(tmp_path / "short.props", GOOD[:3])
    line = _one_error_line(run_script("--gold-props", files["gold"], "--pred-props",
                                      f"bad={files['bad']}", "--pred-props", f"s={short}"))
    assert f"--pred-props s={short} has 3 sentences" in line


@pytest.mark.parametrize("argv,expected", [
    (["--pred-props", "{bad}"], "the following arguments are required: --data, --checkpoint (or"),
    (["--pred-props", "a={bad}", "--batch-size", "8"], "argument --batch-size: only with "
                                                        "--checkpoint"),
    (["--pred-props", "a={bad}", "--data", "d"], "required: --checkpoint (or, to compare"),
    (["--pred-props", "a={bad}", "--pred-props", "=x"], "argument --pred-props: expected "
                                                          "NAME=FILE, got '=x'"),
    (["--pred-props", "a={bad}", "--bootstrap-samples", "0"], "argument --bootstrap-samples: "
                                                               "must be an integer >= 1"),
])
def test_script_options_in_process(files, capsys, argv, expected):
    """The same argparse path as the script (a subprocess costs seconds of imports)."""
    from helpers.translation_testlib import load_script

    main = load_script("evaluate_srl").main
    with pytest.raises(SystemExit) as exit_info:
        main(["--gold-props", str(files["gold"])] + [x.format(bad=files["bad"]) for x in argv])
    assert exit_info.value.code == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and expected in err[0], err


def test_checkpoint_mode_is_still_chosen_by_checkpoint(tmp_path, capsys):
    """--checkpoint decodes as before (here: a missing data directory, refused in one line)."""
    from helpers.translation_testlib import load_script

    main = load_script("evaluate_srl").main
    code = main(["--data", str(tmp_path / "none"), "--checkpoint", str(tmp_path / "c.pt"),
                 "--gold-props", str(tmp_path / "g.props"), "--pred-props",
                 str(tmp_path / "p.props"), "--json", str(tmp_path / "r.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].endswith(f"error: {tmp_path / 'none'} does not exist"), err
    with pytest.raises(SystemExit) as exit_info:  # two outputs make no sense when decoding
        main(["--data", "d", "--checkpoint", "c", "--gold-props", "g", "--pred-props", "a=p",
              "--pred-props", "b=q", "--json", "j"])
    assert exit_info.value.code == 2
    assert "with --checkpoint, give one output file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--checkpoint", "c", "--gold-props", "g", "--pred-props", "p"])
    assert "required: --data, --json" in capsys.readouterr().err


def test_seeds_pooled_against_direct_bootstrap(files, tmp_path):
    """GROUP@SEED: each system against the first group's same seed; groups[] holds the
    seed means and sds of P/R/F1 and, for the second group, the pooled paired bootstrap of
    the seed-mean F1, equal to a direct call on the per-sentence counts; one seed per group is
    the plain two-system comparison; a bad name is one clear error."""
    import numpy as np

    from ssan_plugin.stats.significance import paired_bootstrap
    from ssan_plugin.srl.compare import f1_score

    g = str(files["gold"])
    systems = [("san@1", str(files["bad"])), ("san@2", str(files["good"])),
               ("ssan@2", str(files["good"])), ("ssan@1", str(files["good"]))]
    report = compare_props(g, systems, n_samples=200, seed=3)
    by_name = {s["name"]: s for s in report["systems"]}
    assert by_name["ssan@1"]["compared_with"] == "san@1"
    assert by_name["ssan@2"]["compared_with"] == "san@2" and by_name["ssan@2"]["identical"]
    san, ssan = report["groups"]
    assert (san["name"], san["systems"], san["n_seeds"]) == ("san", ["san@1", "san@2"], 2)
    f1s = [by_name["san@1"]["f1"], by_name["san@2"]["f1"]]
    assert san["mean"]["f1"] == pytest.approx(np.mean(f1s))
    assert san["std"]["f1"] == pytest.approx(np.std(f1s, ddof=1))
    assert ssan["std"]["f1"] == 0.0
    gold = read_checked(g, "g", "g")
    stats = {n: score_system(gold, n, read_checked(p, n, n)).stats for n, p in systems}
    direct = paired_bootstrap([stats["san@1"], stats["san@2"]], [stats["ssan@1"], stats["ssan@2"]],
                              f1_score, n_samples=200, seed=3)
    assert ssan["delta"] == pytest.approx(direct.delta) == pytest.approx(ssan["mean"]["f1"] - san["mean"]["f1"])
    assert ssan["p_value"] == direct.p_value and ssan["compared_with"] == "san"
    assert "Seed groups" in markdown(report) and "| ssan | 2 |" in markdown(report)
    # the verdict: the seed-level test on the same statistics, Holm over one group = itself
    from ssan_plugin.stats.significance import seed_level_test

    seed_level = seed_level_test([stats["san@1"], stats["san@2"]],
                                 [stats["ssan@2"], stats["ssan@1"]], f1_score, ["1", "2"],
                                 ["2", "1"], n_samples=200, seed=3)  # paired by seed name
    assert ssan["seed_level"]["p"] == pytest.approx(seed_level.p_value)
    assert ssan["seed_level"]["per_seed"] == pytest.approx(seed_level.per_seed)
    assert ssan["seed_level"]["p_holm"] == ssan["seed_level"]["p"]
    assert ssan["verdict"] == ("no difference shown" if seed_level.p_value >= 0.05 else "better")

    one = compare_props(g, [("san@1", str(files["bad"])), ("ssan@1", str(files["good"]))],
                        n_samples=200, seed=3)
    plain = compare_props(g, [("san", str(files["bad"])), ("ssan", str(files["good"]))],
                          n_samples=200, seed=3)
    assert one["groups"][1]["p_value"] == plain["systems"][1]["p_value"]
    assert one["groups"][1]["seed_level"] == {} and one["groups"][1]["verdict"] == "too few seeds"
    assert "groups" not in plain
    with pytest.raises(CompareError, match="mixes a system without a seed"):
        compare_props(g, [("san", str(files["bad"])), ("san@1", str(files["good"]))])
