"""ssan-align (commands/align.py, analysis/alignments.py) on a tiny En-Ro model prepared by
ssan-prepare-translation: the last layer's piece links are those fairseq-generate
--score-reference --print-alignment prints for the same pairs (fairseq's own hard alignment);
every reading and layer is reported with the rule first; the scores are those of the written
links (recomputed); the shifted reading reads the next query's row; the held-apart choice aligns
each fold with the candidate best on the other fold; a bitext given the other way round gives
the same links; the selection map of a
cross-selector model is the heads' majority; bad input is one line. ssan-show-selection with a
reference translation draws the decoder and cross selection maps of a model selecting there;
the eflomal peer (--eflomal-train) and the diagonal reference (--diagonal) are scored in the same
layout."""

import itertools
import json
import re
import statistics

import pytest
import torch
from helpers.translation_testlib import call_prepare, small_corpus, train_tiny

from conftest import run_cli
from ssan_plugin.analysis.alignments import (cross_attention_maps, forced_alignments,
                                             piece_links)
from ssan_plugin.analysis.inputs import AnalysisInput
from ssan_plugin.commands import align, show_selection
from ssan_plugin.translation.alignment import (alignment_scores, parse_links, read_bitext, read_gold,
                                               without_marks)

TRAIN = ["--decoder-layers", "2", "--encoder-layers", "2"]


def scores_by_hand(predicted, reference):
    """(precision, recall, AER) of link sets against gold, from their definitions (Och and Ney
    2003): |A & P| / |A|, |A & S| / |S|, 1 - (|A & S| + |A & P|) / (|A| + |S|), summed over
    sentences."""
    a = sum(len(x) for x in predicted)
    s = sum(len(g.sure) for g in reference)
    a_s = sum(len(x & g.sure) for x, g in zip(predicted, reference))
    a_p = sum(len(x & g.possible) for x, g in zip(predicted, reference))
    return a_p / a, a_s / s, 1 - (a_s + a_p) / (a + s)


def assert_scored(entry, predicted, reference):
    precision, recall, aer = scores_by_hand(predicted, reference)
    assert (entry["precision"], entry["recall"], entry["aer"]) == pytest.approx((precision, recall, aer))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("align")
    raw = root / "raw"
    small_corpus(raw, n_train=60)
    status, data = call_prepare(root, raw)
    assert status == 0
    plain = train_tiny(data, "transformer", root / "plain", 30, 1, *TRAIN)
    selective = train_tiny(data, "selective_transformer", root / "selective", 30, 1, *TRAIN,
                           "--encoder-selector", "none", "--decoder-selector", "topk",
                           "--cross-selector", "topk", "--topk", "2")
    bitext = root / "test.en-ro"
    pairs = [("The house number 3 is green .", "Casa numărul 3 este verde ."),
             ("A green house .", "O casă verde ."),
             ("The house number 12 is green .", "Casa numărul 12 este verde .")]
    bitext.write_text("".join(f"{a} ||| {b}\n" for a, b in pairs), "utf-8")
    gold = root / "test.gold"
    gold.write_text("1-1 2-1 3-2 4-3 5-4 6-5 7-6\n1-1 2p3 3-2 4-4\n1-1 2-1 3-2 4-3 5-4 6-5 7?6\n", "utf-8")
    return data, plain, selective, bitext, gold, root


def test_last_layer_links_are_fairseqs_print_alignment(models, tmp_path):
    data, plain, *_ = models
    proc = run_cli("fairseq-generate", data, "--user-dir", align.__file__.rsplit("/", 2)[0],
                   "--path", plain, "--gen-subset", "valid", "--score-reference", "--print-alignment",
                   "--batch-size", "1", "--required-batch-size-multiple", "1", "--cpu")
    inp = AnalysisInput(data, plain)
    task = inp.task
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    printed = {int(m.group(1)): m.group(2) for m in re.finditer(r"^A-(\d+)\t(.*)$", proc.stdout, re.M)}
    assert len(printed) == len(dataset)
    for k in range(len(dataset)):
        item = dataset[k]
        matrix = cross_attention_maps(inp.model, item["source"], item["target"], "weights")[-1]
        ours = piece_links(matrix[:-1, :-1], "weights")
        theirs = {tuple(map(int, pair.split("-"))) for pair in printed[k].split()}
        assert ours == theirs, k


