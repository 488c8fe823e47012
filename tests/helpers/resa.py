"""The selective criterion without a real task and a token-selection toy task, shared by
tests/unit/modules/test_resa.py and tests/unit/criterions/test_selective_label_smoothed_cross_entropy.py."""

from types import SimpleNamespace

import torch
from fairseq.data import Dictionary

import ssan_plugin  # noqa: F401
from ssan_plugin.criterions.selective_label_smoothed_cross_entropy import (
    SelectiveLabelSmoothedCrossEntropyCriterion,
)


torch.set_num_threads(1)


def make_criterion(**kwargs):
    task = SimpleNamespace(target_dictionary=Dictionary())
    return SelectiveLabelSmoothedCrossEntropyCriterion(task, sentence_avg=False, label_smoothing=0.1, **kwargs)


def selection_task(bsz=16, length=6, seed=0):
    """Tokens whose feature 0 is +1 are 'good', -1 'bad'; the last sentence is padded."""
    gen = torch.Generator().manual_seed(seed)
    good = torch.rand(bsz, length, generator=gen) < 0.5
    x = torch.randn(bsz, length, 4, generator=gen) * 0.1
    x[..., 0] = good.float() * 2 - 1
    pad = torch.zeros(bsz, length, dtype=torch.bool)
    pad[-1, 3:] = True
    return x, pad, good & ~pad
