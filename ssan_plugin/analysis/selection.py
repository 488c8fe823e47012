"""What a trained selective encoder selects: 0/1 selection maps, rates by token class, heat maps.

The plugin's selection contract (``modules/selection.py``): every selective attention module is
a ``SelectionReporter``; with ``keep_selection = True`` its per-forward
``SelectionStats`` record carries ``selection``, the bool (B, h, T, S) eval-mode selection
(True: query t of head h attends to key s). The encoder returns the records, one per selective
layer, in ``encoder_out["selection_stats"]`` (``record.layer`` is the 0-based layer index).
SSAN's module and every selector of ``selective_transformer`` (``SelectorMultiheadAttention``)
keep that contract, so everything here reads any of them the same way; for a selector a pair is
selected when its final weight is nonzero (docs/selectors.md), for SSAN when it is in A
(maps.py's module doc).

Running the encoder (eval mode, selections kept), batching sentences and removing pads are
maps.py's (:func:`~ssan_plugin.analysis.maps.run_encoder`,
:func:`~ssan_plugin.analysis.maps.sentence_maps`); this module reads the pair selections from
them. Here:

- :func:`load_model`: a checkpoint (and its task, optionally with another data-bin and a split
  loaded), in eval mode;
- :func:`batch_selection`, :func:`selection_maps`: the maps of a padded batch as the model sees
  it (pads included), of one sentence (a batch of one, nothing padded);
- :func:`sentence_selections`: the maps of a sequence of sentences, pads removed whatever the
  side (the pair selections of :func:`~ssan_plugin.analysis.maps.sentence_maps`);
- :func:`piece_word_index`, :func:`piece_labels`: sentencepiece pieces back to the words they
  came from (a piece starting with U+2581 starts a word), and per-word labels onto pieces
  (``inputs.py`` gives raw text its word indices this way; ``maps.to_words`` pools by them);
- :class:`SelectionRates`: the fraction of (query, key) pairs selected, by the key's label,
  per layer and pooled, accumulated over sentences;
- :func:`plot_selection_heatmap`: one sentence's selection, one panel per layer, heads averaged
  (``maps.plot_grid`` draws every head instead; both draw their panels with
  :func:`~ssan_plugin.analysis.maps.heat_panel`).

Pair selectors only (SSAN, the selectors); token selectors (ReSA) report (B, 2, T) selections,
left out here (maps.py turns them into pair maps).
"""

from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .maps import heat_panel, recorded_selections, run_encoder, sentence_maps

#: sentencepiece's word-start marker (U+2581, "LOWER ONE EIGHTH BLOCK")
WORD_START = "\u2581"
#: dictionary symbols that belong to no word
SPECIAL_SYMBOLS = frozenset({"<s>", "</s>", "<pad>"})


def load_model(checkpoint, data=None, subset: Optional[str] = None):
    """(model, task) of a fairseq checkpoint, the model on CPU in eval mode.

    ``data`` replaces the data-bin recorded in the checkpoint (e.g. when it moved); ``subset``
    (e.g. "test") is loaded into the task (``task.dataset(subset)``)."""
    from .. import register

    register()  # the plugin's models and tasks before the checkpoint is read
    from fairseq import checkpoint_utils

    overrides = {"data": str(data)} if data is not None else None
    models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(checkpoint)], arg_overrides=overrides)
    model = models[0].cpu().eval()
    if subset is not None:
        task.load_dataset(subset)
    return model, task


def batch_selection(model, src_tokens: Tensor, src_lengths: Optional[Tensor] = None,
                    pad_idx: Optional[int] = None) -> Dict[int, Tensor]:
    """{layer: bool (B, h, T, T)}: the eval-mode selection of each selective encoder layer for
    a padded batch of sources (B, T), as the model sees it (pad rows/columns included).
    ``model`` is a fairseq encoder-decoder (``model.encoder``) or an encoder."""
    out = run_encoder(model, src_tokens, src_lengths, pad_idx)
    return {layer: sel for layer, sel in recorded_selections(out).items()
            if sel.dim() == 4}  # a token selector's is (B, 2, T)


