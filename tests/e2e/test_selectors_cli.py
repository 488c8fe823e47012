"""Every selector of --encoder-selector through fairseq's command line on the tiny synthetic
corpus: fairseq-train a few updates of selective_transformer_small (tiny sizes) with the
selective criterion (training and validation log the selection rate), then fairseq-generate
decodes every test sentence from the checkpoint, and refuses to decode it as another selector."""

import re

import pytest

from conftest import SELECTOR_PLUGIN_DIR, TINY_MODEL, message_lines, run_cli
from helpers.selectors import tiny_flags
from ssan_plugin.modules.selectors import SELECTORS

N_TEST = 37  # tests/conftest.py's tiny corpus

@pytest.mark.parametrize("name", list(SELECTORS))
def test_train_and_generate(tiny_bin, tmp_path, name):
    save = tmp_path / "ckpt"
    log = run_cli("fairseq-train", tiny_bin, "--user-dir", SELECTOR_PLUGIN_DIR, "--arch", "selective_transformer_small",
                  *TINY_MODEL, "--encoder-selector", name, *tiny_flags(name),
                  "--criterion", "selective_label_smoothed_cross_entropy", "--label-smoothing", "0.1",
                  "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "500", "--max-update", "3",
                  "--save-dir", save, "--cpu", "--seed", "1", "--log-format", "simple", "--log-interval", "1",
                  "--no-progress-bar", "--no-epoch-checkpoints")
    text = log.stdout + log.stderr
    assert "num_updates 3" in text or "num_updates=3" in text, text[-2000:]
    inner = re.findall(r"train_inner .*", text)
    assert inner and all(re.search(r" sel=[\d.]+", line) and "sel_0=" in line for line in inner), text[-2000:]
    valid = re.findall(r"valid on 'valid' subset .*", text)
    assert valid and all(re.search(r"\| sel [\d.]+ \|", line) for line in valid), text[-2000:]
    out = run_cli("fairseq-generate", tiny_bin, "--user-dir", SELECTOR_PLUGIN_DIR, "--path", save / "checkpoint_last.pt",
                  "--gen-subset", "test", "--batch-size", "8", "--required-batch-size-multiple", "1",
                  "--beam", "2", "--max-len-b", "10", "--cpu").stdout
    ids = sorted(int(m.group(1)) for m in re.finditer(r"^H-(\d+)\t", out, re.M))
    assert ids == list(range(N_TEST)), out[-2000:]

    # decoded as another selector (fairseq's --model-overrides): refused in one line naming
    # both, never translated with that selector's fresh parameters
    names = list(SELECTORS)
    other = names[(names.index(name) + 1) % len(names)]
    refused = run_cli("fairseq-generate", tiny_bin, "--user-dir", SELECTOR_PLUGIN_DIR,
                      "--path", save / "checkpoint_last.pt", "--gen-subset", "test", "--cpu",
                      "--model-overrides", repr({"encoder_selector": other}), check=False)
    lines = message_lines(refused.stderr)
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr[-2000:]
    assert f"trained with the {name} selector, this model has {other}" in lines[0]
    assert "Traceback" not in refused.stderr and "H-0" not in refused.stdout


def test_resuming_as_another_selector_is_refused(tiny_bin, tmp_path):
    """fairseq-train resuming a top-k run with --encoder-selector entmax: one line naming both
    selectors (fairseq wraps the refusal in its own "Cannot load model parameters"), exit 2."""
    save = tmp_path / "ckpt"
    train = ["fairseq-train", tiny_bin, "--user-dir", SELECTOR_PLUGIN_DIR, "--arch", "selective_transformer_small",
             *TINY_MODEL, "--criterion", "selective_label_smoothed_cross_entropy", "--optimizer", "adam",
             "--lr", "1e-3", "--max-tokens", "500", "--save-dir", save, "--cpu", "--seed", "1",
             "--no-progress-bar", "--no-epoch-checkpoints", "--disable-validation"]
    run_cli(*train, "--encoder-selector", "topk", "--topk", "2", "--max-update", "2")
    refused = run_cli(*train, "--encoder-selector", "entmax", "--entmax-fixed-alpha", "--max-update", "4",
                      check=False)
    lines = message_lines(refused.stderr)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    assert len(lines) == 1 and "trained with the topk selector, this model has entmax" in lines[0]
