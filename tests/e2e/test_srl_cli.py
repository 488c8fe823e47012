"""SRL through the public CLIs: prepare_srl.py, fairseq-train --task srl, evaluate_srl.py.

The EWT test (skipped when ../shared/data is absent) prepares a slice of the real data, trains
tiny san and ssan taggers for a few updates and evaluates them. The others use hand-built
CoNLL-2005 snippets and need no data. (The criterion on the same tiny data-bin, in-process:
tests/unit/criterions/test_srl_cross_entropy.py.)
"""

import json
import sys
from pathlib import Path

import pytest
from conftest import require_shared
from helpers.srl_cli import BIN, EWT, PROPS, WORDS, prepare, run, tiny05  # noqa: F401  (fixture)


def test_prepare_conll2005(tiny05):
    manifest = json.loads((tiny05 / "manifest.json").read_text())
    assert manifest["format"] == "conll2005"
    assert sorted(manifest["labels"]) == ["B-A0", "B-A1", "B-V", "I-A1", "O"]
    assert manifest["splits"]["train"]["sentences"] == 3
    assert manifest["splits"]["train"]["instances"] == 3
    assert manifest["splits"]["valid"]["unknown_label_tokens"] == 1  # A2 is not in train
    for split in ("train", "valid"):
        for part in ("words", "predicate", "labels"):
            assert (tiny05 / f"{split}.{part}.bin").exists() and (tiny05 / f"{split}.{part}.idx").exists()
    assert (tiny05 / "train.instances.tsv").read_text().splitlines() == [
        "instance\tsentence\tpredicate", "0\t0\t1", "1\t0\t3", "2\t1\t1"]
    from fairseq.data import Dictionary, data_utils

    labels = Dictionary.load(str(tiny05 / "dict.labels.txt"))
    ds = data_utils.load_indexed_dataset(str(tiny05 / "train.labels"), labels)
    assert [labels[i] for i in ds[1]] == ["O", "O", "B-A0", "B-V"]
    pred = data_utils.load_indexed_dataset(str(tiny05 / "train.predicate"), None)
    assert pred[1].tolist() == [0, 0, 0, 1]


def test_prepare_reports_malformed_input(tmp_path):
    (tmp_path / "t.words").write_text(WORDS)
    (tmp_path / "t.props").write_text(PROPS.replace("(A1*   (A0*)", "(A1*   (A0*", 1))
    proc = run([sys.executable, "-m", "ssan_plugin.commands.prepare_srl", "--format", "conll2005", "--train",
                str(tmp_path / "t"), "--dest", str(tmp_path / "bin")], check=False)
    assert proc.returncode == 2
    assert f"{tmp_path / 't.props'}:3: argument column 2" in proc.stderr
    assert not (tmp_path / "bin").exists()


def _slice(src: Path, dst: Path, n: int):
    blocks = [b for b in src.read_text(encoding="utf-8").split("\n\n") if b.strip()][:n]
    dst.write_text("\n\n".join(b.strip("\n") for b in blocks) + "\n\n", encoding="utf-8")


def test_ewt_prepare_train_san_and_ssan_evaluate(tmp_path):
    require_shared("srl/ewt")
    from ssan_plugin.srl.brackets import brackets_to_bio
    from ssan_plugin.srl.props import read_props
    from ssan_plugin.srl.scorer import evaluate

    _slice(EWT / "train.gold_conll", tmp_path / "train.gold_conll", 60)
    _slice(EWT / "dev.gold_conll", tmp_path / "dev.gold_conll", 20)
    dest = tmp_path / "bin"
    prepare("conll2012", dest, tmp_path / "train.gold_conll", tmp_path / "dev.gold_conll",
            tmp_path / "dev.gold_conll")
    manifest = json.loads((dest / "manifest.json").read_text())
    n_valid = manifest["splits"]["valid"]["instances"]
    assert manifest["splits"]["valid"]["sentences"] == 20 and n_valid > 20

    for encoder in ("san", "ssan"):
        save = tmp_path / f"ckpt_{encoder}"
        run([str(BIN / "fairseq-train"), str(dest), "--user-dir", "ssan_plugin", "--task", "srl",
             "--arch", "srl_tagger", "--srl-encoder", encoder, "--encoder-embed-dim", "32",
             "--encoder-ffn-embed-dim", "64", "--encoder-layers", "2",
             "--encoder-attention-heads", "2", "--criterion", "srl_cross_entropy",
             "--report-accuracy", "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1500",
             "--max-update", "3", "--cpu", "--save-dir", str(save), "--no-epoch-checkpoints",
             "--log-format", "simple", "--log-interval", "1", "--seed", "1",
             *(["--srl-char-dim", "8"] if encoder == "ssan" else [])])  # characters: one run
        ckpt = save / "checkpoint_last.pt"
        assert ckpt.exists()
        out = tmp_path / f"eval_{encoder}"
        proc = run([sys.executable, "-m", "ssan_plugin.commands.evaluate_srl", "--data", str(dest),
                    "--checkpoint", str(ckpt), "--subset", "valid", "--gold-props",
                    str(out / "gold.props"), "--pred-props", str(out / "pred.props"),
                    "--json", str(out / "scores.json"), "--batch-size", "7"])
        assert "Overall" in proc.stdout
        scores = json.loads((out / "scores.json").read_text())
        assert scores["propositions"] == n_valid and scores["sentences"] == 20
        for key in ("precision", "recall", "f1"):
            assert 0.0 <= scores["overall"][key] <= 100.0
        gold = read_props(str(out / "gold.props"))
        pred = read_props(str(out / "pred.props"))
        assert gold == read_props(str(dest / "valid.props"))
        # the gold file scores 100 against itself; the predictions carry V at every predicate
        assert evaluate(gold, gold).overall.prf() == (100.0, 100.0, 100.0)
        assert evaluate(gold, pred).to_json()["overall"] == scores["overall"]
        for targets, columns in pred:
            positions = [i for i, t in enumerate(targets) if t != "-"]
            assert len(columns) == len(positions)
            for position, column in zip(positions, columns):
                bio, _ = brackets_to_bio(column)
                assert bio[position] in ("B-V", "I-V", "B-C-V", "I-C-V")


