"""``window``: each query keeps the keys within W positions of itself (a local window)."""

from dataclasses import dataclass, field

from fairseq.dataclass import FairseqDataclass

from ssan_plugin.modules.selective_weights import selective_softmax
from ssan_plugin.modules.selectors import Selection, Selector, SiteContext, register_selector


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

    def reference(self, logits, key_padding_mask, query, rate_gradient=True, noise=None, site=None):
        site = site or SiteContext.encoder(query, key_padding_mask)  # positions in the sentence
        distance = site.query_positions.unsqueeze(-1) - site.key_positions.unsqueeze(-2)
        keep = (distance.abs() <= self.width).unsqueeze(1).expand_as(logits)  # (B, h, T, S)
        return Selection(selective_softmax(logits, keep.float(), key_padding_mask), keep=keep)
