"""--tensorboard-logdir (the `tensorboard` extra) records the selection and entropy curves of a
selective model: a tiny ssan_transformer trained for 6 updates on the tiny data-bin with the
plugin's criterion; the event files hold sel_0, sel_1, sel and pol_ent per logged update.
Skipped when tensorboard is not installed (pip install 'ssan_plugin[tensorboard]')."""

import pytest
from conftest import TINY_MODEL, run_cli

UPDATES = 6


def test_tensorboard_logdir_has_selection_and_entropy_curves(tiny_bin, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "tb"
    run_cli("fairseq-train", tiny_bin, "--user-dir", "ssan_plugin", "--arch", "ssan_transformer",
            *TINY_MODEL, "--criterion", "selective_label_smoothed_cross_entropy",
            "--label-smoothing", 0.1, "--optimizer", "adam", "--lr", 0.001,
            "--max-tokens", 1000, "--max-update", UPDATES, "--log-interval", 1,
            "--log-format", "simple", "--cpu", "--num-workers", 0, "--seed", 1,
            "--save-dir", tmp_path / "ck", "--no-save", "--disable-validation",
            "--tensorboard-logdir", logdir)
    events = EventAccumulator(str(logdir / "train_inner"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"sel_0", "sel_1", "sel", "pol_ent", "loss"} <= tags, tags
    for tag in ("sel_0", "sel", "pol_ent"):
        points = events.Scalars(tag)
        assert [p.step for p in points] == list(range(1, UPDATES + 1)), tag
    assert all(0 <= p.value <= 1 for p in events.Scalars("sel"))
    assert all(0 < p.value <= 0.6932 for p in events.Scalars("pol_ent"))  # nats, <= ln 2
