"""The analysis scripts end to end on a tiny SSAN trained for a few updates on the synthetic
corpus (prepare_translation.py data-bin): show_selection.py, selection_stats.py,
make_probing_data.py, probe.py, induce_trees.py; and their one-line errors for bad input."""

import json

import pytest
from conftest import message_lines
from helpers.translation_testlib import PY, SCRIPTS, load_script, prepare, run, train_tiny

MAX_POSITIONS = 512
SHOW = load_script("show_selection")
STATS = load_script("selection_stats")
MAKE = load_script("make_probing_data")
PROBE = load_script("probe")
TREES = load_script("induce_trees")

# a small CoNLL-2012 file: (word, POS, parse bit)
TREE_SENTENCES = [
    [("the", "DT", "(TOP(S(NP*"), ("cat", "NN", "*)"), ("saw", "VBD", "(VP*"), ("a", "DT", "(NP*"),
     ("dog", "NN", "*))"), (".", ".", "*))")],
    [("dogs", "NNS", "(TOP(S(NP*)"), ("run", "VBP", "(VP*"), ("very", "RB", "(ADVP*"),
     ("fast", "RB", "*))"), (".", ".", "*))")],
    [("we", "PRP", "(TOP(S(NP*)"), ("like", "VBP", "(VP*"), ("green", "JJ", "(NP*"),
     ("tea", "NN", "*))))")],
]


def write_conll(path, sentences, parse=True):
    lines = ["#begin document (t); part 000"]
    for s in sentences:
        for i, (w, p, b) in enumerate(s):
            lines.append("\t".join(["t", "0", str(i), w, p, b if parse else "-", "-", "-", "-",
                                    "-", "*", "-"]))
        lines.append("")
    path.write_text("\n".join(lines) + "#end document\n")
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("analysis")
    raw = tmp / "raw"
    run([PY, SCRIPTS / "make_synthetic_corpus.py", "--out", raw, "--train", 200, "--valid", 20,
         "--test", 60])
    data = tmp / "bin"
    prepare("src", "tgt", raw, data, 100)
    checkpoint = train_tiny(data, "ssan_transformer", tmp / "ck", 10, 1,
                            "--max-source-positions", MAX_POSITIONS)
    conll = write_conll(tmp / "t.gold_conll", TREE_SENTENCES * 4)
    return dict(tmp=tmp, raw=raw, data=data, checkpoint=checkpoint, conll=conll)


def model(setup):
    return ["--data", str(setup["data"]), "--checkpoint", str(setup["checkpoint"])]


def test_show_selection(setup, tmp_path, capsys):
    from PIL import Image

    from ssan_plugin.analysis.maps import grid_size_inches
    from ssan_plugin.analysis.selection import load_model, selection_maps

    sentence = min((setup["raw"] / "test.src").read_text().splitlines(), key=len)
    out = tmp_path / "maps"
    assert SHOW.main([*model(setup), "--sentence", sentence, "--out", str(out)]) == 0
    js = json.loads((out / "sent1.json").read_text())
    pieces = js["pieces"]
    assert pieces[-1] == "</s>" and js["sentence"] == sentence
    (layer,) = js["layers"]  # train_tiny: 1 encoder layer, 2 heads
    assert layer["kind"] == "ssan" and len(layer["heads"]) == 2
    # the JSON's selection is the model's own eval-mode selection of these pieces
    m, task = load_model(setup["checkpoint"], setup["data"])
    tokens = task.source_dictionary.encode_line(" ".join(pieces[:-1]), add_if_not_exist=False)
    own = selection_maps(m, tokens.long())[0]
    assert [h["selection"] for h in layer["heads"]] == own.int().tolist()
    for name in ("sent1_selection.png", "sent1_attention.png"):
        with Image.open(out / name) as img:
            w, h = grid_size_inches(1, 2, len(pieces))
            assert img.size == (round(w * 100), round(h * 100))
    # bad input: a sentence longer than the model's source positions, an empty input file
    long = " ".join(["w"] * (MAX_POSITIONS + 5))
    capsys.readouterr()
    assert SHOW.main([*model(setup), "--sentence", long, "--out", str(out), "--overwrite"]) == 2
    err = message_lines(capsys.readouterr().err)
    assert len(err) == 1 and "more than the model's 512 source positions" in err[0], err
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert SHOW.main([*model(setup), "--input", str(empty), "--out", str(out), "--overwrite"]) == 2
    assert "empty input" in capsys.readouterr().err


