"""Hostile and broken checkpoints on the training paths (resume, --restore-file,
--finetune-from-model) and for decoding: each fails with a clear error, nothing runs.

(tests/e2e/test_cli.py already covers a hostile checkpoint given to fairseq-generate.)
"""

import os
import shutil

import pytest
import torch

import ssan_plugin  # noqa: F401
from conftest import PLUGIN_DIR, TINY_MODEL, message_lines, run_cli

COMMON = ["--user-dir", PLUGIN_DIR, "--cpu", *TINY_MODEL, "--optimizer", "adam", "--lr", "1e-3",
          "--max-tokens", "300", "--disable-validation", "--no-epoch-checkpoints", "--log-format", "simple",
          "--log-interval", "1", "--no-progress-bar", "--seed", "1"]
SSAN = ["--arch", "ssan_transformer", "--criterion", "selective_label_smoothed_cross_entropy",
        "--label-smoothing", "0.1"]


def train(data, save_dir, max_update, *extra, check=True):
    return run_cli("fairseq-train", data, *COMMON, "--max-update", max_update, "--save-dir", save_dir, *extra,
                   check=check)


@pytest.fixture(scope="module")
def checkpoints(tiny_bin, tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpts")
    train(tiny_bin, root / "ssan", 1, *SSAN)
    train(tiny_bin, root / "disan", 1, "--arch", "disan_transformer", "--criterion", "label_smoothed_cross_entropy")
    return {"ssan": root / "ssan" / "checkpoint_last.pt", "disan": root / "disan" / "checkpoint_last.pt"}


class Payload:
    """Unpickling this runs a shell command (pickled as GLOBAL posix.system)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("how", ["auto-resume", "--restore-file", "--finetune-from-model"])
def test_hostile_checkpoint_refused_for_training(how, checkpoints, tiny_bin, tmp_path):
    marker = tmp_path / "payload_ran"
    state = torch.load(checkpoints["ssan"], map_location="cpu", weights_only=True)
    state["extra_state"]["payload"] = Payload(marker)
    save = tmp_path / "save"
    save.mkdir()
    hostile = save / "checkpoint_last.pt" if how == "auto-resume" else tmp_path / "hostile.pt"
    torch.save(state, hostile)
    extra = [] if how == "auto-resume" else [how, hostile]
    proc = train(tiny_bin, save, 3, *SSAN, *extra, check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Weights only load failed" in log and "GLOBAL posix.system" in log
    assert "train_inner" not in log
    assert not marker.exists(), "the payload ran"
    # control: the same payload does run when the check is switched off (so the test can fail)
    torch.load(hostile, map_location="cpu", weights_only=False)
    assert marker.exists()


def test_truncated_checkpoint_refused_by_generate(checkpoints, tiny_bin, tmp_path):
    good = checkpoints["ssan"].read_bytes()
    broken = tmp_path / "truncated.pt"
    broken.write_bytes(good[: len(good) * 2 // 3])
    proc = run_cli("fairseq-generate", tiny_bin, "--user-dir", PLUGIN_DIR, "--cpu", "--path", broken,
                   "--gen-subset", "test", "--batch-size", 8, "--required-batch-size-multiple", 1, check=False)
    assert proc.returncode != 0
    assert "checkpoint file is corrupted" in proc.stderr
    assert "H-0\t" not in proc.stdout


@pytest.mark.parametrize("how", ["--restore-file", "--finetune-from-model"])
def test_checkpoint_of_another_architecture_refused(how, checkpoints, tiny_bin, tmp_path):
    """A DiSAN checkpoint into SSAN: one line naming the layer and the parameters SSAN's attention
    lacks (fairseq's own "Cannot load model parameters" wraps it; the plugin prints the reason)."""
    proc = train(tiny_bin, tmp_path / "save", 2, *SSAN, how, checkpoints["disan"], check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, log[-3000:]
    lines = message_lines(proc.stderr)
    assert len(lines) == 1 and "encoder.layers.0.self_attn.: the checkpoint's layer holds parameters the " \
        "gumbel selector's attention does not have (bw.fc_h.bias, bw.fc_h.weight," in lines[0], lines
    assert "train_inner" not in log


def test_generate_with_a_data_bin_whose_dictionary_does_not_match(checkpoints, tiny_corpus, tmp_path):
    """A data-bin preprocessed differently (separate, smaller dictionaries): size mismatch, named."""
    other = tmp_path / "other-bin"
    run_cli("fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt", "--trainpref",
            tiny_corpus / "train", "--testpref", tiny_corpus / "test", "--destdir", other,
            "--nwordssrc", 40, "--nwordstgt", 40, "--workers", 1)
    proc = run_cli("fairseq-generate", other, "--user-dir", PLUGIN_DIR, "--cpu", "--path", checkpoints["ssan"],
                   "--gen-subset", "test", "--batch-size", 8, "--required-batch-size-multiple", 1, check=False)
    assert proc.returncode != 0
    # fairseq's message names the parameter and both shapes (not the dictionary itself; a
    # dictionary of the same size but other words is NOT detected: nothing in a checkpoint
    # identifies its dictionary)
    assert "size mismatch for encoder.embed_tokens.weight" in proc.stderr
    assert "from checkpoint, the shape in current model is torch.Size([40, 32])" in proc.stderr
    assert "H-0\t" not in proc.stdout
