"""What a trained selective encoder selects: 0/1 selection maps, rates by token class, heat maps.

The plugin's selection contract (``modules/selection.py``): every selective attention module is
a :class:`SelectionReporter`; with ``keep_selection = True`` its per-forward
:class:`SelectionStats` record carries ``selection``, the bool (B, h, T, S) eval-mode selection
(True: query t of head h attends to key s). The encoder returns the records, one per selective
layer, in ``encoder_out["selection_stats"]`` (``record.layer`` is the 0-based layer index).
SSAN's module and every selector of ``selective_transformer`` (``SelectorMultiheadAttention``)
keep that contract, so everything here reads any of them the same way; for a selector a pair is
selected when its final weight is nonzero (docs/selectors.md), for SSAN when it is in A
(maps.py's module doc).

Here:

- :func:`load_model`: a checkpoint (and its task, optionally with another data-bin and a split
  loaded), in eval mode;
- :func:`batch_selection`, :func:`selection_maps`, :func:`sentence_selections`: the maps of a
  padded batch, of one sentence, of a sequence of sentences (pads removed whatever the side:
  fairseq's translation task pads sources on the left by default, so position t of a padded
  row is not token t);
- :func:`piece_word_index`, :func:`piece_labels`: sentencepiece pieces back to the words they
  came from (a piece starting with U+2581 starts a word), and per-word labels onto pieces;
- :class:`SelectionRates`: the fraction of (query, key) pairs selected, by the key's label,
  per layer and pooled, accumulated over sentences;
- :func:`plot_selection_heatmap`: one sentence's selection, one panel per layer, heads averaged.

Pair selectors only (SSAN, the selectors); token selectors (ReSA) report (B, 2, T) selections,
not handled here (maps.py turns them into pair maps).
"""

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..modules.selection import SelectionReporter

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


def selective_modules(model) -> List[SelectionReporter]:
    """The model's selective attention modules (empty for a model without selector)."""
    return [m for m in model.modules() if isinstance(m, SelectionReporter)]


@contextmanager
def keeping_selection(model):
    """Within the block, every selective module records its 0/1 selection; restored after."""
    modules = selective_modules(model)
    before = [m.keep_selection for m in modules]
    for m in modules:
        m.keep_selection = True
    try:
        yield modules
    finally:
        for m, value in zip(modules, before):
            m.keep_selection = value


def run_encoder(model, src_tokens: Tensor, src_lengths: Optional[Tensor] = None,
                pad_idx: Optional[int] = None, return_all_hiddens: bool = False) -> dict:
    """The encoder's output for a padded batch (B, T), in eval mode, without gradient, every
    selective module keeping its 0/1 selection in its record (``out["selection_stats"]``);
    with ``return_all_hiddens``, ``out["encoder_states"]`` holds the embedding layer's output
    and every layer's (T x B x C each). ``model`` is a fairseq encoder-decoder or an encoder;
    its training mode is restored afterwards."""
    encoder = getattr(model, "encoder", model)
    if src_lengths is None:
        if pad_idx is None:
            pad_idx = encoder.padding_idx
        src_lengths = src_tokens.ne(pad_idx).sum(-1)
    was_training = model.training
    model.eval()
    try:
        extra = {"return_all_hiddens": True} if return_all_hiddens else {}
        with torch.no_grad(), keeping_selection(model):
            return encoder(src_tokens, src_lengths=src_lengths, **extra)
    finally:
        model.train(was_training)


def batch_selection(model, src_tokens: Tensor, src_lengths: Optional[Tensor] = None,
                    pad_idx: Optional[int] = None) -> Dict[int, Tensor]:
    """{layer: bool (B, h, T, T)}: the eval-mode selection of each selective encoder layer for
    a padded batch of sources (B, T), as the model sees it (pad rows/columns included).
    ``model`` is a fairseq encoder-decoder (``model.encoder``) or an encoder."""
    out = run_encoder(model, src_tokens, src_lengths, pad_idx)
    maps = {}
    for record in out.get("selection_stats", []):
        if record.selection is None or record.selection.dim() != 4:
            continue  # no selection kept, or a token selector (B, 2, T)
        maps[record.layer] = record.selection
    return maps


def selection_maps(model, src_tokens: Tensor) -> Dict[int, Tensor]:
    """{layer: bool (h, T, T)} for one unpadded sentence (1-D tokens, EOS included)."""
    if src_tokens.dim() != 1:
        raise ValueError(f"one sentence expected (1-D tokens), got shape {tuple(src_tokens.shape)}")
    lengths = torch.tensor([src_tokens.numel()])
    return {layer: sel[0] for layer, sel in
            batch_selection(model, src_tokens.unsqueeze(0), lengths).items()}


def collate(sentences: Sequence[Tensor], pad_idx: int, left_pad: bool = True) -> Tuple[Tensor, Tensor]:
    """(B, T) padded tokens and lengths; left padding as fairseq's translation task does."""
    lengths = torch.tensor([s.numel() for s in sentences])
    tokens = torch.full((len(sentences), int(lengths.max())), pad_idx, dtype=torch.long)
    for row, s in enumerate(sentences):
        if left_pad:
            tokens[row, tokens.size(1) - s.numel():] = s
        else:
            tokens[row, :s.numel()] = s
    return tokens, lengths


def unpad(maps: Dict[int, Tensor], src_tokens: Tensor, pad_idx: int) -> List[Dict[int, Tensor]]:
    """Per sentence {layer: (h, n, n)}: the rows and columns of its non-pad positions."""
    keep = src_tokens.ne(pad_idx)
    out = []
    for row in range(src_tokens.size(0)):
        idx = keep[row].nonzero().squeeze(-1)
        out.append({layer: sel[row][:, idx][:, :, idx] for layer, sel in maps.items()})
    return out


def sentence_selections(model, sentences: Iterable[Tensor], pad_idx: int,
                        batch_size: int = 64, left_pad: bool = True) -> Iterator[Dict[int, Tensor]]:
    """{layer: bool (h, n, n)} for each sentence (1-D tokens), in the given order."""
    batch: List[Tensor] = []

    def flush():
        tokens, lengths = collate(batch, pad_idx, left_pad)
        return unpad(batch_selection(model, tokens, lengths), tokens, pad_idx)

    for sentence in sentences:
        batch.append(sentence)
        if len(batch) == batch_size:
            yield from flush()
            batch = []
    if batch:
        yield from flush()


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
        image = ax.imshow(sel.float().mean(0).numpy(), vmin=0, vmax=1, cmap="viridis",
                          interpolation="nearest")
        ax.set_title(f"layer {layer}")
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        ax.set_xticklabels(tokens, rotation=90, fontsize=6)
        ax.set_yticklabels(tokens, fontsize=6)
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
