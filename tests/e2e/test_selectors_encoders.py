"""Every selector of ``--encoder-selector`` as the encoder of the encoder-only models: the SRL
tagger (``--srl-encoder selective``) and the sentence-pair classifier (``--pair-encoder
selective``). Per selector: fairseq-train a few updates with the task's criterion (the
selection rates in its log, the rate term ``ssan_reg`` where ``--select-scale`` can train the
selector), the checkpoint holds that selector's layer, and the evaluation command predicts
every instance, the same predictions in batches of one as in larger batches (no padding
reaches a sentence's encoding). Translation: tests/e2e/test_selectors_everywhere.py.
"""

import json

import pytest
import torch

from conftest import SELECTOR_PLUGIN_DIR
from helpers.pairs_cli import TINY_PAIR_MODEL, prepare_in_process, sick_rows, train as train_pairs
from helpers.selectors import own_state_names, tiny_flags
from helpers.srl_cli import BIN, run, tiny05  # noqa: F401  (fixture)
from ssan_plugin.commands import evaluate_pairs, evaluate_srl
from ssan_plugin.modules.selectors import SELECTORS

def select_scale(name):
    """``--select-scale`` where it trains the selector (it is refused elsewhere)."""
    return ["--select-scale", "0.01"] if SELECTORS[name].rate_has_gradient else []


def check_checkpoint(path, name):
    """The checkpoint's encoder layers are the selector's (its own parameters where it has
    some); -> the checkpoint."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    model_args = state["args"] if state.get("args") is not None else state["cfg"]["model"]
    assert model_args.encoder_selector == name
    own = {k.split(".self_attn.", 1)[1] for k in state["model"] if ".self_attn.selector." in k}
    assert own == own_state_names(name)
    return state


@pytest.mark.parametrize("name", list(SELECTORS))
def test_srl_tagger(tiny05, tmp_path, name):
    save = tmp_path / "ckpt"
    proc = run([str(BIN / "fairseq-train"), str(tiny05), "--user-dir", str(SELECTOR_PLUGIN_DIR), "--task", "srl",
                "--arch", "srl_tagger", "--srl-encoder", "selective", "--encoder-selector", name, *tiny_flags(name),
                "--encoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32", "--encoder-layers", "1",
                "--encoder-attention-heads", "2", "--criterion", "srl_cross_entropy", *select_scale(name),
                "--optimizer", "adam", "--lr", "1e-2", "--required-batch-size-multiple", "1",
                "--batch-size", "2", "--max-update", "4", "--cpu", "--save-dir", str(save),
                "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "1", "--seed", "1"])
    log = proc.stdout + proc.stderr
    inner = [line for line in log.splitlines() if "train_inner" in line]
    assert len(inner) == 4 and all("sel_0=" in line for line in inner), log[-3000:]
    assert all(("ssan_reg=" in line) == bool(select_scale(name)) for line in inner)
    assert "valid on 'valid' subset" in log and "| sel_0 " in log  # validation logs the rate too
    check_checkpoint(save / "checkpoint_last.pt", name)

    preds = {}
    for batch in (1, 3):
        out = tmp_path / f"eval{batch}"
        assert evaluate_srl.main(["--data", str(tiny05), "--checkpoint", str(save / "checkpoint_last.pt"),
                                  "--subset", "valid", "--gold-props", str(out / "gold.props"),
                                  "--pred-props", str(out / "pred.props"), "--json", str(out / "scores.json"),
                                  "--batch-size", str(batch), "--cpu"]) == 0
        scores = json.loads((out / "scores.json").read_text())
        assert scores["propositions"] == 3 and scores["sentences"] == 3
        preds[batch] = (out / "pred.props").read_text()
    from ssan_plugin.srl.props import read_props

    assert [len(columns) for _, columns in read_props(str(tmp_path / "eval3" / "pred.props"))] == [2, 1, 0]
    assert preds[1] == preds[3]  # sentences of 4, 2 and 1 words: alone or padded, the same tags


@pytest.fixture(scope="module")
def pair_data(tmp_path_factory):
    return prepare_in_process(tmp_path_factory.mktemp("pairs") / "bin", sick_rows(60), sick_rows(20, start_id=500))


@pytest.mark.parametrize("name", list(SELECTORS))
def test_pair_classifier(pair_data, tmp_path, name):
    checkpoint, proc = train_pairs(pair_data, tmp_path / "ckpt", "selective", "--encoder-selector", name,
                                   *tiny_flags(name), *select_scale(name), target="both",
                                   user_dir=SELECTOR_PLUGIN_DIR)
    log = proc.stdout + proc.stderr
    inner = [line for line in log.splitlines() if "train_inner" in line]
    assert len(inner) == 4 and all("sel_0=" in line and "sel_1=" in line for line in inner), log[-3000:]
    assert all(("ssan_reg=" in line) == bool(select_scale(name)) for line in inner)
    assert "valid on 'valid' subset" in log and "| sel_1 " in log
    check_checkpoint(checkpoint, name)

    predictions = {}
    for batch in (1, 7):
        out = tmp_path / f"eval{batch}"
        assert evaluate_pairs.main(["--data", str(pair_data), "--checkpoint", f"{name}={checkpoint}",
                                    "--json", str(out / "scores.json"), "--predictions", str(out / "pred.tsv"),
                                    "--batch-size", str(batch), "--bootstrap-samples", "10"]) == 0
        result = json.loads((out / "scores.json").read_text())
        assert result["pairs"] == 20 and list(result["systems"]) == [name]
        rows = [line.split("\t") for line in (out / "pred.tsv").read_text().splitlines()]
        assert [r[0] for r in rows] == [str(500 + i) for i in range(20)]
        predictions[batch] = rows
    for alone, batched in zip(predictions[1], predictions[7]):
        assert alone[:2] == batched[:2] and float(alone[2]) == pytest.approx(float(batched[2]), abs=2e-4)
