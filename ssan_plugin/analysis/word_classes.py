"""Selection by word class: rates of keys and of queries by POS tag, content vs function words,
and the rate against the word distance |i - j|.

Definitions:

- A piece takes the POS tag of the word it belongs to; ``</s>`` is neither a query nor a key
  here (it belongs to no word).
- Content words: nouns, proper nouns, verbs, adjectives, adverbs and numbers, i.e. the PTB tags
  in :data:`CONTENT_TAGS`; punctuation: :data:`~ssan_plugin.analysis.trees.PUNCTUATION_TAGS`;
  function words: every other tag (determiners, prepositions, pronouns, conjunctions, ...).
- The key rate of a class: selected / possible (query, key) pairs, summed over heads, over the
  pairs whose key is a piece of that class (queries: every piece of a word); the query rate
  likewise with the query in the class. Counts are kept with the rates.
- Distance: |word(i) - word(j)| between the words of the query and key pieces (0: the same
  word, including the diagonal).

Pair maps come from :mod:`ssan_plugin.analysis.maps` (SSAN's pair selection; a selector's
pairs with a nonzero final weight; ReSA as the pair map ``head_i and dependent_j``). The key/query accumulators reuse
:class:`~ssan_plugin.analysis.selection.SelectionRates`.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Sequence

import torch
from torch import Tensor

from .selection import SelectionRates
from .trees import PUNCTUATION_TAGS

CONTENT_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ",
                          "JJ", "JJR", "JJS", "RB", "RBR", "RBS", "CD"})


def word_class(tag: str) -> str:
    if tag in CONTENT_TAGS:
        return "content"
    if tag in PUNCTUATION_TAGS:
        return "punctuation"
    return "function"


@dataclass
class WordClassStats:
    """Accumulates, per layer, the selection rates of keys and queries by POS tag and by word
    class, and by word distance, over sentences (:meth:`add`)."""

    keys_pos: SelectionRates = field(default_factory=SelectionRates)
    queries_pos: SelectionRates = field(default_factory=SelectionRates)
    keys_class: SelectionRates = field(default_factory=SelectionRates)
    queries_class: SelectionRates = field(default_factory=SelectionRates)
    distance_selected: Dict[int, Dict[int, int]] = field(default_factory=dict)
    distance_possible: Dict[int, Dict[int, int]] = field(default_factory=dict)
    words_by_tag: Dict[str, int] = field(default_factory=dict)
    sentences: int = 0

    def add(self, selection: Dict[int, Tensor], word_index: Sequence[int], tags: Sequence[str]):
        """One sentence: ``selection`` {layer: bool (h, n, n)} over its n pieces, the word of
        each piece (-1: not a word, e.g. ``</s>``), the POS tag of each word."""
        index = list(word_index)
        is_word = [w >= 0 for w in index]
        pos = [tags[w] if w >= 0 else None for w in index]
        cls = [word_class(t) if t is not None else None for t in pos]
        flipped = {layer: sel.transpose(-1, -2) for layer, sel in selection.items()}
        self.keys_pos.add(selection, pos, query_mask=is_word)
        self.keys_class.add(selection, cls, query_mask=is_word)
        self.queries_pos.add(flipped, pos, query_mask=is_word)
        self.queries_class.add(flipped, cls, query_mask=is_word)
        words = torch.tensor(index)
        ok = torch.tensor(is_word)
        dist = (words[:, None] - words[None, :]).abs()
        pair_ok = ok[:, None] & ok[None, :]
        for layer, sel in selection.items():
            heads = sel.size(0)
            d = dist[pair_ok]
            selected = torch.bincount(d, weights=sel.sum(0)[pair_ok].double())
            possible = torch.bincount(d) * heads
            s_map = self.distance_selected.setdefault(layer, {})
            p_map = self.distance_possible.setdefault(layer, {})
            for k in range(possible.numel()):
                if possible[k]:
                    s_map[k] = s_map.get(k, 0) + int(selected[k])
                    p_map[k] = p_map.get(k, 0) + int(possible[k])
        for t in tags:
            self.words_by_tag[t] = self.words_by_tag.get(t, 0) + 1
        self.sentences += 1

    @staticmethod
    def _table(rates: SelectionRates, layer: int) -> dict:
        return {label: {"rate": rates.rate(label, layer),
                        "selected": rates.selected.get((layer, label), 0),
                        "possible": rates.possible.get((layer, label), 0)}
                for label in rates.labels() if (layer, label) in rates.possible}

    def as_dict(self) -> dict:
        """JSON-friendly: ``n_sentences``, ``words_by_pos``, ``layers[]`` with ``keys`` and
        ``queries`` (``by_pos``, ``by_class``: {label: rate, selected, possible}) and
        ``distance`` ([{distance, rate, selected, possible}])."""
        layers = []
        for layer in self.keys_pos.layers():
            dist = [{"distance": d, "rate": self.distance_selected[layer][d] / p,
                     "selected": self.distance_selected[layer][d], "possible": p}
                    for d, p in sorted(self.distance_possible.get(layer, {}).items())]
            layers.append({
                "layer": layer,
                "keys": {"by_pos": self._table(self.keys_pos, layer),
                         "by_class": self._table(self.keys_class, layer)},
                "queries": {"by_pos": self._table(self.queries_pos, layer),
                            "by_class": self._table(self.queries_class, layer)},
                "distance": dist,
            })
        return {"n_sentences": self.sentences, "words_by_pos": dict(sorted(self.words_by_tag.items())),
                "content_tags": sorted(CONTENT_TAGS), "punctuation_tags": sorted(PUNCTUATION_TAGS),
                "layers": layers}


def plot_word_class_stats(stats: dict, path, max_distance: int = 20):
    """A PNG of :meth:`WordClassStats.as_dict`: left, key and query selection rates of content
    vs function words per layer; right, the selection rate against word distance per layer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = stats["layers"]
    if not layers:
        raise ValueError("no selective layer to plot")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.2
    xs = list(range(len(layers)))
    for k, (role, cls) in enumerate([("keys", "content"), ("keys", "function"),
                                     ("queries", "content"), ("queries", "function")]):
        values = [l[role]["by_class"].get(cls, {}).get("rate", float("nan")) for l in layers]
        left.bar([x + (k - 1.5) * width for x in xs], values, width, label=f"{role}: {cls}")
    left.set_xticks(xs)
    left.set_xticklabels([f"layer {l['layer']}" for l in layers])
    left.set_ylabel("selection rate")
    left.set_ylim(0, 1)
    left.legend(fontsize=7)
    for l in layers:
        pts = [(d["distance"], d["rate"]) for d in l["distance"] if d["distance"] <= max_distance]
        right.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=f"layer {l['layer']}")
    right.set_xlabel("word distance |i - j|")
    right.set_ylabel("selection rate")
    right.set_ylim(0, 1)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
