"""Sentence pairs through the public CLIs: prepare_pairs.py, fairseq-train --task
sentence_pair, evaluate_pairs.py, and --encoder-init from a translation checkpoint.

A synthetic SICK-layout corpus (tests/helpers/pairs_cli.py) is prepared once per module; every
encoder is trained on it for a few updates and all are evaluated in one call. The test on the
real SICK / SNLI files skips when ../shared/data is absent.
"""

import json
import sys

import pytest
import torch
from helpers.pairs_cli import (
    NLI,
    ROOT,
    TINY_PAIR_MODEL,
    build_pair,
    evaluate,
    prepare,
    run,
    sick_rows,
    train,
    write_sick,
    write_snli,
)
from conftest import message_lines, require_shared
from helpers.translation_testlib import load_script, prepare as prepare_translation, train_tiny

from ssan_plugin.pairs import datadir
from ssan_plugin.pairs.corpus import LABELS
from ssan_plugin.pairs.metrics import entailment_metrics, relatedness_metrics

ENCODERS = ("san", "ssan", "disan", "biblosan", "resa")


@pytest.fixture(scope="module")
def sick(tmp_path_factory):
    raw = tmp_path_factory.mktemp("sick_raw")
    write_sick(raw / "train.tsv", sick_rows(90))
    write_sick(raw / "valid.tsv", sick_rows(30, start_id=500), "TRIAL")
    test_rows = sick_rows(25, start_id=900)[::-1]  # ids not in order: the output keeps input order
    write_sick(raw / "test.tsv", test_rows, "TEST")
    dest = tmp_path_factory.mktemp("sick") / "bin"
    prepare("sick", raw / "train.tsv", raw / "valid.tsv", raw / "test.tsv", dest,
            "--vocab-size", 40)
    return raw, dest, test_rows


def test_prepare_sick_manifest_gold_and_text(sick):
    raw, dest, test_rows = sick
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["format"] == "sick" and manifest["tokens"] == "spm"
    assert {s: c["pairs"] for s, c in manifest["counts"].items()} == {"train": 90, "valid": 30,
                                                                      "test": 25}
    assert manifest["counts"]["train"]["labels"] == {"entailment": 30, "neutral": 30,
                                                     "contradiction": 30}
    assert manifest["inputs"]["test"][0]["path"] == str((raw / "test.tsv").resolve())
    assert "fairseq_cli.preprocess" in manifest["commands"]["fairseq_preprocess"]
    gold = datadir.read_gold(datadir.gold_path(dest, "test"))
    assert [(p.pair_id, p.label, p.score) for p in gold] == [
        (i, label.lower(), score) for i, _, _, label, score in test_rows]
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(dest / "spm.model"))
    pieces = (dest / "text" / "test.s2").read_text().splitlines()
    assert [sp.decode_pieces(p.split()) for p in pieces] == [b for _, _, b, _, _ in test_rows]
    assert (dest / "dict.s1.txt").read_text() == (dest / "dict.s2.txt").read_text()


