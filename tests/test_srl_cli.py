"""SRL through the public CLIs: prepare_srl.py, fairseq-train --task srl, evaluate_srl.py.

The EWT test (skipped when ../shared/data is absent) prepares a slice of the real data, trains
tiny san and ssan taggers for a few updates and evaluates them. The others use hand-built
CoNLL-2005 snippets and need no data.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
EWT = DATA / "srl" / "ewt"
BIN = Path(sys.executable).parent
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))

WORDS = "I\nsaw\nher\nleave\n\nShe\nleft\n\nRain\n"
PROPS = ("-   (A0*)   *\nsee (V*)    *\n-  (A1*   (A0*)\nleave *)   (V*)\n\n"
         "-  (A0*)\nleave (V*)\n\n-\n")
VALID_PROPS = "-  (A0*)    *\nsee (V*)    *\n-  (A1*  (A2*)\nleave *)  (V*)\n\n-  (A0*)\nleave (V*)\n\n-\n"


def run(args, check=True):
    proc = subprocess.run(args, cwd=REPO, env=ENV, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return proc


def prepare(fmt, dest, train, valid=None, test=None):
    args = [sys.executable, "scripts/prepare_srl.py", "--format", fmt, "--train", str(train),
            "--dest", str(dest)]
    for name, spec in (("--valid", valid), ("--test", test)):
        if spec:
            args += [name, str(spec)]
    return run(args)


@pytest.fixture(scope="module")
def tiny05(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("tiny05")
    (tmp_path / "t.words").write_text(WORDS)
    (tmp_path / "t.props").write_text(PROPS)
    (tmp_path / "v.words").write_text(WORDS)
    (tmp_path / "v.props").write_text(VALID_PROPS)
    dest = tmp_path / "bin"
    prepare("conll2005", dest, tmp_path / "t", f"{tmp_path / 'v.words'},{tmp_path / 'v.props'}")
    return dest


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
    proc = run([sys.executable, "scripts/prepare_srl.py", "--format", "conll2005", "--train",
                str(tmp_path / "t"), "--dest", str(tmp_path / "bin")], check=False)
    assert proc.returncode == 2
    assert f"{tmp_path / 't.props'}:3: argument column 2" in proc.stderr
    assert not (tmp_path / "bin").exists()


def test_criterion_is_token_cross_entropy_plus_selection_regulariser(tiny05):
    import ssan_plugin  # noqa: F401
    from fairseq import options, tasks

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(tiny05), "--task", "srl", "--arch", "srl_tagger", "--srl-encoder", "ssan",
        "--encoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32", "--encoder-layers", "2",
        "--encoder-attention-heads", "2", "--criterion", "srl_cross_entropy",
        "--select-scale", "0.5", "--cpu", "--ssan-layers", "1"])
    task = tasks.setup_task(args)
    task.load_dataset("valid")
    model = task.build_model(args).eval()
    criterion = task.build_criterion(args)
    batch = task.dataset("valid").collater([task.dataset("valid")[i] for i in range(3)])
    loss, sample_size, log = criterion(model, batch)

    logits, extra = model(**batch["net_input"])
    assert logits.shape == (3, 4, len(task.label_dict))
    assert [s["layer"] for s in extra["selection_stats"]] == [1]
    target = batch["target"]
    keep = target.ne(task.label_dict.pad()) & target.ne(task.label_dict.unk())
    assert int((target == task.label_dict.unk()).sum()) == 1  # the unseen A2 is not scored
    ce = torch.nn.functional.cross_entropy(logits[keep].float(), target[keep], reduction="sum")
    reg = 0.5 * extra["selection_stats"][0]["select_rate"]
    assert sample_size == batch["ntokens"] == 10
    assert float(loss) == pytest.approx(float(ce + reg * sample_size), rel=1e-5)
    assert log["sel_pairs_1"] > 0

    san = options.parse_args_and_arch(options.get_training_parser(), [
        str(tiny05), "--task", "srl", "--arch", "srl_tagger", "--encoder-embed-dim", "16",
        "--encoder-layers", "1", "--encoder-attention-heads", "2", "--cpu"])
    assert task.build_model(san)(**batch["net_input"])[1]["selection_stats"] == []


def _slice(src: Path, dst: Path, n: int):
    blocks = [b for b in src.read_text(encoding="utf-8").split("\n\n") if b.strip()][:n]
    dst.write_text("\n\n".join(b.strip("\n") for b in blocks) + "\n\n", encoding="utf-8")


@pytest.mark.skipif(not EWT.exists(), reason="../shared/data/srl/ewt not available")
def test_ewt_prepare_train_san_and_ssan_evaluate(tmp_path):
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
             "--log-format", "simple", "--log-interval", "1", "--seed", "1"])
        ckpt = save / "checkpoint_last.pt"
        assert ckpt.exists()
        out = tmp_path / f"eval_{encoder}"
        proc = run([sys.executable, "scripts/evaluate_srl.py", "--data", str(dest),
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