def test_selection_stats(setup, tmp_path, capsys):
    out, png = tmp_path / "s.json", tmp_path / "s.png"
    assert STATS.main([*model(setup), "--conll", str(setup["conll"]), "--json", str(out),
                       "--png", str(png)]) == 0
    d = json.loads(out.read_text())
    assert d["n_sentences"] == 12 and d["words_by_pos"]["NN"] == 12  # cat, dog, tea x 4
    (layer,) = d["layers"]
    assert d["kinds"] == {"0": "ssan"} and d["learnt"] == {}  # SSAN learns no per-head value
    keys = layer["keys"]["by_class"]
    assert set(keys) == {"content", "function", "punctuation"}
    assert all(0 <= v["rate"] <= 1 and v["possible"] > 0 for v in keys.values())
    # every (query, key) word-piece pair is counted once per head, whatever the class
    total = sum(v["possible"] for v in keys.values())
    assert total == sum(x["possible"] for x in layer["distance"])
    from PIL import Image

    with Image.open(png) as img:
        assert img.size == (1100, 400)
    no_parse = write_conll(tmp_path / "np.gold_conll", TREE_SENTENCES, parse=False)
    assert STATS.main([*model(setup), "--conll", str(no_parse), "--json", str(out),
                       "--overwrite"]) == 2
    assert "no parse bit" in capsys.readouterr().err


