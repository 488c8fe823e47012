"""ssan_plugin.stats.buckets: every value in exactly the bucket its bounds say, labels, and a
value outside every bucket refused."""

import pytest

from ssan_plugin.stats.buckets import LENGTH_BUCKETS, bucket_index, bucket_label


def test_each_value_falls_in_the_bucket_of_its_bounds():
    for value in range(1, 200):
        inside = [k for k, (first, last) in enumerate(LENGTH_BUCKETS)
                  if first <= value and (last is None or value <= last)]
        assert inside == [bucket_index(value, LENGTH_BUCKETS)]  # exactly one, the right one
    assert [bucket_index(v, LENGTH_BUCKETS) for v in (10, 11, 40, 41, 10**9)] == [0, 1, 3, 4, 4]


def test_labels():
    assert [bucket_label(*b) for b in LENGTH_BUCKETS] == ["1-10", "11-20", "21-30", "31-40",
                                                          "41+"]
    assert bucket_label(0, 0) == "0" and bucket_label(3, 5) == "3-5"


def test_a_value_in_no_bucket_is_refused():
    with pytest.raises(ValueError, match="0 is in no bucket"):
        bucket_index(0, LENGTH_BUCKETS)
    with pytest.raises(ValueError, match="7 is in no bucket"):
        bucket_index(7, ((0, 2), (3, 5)))
