"""The SICK and SNLI readers: what they read, and each malformed line named by file and line."""

import pytest
from helpers.pairs_cli import sick_rows, write_sick, write_snli

from ssan_plugin.pairs.corpus import PairFormatError, read_pairs, read_sick, read_snli, snli_files


def test_sick_reads_ids_sentences_labels_scores(tmp_path):
    path = tmp_path / "sick.tsv"
    write_sick(path, sick_rows(3, start_id=7))
    pairs = read_sick(path)
    assert [p.pair_id for p in pairs] == ["7", "8", "9"]
    assert pairs[0].a == pairs[0].b == "A man is playing a guitar"
    assert [p.label for p in pairs] == ["entailment", "contradiction", "neutral"]
    assert [p.score for p in pairs] == [5.0, 3.5, 2.0]


def test_sick_columns_found_by_header_name(tmp_path):
    path = tmp_path / "sick.tsv"
    path.write_text("relatedness_score\tentailment_label\tsentence_B\tsentence_A\tpair_ID\n"
                    "4.5\tNeutral\t  B  text \tA text\t12\n", encoding="utf-8")
    (pair,) = read_sick(path)
    assert pair == ("12", "A text", "B text", "neutral", 4.5)


@pytest.mark.parametrize("line, message", [
    ("1\tA\tB\tENTAILMENT\t4.0", "5 tab-separated fields, the header has 6"),
    ("1\tA\tB\tMAYBE\t4.0\tTRAIN", "label 'MAYBE' is not one of entailment, neutral, contradiction"),
    ("1\tA\tB\tNEUTRAL\t5.5\tTRAIN", "relatedness_score '5.5' is not a number in [1, 5]"),
    ("1\tA\tB\tNEUTRAL\tnan\tTRAIN", "relatedness_score 'nan' is not a number in [1, 5]"),
    ("1\tA\tB\tNEUTRAL\thigh\tTRAIN", "relatedness_score 'high' is not a number"),
    ("1\t \tB\tNEUTRAL\t3\tTRAIN", "sentence_A is empty"),
    ("\tA\tB\tNEUTRAL\t3\tTRAIN", "pair_ID is empty"),
    ("2\tA\tB\tNEUTRAL\t3\tTRAIN", "pair_ID 2 repeats line 2"),
])
def test_sick_malformed_line_named(tmp_path, line, message):
    path = tmp_path / "sick.tsv"
    write_sick(path, [("2", "A man", "A woman", "NEUTRAL", 2.0)])
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    with pytest.raises(PairFormatError) as err:
        read_sick(path)
    assert str(err.value).startswith(f"{path}:3: ")
    assert message in str(err.value)


def test_sick_header_and_empty_files(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("id\tsentence_A\tsentence_B\n1\ta\tb\n", encoding="utf-8")
    with pytest.raises(PairFormatError, match=r"bad.tsv:1: header lacks column\(s\) pair_ID, "
                                              r"entailment_label, relatedness_score"):
        read_sick(path)
    write_sick(path, [])
    with pytest.raises(PairFormatError, match="no pairs after the header"):
        read_sick(path)
    path.write_text("", encoding="utf-8")
    with pytest.raises(PairFormatError, match="empty file"):
        read_sick(path)


def test_sick_invalid_utf8_named(tmp_path):
    path = tmp_path / "sick.tsv"
    write_sick(path, sick_rows(2))
    path.write_bytes(path.read_bytes() + b"3\tA \xff\tB\tNEUTRAL\t3\tTRAIN\n")
    with pytest.raises(Exception, match=r"line 4 is not valid UTF-8"):
        read_sick(path)


SNLI = [("A man sleeps .", "A person rests .", "entailment"),
        ("A dog runs .", "A cat runs .", "contradiction"),
        ("Kids play .", "Kids play outside .", "neutral")]


def test_snli_both_spec_forms(tmp_path):
    write_snli(tmp_path, "dev", SNLI)
    pairs = read_snli(str(tmp_path / "dev"))
    assert [(p.pair_id, p.a, p.b, p.label, p.score) for p in pairs] == [
        (str(i + 1), a, b, label, None) for i, (a, b, label) in enumerate(SNLI)]
    files = snli_files(str(tmp_path / "dev"))
    assert files == (tmp_path / "s1.dev", tmp_path / "s2.dev", tmp_path / "labels.dev")
    assert read_pairs("snli", ",".join(map(str, files))) == pairs


def test_snli_misaligned_files_refused(tmp_path):
    write_snli(tmp_path, "dev", SNLI)
    with open(tmp_path / "s2.dev", "a", encoding="utf-8") as f:
        f.write("one more .\n")
    with pytest.raises(PairFormatError) as err:
        read_snli(str(tmp_path / "dev"))
    assert str(err.value) == (f"misaligned SNLI files: {tmp_path / 's1.dev'} has 3 lines, "
                              f"{tmp_path / 's2.dev'} has 4 lines, {tmp_path / 'labels.dev'} has 3 lines")


@pytest.mark.parametrize("row, where, message", [
    (("A b .", "C d .", "-"), "labels.dev:2", "label '-' is not one of entailment, neutral, "
                                              "contradiction (a pair without gold label; remove it)"),
    (("A b .", "   ", "neutral"), "s2.dev:2", "sentence 2 is empty"),
    (("", "C d .", "neutral"), "s1.dev:2", "sentence 1 is empty"),
])
def test_snli_malformed_line_named(tmp_path, row, where, message):
    write_snli(tmp_path, "dev", [SNLI[0], row, SNLI[1]])
    with pytest.raises(PairFormatError) as err:
        read_snli(str(tmp_path / "dev"))
    assert str(err.value) == f"{tmp_path / where}: {message}"


def test_snli_missing_file_and_bad_spec(tmp_path):
    write_snli(tmp_path, "dev", SNLI)
    (tmp_path / "labels.dev").unlink()
    with pytest.raises(Exception, match="labels.dev"):
        read_snli(str(tmp_path / "dev"))
    with pytest.raises(PairFormatError, match="give DIR/SPLIT or S1,S2,LABELS"):
        read_snli("a,b")