def test_the_command_reports_every_layer_and_scores_its_own_links(models, tmp_path, capsys):
    data, plain, _, bitext, gold, _ = models
    out = tmp_path / "plain.json"
    links = tmp_path / "plain.links"
    assert align.main(["--data", str(data), "--checkpoint", str(plain), "--bitext", str(bitext),
                       "--gold", str(gold), "--out", str(out), "--links", str(links),
                       "--links-of", "all"]) == 0
    report = json.loads(out.read_text())
    assert report["links_of"] == "all"
    assert report["rule_layer"] == 0 and report["rule_reading"] == "predicted"
    assert report["langs"] == "en-ro" and report["model"] == "en-ro"
    assert sorted(report["readings"]) == ["predicted", "shifted"]
    reference = read_gold(gold)
    words = [line.split(" ||| ") for line in bitext.read_text().splitlines()]
    parsed = {}
    for reading, layers in report["readings"].items():
        assert [entry["layer"] for entry in layers] == [0, 1]
        for entry in layers:
            predicted = [parse_links(line, "json")[0] for line in entry["links"]]
            parsed[reading, entry["layer"]] = predicted
            for (a, b), sentence in zip(words, predicted):
                assert all(i < len(a.split()) and j < len(b.split()) for i, j in sentence)
                assert len({j for _, j in sentence}) == len(b.split())  # argmax: every target word linked
            assert entry["unlinked_pieces"] == 0  # softmax: no row is all zero
            assert_scored(entry, predicted, reference)
            assert entry["predicted"] == sum(map(len, predicted))
            assert entry["sentence_counts"] == [  # |A|, |S|, |P|, |A&S|, |A&P| a sentence
                [len(x), len(g.sure), len(g.possible), len(x & g.sure), len(x & g.possible)]
                for x, g in zip(predicted, reference)]
    assert links.read_text().splitlines() == report["readings"]["predicted"][0]["links"]
    # the held-apart choice: pairs 0 and 2 (fold 0) take the candidate best on pair 1, and back
    held = report["held_apart"]
    candidates = [("predicted", 0), ("predicted", 1), ("shifted", 0), ("shifted", 1)]
    for fold, own, other in ((0, [0, 2], [1]), (1, [1], [0, 2])):
        aers = [alignment_scores([parsed[c][k] for k in other], [reference[k] for k in other]).aer
                for c in candidates]
        best = candidates[aers.index(min(aers))]
        assert (held["choices"][fold]["reading"], held["choices"][fold]["layer"]) == best
        assert held["choices"][fold]["aer_on_other_folds"] == pytest.approx(min(aers))
        assert [held["links"][k] for k in own] == [report["readings"][best[0]][best[1]]["links"][k] for k in own]
    assert report["sentence_counts_are"] == ["predicted", "sure", "possible", "predicted_sure",
                                             "predicted_possible"]
    assert_scored(held, [parse_links(line, "json")[0] for line in held["links"]], reference)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("predicted, layer 0 (the rule: penultimate decoder layer): AER ")
    assert printed[-1].startswith("held-apart choice (fold 0: ")

    # the same pairs written the other way round (ro ||| en): the same links, transposed; by
    # default (--links-of chosen) only the rule's entry and the held-apart choice keep links,
    # every entry keeps its scores and per-sentence counts
    flipped_bitext = tmp_path / "test.ro-en"
    flipped_bitext.write_text("".join(f"{b} ||| {a}\n" for a, b in words), "utf-8")
    flipped_gold = tmp_path / "flipped.gold"
    flipped_gold.write_text("".join(" ".join([f"{j + 1}-{i + 1}" for i, j in sorted(g.sure)] +
                                             [f"{j + 1}?{i + 1}" for i, j in sorted(g.possible - g.sure)])
                                    + "\n" for g in reference), "utf-8")
    out2 = tmp_path / "flipped.json"
    assert align.main(["--data", str(data), "--checkpoint", str(plain), "--bitext", str(flipped_bitext),
                       "--gold", str(flipped_gold), "--out", str(out2)]) == 0
    flipped = json.loads(out2.read_text())
    assert flipped["links_of"] == "chosen"
    pairs = itertools.chain(*(zip(report["readings"][r], flipped["readings"][r])
                              for r in ("predicted", "shifted")), [(held, flipped["held_apart"])])
    for a, b in pairs:
        assert {key: value for key, value in a.items() if key != "links"} == \
               {key: value for key, value in b.items() if key != "links"}
        kept = a is held or (a is report["readings"]["predicted"][0])
        assert ("links" in b) == kept
        if kept:
            assert [{(j, i) for i, j in parse_links(line, "x")[0]} for line in b["links"]] == \
                   [parse_links(line, "x")[0] for line in a["links"]]