def test_selection_stats_archive_entmax_learnt_alpha(setup, tmp_path):
    """A selective_transformer with alpha learnt per head: the JSON holds each head's alpha,
    1 + sigmoid(a) of the checkpoint's own parameter (trained away from its 1.5 start)."""
    import torch

    checkpoint = train_tiny(setup["data"], "selective_transformer", tmp_path / "ck", 10, 1,
                            "--encoder-selector", "entmax", "--entmax-alpha", "1.3")
    out = tmp_path / "s.json"
    assert STATS.main(["--data", str(setup["data"]), "--checkpoint", str(checkpoint), "--conll",
                       str(setup["conll"]), "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["kinds"] == {"0": "entmax"}
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["model"]
    logit = state["encoder.layers.0.self_attn.selector.alpha_logit"]
    expected = (1 + torch.sigmoid(logit)).tolist()
    assert d["learnt"] == {"0": {"alpha": pytest.approx(expected, abs=1e-6)}}
    assert len(expected) == 2 and all(abs(a - 1.3) > 1e-6 for a in expected)  # it learnt


def test_make_probing_data_and_probe(setup, tmp_path, capsys):
    pfile = tmp_path / "bshift.txt"
    assert MAKE.main(["--task", "bigram_shift", "--input", str(setup["raw"] / "train.src"),
                      "--seed", "3", "--out", str(pfile)]) == 0
    lines = pfile.read_text().splitlines()
    assert len(lines) == 200 and {l.split("\t")[1] for l in lines} == {"I", "O"}
    out = tmp_path / "p.json"
    assert PROBE.main([*model(setup), "--task", "bigram_shift", "--probing-file", str(pfile),
                       "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["task"] == "bigram_shift" and d["n_test"] == 20
    assert [l["layer"] for l in d["layers"]] == [0, 1]  # embeddings, encoder layer
    for l in d["layers"]:
        lo, hi = l["ci95"]
        assert 0 <= lo <= l["accuracy"] <= hi <= 1
    te = [l.split("\t")[1] for l in lines if l.startswith("te\t")]
    assert d["majority"] == max(te.count("I"), te.count("O")) / len(te)
    # tree tasks from CoNLL
    tfile = tmp_path / "depth.txt"
    assert MAKE.main(["--task", "tree_depth", "--conll", str(setup["conll"]), "--out", str(tfile)]) == 0
    # S > VP > NP (a dog), S > VP > ADVP (very fast), S > VP > NP (green tea)
    assert {l.split("\t")[1] for l in tfile.read_text().splitlines()} == {"3"}
    # bad input: unknown task (both scripts), a CoNLL file without parse bits
    capsys.readouterr()
    assert MAKE.main(["--task", "depth", "--conll", str(setup["conll"]), "--out", str(tfile)]) == 2
    assert PROBE.main([*model(setup), "--task", "depth", "--probing-file", str(pfile),
                       "--json", str(out)]) == 2
    err = message_lines(capsys.readouterr().err)
    assert len(err) == 2 and all("unknown probing task 'depth'" in e for e in err)
    no_parse = write_conll(tmp_path / "np.gold_conll", TREE_SENTENCES, parse=False)
    assert MAKE.main(["--task", "top_constituent", "--conll", str(no_parse), "--out", str(tfile),
                      "--overwrite"]) == 2
    assert "no parse bit (column 6 is '-')" in capsys.readouterr().err


def test_induce_trees(setup, tmp_path, capsys):
    out = tmp_path / "t.json"
    assert TREES.main([*model(setup), "--conll", str(setup["conll"]), "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["n_sentences"] == 12
    (layer,) = d["layers"]
    # gold spans after punctuation removal: s1 {the cat, saw a dog, a dog}, s2 {run very fast,
    # very fast}, s3 {like green tea, green tea}: 7 per copy
    assert layer["gold"] == 4 * 7 and d["right_branching"]["gold"] == 4 * 7
    # right branching: s1 (1,4)(2,4)(3,4) matches 2; s2 (1,3)(2,3) matches 2; s3 (1,3)(2,3) matches 2
    assert d["right_branching"]["matched"] == 4 * 6 and d["right_branching"]["predicted"] == 4 * 7
    assert 0 <= layer["f1"] <= 100
    empty = tmp_path / "e.gold_conll"
    empty.write_text("")
    assert TREES.main([*model(setup), "--conll", str(empty), "--json", str(out), "--overwrite"]) == 2
    assert "empty CoNLL file" in capsys.readouterr().err


def test_script_in_a_subprocess_prints_one_line(setup, tmp_path):
    result = run([PY, "-m", "ssan_plugin.commands.induce_trees", *model(setup), "--conll", tmp_path / "none",
                  "--json", tmp_path / "x.json"], check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("induce_trees.py: error: missing CoNLL file")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("arch,names", [
    ("disan_transformer", ["forward", "backward"]),
    ("biblosan_transformer", ["forward intra-block", "forward inter-block",
                              "backward intra-block", "backward inter-block"])])
def test_multidim_encoders_show_attention_and_induce_trees(setup, tmp_path, arch, names):
    """DiSAN / Bi-BloSAN: show_selection.py writes their feature-averaged attention (named
    "heads", rows of a distribution or zero) and no selection; induce_trees.py scores them."""
    checkpoint = train_tiny(setup["data"], arch, tmp_path / "ck", 4, 1,
                            "--max-source-positions", MAX_POSITIONS)
    args = ["--data", str(setup["data"]), "--checkpoint", str(checkpoint)]
    sentence = min((setup["raw"] / "test.src").read_text().splitlines(), key=len)
    assert SHOW.main([*args, "--sentence", sentence, "--out", str(tmp_path / "maps")]) == 0
    (layer,) = json.loads((tmp_path / "maps" / "sent1.json").read_text())["layers"]
    assert layer["kind"] == arch.split("_")[0] and [h["name"] for h in layer["heads"]] == names
    for head in layer["heads"]:
        assert "selection" not in head
        for row in head["attention"]:
            assert sum(row) == pytest.approx(1, abs=1e-4) or sum(row) == 0
    assert (tmp_path / "maps" / "sent1_attention.png").is_file()
    assert not (tmp_path / "maps" / "sent1_selection.png").exists()
    out = tmp_path / "t.json"
    assert TREES.main([*args, "--conll", str(setup["conll"]), "--json", str(out)]) == 0
    (scores,) = json.loads(out.read_text())["layers"]
    assert scores["gold"] == 4 * 7 and scores["predicted"] == 4 * 7 and 0 <= scores["f1"] <= 100
