"""``window``: each query keeps the keys within W positions of itself (a local window)."""

from dataclasses import dataclass, field

import torch
from fairseq.dataclass import FairseqDataclass

from ssan_plugin.modules.selective_weights import selective_softmax
from ssan_plugin.modules.selectors import Selection, Selector, register_selector


@dataclass
class WindowOptions(FairseqDataclass):
    window: int = field(default=4, metadata={"help": "window selector: keys within W positions"})


@register_selector
class WindowSelector(Selector):
    name, options = "window", WindowOptions
    tiny_flags = ("--window", "1")  # what the tests that run every selector train it with

    def __init__(self, width: int):
        super().__init__()
        self.width = width

    @classmethod
    def from_args(cls, args, embed_dim, num_heads):
        return cls(args.window)

    def reference(self, logits, key_padding_mask, query, rate_gradient=True, noise=None):
        i = torch.arange(logits.size(-1), device=logits.device)
        keep = ((i[:, None] - i[None, :]).abs() <= self.width).expand_as(logits)
        return Selection(selective_softmax(logits, keep.float(), key_padding_mask), keep=keep)
