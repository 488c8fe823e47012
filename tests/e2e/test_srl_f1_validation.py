"""Span F1 during validation: fairseq-train --task srl logs precision,
recall and f1 on the validation split, --best-checkpoint-metric f1 chooses checkpoint_best.pt
by it, and the F1 validation recorded for that checkpoint is the F1 ssan-evaluate-srl
computes on the same checkpoint and split (tiny hand-built CoNLL-2005 data; the valid split
has an A2 argument the training split lacks, so the F1 is neither 0 nor 100 once the tagger
has learnt the rest).
"""

import json
import re
import sys

from helpers.srl_cli import BIN, run, tiny05  # noqa: F401  (fixture)

VALID = re.compile(r"valid on 'valid' subset \|(.*)$")


def _stats(line):
    return dict(re.findall(r"(\w+) ([-\d.e]+)", line))


def test_validation_f1_chooses_checkpoint_and_equals_evaluate_srl(tiny05, tmp_path):
    save = tmp_path / "ckpt"
    proc = run([
        str(BIN / "fairseq-train"), str(tiny05), "--user-dir", "ssan_plugin", "--task", "srl",
        "--arch", "srl_tagger", "--encoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32",
        "--encoder-layers", "1", "--encoder-attention-heads", "2",
        "--criterion", "srl_cross_entropy", "--report-accuracy", "--optimizer", "adam",
        "--lr", "2e-2", "--required-batch-size-multiple", "1",
        "--batch-size", "2",  # the 3 valid instances in two batches: counts summed over them
        "--max-update", "12", "--validate-interval", "3", "--save-interval", "3", "--cpu",
        "--save-dir", str(save), "--no-epoch-checkpoints", "--no-last-checkpoints",
        "--best-checkpoint-metric", "f1", "--maximize-best-checkpoint-metric",
        "--log-format", "simple", "--seed", "1",
    ])
    log = proc.stdout + proc.stderr
    valid = [_stats(m.group(1)) for m in map(VALID.search, log.splitlines()) if m]
    assert len(valid) >= 2
    for stats in valid:
        for key in ("precision", "recall", "f1"):
            assert 0.0 <= float(stats[key]) <= 100.0, (key, stats)
    f1s = [float(s["f1"]) for s in valid]
    assert float(valid[-1]["best_f1"]) == max(f1s)
    assert 0.0 < max(f1s) < 100.0, f1s  # A2 is never predicted: recall stays below 100

    from ssan_plugin.cli.checkpoints import load_checkpoint

    best = save / "checkpoint_best.pt"
    state = load_checkpoint(best, expect_task="srl")
    recorded = state["extra_state"]["val_loss"]  # the validation F1 of this checkpoint
    assert f"{recorded:g}" == valid[-1]["best_f1"]  # chosen by F1, not by loss

    out = tmp_path / "eval"
    run([sys.executable, "-m", "ssan_plugin.commands.evaluate_srl", "--data", str(tiny05), "--checkpoint",
         str(best), "--subset", "valid", "--gold-props", str(out / "gold.props"),
         "--pred-props", str(out / "pred.props"), "--json", str(out / "scores.json"),
         "--batch-size", "3"])
    overall = json.loads((out / "scores.json").read_text())["overall"]
    assert overall["f1"] == recorded  # same counts, same formula: exactly equal
    logged = valid[f1s.index(max(f1s))]
    for key in ("precision", "recall", "f1"):  # the log shows 6 significant digits
        assert float(logged[key]) == float(f"{overall[key]:g}"), (key, logged, overall)
