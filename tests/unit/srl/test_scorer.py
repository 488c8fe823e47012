"""The scorer against hand-computed srl-eval.pl numbers.

Every expected count below is worked out by hand from srl-eval.pl's definition: a predicted
argument is correct iff a gold argument of the same type has the same start and end (and, for
a discontinuous C- argument, the same set of pieces); V is excluded from the counts;
P = 100 ok/(ok+excess), R = 100 ok/(ok+missed), F1 = 2PR/(P+R), 0 for empty denominators.
"""

import pytest

from ssan_plugin.srl.props import format_props, read_props
from ssan_plugin.srl.scorer import evaluate, evaluate_files


def props(text):
    """Columns written one sentence per block, rows as 'target tag tag ...'."""
    return [([r.split()[0] for r in block.splitlines()],
             [list(c) for c in zip(*[r.split()[1:] for r in block.splitlines()])])
            for block in text.strip().split("\n\n")]


def counts(result, label=None, table="per_label"):
    c = result.overall if label is None else getattr(result, table)[label]
    return c.correct, c.excess, c.missed


# 0 The 1 man 2 who 3 left 4 said 5 it 6 rained
GOLD_A = """
-      (A0*      (A0*      *
-         *)        *      *
-     (R-A0*)       *      *
leave   (V*)        *)     *
say        *      (V*)     *
-          *     (A1*      *
rain       *        *)   (V*)
"""
# leave: all correct. say: A0 predicted over "The man" only (overlaps the gold 0..3 span: an
# excess A0 and a missed A0), A1 correct. rain: no gold argument, one predicted A1 (excess).
PRED_A = """
-      (A0*      (A0*      *
-         *)        *)     *
-     (R-A0*)       *      *
leave   (V*)        *      *
say        *      (V*)     *
-          *     (A1*   (A1*)
rain       *        *)   (V*)
"""


def test_basic_reference_overlap_and_predicate_without_arguments():
    r = evaluate(props(GOLD_A), props(PRED_A))
    assert (r.sentences, r.propositions, r.perfect) == (1, 3, 1)
    assert counts(r) == (3, 2, 1)
    p, rec, f1 = r.overall.prf()
    assert (p, rec) == (60.0, 75.0) and f1 == pytest.approx(2 * 60 * 75 / 135)
    assert counts(r, "A0") == (1, 1, 1)
    assert counts(r, "A1") == (1, 1, 0)
    assert counts(r, "R-A0") == (1, 0, 0)  # R- arguments are labels of their own
    assert r.per_label["A1"].prf() == (50.0, 100.0, pytest.approx(200 / 3))
    assert set(r.per_label) == {"A0", "A1", "R-A0"}
    assert counts(r, "V", "excluded") == (3, 0, 0)  # V never enters the overall counts
    line = "   Overall        3       2       1    60.00   75.00   66.67"
    assert line in r.report().splitlines()
    j = r.to_json()
    assert j["overall"]["f1"] == pytest.approx(66.6666667) and j["per_label"]["R-A0"]["f1"] == 100.0


# 0 Mary 1 , 2 he 3 said 4 , 5 left 6 .   gold: A1 = "Mary" + C-A1 "left" (one argument)
GOLD_C = """
-     (A1*)
-        *
-     (A0*)
say   (V*)
-        *
-   (C-A1*)
-        *
"""
PRED_C = [
    ["(A1*)", "*", "(A0*)", "(V*)", "*", "(C-A1*)", "*"],  # exact: A1 ok, A0 ok
    ["(A1*)", "*", "(A0*)", "(V*)", "(C-A1*", "*)", "*"],  # a piece differs: A1 excess+missed
    ["(A1*", "*", "*", "*", "*", "*)", "*"],  # one continuous 0..5 span (and no V, no A0)
    ["*", "*", "(A2*)", "(V*)", "*", "(C-A1*)", "*"],  # C-A1 without head = A1 5..5; A2 wrong
]


def test_continuation_arguments_need_every_piece():
    gold = props(GOLD_C) * 4
    pred = [(["-", "-", "-", "say", "-", "-", "-"], [col]) for col in PRED_C]
    r = evaluate(gold, pred)
    assert r.propositions == 4 and r.perfect == 1
    # A1 (C-A1 counted under A1): ok in case 1; excess+missed in cases 2, 3 and 4
    assert counts(r, "A1") == (1, 3, 3)
    # A0: ok in cases 1, 2; missed in cases 3 and 4
    assert counts(r, "A0") == (2, 0, 2)
    assert counts(r, "A2") == (0, 1, 0) and r.per_label["A2"].prf() == (0.0, 0.0, 0.0)
    assert "C-A1" not in r.per_label
    assert counts(r) == (3, 4, 5)
    assert r.overall.prf()[:2] == (pytest.approx(300 / 7), 37.5)
    # V: found in cases 1, 2 and 4, missed in case 3
    assert counts(r, "V", "excluded") == (3, 0, 1)


