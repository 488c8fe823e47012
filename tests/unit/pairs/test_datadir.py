"""ssan_plugin/pairs/datadir.py: the names prepare writes and the task reads, and the gold
table written and read back exactly (ids with tabs or backslashes, absent labels and scores,
scores to the last bit); a file that is not such a table is an error naming it."""

import os

import pytest

from ssan_plugin.pairs import datadir
from ssan_plugin.pairs.corpus import Pair


def test_paths(tmp_path):
    assert datadir.dict_path(tmp_path) == os.path.join(str(tmp_path), "dict.s1.txt")
    assert datadir.side_prefix(tmp_path, "valid", "s2") == os.path.join(str(tmp_path), "valid.s1-s2.s2")
    assert datadir.gold_path(tmp_path, "test") == os.path.join(str(tmp_path), "test.gold.tsv")
    assert datadir.SIDES == ("s1", "s2") and datadir.SPLITS == ("train", "valid", "test")


def test_gold_round_trip(tmp_path):
    pairs = [Pair("1", "a", "b", "entailment", 4.5),
             Pair("2", "c", "d", None, 0.1 + 0.2),  # 0.30000000000000004: every bit kept
             Pair("3", "e", "f", "contradiction", None),
             Pair("id\twith tab", "g", "h", "neutral", 1.0),
             Pair("back\\slash", "i", "j", None, None)]
    path = tmp_path / "x.gold.tsv"
    datadir.write_gold(path, pairs)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "pair_ID\tlabel\tscore" and lines[1] == "1\tentailment\t4.5"
    assert lines[3] == "3\tcontradiction\t" and len(lines) == 1 + len(pairs)
    back = datadir.read_gold(path)
    # the sentences are not in the gold table
    assert back == [p._replace(a="", b="") for p in pairs]
    assert back[1].score == 0.1 + 0.2


def test_gold_of_no_pairs(tmp_path):
    path = tmp_path / "empty.gold.tsv"
    datadir.write_gold(path, [])
    assert datadir.read_gold(path) == []


@pytest.mark.parametrize("text", ["", "pair_ID\tlabel\n1\tneutral\n", "id\tlabel\tscore\n"])
def test_a_file_without_the_header_is_refused(tmp_path, text):
    path = tmp_path / "bad.gold.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="bad.gold.tsv: not a gold file of prepare_pairs.py"):
        datadir.read_gold(path)


def test_an_unknown_label_is_refused(tmp_path):
    path = tmp_path / "bad.gold.tsv"
    path.write_text("pair_ID\tlabel\tscore\n1\tENTAILMENT\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.gold.tsv: line 2: unknown label 'ENTAILMENT'"):
        datadir.read_gold(path)


@pytest.mark.parametrize("row", ["7", "7\tneutral", "7\tneutral\tfour", "7\tneutral\tnan"])
def test_a_malformed_row_is_an_error_naming_the_file(tmp_path, row):
    path = tmp_path / "bad.gold.tsv"
    path.write_text(f"pair_ID\tlabel\tscore\n{row}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.gold\.tsv: line 2"):
        datadir.read_gold(path)
