"""ssan_plugin.srl.datadir: the names the writer uses are the names the task loads."""

import os

import numpy as np
import pytest

from ssan_plugin.srl import datadir
from ssan_plugin.srl.binarize import prepare
from ssan_plugin.tasks.srl import SRLConfig, SRLTask

WORDS = "I\nsaw\nher\nleave\n\nShe\nleft\n\nRain\n"
PROPS = ("-   (A0*)   *\nsee (V*)    *\n-  (A1*   (A0*)\nleave *)   (V*)\n\n"
         "-  (A0*)\nleave (V*)\n\n-\n")


def test_paths(tmp_path):
    d = str(tmp_path)
    assert datadir.word_dict_path(d) == os.path.join(d, "dict.words.txt")
    assert datadir.label_dict_path(d) == os.path.join(d, "dict.labels.txt")
    assert datadir.manifest_path(d) == os.path.join(d, "manifest.json")
    assert datadir.dataset_prefix(d, "valid", "labels") == os.path.join(d, "valid.labels")
    assert datadir.props_path(d, "test") == os.path.join(d, "test.props")
    assert datadir.instances_path(d, "train") == os.path.join(d, "train.instances.tsv")
    assert datadir.INDEXED == ("words", "predicate", "labels")
    with pytest.raises(ValueError, match="unknown SRL dataset"):
        datadir.dataset_prefix(d, "train", "tags")


def test_instances_roundtrip_and_checks(tmp_path):
    path = str(tmp_path / "x.instances.tsv")
    rows = [datadir.Instance(0, 0, 1), datadir.Instance(1, 0, 3), datadir.Instance(2, 2, 0)]
    assert datadir.write_instances(path, rows) == 3
    assert (tmp_path / "x.instances.tsv").read_text() == (
        "instance\tsentence\tpredicate\n0\t0\t1\n1\t0\t3\n2\t2\t0\n")
    back = datadir.read_instances(path)
    assert back == rows and back[1].predicate == 3
    for text, where in [("a\tb\tc\n", ":1:"), ("instance\tsentence\tpredicate\n0\t0\n", ":2:"),
                        ("instance\tsentence\tpredicate\n0\t0\tx\n", ":2:"),
                        ("instance\tsentence\tpredicate\n0\t0\t1\n2\t0\t2\n", ":3:"), ("", ":1:")]:
        (tmp_path / "bad.tsv").write_text(text)
        with pytest.raises(ValueError, match=f"bad.tsv{where}"):
            datadir.read_instances(str(tmp_path / "bad.tsv"))


def test_prepared_directory_is_exactly_the_layout_and_the_task_loads_it(tmp_path):
    (tmp_path / "t.words").write_text(WORDS)
    (tmp_path / "t.props").write_text(PROPS)
    dest = str(tmp_path / "bin")
    prepare("conll2005", {"train": str(tmp_path / "t"), "test": str(tmp_path / "t")}, dest)

    expected = {datadir.word_dict_path(dest), datadir.label_dict_path(dest),
                datadir.char_dict_path(dest), datadir.manifest_path(dest)}
    for split in ("train", "test"):
        expected |= {datadir.props_path(dest, split), datadir.instances_path(dest, split)}
        for name in datadir.INDEXED + (datadir.CHARS,):
            expected |= {datadir.dataset_prefix(dest, split, name) + ext for ext in (".bin", ".idx")}
    assert {os.path.join(dest, f) for f in os.listdir(dest)} == expected

    task = SRLTask.setup_task(SRLConfig(data=dest, no_shuffle=True, seed=1))
    dataset = task.load_dataset("test")
    table = datadir.read_instances(datadir.instances_path(dest, "test"))
    assert len(dataset) == len(table) == 3
    batch = dataset.collater([dataset[i] for i in range(len(dataset))])
    words = batch["net_input"]["src_tokens"]
    assert [task.word_dict[int(i)] for i in words[0]] == ["I", "saw", "her", "leave"]
    predicate = batch["net_input"]["predicate"]
    # the predicate indicator marks exactly the instances table's positions
    assert predicate.eq(datadir.IS_PREDICATE).long().argmax(dim=1).tolist() == [
        row.predicate for row in table]
    assert np.array_equal(predicate.sum(dim=1).numpy(), np.ones(3))
    assert [task.label_dict[int(i)] for i in batch["target"][2][:2]] == ["B-A0", "B-V"]
    # the characters of every word, padded like the words: (B, T, L)
    chars = batch["net_input"]["chars"]
    assert chars.shape[:2] == words.shape and chars.shape[2] == len("leave")
    spelled = ["".join(task.char_dict[int(c)] for c in word if c != task.char_dict.pad())
               for word in chars[0]]
    assert spelled == ["I", "saw", "her", "leave"]
    assert chars[2, 2:].eq(task.char_dict.pad()).all()  # "She left": 2 words, then padding