def test_every_encoder_trains_and_evaluates(sick, tmp_path):
    _, data, test_rows = sick
    systems = []
    for encoder in ENCODERS:
        extra = ("--select-scale", "0.01") if encoder in ("ssan", "resa") else ()
        checkpoint, proc = train(data, tmp_path / encoder, encoder, *extra, target="both")
        log = proc.stdout + proc.stderr
        assert "num_updates 4" in log and "accuracy" in log and "mse" in log
        if encoder in ("ssan", "resa"):
            assert "sel_1=" in log and "ssan_reg=" in log  # the selective logging applies
        if encoder == "resa":
            assert "resa_pg=" in log  # REINFORCE switched on
        systems.append(f"{encoder}={checkpoint}")
    systems.append(f"san_again={tmp_path / 'san' / 'checkpoint_last.pt'}")
    out = tmp_path / "eval"
    proc = evaluate(data, systems, out / "scores.json", "--predictions", out / "pred.tsv",
                    "--batch-size", 7)
    assert "| ssan |" in proc.stdout
    result = json.loads((out / "scores.json").read_text())
    assert result["pairs"] == 25 and list(result["systems"]) == [*ENCODERS, "san_again"]
    gold_labels = [label.lower() for _, _, _, label, _ in test_rows]
    gold_scores = [score for *_, score in test_rows]
    for name, system in result["systems"].items():
        rows = [line.split("\t") for line in (out / f"pred.{name}.tsv").read_text().splitlines()]
        assert [r[0] for r in rows] == [i for i, *_ in test_rows]  # one line per pair, input order
        labels, scores = [r[1] for r in rows], [float(r[2]) for r in rows]
        assert set(labels) <= set(LABELS) and all(1 <= s <= 5 for s in scores)
        expected = entailment_metrics(gold_labels, labels)
        assert system["entailment"]["accuracy"] == pytest.approx(expected["accuracy"])
        assert system["entailment"]["confusion"] == expected["confusion"]
        for label in LABELS:
            assert system["entailment"]["per_class"][label] == pytest.approx(
                expected["per_class"][label])
        rel = relatedness_metrics(gold_scores, scores)  # from the 4-decimal file: close
        assert system["relatedness"]["mse"] == pytest.approx(rel["mse"], abs=1e-3)
    comparisons = result["comparisons"]
    assert set(comparisons) == {*ENCODERS[1:], "san_again"}
    for name, test in comparisons.items():
        assert test["against"] == "san"
        for metric in ("accuracy", "pearson", "mse"):
            assert 0 < test[metric]["p_value"] <= 1
    assert all(comparisons["san_again"][m]["p_value"] == 1.0 for m in ("accuracy", "pearson", "mse"))

    # the same predictions files scored without checkpoints (--pred): the same numbers (scores
    # as written, 4 decimals), the same comparisons
    preds = [str(tmp_path / "eval" / f"pred.{name}.tsv") for name in result["systems"]]
    again = tmp_path / "again.json"
    assert EVALUATE.main(["--data", str(data), "--json", str(again), "--bootstrap-samples", "200", *[
        a for name, path in zip(result["systems"], preds) for a in ("--pred", f"{name}={path}")]]) == 0
    scored = json.loads(again.read_text())
    assert list(scored["systems"]) == list(result["systems"])
    for name, system in scored["systems"].items():
        assert system["entailment"] == result["systems"][name]["entailment"]
        assert system["relatedness"]["mse"] == pytest.approx(
            result["systems"][name]["relatedness"]["mse"], abs=1e-3)
    for name, test in scored["comparisons"].items():
        assert test["accuracy"] == comparisons[name]["accuracy"]

    # seeds pooled: GROUP@SEED names; two "seeds" of san (san, san_again: the same model) against
    # ssan and disan; the group's mean is the mean of its members', its test the pooled one
    by_name = dict(zip(result["systems"], preds))
    spec = [("san@1", "san"), ("san@2", "san_again"), ("ssan@1", "ssan"), ("ssan@2", "disan")]
    pooled = tmp_path / "pooled.json"
    assert EVALUATE.main(["--data", str(data), "--json", str(pooled), "--bootstrap-samples", "200",
                          *[a for new, old in spec for a in ("--pred", f"{new}={by_name[old]}")]]) == 0
    groups = json.loads(pooled.read_text())["groups"]
    assert [(g["name"], g["n_seeds"], g["systems"]) for g in groups] == [
        ("san", 2, ["san@1", "san@2"]), ("ssan", 2, ["ssan@1", "ssan@2"])]
    accuracy = {name: s["entailment"]["accuracy"] for name, s in scored["systems"].items()}
    assert groups[1]["mean"]["accuracy"] == pytest.approx((accuracy["ssan"] + accuracy["disan"]) / 2)
    assert groups[0]["std"]["accuracy"] == 0  # two identical seeds
    test = groups[1]["comparison"]
    assert test["against"] == "san"
    assert test["accuracy"]["delta"] == pytest.approx(
        (accuracy["ssan"] + accuracy["disan"]) / 2 - accuracy["san"])
    assert 0 < test["accuracy"]["p_value"] <= 1 and set(test) >= {"accuracy", "pearson", "mse"}