def test_a_romanian_side_without_diacritics_is_named_for_a_model_that_keeps_them(models, tmp_path, capsys):
    """The fixture's data keeps Romanian diacritics: a bitext whose Romanian is written without
    any (as the WPT gold is) is aligned all the same, with a warning naming the preparation flag,
    whichever way round the bitext is written; written with them, it is not warned about."""
    data, plain, _, bitext, _, _ = models
    pairs = [line.split(" ||| ") for line in bitext.read_text("utf-8").splitlines()] * 3
    # (the kept cases also catch the sides mixed up: the English side has no diacritics either)
    for name, strip, warned in (("test.en-ro", True, True), ("test.ro-en", True, True),
                                ("kept.en-ro", False, False), ("kept.ro-en", False, False)):
        path = tmp_path / name
        rows = [(a, without_marks(b) if strip else b) for a, b in pairs]
        path.write_text("".join((f"{b} ||| {a}\n" if name.endswith("ro-en") else f"{a} ||| {b}\n")
                                for a, b in rows), "utf-8")
        assert align.main(["--data", str(data), "--checkpoint", str(plain), "--bitext", str(path),
                           "--langs", name.split(".")[-1], "--out", str(tmp_path / f"{name}.json")]) == 0
        err = capsys.readouterr().err
        assert ("warning: the bitext's ro side has no diacritics in its 48 words" in err) == warned, err
        assert ("--romanian-remove-diacritics" in err) == warned


def test_selection_map_links_what_most_heads_select(models):
    data, _, selective, bitext, *_ = models
    inp = AnalysisInput(data, selective)
    pairs = [tuple(line.split(" ||| ")[k].split() for k in (0, 1)) for line in bitext.read_text().splitlines()]
    result = forced_alignments(inp, pairs, "selection")
    source = inp.encode_words([pairs[0][0]])[0]
    target = inp.encode_words([pairs[0][1]], side="target")[0]
    maps = cross_attention_maps(inp.model, source.tokens, target.tokens, "selection")
    heads = inp.model.decoder.layers[0].encoder_attn.num_heads
    for layer, matrix in enumerate(maps):
        assert torch.all((matrix * heads).round() == matrix * heads)  # shares of heads
        # top-k with k = 2: each head selects two source pieces a target piece
        assert torch.allclose(matrix.sum(-1), torch.full((matrix.size(0),), 2.0))
        for reading, rows in (("predicted", matrix[:-1, :-1]), ("shifted", matrix[1:, :-1])):
            expected = {(source.word_index[s], target.word_index[t])
                        for t, s in (rows > 0.5).nonzero().tolist()}
            assert result.links[reading][layer][0] == expected
    # the target pieces without a majority-selected source piece, counted over every pair
    unlinked = {(reading, layer): 0 for reading in ("predicted", "shifted") for layer in range(len(maps))}
    for a, b in pairs:
        source = inp.encode_words([a])[0]
        target = inp.encode_words([b], side="target")[0]
        for layer, matrix in enumerate(cross_attention_maps(inp.model, source.tokens, target.tokens, "selection")):
            for reading, rows in (("predicted", matrix[:-1, :-1]), ("shifted", matrix[1:, :-1])):
                unlinked[reading, layer] += int((rows <= 0.5).all(-1).sum())
    assert {(r, l): result.unlinked[r][l] for r, l in unlinked} == unlinked