@pytest.mark.parametrize("encoder", ["san", "ssan", "disan", "biblosan", "resa"])
def test_every_encoder_trains_and_decodes_conll2005(tiny05, tmp_path, encoder):
    """--srl-encoder for each variant on the CoNLL-2005 words/props layout: fairseq-train
    (srl_cross_entropy; ReSA's policy gradient in the log), then evaluate_srl.py writes
    props with every valid predicate and the scorer's numbers."""
    save = tmp_path / "ckpt"
    proc = run([str(BIN / "fairseq-train"), str(tiny05), "--user-dir", "ssan_plugin",
                "--task", "srl", "--arch", "srl_tagger", "--srl-encoder", encoder,
                "--encoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32",
                "--encoder-layers", "1", "--encoder-attention-heads", "2",
                "--criterion", "srl_cross_entropy", "--optimizer", "adam", "--lr", "1e-2",
                "--required-batch-size-multiple", "1", "--batch-size", "2", "--max-update", "4",
                "--cpu", "--save-dir", str(save), "--no-epoch-checkpoints", "--log-format",
                "simple", "--log-interval", "1", "--seed", "1"])
    log = proc.stdout + proc.stderr
    assert "done training" in log
    if encoder == "resa":
        assert "resa_pg" in log and "resa_head_0" in log
    if encoder == "ssan":
        assert "sel_0" in log
    out = tmp_path / "eval"
    run([sys.executable, "-m", "ssan_plugin.commands.evaluate_srl", "--data", str(tiny05), "--checkpoint",
         str(save / "checkpoint_last.pt"), "--subset", "valid", "--gold-props",
         str(out / "gold.props"), "--pred-props", str(out / "pred.props"), "--json",
         str(out / "scores.json")])
    scores = json.loads((out / "scores.json").read_text())
    assert scores["propositions"] == 3 and scores["sentences"] == 3
    assert 0.0 <= scores["overall"]["f1"] <= 100.0
    from ssan_plugin.srl.props import read_props

    pred = read_props(str(out / "pred.props"))
    assert [len(columns) for _, columns in pred] == [2, 1, 0]