def test_evaluate_pred_files_bad_input(sick, tmp_path, capsys):
    """--pred files out of step with the subset: one line naming the file and line, exit 2."""
    _, data, test_rows = sick
    good = [f"{i}\t{label.lower()}\t{score:.4f}" for i, _, _, label, score in test_rows]
    cases = {
        "short": (good[:-1], "24 lines for the 25 pairs of the subset"),
        "order": ([good[1], good[0], *good[2:]],
                  f":1: pair '{test_rows[1][0]}' where the subset has '{test_rows[0][0]}'"),
        "label": ([f"{test_rows[0][0]}\tmaybe\t3.0", *good[1:]], ":1: unknown label 'maybe'"),
        "score": ([good[0].rsplit("\t", 1)[0] + "\thigh", *good[1:]], ":1: score 'high' is not a number"),
        "nan": ([*good[:2], good[2].rsplit("\t", 1)[0] + "\tnan", *good[3:]],
                ":3: score 'nan' is not a finite number"),
        "inf": ([good[0].rsplit("\t", 1)[0] + "\t-inf", *good[1:]],
                ":1: score '-inf' is not a finite number"),
        "fields": ([good[0].replace("\t", " "), *good[1:]], ":1: expected pair_ID, label, score"),
        "mixed": ([good[0].rsplit("\t", 1)[0] + "\t-", *good[1:]], ":1: score missing (-)"),
    }
    for name, (lines, message) in cases.items():
        path = tmp_path / f"{name}.tsv"
        path.write_text("\n".join(lines) + "\n")
        assert EVALUATE.main(["--data", str(data), "--json", str(tmp_path / "e.json"),
                              "--pred", f"x={path}"]) == 2, name
        err = message_lines(capsys.readouterr().err)
        assert len(err) == 1 and str(path) in err[0] and message in err[0], (name, err)


