"""ssan_plugin/translation/decode.py: fairseq-generate output restored to corpus order and
counted; the speed line."""

import pytest

from ssan_plugin.translation.decode import parse_generate_output, parse_speed
from ssan_plugin.translation.textio import PipelineError


def test_generate_output_restored_to_corpus_order_and_counted():
    out = "S-2\tc\nH-2\t-0.1\tC\nH-0\t-0.2\tA\nH-0\t-0.9\tworse\nH-1\t-0.3\t\nD-1\t-0.3\t\n"
    assert parse_generate_output(out, 3) == ["A", "", "C"]
    with pytest.raises(PipelineError, match=r"returned 3 hypotheses for a split of 4.*\[3\]"):
        parse_generate_output(out, 4)
    log = "| Translated 1,037 sentences (9,000 tokens) in 2.0s (518.50 sentences/s, 4500.00 tokens/s)"
    assert parse_speed(log) == 518.5
    assert parse_speed("nothing") is None