def test_split_predicate_and_embedded_gold_arguments():
    # V + C-V form one excluded argument ("flip - flopped", the predicate row on the C-V
    # piece as in EWT); a V without its C-V piece is wrong, and still excluded
    gold = props("-  (A0*)\n-  (V*)\n-  *\nflipflop (C-V*)")
    pred = [(gold[0][0], [["(A0*)", "(V*)", "*", "*"]])]
    r = evaluate(gold, pred)
    assert counts(r) == (1, 0, 0) and counts(r, "V", "excluded") == (0, 1, 1)
    assert r.overall.prf() == (100.0, 100.0, 100.0) and r.perfect == 1
    # an A1 embedding an R-A1 is, for srl-eval.pl, an argument with pieces: a plain A1 span
    # never matches it (excess + missed), the embedded R-A1 is matched on its own
    gold = props("-  (A1*\n-  (R-A1*)\n-  *)\ngo  (V*)")
    pred = [(gold[0][0], [["(A1*", "*", "*)", "(V*)"]])]
    r = evaluate(gold, [(gold[0][0], [["(A1*", "(R-A1*)", "*)", "(V*)"]])])
    assert counts(r) == (2, 0, 0)
    r = evaluate(gold, pred)
    assert counts(r, "A1") == (0, 1, 1) and counts(r, "R-A1") == (0, 0, 1)


def test_missing_and_mismatched_propositions(tmp_path):
    gold = props("-  (A0*)\nrun (V*)\n-  (A1*)\n\nwalk (V*)\n-  (A0*)")
    # sentence 1: no predicted prop at all -> all gold arguments missed;
    # sentence 2: another lemma at the predicate position -> all missed; an extra predicted
    # prop without gold (position 1) is skipped
    pred = [(["-", "-", "-"], []), (["stroll", "talk"], [["(V*)", "(A0*)"], ["*", "(V*)"]])]
    r = evaluate(gold, pred)
    assert r.propositions == 2 and counts(r) == (0, 0, 3) and r.perfect == 0
    assert any("missing predicted prop" in w for w in r.warnings)
    assert any("expected walk" in w for w in r.warnings)
    # the extra prop after the last gold predicate is said, not dropped silently; so is a
    # predicted prop in a sentence without any gold one (neither changes a count)
    assert "sentence 1: predicted prop talk at 1 without gold; skipped" in r.warnings
    no_gold = [(["-", "-"], [])]
    alone = evaluate(no_gold, [(["-", "go"], [["*", "(V*)"]])])
    assert alone.propositions == 0
    assert alone.warnings == ["sentence 0: predicted prop go at 1 without gold; skipped"]
    # files round trip through the props writer/reader give the same numbers
    (tmp_path / "g").write_text("".join(format_props(t, c) for t, c in gold))
    (tmp_path / "p").write_text("".join(format_props(t, c) for t, c in pred))
    assert read_props(str(tmp_path / "g")) == gold
    assert evaluate_files(str(tmp_path / "g"), str(tmp_path / "p")).to_json() == r.to_json()
    with pytest.raises(ValueError, match="do not align"):
        evaluate(gold, [(["-", "-"], []), pred[1]])


def test_a_continuation_joins_the_last_argument_of_its_type():
    """Two A1 in one column and a C-A1 after them: the C-A1 joins the second (the last seen),
    making A1 (1..3) with pieces 1 and 3; the first A1 stays a word of its own. A prediction
    that joins the C-A1 to an A1 at 0 is one excess A1 (0..3) and both gold A1 missed."""
    gold = [(["-", "-", "go", "-", "-"], [["(A1*)", "(A1*)", "(V*)", "(C-A1*)", "*"]])]
    r = evaluate(gold, gold)
    assert counts(r) == (2, 0, 0) and counts(r, "A1") == (2, 0, 0) and r.perfect == 1
    pred = [(["-", "-", "go", "-", "-"], [["(A1*)", "*", "(V*)", "(C-A1*)", "*"]])]
    r = evaluate(gold, pred)
    assert counts(r) == (0, 1, 2) and counts(r, "A1") == (0, 1, 2)


def test_of_two_gold_phrases_with_one_span_the_later_one_counts():
    """An A1 with an R-A1 on the same single word: both span (0, 0), and only the later one
    visited (the embedded R-A1) is a gold argument, as srl-eval.pl indexes them by span."""
    gold = [(["-", "-", "go"], [["(A1(R-A1*))", "*", "(V*)"]])]
    same = [(["-", "-", "go"], [["(R-A1*)", "*", "(V*)"]])]
    outer = [(["-", "-", "go"], [["(A1*)", "*", "(V*)"]])]
    assert counts(evaluate(gold, same)) == (1, 0, 0)
    assert counts(evaluate(gold, outer)) == (0, 1, 1)
    assert counts(evaluate(gold, outer), "R-A1") == (0, 0, 1)