def selection_maps(model, src_tokens: Tensor) -> Dict[int, Tensor]:
    """{layer: bool (h, T, T)} for one unpadded sentence (1-D tokens, EOS included)."""
    if src_tokens.dim() != 1:
        raise ValueError(f"one sentence expected (1-D tokens), got shape {tuple(src_tokens.shape)}")
    lengths = torch.tensor([src_tokens.numel()])
    return {layer: sel[0] for layer, sel in
            batch_selection(model, src_tokens.unsqueeze(0), lengths).items()}


def sentence_selections(model, sentences: Iterable[Tensor], pad_idx: int,
                        batch_size: int = 64, left_pad: bool = True) -> Iterator[Dict[int, Tensor]]:
    """{layer: bool (h, n, n)} of each pair selector, for each sentence (1-D tokens), in the
    given order, on CPU: :func:`~ssan_plugin.analysis.maps.sentence_maps` without attention
    weights, token selectors left out."""
    for maps in sentence_maps(model, sentences, pad_idx, batch_size, attention=False,
                              left_pad=left_pad):
        yield {layer: sel for layer, sel in maps.selection.items()
               if layer not in maps.token_selection}


def piece_word_index(pieces: Sequence[str], marker: str = WORD_START,
                     specials=SPECIAL_SYMBOLS) -> List[int]:
    """The 0-based index of the word each sentencepiece piece belongs to; -1 for special
    symbols (``</s>`` ...). A piece starting with ``marker`` starts a new word; a first piece
    without it still belongs to word 0."""
    index, out = -1, []
    for piece in pieces:
        if piece in specials:
            out.append(-1)
            continue
        if piece.startswith(marker) or index < 0:
            index += 1
        out.append(index)
    return out


def piece_labels(pieces: Sequence[str], word_labels: Sequence[str], marker: str = WORD_START,
                 specials=SPECIAL_SYMBOLS) -> List[Optional[str]]:
    """The label of the word each piece belongs to (None for special symbols); the pieces
    must spell exactly ``len(word_labels)`` words."""
    index = piece_word_index(pieces, marker, specials)
    words = max(index, default=-1) + 1
    if words != len(word_labels):
        raise ValueError(f"{len(pieces)} pieces spell {words} words, but {len(word_labels)} "
                         f"labels were given: {' '.join(pieces)}")
    return [None if i < 0 else word_labels[i] for i in index]


@dataclass
class SelectionRates:
    """Selected / possible (query, key) pairs by the key's label, per layer and pooled.

    ``add`` one sentence at a time: its maps {layer: (h, T, T)} and one label per token
    position (None: the key is not counted, e.g. EOS). Queries are all positions, or those
    where ``query_mask`` is True."""

    selected: Dict[Tuple[int, str], int] = field(default_factory=dict)
    possible: Dict[Tuple[int, str], int] = field(default_factory=dict)

    def add(self, maps: Dict[int, Tensor], key_labels: Sequence[Optional[str]],
            query_mask: Optional[Sequence[bool]] = None):
        for layer, sel in maps.items():
            heads, n_queries, n_keys = sel.shape
            if n_keys != len(key_labels):
                raise ValueError(f"layer {layer}: {n_keys} keys, {len(key_labels)} labels")
            if query_mask is not None:
                sel = sel[:, torch.as_tensor(list(query_mask), dtype=torch.bool)]
            per_key = sel.sum(dim=(0, 1))  # (T,): selections of each key over heads, queries
            for label in set(l for l in key_labels if l is not None):
                keys = torch.tensor([l == label for l in key_labels])
                key = (layer, label)
                self.selected[key] = self.selected.get(key, 0) + int(per_key[keys].sum())
                self.possible[key] = self.possible.get(key, 0) + heads * sel.size(1) * int(keys.sum())

    def labels(self) -> List[str]:
        return sorted({label for _, label in self.possible})

    def layers(self) -> List[int]:
        return sorted({layer for layer, _ in self.possible})

    def rate(self, label: str, layer: Optional[int] = None) -> float:
        """The rate for one layer, or pooled over layers (``layer=None``); NaN if no pair."""
        layers = self.layers() if layer is None else [layer]
        sel = sum(self.selected.get((l, label), 0) for l in layers)
        pos = sum(self.possible.get((l, label), 0) for l in layers)
        return sel / pos if pos else float("nan")

    def as_dict(self) -> dict:
        """{"all": {label: rate}, "layers": {layer: {label: rate}}} (JSON-friendly)."""
        return {"all": {label: self.rate(label) for label in self.labels()},
                "layers": {str(layer): {label: self.rate(label, layer) for label in self.labels()}
                           for layer in self.layers()}}