def test_encoder_init_loads_exactly_the_translation_encoder(sick, tmp_path):
    raw_pairs, _, _ = sick
    corpus = tmp_path / "mt"
    corpus.mkdir()
    sentences = [a for _, a, _, _, _ in sick_rows(60)]
    for split, n in (("train", 60), ("valid", 10), ("test", 10)):
        (corpus / f"{split}.en").write_text("\n".join(sentences[:n]) + "\n")
        (corpus / f"{split}.de").write_text("\n".join(" ".join(reversed(s.split()))
                                                      for s in sentences[:n]) + "\n")
    mt_bin = tmp_path / "mt_bin"
    prepare_translation("en", "de", corpus, mt_bin, 60)
    mt_checkpoint = train_tiny(mt_bin, "transformer", tmp_path / "mt_ckpt", 2)

    pair_bin = tmp_path / "pair_bin"
    prepare("sick", raw_pairs / "train.tsv", raw_pairs / "valid.tsv", raw_pairs / "test.tsv",
            pair_bin, "--translation-data", mt_bin, "--lang", "en")
    manifest = json.loads((pair_bin / "manifest.json").read_text())
    assert manifest["dictionary"]["from"] == str((mt_bin / "dict.en.txt").resolve())
    assert (pair_bin / "dict.s1.txt").read_text() == (mt_bin / "dict.en.txt").read_text()

    shape = ("--encoder-layers", 1, "--encoder-embed-dim", 32, "--encoder-ffn-embed-dim", 64,
             "--encoder-attention-heads", 2)
    _, model, _ = build_pair(pair_bin, *shape, "--pair-encoder", "ssan",
                             "--encoder-init", mt_checkpoint)
    translation = {k[len("encoder."):]: v for k, v in
                   torch.load(mt_checkpoint, weights_only=True)["model"].items()
                   if k.startswith("encoder.")}
    pair = model.encoder.state_dict()
    new = sorted(set(pair) - set(translation))
    assert new and all(".policy_proj." in name or name.endswith(".selector_name") for name in new)  # SSAN's only
    assert set(translation) <= set(pair)
    for name, value in translation.items():
        assert torch.equal(pair[name], value), name
    _, fresh, _ = build_pair(pair_bin, *shape, "--pair-encoder", "ssan")
    assert not torch.equal(fresh.encoder.embed_tokens.weight, pair["embed_tokens.weight"])

    # through fairseq-train: the transfer is logged; a checkpoint reload does not redo it
    checkpoint, proc = train(pair_bin, tmp_path / "ckpt", "ssan", "--encoder-init", mt_checkpoint,
                             updates=1, shape=shape)
    log = proc.stdout + proc.stderr
    assert f"--encoder-init {mt_checkpoint}: {len(translation)} encoder tensors loaded" in log
    assert "new (freshly initialised): encoder.layers.0.self_attn.selector.policy_proj.weight" in log
    mt_checkpoint.unlink()
    evaluate(pair_bin, [str(checkpoint)], tmp_path / "e.json", subset="valid")

    with pytest.raises(Exception, match="the checkpoint's encoder has 1 layers, the pair encoder 2"):
        build_pair(pair_bin, *TINY_PAIR_MODEL, "--encoder-init", tmp_path / "ckpt" / "checkpoint_last.pt")


def test_prepare_snli_words(tmp_path):
    rows = [("A man sleeps .", "A person rests .", "entailment"),
            ("A dog runs .", "A cat runs .", "contradiction"),
            ("Kids play .", "Kids play outside .", "neutral")] * 4
    write_snli(tmp_path / "snli", "dev", rows)
    spec = str(tmp_path / "snli" / "dev")
    dest = tmp_path / "bin"
    prepare("snli", spec, spec, spec, dest, "--tokens", "words")
    assert (dest / "text" / "valid.s2").read_text().splitlines()[:2] == ["A person rests .",
                                                                        "A cat runs ."]
    gold = datadir.read_gold(datadir.gold_path(dest, "test"))
    assert [(p.pair_id, p.label, p.score) for p in gold][:2] == [("1", "entailment", None),
                                                                 ("2", "contradiction", None)]
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["sentencepiece"] is None and manifest["counts"]["train"]["with_score"] == 0


# ---------------------------------------------------------------- bad input

PREPARE = load_script("prepare_pairs")
EVALUATE = load_script("evaluate_pairs")


def test_prepare_bad_input_one_line_exit_2(tmp_path, capsys):
    good = tmp_path / "good.tsv"
    write_sick(good, sick_rows(6))
    bad = tmp_path / "bad.tsv"
    write_sick(bad, sick_rows(6))
    bad.write_text(bad.read_text().replace("\t3.5\t", "\t7\t", 1))
    dest = tmp_path / "bin"
    argv = ["--format", "sick", "--train", str(good), "--valid", str(bad), "--test", str(good),
            "--dest", str(dest)]
    assert PREPARE.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"prepare_pairs.py: error: {bad}:3: relatedness_score '7' is not a number "
                       "in [1, 5]")
    assert not dest.exists()
    argv[3] = str(tmp_path / "missing.tsv")
    assert PREPARE.main(argv) == 2
    assert "missing.tsv: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        PREPARE.main(argv[:8] + ["--vocab-size", "3"])
    assert exit_.value.code == 2
    assert "argument --vocab-size: must be an integer >= 8, got '3'" in capsys.readouterr().err
    write_snli(tmp_path / "snli", "dev", [("a .", "b .", "neutral")])
    (tmp_path / "snli" / "labels.dev").write_text("neutral\nneutral\n")
    spec = str(tmp_path / "snli" / "dev")
    assert PREPARE.main(["--format", "snli", "--train", spec, "--valid", spec, "--test", spec,
                         "--dest", str(dest)]) == 2
    assert "prepare_pairs.py: error: misaligned SNLI files:" in capsys.readouterr().err


