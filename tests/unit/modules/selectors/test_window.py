"""The docs' example selector (tests/helpers/selector_plugin/window.py, README "Adding a
selector", registered at run time by tests/conftest.py): its pattern against its definition,
the layer against the formula written out, gradients; and the README shows exactly that file."""

import re
from pathlib import Path

import pytest
import torch
from helpers.selectors import attend_by_hand, build, call, inputs, logits_by_hand, softmax_over

from ssan_plugin.modules.selectors import SELECTORS

ROOT = Path(__file__).resolve().parents[4]
EXAMPLE = ROOT / "tests" / "helpers" / "selector_plugin" / "window.py"


def window_by_hand(pad, width):
    """bool (B, 1, T, T): key j is kept by query i when their positions in the sentence differ
    by at most ``width`` (a token's position: the real tokens before it; a pad's: its last real
    neighbour's, or 0)."""
    rows = []
    for sentence in pad.tolist():
        positions, seen = [], 0
        for is_pad in sentence:
            positions.append(max(seen - (1 if is_pad else 0), 0))
            seen += 0 if is_pad else 1
        rows.append([[abs(p - q) <= width for q in positions] for p in positions])
    return torch.tensor(rows).unsqueeze(1)


@pytest.mark.parametrize("width", [0, 1, 3])
@pytest.mark.parametrize("left_pad", [False, True])
def test_pattern_and_forward_against_the_formula(width, left_pad):
    attn = build("window", window=width).eval()
    x, pad = inputs(seed=width, left_pad=left_pad)
    keep = window_by_hand(pad, width).expand(-1, attn.num_heads, -1, -1)
    expected = softmax_over(logits_by_hand(attn, x), keep, pad)
    attn.keep_selection = True
    out, weights = call(attn, x, pad, need_head_weights=True)
    torch.testing.assert_close(weights.transpose(0, 1), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out, attend_by_hand(attn, x, expected), rtol=1e-5, atol=1e-6)
    valid = ~pad
    pairs = valid.view(x.size(1), 1, 1, -1) & valid.view(x.size(1), 1, -1, 1)
    assert torch.equal(attn.pop_selection().selection, keep & pairs)


def test_gradients_reach_queries_and_keys_not_the_pattern():
    attn = build("window", window=1).train()
    x, pad = inputs(seed=4)
    out, _ = call(attn, x, pad)
    record = attn.pop_selection()
    out.sum().backward()
    assert attn.q_proj.weight.grad.abs().sum() > 0 and attn.k_proj.weight.grad.abs().sum() > 0
    assert not record.pair_rate.requires_grad  # the window has nothing to learn
    assert SELECTORS["window"].rate_has_gradient is False


def test_readme_shows_this_file():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert EXAMPLE.read_text() in blocks, "README's 'Adding a selector' block differs from window.py"