def word_label_rates(model, sentences: Sequence[Tensor], pieces: Sequence[Sequence[str]],
                     word_labels: Sequence[Sequence[str]], pad_idx: int,
                     classify=None, batch_size: int = 64) -> SelectionRates:
    """Selection rates by the label of the key's *word*, over a corpus.

    ``sentences``: 1-D token tensors (EOS included) as the model reads them; ``pieces``: their
    dictionary symbols (sentencepiece pieces); ``word_labels``: one label per word of each
    sentence (e.g. a generator's labels file); ``classify`` maps a word label to the class
    counted (e.g. content vs filler), identity by default. Special symbols are not counted as
    keys; every non-pad position is a query."""
    if not len(sentences) == len(pieces) == len(word_labels):
        raise ValueError(f"{len(sentences)} sentences, {len(pieces)} piece lists, "
                         f"{len(word_labels)} label lists")
    rates = SelectionRates()
    maps_iter = sentence_selections(model, sentences, pad_idx, batch_size)
    for maps, sentence_pieces, labels in zip(maps_iter, pieces, word_labels):
        key_labels = piece_labels(sentence_pieces, labels)
        if classify is not None:
            key_labels = [None if l is None else classify(l) for l in key_labels]
        rates.add(maps, key_labels)
    return rates


def plot_selection_heatmap(maps: Dict[int, Tensor], tokens: Sequence[str], path,
                           key_labels: Optional[Sequence[Optional[str]]] = None,
                           highlight: str = "filler", title: Optional[str] = None):
    """Write a PNG: one panel per selective layer, cell (query, key) = the fraction of heads
    that select the key for the query. Tick labels of tokens whose label is ``highlight`` are
    grey. Returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = sorted(maps)
    if not layers:
        raise ValueError("no selection maps to plot (is the model selective?)")
    n = len(tokens)
    size = max(3.0, 0.16 * n + 1.5)
    fig, axes = plt.subplots(1, len(layers), figsize=(size * len(layers), size + 0.6),
                             squeeze=False)
    image = None
    for ax, layer in zip(axes[0], layers):
        sel = maps[layer]
        if sel.shape[-1] != n:
            raise ValueError(f"layer {layer}: {sel.shape[-1]} keys, {n} tokens")
        image = heat_panel(ax, sel.float().mean(0), tokens, vmax=1.0, fontsize=6)
        ax.set_title(f"layer {layer}")
        ax.set_xlabel("key")
        ax.set_ylabel("query")
        if key_labels is not None:
            for ticks in (ax.get_xticklabels(), ax.get_yticklabels()):
                for tick, label in zip(ticks, key_labels):
                    if label == highlight:
                        tick.set_color("0.6")
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.6, label="fraction of heads selecting")
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def read_word_labels(path) -> List[List[str]]:
    """A labels file: one line per sentence, one whitespace-separated label per word."""
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f]
