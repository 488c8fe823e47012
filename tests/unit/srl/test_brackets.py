"""ssan_plugin/srl/brackets.py: bracket <-> BIO conversion, embedded phrases, invalid BIO."""

import pytest

from ssan_plugin.srl.brackets import bio_to_brackets, brackets_to_bio


def test_brackets_round_trip_and_embedded():
    tags = ["(A0*", "*)", "(V*)", "(C-A0*)", "*"]
    bio, dropped = brackets_to_bio(tags)
    assert (bio, dropped) == (["B-A0", "I-A0", "B-V", "B-C-A0", "O"], 0)
    assert bio_to_brackets(bio) == tags
    # BIO cannot hold an embedded phrase: the outermost is kept and the drop is counted
    assert brackets_to_bio(["(A1*", "(R-A1*)", "*)"]) == (["B-A1", "I-A1", "I-A1"], 1)
    with pytest.raises(ValueError, match="invalid BIO"):
        bio_to_brackets(["I-A0", "O"])
    # an I- must continue a phrase of its own type, right before it
    for tags, position in ((["B-A0", "I-A1"], 1), (["B-A0", "I-A0", "O", "I-A0"], 3), (["O", "I-A0"], 1)):
        with pytest.raises(ValueError, match=f"invalid BIO tag 'I-A[01]' at position {position}"):
            bio_to_brackets(tags)