def test_each_given_word_is_encoded_on_its_own(models):
    """AnalysisInput.encode_words, how ssan-align maps pieces to the gold's words: each word's
    pieces (the word Moses-tokenised on its own, written out by hand here, then sentencepiece)
    in order, every piece indexed by its word; a word the tokeniser splits ("12," -> "12 ,")
    or sentencepiece splits stays one word, and the words after it keep their indices."""
    data, plain, *_ = models
    inp = AnalysisInput(data, plain)
    sp = inp.pipeline.sp
    for side, words, tokenised in (
            ("source", ["The", "housenumber", "12,", "green."], ["The", "housenumber", "12 ,", "green ."]),
            ("target", ["Casa", "numărul", "12,", "verde"], ["Casa", "numărul", "12 ,", "verde"])):
        expected = [sp.encode(text, out_type=str) for text in tokenised]
        assert max(map(len, expected)) > 1  # some word is several pieces
        encoded = inp.encode_words([words], side=side)[0]
        assert encoded.pieces == [p for pieces in expected for p in pieces] + ["</s>"]
        assert encoded.word_index == [k for k, pieces in enumerate(expected) for _ in pieces] + [-1]
        assert encoded.n_words == len(words)
        dictionary = inp.dictionary if side == "source" else inp.task.target_dictionary
        assert encoded.tokens.tolist() == [dictionary.index(p) for p in encoded.pieces]  # unk too


def test_bad_input_is_one_line(models, tmp_path, capsys):
    data, plain, _, bitext, gold, root = models
    cases = [
        (["--map", "selection"], "needs a model whose every decoder layer's cross attention selects"),
        (["--langs", "de-fr"], "the model translates en-ro, the bitext is de-fr"),
    ]
    for extra, message in cases:
        status = align.main(["--data", str(data), "--checkpoint", str(plain), "--bitext", str(bitext),
                             "--out", str(tmp_path / "x.json"), "--overwrite", *extra])
        err = capsys.readouterr().err
        last = err.strip().splitlines()[-1]  # (fairseq logs its dictionaries first)
        assert status == 2 and last.startswith("align.py: error: ") and message in last, err
        assert "Traceback" not in err and "forced decoding" not in err, err  # refused before the work
    short_gold = tmp_path / "short.gold"
    short_gold.write_text("1-1\n", "utf-8")
    assert align.main(["--data", str(data), "--checkpoint", str(plain), "--bitext", str(bitext),
                       "--gold", str(short_gold), "--out", str(tmp_path / "y.json")]) == 2
    assert "--gold has 1 lines, --bitext 3" in capsys.readouterr().err
    outside = tmp_path / "outside.gold"
    outside.write_text("9-1\n1-1\n1-1\n", "utf-8")
    assert align.main(["--data", str(data), "--checkpoint", str(plain), "--bitext", str(bitext),
                       "--gold", str(outside), "--out", str(tmp_path / "z.json")]) == 2
    assert "link 9-1 outside a sentence" in capsys.readouterr().err
    empty = tmp_path / "empty.ro-en"
    empty.write_text("", "utf-8")
    for aligner in (["--diagonal"], ["--data", str(data), "--checkpoint", str(plain)]):
        assert align.main([*aligner, "--bitext", str(empty), "--out", str(tmp_path / "e.json")]) == 2
        assert "holds no sentence pair" in capsys.readouterr().err
    # the bitext's sides, a line with an empty side, a malformed gold link, a peer's --data without
    # a manifest: one line each, named, before any model or aligner runs
    no_suffix = tmp_path / "pairs"
    no_suffix.write_text(bitext.read_text("utf-8"), "utf-8")
    half = tmp_path / "half.en-ro"
    half.write_text("A house . ||| O casă .\nThe house . ||| \n", "utf-8")
    bad_gold = tmp_path / "bad.gold"
    bad_gold.write_text("1-1\n1-1 2x2\n1-1\n", "utf-8")
    (tmp_path / "no-manifest").mkdir()
    model = ["--data", str(data), "--checkpoint", str(plain)]
    cases = [
        ([*model, "--bitext", str(bitext), "--langs", "en"], "--langs: name the bitext's two sides as A-B (e.g. ro-en); got 'en'"),
        ([*model, "--bitext", str(bitext), "--langs", "en-ro-de"], "got 'en-ro-de'"),
        ([*model, "--bitext", str(bitext), "--langs=-ro"], "got '-ro'"),
        ([*model, "--bitext", str(no_suffix)], f"{no_suffix} has no such suffix"),
        ([*model, "--bitext", str(half)], f"{half}: line 2 has an empty side"),
        ([*model, "--bitext", str(bitext), "--gold", str(bad_gold)],
         f"{bad_gold}: line 2: '2x2' is not a link i-j (sure) or i?j / ipj (possible)"),
        (["--eflomal-train", str(root / "raw" / "train"), "--data", str(tmp_path / "no-manifest"),
          "--bitext", str(bitext)], "manifest.json not found"),
    ]
    for argv, message in cases:
        status = align.main([*argv, "--out", str(tmp_path / "b.json")])
        err = capsys.readouterr().err
        assert status == 2 and len(err.strip().splitlines()) == 1 and message in err, (argv, err)
        assert not (tmp_path / "b.json").exists()


