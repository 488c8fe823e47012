"""ssan_plugin/pairs/relatedness.py: Tai et al.'s distribution and the relatedness head read as
``--relatedness-loss`` says (the option, never the head's shape, decides)."""

import pytest
import torch

from ssan_plugin.pairs.relatedness import (
    RELATEDNESS_LEVELS,
    RELATEDNESS_LOSSES,
    check_relatedness_loss,
    relatedness_distribution,
    relatedness_outputs,
    relatedness_scores,
)


@pytest.mark.parametrize("y, expected", [
    (1.0, [1, 0, 0, 0, 0]), (5.0, [0, 0, 0, 0, 1]), (3.6, [0, 0, 0.4, 0.6, 0]),
    (4.5, [0, 0, 0, 0.5, 0.5]), (2.0, [0, 1, 0, 0, 0])])
def test_tai_distribution(y, expected):
    p = relatedness_distribution(torch.tensor([y]))[0]
    assert p.tolist() == pytest.approx(expected)
    assert float(p @ torch.arange(1.0, 6.0)) == pytest.approx(y)  # its expectation is y


def test_the_metrics_module_still_exports_the_distribution():
    from ssan_plugin.pairs import metrics

    assert metrics.relatedness_distribution is relatedness_distribution


def test_scores_follow_the_option():
    assert relatedness_scores(torch.tensor([[0.0]]), "mse").tolist() == [3.0]
    big = torch.tensor([[-50.0, -50.0, -50.0, 50.0, -50.0]])
    assert relatedness_scores(big, "kl").tolist() == pytest.approx([4.0])


def test_head_sizes_and_checks():
    assert RELATEDNESS_LOSSES == ("kl", "mse") and RELATEDNESS_LEVELS == 5
    assert [relatedness_outputs(loss) for loss in RELATEDNESS_LOSSES] == [5, 1]
    with pytest.raises(ValueError, match="--relatedness-loss must be one of kl, mse, got 'l1'"):
        check_relatedness_loss("l1")
    # a head of the other option's size is refused, not read the other way
    with pytest.raises(ValueError, match="--relatedness-loss kl reads a relatedness head of 5"):
        relatedness_scores(torch.zeros(2, 1), "kl")
    with pytest.raises(ValueError, match="--relatedness-loss mse reads a relatedness head of 1"):
        relatedness_scores(torch.zeros(2, 5), "mse")
