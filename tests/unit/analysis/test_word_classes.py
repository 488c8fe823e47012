"""ssan_plugin/analysis/word_classes.py: key/query/distance rates on hand-made selections."""

import pytest
import torch

from ssan_plugin.analysis.word_classes import WordClassStats, plot_word_class_stats, word_class


def test_word_class():
    assert word_class("NNP") == "content" and word_class("CD") == "content"
    assert word_class("DT") == "function" and word_class("IN") == "function"
    assert word_class(",") == "punctuation" and word_class("HYPH") == "punctuation"


def test_rates_hand_made():
    # pieces: w0 (NN) w0 w1 (DT) </s>; 1 head
    sel = torch.tensor([[[1, 0, 1, 1],
                         [1, 1, 0, 0],
                         [0, 0, 0, 1],
                         [1, 1, 1, 1]]], dtype=torch.bool)
    stats = WordClassStats()
    stats.add({0: sel}, [0, 0, 1, -1], ["NN", "DT"])
    d = stats.as_dict()
    (layer,) = d["layers"]
    # keys NN: pieces 0, 1 as keys, queries 0..2 (EOS row not a query): col0 = 1+1+0, col1 = 0+1+0
    assert layer["keys"]["by_pos"]["NN"] == {"rate": pytest.approx(3 / 6), "selected": 3, "possible": 6}
    assert layer["keys"]["by_pos"]["DT"]["selected"] == 1 and layer["keys"]["by_pos"]["DT"]["possible"] == 3
    assert layer["keys"]["by_class"]["content"]["rate"] == pytest.approx(0.5)
    # queries NN: rows 0, 1 over keys 0..2: row0 = 1+0+1, row1 = 1+1+0
    assert layer["queries"]["by_pos"]["NN"] == {"rate": pytest.approx(4 / 6), "selected": 4, "possible": 6}
    assert layer["queries"]["by_class"]["function"] == {"rate": 0.0, "selected": 0, "possible": 3}
    # distance: word pairs among pieces 0..2: d=0 pairs (0,0),(0,1),(1,0),(1,1),(2,2) -> 1+0+1+1+0
    dist = {x["distance"]: (x["selected"], x["possible"]) for x in layer["distance"]}
    assert dist == {0: (3, 5), 1: (1, 4)}  # d=1: (0,2)=1, (1,2)=0, (2,0)=0, (2,1)=0
    assert d["words_by_pos"] == {"DT": 1, "NN": 1} and d["n_sentences"] == 1
    # heads count as pairs; a second sentence accumulates
    stats.add({0: torch.ones(2, 2, 2, dtype=torch.bool)}, [0, -1], ["NN"])
    layer = stats.as_dict()["layers"][0]
    assert layer["keys"]["by_pos"]["NN"]["possible"] == 6 + 2
    assert layer["keys"]["by_pos"]["NN"]["selected"] == 3 + 2
    assert {x["distance"]: x["possible"] for x in layer["distance"]}[0] == 5 + 2


def test_plot(tmp_path):
    from PIL import Image

    stats = WordClassStats()
    stats.add({0: torch.ones(1, 3, 3, dtype=torch.bool), 2: torch.eye(3, dtype=torch.bool)[None]},
              [0, 1, -1], ["NN", "IN"])
    path = plot_word_class_stats(stats.as_dict(), tmp_path / "s.png")
    with Image.open(path) as img:
        assert img.size == (1100, 400)
