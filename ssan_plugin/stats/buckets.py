"""Buckets of a non-negative count (sentence length, distance in words) for breakdowns of a
score: each bucket is ``(first, last)``, both inclusive, ``last`` None for an open-ended last
bucket."""

from typing import Optional, Sequence, Tuple

Bucket = Tuple[int, Optional[int]]

#: sentence length in words, of every by-length breakdown (translation BLEU by source length,
#: SRL F1 by sentence length)
LENGTH_BUCKETS: Tuple[Bucket, ...] = ((1, 10), (11, 20), (21, 30), (31, 40), (41, None))


def bucket_index(value: int, buckets: Sequence[Bucket]) -> int:
    """Index of the bucket of ``buckets`` holding ``value``; ValueError when none does."""
    for k, (first, last) in enumerate(buckets):
        if value >= first and (last is None or value <= last):
            return k
    raise ValueError(f"{value} is in no bucket of {tuple(buckets)}")


def bucket_label(first: int, last: Optional[int]) -> str:
    """``"41+"`` (open-ended), ``"3"`` (one value) or ``"11-20"``."""
    if last is None:
        return f"{first}+"
    return str(first) if first == last else f"{first}-{last}"