def test_runner_archives_runs_and_compares_props(tmp_path):
    """examples/srl/run_srl.py on an EWT slice (2 encoders, 1 seed, 2 updates): result, dev
    props and learning curve (valid f1) archived per run, the comparison made from the
    archived props, and a second runner on a fresh OUT trains nothing."""
    require_shared("srl/ewt")
    raw = tmp_path / "raw"
    raw.mkdir()
    _slice(EWT / "train.gold_conll", raw / "train.gold_conll", 40)
    _slice(EWT / "dev.gold_conll", raw / "dev.gold_conll", 15)
    archive = tmp_path / "archive"
    args = [sys.executable, "examples/srl/run_srl.py", "--raw", str(raw), "--archive", str(archive),
            "--encoders", "san,ssan", "--seeds", "1", "--updates", "2", "--validate-interval", "1",
            "--threads", "1", "--config", "tiny", "--flags", "--srl-predicate-distance 4"]
    run([*args, "--out", str(tmp_path / "out")])
    for encoder in ("san", "ssan"):
        kept = archive / f"tiny_{encoder}_s1"
        result = json.loads((kept / "result.json").read_text())
        assert result["flags"] == ["--srl-predicate-distance", "4"] and result["encoder"] == encoder
        assert 0 <= result["dev"]["f1"] <= 100
        curve = [json.loads(x) for x in (kept / "curve.jsonl").read_text().splitlines()]
        assert [r["valid_num_updates"] for r in curve if r["kind"] == "valid"] == ["1", "2"]
        assert all("valid_f1" in r for r in curve if r["kind"] == "valid")
        assert (kept / "dev.pred.props.gz").stat().st_size > 0
    compare = json.loads((archive / "compare" / "tiny_s1.json").read_text())
    assert [s["name"] for s in compare["systems"]] == ["san", "ssan"]
    ssan = json.loads((archive / "tiny_ssan_s1" / "result.json").read_text())
    assert compare["systems"][1]["f1"] == pytest.approx(ssan["dev"]["f1"])
    assert "| tiny | ssan | 1 | 2 |" in (archive / "summary.md").read_text()
    pooled = archive / "compare" / "pooled" / "tiny.json"
    assert [s["name"] for s in json.loads(pooled.read_text())["systems"]] == ["san@1", "ssan@1"]
    again = run([*args, "--out", str(tmp_path / "fresh")])
    assert again.stdout.count("done, skipped") == 2 and "fairseq-train" not in again.stdout
    # a second seed joins: the pooled comparison is redone over both seeds
    at = args.index("--seeds") + 1
    run([*args[:at], "2", *args[at + 1:], "--out", str(tmp_path / "out")])
    report = json.loads(pooled.read_text())
    assert [s["name"] for s in report["systems"]] == ["san@1", "san@2", "ssan@1", "ssan@2"]
    san, ssan = report["groups"]
    assert san["n_seeds"] == ssan["n_seeds"] == 2 and "p_value" in ssan
    f1 = [json.loads((archive / f"tiny_ssan_s{k}" / "result.json").read_text())["dev"]["f1"]
          for k in (1, 2)]
    assert ssan["mean"]["f1"] == pytest.approx(sum(f1) / 2)
    assert "| tiny | ssan | 2 |" in (archive / "summary.md").read_text()
    assert (archive / "curves.png").stat().st_size > 0


def test_runner_reports_averaged_checkpoints(tmp_path):
    """run_srl.py --average-last 2: the last two interval checkpoints are kept and averaged
    parameter by parameter; the average is the reported checkpoint (dev), the best-on-dev one
    is scored too (dev_best); more checkpoints than the budget saves is refused up front."""
    require_shared("srl/ewt")
    raw = tmp_path / "raw"
    raw.mkdir()
    _slice(EWT / "train.gold_conll", raw / "train.gold_conll", 30)
    _slice(EWT / "dev.gold_conll", raw / "dev.gold_conll", 10)
    archive, out = tmp_path / "archive", tmp_path / "out"
    args = [sys.executable, "examples/srl/run_srl.py", "--raw", str(raw), "--archive", str(archive),
            "--out", str(out), "--encoders", "san", "--seeds", "1", "--updates", "3",
            "--validate-interval", "1", "--threads", "1", "--config", "avg"]
    refused = run([*args, "--average-last", "4"], check=False)
    assert refused.returncode != 0 and "--average-last 4" in refused.stderr
    assert not archive.exists()
    run([*args, "--average-last", "2"])
    result = json.loads((archive / "avg_san_s1" / "result.json").read_text())
    assert result["checkpoint"].startswith("average of the last 2")
    assert 0 <= result["dev_best"]["f1"] <= 100
    save = out / "runs" / "avg_san_s1"
    assert json.loads((save / "dev.json").read_text())["overall"] == result["dev"]
    import torch

    def params(name):
        return torch.load(save / name, map_location="cpu", weights_only=False)["model"]

    kept = sorted(p.name for p in save.glob("checkpoint_*_*.pt"))
    # the two newest (fairseq writes none at an epoch's end, so not necessarily updates 2 and 3)
    assert len(kept) == 2 and kept[-1].endswith("_3.pt")
    a, b, avg = params(kept[0]), params(kept[1]), params("checkpoint_avg2.pt")
    assert set(avg) == set(a)
    for key in a:
        if a[key].is_floating_point():
            torch.testing.assert_close(avg[key], (a[key] + b[key]) / 2)
    assert not torch.equal(a["encoder.layers.0.fc1.weight"], b["encoder.layers.0.fc1.weight"])
