"""ssan_plugin/seed_groups.py: GROUP@SEED names, the convention of every comparison script."""

import pytest

from ssan_plugin.cli import InputError
from ssan_plugin.seed_groups import (GroupMember, SeedGroupError, group_order, has_groups,
                                     parse_member, same_seed_baseline)


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