def test_evaluate_bad_input_one_line_exit_2(sick, tmp_path, capsys):
    _, data, _ = sick
    out = str(tmp_path / "e.json")
    assert EVALUATE.main(["--data", str(data), "--checkpoint", str(tmp_path / "none.pt"),
                          "--json", out]) == 2
    assert "none.pt: no such file" in capsys.readouterr().err
    not_pairs = tmp_path / "other.pt"
    torch.save({"model": {}, "cfg": {"task": {"_name": "translation"},
                                     "model": {"_name": "transformer"}}}, not_pairs)
    assert EVALUATE.main(["--data", str(data), "--checkpoint", str(not_pairs), "--json", out]) == 2
    assert "expected a checkpoint of task 'sentence_pair'" in capsys.readouterr().err
    assert EVALUATE.main(["--data", str(data), "--checkpoint", str(not_pairs), "--json", out,
                          "--subset", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--subset nope: " in err and "prepared splits: test, train, valid" in err
    assert EVALUATE.main(["--data", str(tmp_path / "nodir"), "--checkpoint", str(not_pairs),
                          "--json", out]) == 2
    assert "nodir: no such directory" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        EVALUATE.main(["--data", str(data), "--checkpoint", "=x", "--json", out])


def test_shared_sick_and_snli_slices(tmp_path):
    require_shared("nli/sick")
    require_shared("nli/snli")
    for split, n in (("train", 121), ("valid", 41)):
        lines = (NLI / "sick" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[:n]
        (tmp_path / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    dest = tmp_path / "sick"
    prepare("sick", tmp_path / "train.tsv", tmp_path / "valid.tsv", tmp_path / "valid.tsv", dest,
            "--vocab-size", 300)
    checkpoint, _ = train(dest, tmp_path / "ckpt", "disan", target="relatedness", updates=3)
    evaluate(dest, [str(checkpoint)], tmp_path / "e.json", "--predictions", tmp_path / "p.tsv")
    result = json.loads((tmp_path / "e.json").read_text())["systems"]["ckpt"]
    assert "entailment" not in result and result["relatedness"]["pairs"] == 40
    assert (tmp_path / "p.tsv").read_text().splitlines()[0].split("\t")[:2] == ["4", "-"]

    snli = tmp_path / "snli"
    snli.mkdir()
    for name in ("s1", "s2", "labels"):
        lines = (NLI / "snli" / f"{name}.dev").read_text(encoding="utf-8").splitlines()[:50]
        (snli / f"{name}.dev").write_text("\n".join(lines) + "\n", encoding="utf-8")
    spec = str(snli / "dev")
    prepare("snli", spec, spec, spec, tmp_path / "snli_bin", "--vocab-size", 200)
    assert json.loads((tmp_path / "snli_bin" / "manifest.json").read_text())["language"]["segmented"]


# ---------------------------------------------------------------- the part-5 runner (dry runs only)

RUNNER = ROOT / "examples" / "pairs" / "run_pairs.py"


def test_runner_skips_finished_runs_and_plans_transfer(tmp_path):
    out, archive = tmp_path / "out", tmp_path / "archive"
    (archive / "entailment_scratch_san_s1").mkdir(parents=True)
    (archive / "entailment_scratch_san_s1" / "result.json").write_text("{}")
    proc = run([sys.executable, RUNNER, "--out", out, "--archive", archive, "--dry-run",
                "--encoders", "san,ssan",
                "--seeds", "1", "--targets", "entailment", "--inits", "scratch,translation",
                "--translation-data", tmp_path / "mt", "--translation-checkpoint",
                f"ssan={tmp_path / 'ssan.pt'}"])
    lines = proc.stdout.splitlines()
    assert any(line.endswith("[1/4] entailment_scratch_san_s1: done, skipped") for line in lines)
    assert any(line.endswith("[3/4] entailment_translation_san_s1: no --translation-checkpoint "
                             "san=..., skipped") for line in lines)
    trains = [line for line in lines if "fairseq-train" in line]
    assert len(trains) == 2  # scratch ssan, translation ssan
    assert "--encoder-init" not in trains[0] and "--pair-encoder ssan" in trains[0]
    assert f"--encoder-init {tmp_path / 'ssan.pt'}" in trains[1]
    for flag in ("--required-batch-size-multiple 1", "--best-checkpoint-metric accuracy",
                 "--arch pair_classifier_small", "--max-update 1500"):
        assert flag in trains[0]


def test_runner_one_at_a_time_and_summary(tmp_path):
    import fcntl

    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proc = run([sys.executable, RUNNER, "--out", out, "--dry-run"], check=False)
    assert proc.returncode == 1 and "another run_pairs.py is running on" in proc.stderr
    runner = load_module(RUNNER)
    for name, seed, valid, test in (("a", 1, 0.70, 0.60), ("b", 2, 0.80, 0.80)):
        (out / name).mkdir()
        (out / name / "result.json").write_text(json.dumps({
            "target": "relatedness", "init": "scratch", "encoder": "ssan", "seed": seed,
            "valid": {"relatedness": {"pearson": valid}}, "test": {"relatedness": {"pearson": test}}}))
    (out / "compare").mkdir()
    (out / "compare" / "relatedness_scratch_s1.json").write_text(json.dumps({
        "systems": {"san": {"relatedness": {"pearson": 0.5}}, "ssan": {"relatedness": {"pearson": 0.6}}},
        "comparisons": {"ssan": {"pearson": {"delta": 0.1, "p_value": 0.25}}}}))
    runner.summarise(out)
    lines = (out / "summary.md").read_text().splitlines()
    assert lines[2] == "| relatedness | scratch | ssan | 2 | pearson 0.7 ± 0.14 | 0.75 |"
    assert lines[-2:] == ["| relatedness_scratch_s1 | san | pearson 0.5 | (first) |  |",
                          "| relatedness_scratch_s1 | ssan | pearson 0.6 | +0.1 | 0.25 |"]


def test_runner_archives_runs_and_compares_from_predictions(tmp_path):
    """A tiny real plan on SICK (2 encoders, 1 seed, 2 updates): each run's result, predictions
    and curve land in the archive, the per-seed comparison is made from the archived
    predictions (no checkpoint), and a second runner on a fresh OUT trains nothing."""
    require_shared("nli/sick")
    out, archive = tmp_path / "out", tmp_path / "archive"
    args = [sys.executable, RUNNER, "--archive", archive, "--encoders", "san,ssan", "--seeds", "1",
            "--targets", "entailment", "--updates", "2", "--save-interval", "1",
            "--vocab-size", "1000", "--threads", "1"]
    run([*args, "--out", out])
    for encoder in ("san", "ssan"):
        kept = archive / f"entailment_scratch_{encoder}_s1"
        result = json.loads((kept / "result.json").read_text())
        assert result["test"]["entailment"]["pairs"] == 495 and result["valid"]["entailment"]["pairs"] == 500
        assert len((kept / "test.predictions.tsv").read_text().splitlines()) == 495
        curve = [json.loads(x) for x in (kept / "curve.jsonl").read_text().splitlines()]
        assert any(r["kind"] == "valid" for r in curve)
    compare = json.loads((archive / "compare" / "entailment_scratch_s1.json").read_text())
    assert list(compare["systems"]) == ["san", "ssan"] and compare["comparisons"]["ssan"]["against"] == "san"
    ssan = json.loads((archive / "entailment_scratch_ssan_s1" / "result.json").read_text())
    assert compare["systems"]["ssan"]["entailment"] == ssan["test"]["entailment"]
    assert "| entailment | scratch | ssan | 1 |" in (archive / "summary.md").read_text()
    again = run([*args, "--out", tmp_path / "fresh"])
    assert again.stdout.count("done, skipped") == 2 and "fairseq-train" not in again.stdout
    # a later plan with another encoder: the comparison is redone with every archived encoder
    run([*args[:args.index("--encoders")], "--encoders", "resa", *args[args.index("--encoders") + 2:],
         "--out", out])
    compare = json.loads((archive / "compare" / "entailment_scratch_s1.json").read_text())
    assert list(compare["systems"]) == ["san", "ssan", "resa"]
    assert compare["comparisons"]["resa"]["against"] == "san"


def load_module(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_pairs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_runner_pools_the_seeds_every_encoder_has(tmp_path, monkeypatch):
    """compare_pooled: per (target, init) the encoders archived (ENCODERS order) over the seeds
    all of them share, as ENC@SEED systems; nothing with one encoder or one shared seed; an
    up-to-date file is not redone. pooled_rows reads the result into the summary."""
    runner = load_module(RUNNER)
    archive = tmp_path / "archive"
    for encoder, seeds in (("ssan", (1, 2, 3)), ("san", (1, 2)), ("disan", (2, 1))):
        for seed in seeds:
            (archive / f"entailment_scratch_{encoder}_s{seed}").mkdir(parents=True)
            (archive / f"entailment_scratch_{encoder}_s{seed}" / "result.json").write_text("{}")
    (archive / "relatedness_scratch_san_s1").mkdir()
    (archive / "relatedness_scratch_san_s1" / "result.json").write_text("{}")
    calls = []
    monkeypatch.setattr(runner, "run_command", lambda command, **kw: calls.append(command))
    plan = [("entailment", "scratch", "san", 1), ("relatedness", "scratch", "san", 1)]
    runner.compare_pooled(archive, plan, {"scratch": tmp_path / "data"}, {})
    assert len(calls) == 1
    systems = [a.split("=")[0] for a in calls[0] if "@" in str(a)]
    assert systems == ["san@1", "san@2", "ssan@1", "ssan@2", "disan@1", "disan@2"]
    assert calls[0][calls[0].index("--json") + 1] == archive / "compare" / "pooled" / "entailment_scratch.json"
    pooled = archive / "compare" / "pooled" / "entailment_scratch.json"
    pooled.parent.mkdir(parents=True, exist_ok=True)
    pooled.write_text(json.dumps({
        "systems": dict.fromkeys(systems, {}),
        "groups": [{"name": "san", "n_seeds": 2, "mean": {"accuracy": 70.0}},
                   {"name": "ssan", "n_seeds": 2, "mean": {"accuracy": 71.5},
                    "comparison": {"accuracy": {"delta": 1.5, "p_value": 0.2, "seed_level": {
                        "delta": 1.5, "ci": [0.25, 2.75], "p": 0.02, "p_holm": None,
                        "per_seed": [1.0, 2.0], "same_sign": 2}}}}]}))
    calls.clear()
    runner.compare_pooled(archive, plan, {"scratch": tmp_path / "data"}, {})
    assert calls == []  # up to date
    # the verdict is the seed-level test, Holm over the rows' comparisons (one here: p itself)
    assert runner.pooled_rows(archive) == [
        "| entailment_scratch | san | 2 | accuracy 70 | (first) | | | | | | |",
        "| entailment_scratch | ssan | 2 | accuracy 71.5 | +1.5000 [+0.2500, +2.7500] | 0.02 | "
        "0.02 | +1.0000 +2.0000 | 2/2 | better | 0.2 |"]
