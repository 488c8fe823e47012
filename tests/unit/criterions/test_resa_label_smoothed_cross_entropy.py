"""ssan_plugin/criterions/resa_label_smoothed_cross_entropy.py: a deprecated alias of the
selective criterion (REINFORCE itself is tested in test_selective_label_smoothed_cross_entropy.py)."""

import logging

import ssan_plugin  # noqa: F401
from fairseq import options, tasks
from conftest import PLUGIN_DIR, TINY_MODEL
from ssan_plugin.criterions.selective_label_smoothed_cross_entropy import (
    SelectiveLabelSmoothedCrossEntropyCriterion,
)


def test_alias_warns_and_builds_the_selective_criterion_with_its_options(tiny_bin, caplog):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(tiny_bin), "--user-dir", str(PLUGIN_DIR), "--arch", "resa_transformer", *TINY_MODEL,
        "--criterion", "resa_label_smoothed_cross_entropy", "--resa-lambda", "0.02",
        "--resa-baseline", "running", "--label-smoothing", "0.1"])
    task = tasks.setup_task(args)
    with caplog.at_level(logging.WARNING):
        criterion = task.build_criterion(args)
    assert "deprecated" in caplog.text and "selective_label_smoothed_cross_entropy" in caplog.text
    assert isinstance(criterion, SelectiveLabelSmoothedCrossEntropyCriterion)
    assert (criterion.resa_lambda, criterion.baseline_mode, criterion.eps) == (0.02, "running", 0.1)