def test_a_held_apart_choice_that_cannot_be_made_is_said(models, tmp_path, capsys):
    """One sentence pair cannot be split into two folds: the report and the printout say that
    the held-apart choice was not made, instead of leaving it out silently."""
    data, plain, _, bitext, gold, _ = models
    one, one_gold = tmp_path / "one.en-ro", tmp_path / "one.gold"
    one.write_text(bitext.read_text("utf-8").splitlines()[0] + "\n", "utf-8")
    one_gold.write_text(gold.read_text("utf-8").splitlines()[0] + "\n", "utf-8")
    out = tmp_path / "one.json"
    assert align.main(["--data", str(data), "--checkpoint", str(plain), "--bitext", str(one),
                       "--gold", str(one_gold), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["held_apart"] is None
    assert report["held_apart_not_made"] == "1 sentence pair: the held-apart choice needs at least 2, one a fold"
    assert capsys.readouterr().out.splitlines()[-1] == f"held-apart choice: not made ({report['held_apart_not_made']})"


def test_show_selection_draws_the_decoder_sites_maps(models, tmp_path):
    """top-k with k = 2 at both decoder sites: a target query t keeps min(2, t + 1) earlier or
    equal target pieces and two source pieces, in every head of every layer."""
    data, _, selective, *_ = models
    out = tmp_path / "maps"
    assert show_selection.main(["--data", str(data), "--checkpoint", str(selective),
                                "--sentence", "A green house.", "--target", "O casă verde.",
                                "--out", str(out)]) == 0
    record = json.loads((out / "sent1.json").read_text())
    n_target, n_source = len(record["target_pieces"]), len(record["pieces"])
    assert sorted(record["decoder"]) == sorted(record["cross"]) == ["0", "1"]
    for layer in ("0", "1"):
        decoder, cross = torch.tensor(record["decoder"][layer]), torch.tensor(record["cross"][layer])
        assert decoder.shape[1:] == (n_target, n_target) and cross.shape[1:] == (n_target, n_source)
        assert not decoder.triu(1).any()  # never a later target piece
        rows = torch.arange(n_target)
        assert torch.equal(decoder.sum(-1), torch.minimum(rows + 1, torch.tensor(2)).expand_as(decoder.sum(-1)))
        assert (cross.sum(-1) == 2).all()
    assert (out / "sent1_decoder_selection.png").is_file() and (out / "sent1_cross_selection.png").is_file()


def test_the_eflomal_peer_is_scored_in_the_same_layout(models, tmp_path, capsys):
    data, plain, _, bitext, gold, root = models
    out = tmp_path / "eflomal.json"
    assert align.main(["--eflomal-train", str(root / "raw" / "train"), "--bitext", str(bitext),
                       "--gold", str(gold), "--out", str(out), "--eflomal-runs", "3"]) == 0
    report = json.loads(out.read_text())
    assert report["peer"] == "eflomal" and report["train_pairs"] == 60 and report["sentences"] == 3
    assert report["runs"] == 3
    assert [d["direction"] for d in report["directions"]] == ["forward", "reverse", "intersection", "union"]
    reference = read_gold(gold)
    for entry in report["directions"]:
        predicted = [parse_links(line, "json")[0] for line in entry["links"]]  # the first run's
        first_run = [entry[f"{field}_runs"][0] for field in ("precision", "recall", "aer")]
        assert first_run == pytest.approx(scores_by_hand(predicted, reference))
        assert entry["sentence_counts"] == [  # the first run's
            [len(x), len(g.sure), len(g.possible), len(x & g.sure), len(x & g.possible)]
            for x, g in zip(predicted, reference)]
        for field in ("precision", "recall", "aer"):  # mean and sample standard deviation
            runs = entry[f"{field}_runs"]
            assert len(runs) == 3 and entry[field] == pytest.approx(statistics.mean(runs))
            assert entry[f"{field}_sd"] == pytest.approx(statistics.stdev(runs))
    # the bitext's words against the training text, per side, counted over the bitext's tokens
    words = read_bitext(bitext)
    side_a, side_b = bitext.suffix[1:].split("-")
    assert list(report["gold_words"]) == [side_a, side_b]
    for side, lang in enumerate((side_a, side_b)):
        entry = report["gold_words"][lang]
        assert entry["tokens"] == sum(len(pair[side]) for pair in words)
        assert 0 <= entry["unseen"] <= entry["tokens"] and 0 <= entry["other_marks"] <= entry["tokens"]
    printed = capsys.readouterr().out
    assert "eflomal forward: AER" in printed and f"{side_a} words of --bitext: " in printed
    assert report["data"] is None
    # a model and the peer at once, the peer and the diagonal, --data alone or with the diagonal,
    # --checkpoint without --data, or nothing: refused by argparse (exit 2); so is an option of
    # another aligner, which would otherwise be ignored
    model = ["--data", str(data), "--checkpoint", str(plain)]
    for argv, message in (
            (["--eflomal-train", "x", *model], "one of them"),
            (["--eflomal-train", "x", "--diagonal"], "one of them"),
            (["--diagonal", "--checkpoint", str(plain)], "one of them"),
            (["--diagonal", "--data", str(data)], "one of them"),
            (["--data", str(data)], "one of them"), (["--checkpoint", str(plain)], "one of them"),
            ([], "one of them"),
            (["--diagonal", "--map", "selection"], "--map: not an option of this aligner"),
            (["--eflomal-train", "x", "--links-of", "all"], "--links-of: not an option"),
            (["--diagonal", "--eflomal-runs", "2"], "--eflomal-runs: not an option"),
            ([*model, "--eflomal-runs", "2", "--map", "weights"], "error: --eflomal-runs: not an option"),
            (["--eflomal-train", "x", "--map", "weights", "--links-of", "chosen"],
             "--map, --links-of: not an option")):
        with pytest.raises(SystemExit) as info:
            align.main([*argv, "--bitext", str(bitext), "--out", str(tmp_path / "n.json")])
        assert info.value.code == 2 and message in capsys.readouterr().err, argv


def test_the_peer_reads_its_text_as_the_data_manifest_says(models, tmp_path, capsys):
    """--eflomal-train with --data: the training text is tokenised with the manifest's options.
    A manifest that removes Romanian diacritics makes the training text write "numarul", so the
    bitext's two "numărul" are no longer seen in it as written; a data-bin of another pair is
    refused in one line."""
    data, *_, bitext, gold, root = models
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest["languages"]["ro"]["romanian_remove_diacritics"] is False
    manifest["languages"]["ro"]["romanian_remove_diacritics"] = True
    plain_data = tmp_path / "without-diacritics"
    plain_data.mkdir()
    (plain_data / "manifest.json").write_text(json.dumps(manifest))
    reports = {}
    for name, extra in (("defaults", []), ("data", ["--data", str(data)]),
                        ("without", ["--data", str(plain_data)])):
        out = tmp_path / f"{name}.json"
        assert align.main(["--eflomal-train", str(root / "raw" / "train"), "--bitext", str(bitext),
                           "--gold", str(gold), "--out", str(out), "--eflomal-runs", "1", *extra]) == 0
        reports[name] = json.loads(out.read_text())
    assert reports["data"]["data"] == str(data)
    assert reports["data"]["gold_words"] == reports["defaults"]["gold_words"]  # the same options
    unseen = {name: report["gold_words"]["ro"]["unseen"] for name, report in reports.items()}
    assert unseen["without"] == unseen["defaults"] + 2
    assert reports["without"]["gold_words"]["en"] == reports["defaults"]["gold_words"]["en"]
    manifest["src"], manifest["tgt"] = "en", "de"
    manifest["languages"] = {"en": manifest["languages"]["en"],
                             "de": dict(manifest["languages"]["ro"], lang="de")}
    other = tmp_path / "en-de"
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    status = align.main(["--eflomal-train", str(root / "raw" / "train"), "--bitext", str(bitext),
                         "--out", str(tmp_path / "n.json"), "--data", str(other)])
    err = capsys.readouterr().err
    assert status == 2 and err.strip().splitlines() == [
        "align.py: error: --data prepares en-de, the bitext is en-ro (--langs)"], err
    assert not (tmp_path / "n.json").exists()


def test_the_diagonal_reference_is_scored_in_the_peers_layout(models, tmp_path, capsys):
    """--diagonal: one run, the four directions, each one link per word of the side it links
    from, scored as the written links score; --links writes the forward direction's."""
    *_, bitext, gold, _ = models
    out, links = tmp_path / "diagonal.json", tmp_path / "diagonal.links"
    assert align.main(["--diagonal", "--bitext", str(bitext), "--gold", str(gold), "--out", str(out),
                       "--links", str(links)]) == 0
    report = json.loads(out.read_text())
    assert report["peer"] == "diagonal" and report["runs"] == 1 and report["sentences"] == 3
    assert [d["direction"] for d in report["directions"]] == ["forward", "reverse", "intersection", "union"]
    words, reference = read_bitext(bitext), read_gold(gold)
    for entry in report["directions"]:
        predicted = [parse_links(line, "json")[0] for line in entry["links"]]
        assert_scored(entry, predicted, reference)
        assert entry["aer_runs"] == [entry["aer"]] and entry["aer_sd"] == 0.0
        assert entry["sentence_counts"] == [  # what a seed-level test against a model reads
            [len(x), len(g.sure), len(g.possible), len(x & g.sure), len(x & g.possible)]
            for x, g in zip(predicted, reference)]
    forward = [parse_links(line, "json")[0] for line in report["directions"][0]["links"]]
    for (a, b), sentence in zip(words, forward):  # each B word once, at its relative position
        assert sorted(j for _, j in sentence) == list(range(len(b)))
        assert all(i == int((j + 0.5) * len(a) / len(b)) for i, j in sentence)
    assert links.read_text().splitlines() == report["directions"][0]["links"]
    assert "diagonal forward: AER " in capsys.readouterr().out
