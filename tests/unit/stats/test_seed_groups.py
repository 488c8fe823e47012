"""ssan_plugin/stats/seed_groups.py: GROUP@SEED names, the convention of every comparison script."""

import statistics

import numpy as np
import pytest

from ssan_plugin.errors import InputError
from ssan_plugin.stats.seed_groups import (
    GroupMember,
    SeedGroupError,
    group_order,
    has_groups,
    mean_std,
    parse_member,
    pooled_groups,
    same_seed_baseline,
)
from ssan_plugin.stats.significance import paired_bootstrap


def test_members_and_order():
    assert parse_member("ssan@1") == GroupMember("ssan", "1")
    assert parse_member("ssan") == GroupMember("ssan", None)
    assert parse_member("a@b@3") == GroupMember("a@b", "3")  # the last @ separates the seed
    assert not has_groups(["san", "ssan"]) and has_groups(["san", "ssan@1"])
    assert group_order(["san@1", "ssan@1", "san@2", "disan"]) == {
        "san": [0, 2], "ssan": [1], "disan": [3]}


@pytest.mark.parametrize("names, message", [
    (["san@1", "@2"], "expected GROUP@SEED"),
    (["san@"], "expected GROUP@SEED"),
    (["san@1", "san@1"], "has seed 1 twice"),
    (["san", "san@1"], "mixes a system without a seed"),
    (["san@1", "san"], "mixes a system without a seed"),
])
def test_bad_names_are_input_errors(names, message):
    with pytest.raises(SeedGroupError, match=message) as err:
        group_order(names)
    assert isinstance(err.value, InputError)  # one line and exit 2 in the scripts


def test_same_seed_baseline():
    names = ["san@1", "san@2", "ssan@2", "ssan@1", "ssan@3", "other"]
    assert same_seed_baseline(names) == [0, 0, 1, 0, 0, 0]


def accuracy(sums):
    return 100.0 * sums[0] / sums[1]


def test_pooled_groups_test_each_group_against_the_first():
    rng = np.random.default_rng(0)
    names = ["san@1", "ssan@1", "san@2", "ssan@2", "disan@1"]
    stats = [np.stack([rng.integers(0, 2, 50), np.ones(50)], 1).astype(float) for _ in names]
    groups = pooled_groups(names, stats, accuracy, n_samples=200, seed=7)
    assert [(g.name, g.members) for g in groups] == [
        ("san", [0, 2]), ("ssan", [1, 3]), ("disan", [4])]
    assert groups[0].test is None
    expected = paired_bootstrap([stats[0], stats[2]], [stats[1], stats[3]], accuracy, 200, 7)
    assert groups[1].test == expected
    expected = paired_bootstrap([stats[0], stats[2]], [stats[4]], accuracy, 200, 7)
    assert groups[2].test == expected


def test_mean_std_is_the_sample_deviation():
    assert mean_std([57.66, 57.75, 58.15]) == pytest.approx(
        (statistics.mean([57.66, 57.75, 58.15]), statistics.stdev([57.66, 57.75, 58.15])))
    assert mean_std([31.2]) == (31.2, 0.0)


def test_interim_label_until_both_groups_have_their_planned_seeds():
    from ssan_plugin.stats.seed_groups import interim_label

    assert interim_label(2, 5, 5, 5) == "interim: 2 of 5 seeds"
    assert interim_label(5, 5, 3, 5) == "interim: baseline 3 of 5 seeds"
    assert interim_label(2, 5, 3, 5) == "interim: 2 of 5 seeds"  # the group's own first
    assert interim_label(5, 5, 5, 5) is None
    assert interim_label(2, None, 2, None) is None  # nothing planned: no plan to wait for
