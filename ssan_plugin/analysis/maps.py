"""Running an encoder over sentences, and the per-sentence maps it gives: eval-mode selection
and attention weights, per layer and head.

This module is the analysis tools' one way to run an encoder (``selection.py`` builds on it):

- :func:`run_encoder`: the encoder's output for a padded batch (B, T), in eval mode, without
  gradient, every selective module keeping its 0/1 selection (:func:`keeping_selection`);
- :func:`sentence_maps`: a sequence of sentences (1-D tokens, ``</s>`` last) cut into
  consecutive batches, padded on the left as fairseq's translation task reads sources
  (:func:`padded_batches`, :func:`collate`); :func:`batch_maps` gives each sentence's maps with
  the pads removed whatever the padding side (:func:`sentence_positions`, :func:`unpad`:
  position t of a padded row is not token t);
- :func:`selective_modules` (every module that can record a selection, what
  :func:`keeping_selection` switches) and :func:`selective_layers` (the encoder layers whose
  self-attention is one, with their kind); :func:`learnt_selector_values` (per layer, what a
  selector learnt per head: entmax's alpha);
- :func:`to_words` (piece-level maps to word level), :func:`maps_json`, :func:`plot_grid` (a
  layers x heads grid of :func:`heat_panel` maps).

Every selective layer is read through one interface, the one the selective criterion reads
(``modules/selection.py``): a ``SelectionReporter``, whose per-forward record carries its 0/1
selection when ``keep_selection`` is set (:func:`run_encoder` sets it); a pair selector
is also fairseq's ``MultiheadAttention``, whose per-head weights ``need_head_weights`` returns.
SSAN's module and the selector family's ``SelectorMultiheadAttention`` both provide it; nothing
here depends on a selector's maths.

What each encoder layer kind gives (:func:`layer_kinds`):

- ``san`` (fairseq's ``MultiheadAttention``, the Transformer baseline): attention weights per
  head. fairseq's layer asks for no weights, so a forward pre-hook asks for them
  (``need_weights``/``need_head_weights``) and a forward hook keeps them. fairseq hands
  the call to torch's fused ``F.multi_head_attention_forward`` whenever it can, and that path
  averages the heads; the hooked call is therefore sent down fairseq's own per-head path (the
  module's ``skip_embed_dim_check`` flag, set for the call only); the result is the same
  attention (tests compare the head average with the fused path).
- ``ssan`` (``ssan_transformer``, and ``selective_transformer`` with the ``gumbel`` or ``soft``
  selector; ``SelectorMultiheadAttention``): the 0/1 selection from the module's own record
  (``keep_selection``; hard selection: A = 1[E_p > 0], exactly the keys with a nonzero weight;
  soft: sigmoid(E_p) > 0.5, as its logged rate counts it) and the attention weights per head as
  above.
- a selector of ``selective_transformer`` computed on the attention logits
  (``SelectorMultiheadAttention``; the kind is the selector's name: ``topk``, ``entmax``,
  ``gate``, ``fixed_mask``, ...): as ``ssan``, the 0/1 selection from the module's own record, in
  which a (query, key) pair is selected when its final weight (after the gate, before dropout)
  is nonzero (docs/selectors.md), and the final weights per head, gate included.
- ``resa``: the tokens selected as heads (queries) and as dependents (keys), (2, n); as a pair
  map, one "head" with ``selected[i, j] = head_i and dependent_j and i != j`` (the pairs that
  attend each other through the selected-token attention; unselected heads use the mean of
  the other tokens instead). Its multi-dimensional attention is not recorded.
- ``disan``, ``biblosan``: multi-dimensional attention, one weight per feature, which the
  layer computes block-wise without storing it. A forward hook recomputes the weights from the
  layer's input (``attention_maps`` of the module) and keeps their mean over the features, as
  "heads": DiSAN 2 (forward, backward), Bi-BloSAN 4 (forward intra-block, forward inter-block,
  backward intra-block, backward inter-block; the inter-block map spreads a block's weight
  over its tokens by the source2token weights). Names in ``HEAD_NAMES``.

:func:`batch_maps` and :func:`sentence_maps` return all maps per sentence with pads removed
(positions = the sentence's pieces, ``</s>`` last), on CPU (:class:`SentenceMaps`).
"""

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import torch
from fairseq.modules import MultiheadAttention
from torch import Tensor

from ..modules.biblosan import BiBloSANAttention
from ..modules.disan import DiSANAttention
from ..modules.resa import ReSAAttention
from ..modules.selection import SelectionReporter
from ..modules.selectors import SelectorMultiheadAttention

#: what each "head" of a multi-dimensional layer's attention map is
HEAD_NAMES = {"disan": DiSANAttention.map_names, "biblosan": BiBloSANAttention.map_names}


class UnsupportedEncoder(ValueError):
    """The model has layers whose maps the analysis tools cannot record."""


def encoder_layers(model) -> list:
    """The encoder's layers, in order; ``model`` is a fairseq encoder-decoder or an encoder."""
    encoder = getattr(model, "encoder", model)
    layers = encoder.layers
    return [layers[i] for i in range(len(layers))]  # indexing: LayerDropModuleList's iterator drops


def self_attention(layer):
    """An encoder layer's self-attention module (through a fairscale checkpoint wrapper)."""
    return getattr(getattr(layer, "_checkpoint_wrapped_module", layer), "self_attn")


def layer_kind(attention) -> str:
    """The kind of a self-attention module (see the module doc); UnsupportedEncoder if unknown."""
    if isinstance(attention, SelectorMultiheadAttention):
        return attention.selector.layer_kind()
    if isinstance(attention, MultiheadAttention):
        return "san"
    if isinstance(attention, ReSAAttention):
        return "resa"
    if isinstance(attention, DiSANAttention):
        return "disan"
    if isinstance(attention, BiBloSANAttention):
        return "biblosan"
    raise UnsupportedEncoder(f"unknown self-attention module {type(attention).__name__}")


def layer_kinds(model) -> Dict[int, str]:
    """{0-based encoder layer: kind} (see the module doc)."""
    return {i: layer_kind(self_attention(layer)) for i, layer in enumerate(encoder_layers(model))}


def selective_layers(model) -> Dict[int, str]:
    """{0-based encoder layer: kind} of the layers that report a selection (the
    ``SelectionReporter`` interface of the module doc): SSAN, ReSA and every selector."""
    layers = {}
    for index, layer in enumerate(encoder_layers(model)):
        attention = self_attention(layer)
        if isinstance(attention, SelectionReporter):
            layers[index] = layer_kind(attention)
    return layers


def learnt_selector_values(model) -> Dict[int, Dict[str, List[float]]]:
    """{0-based encoder layer: {name: one value per head}} of the selectors that learn
    per-head quantities (``Selector.learnt_values``: entmax's learnt alpha); layers without
    any are left out."""
    values = {}
    for index, layer in enumerate(encoder_layers(model)):
        attention = self_attention(layer)
        if isinstance(attention, SelectorMultiheadAttention):
            learnt = attention.selector.learnt_values()
            if learnt:
                values[index] = learnt
    return values


def selective_modules(model) -> List[SelectionReporter]:
    """Every module of the model that can record a selection (``SelectionReporter``), encoder
    and decoder alike, in module order; empty for a model without selector. What
    :func:`keeping_selection` switches; :func:`selective_layers` names the encoder's."""
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
    selective module keeping its 0/1 selection in its record (``out["selection_stats"]``,
    read by :func:`recorded_selections`); with ``return_all_hiddens``,
    ``out["encoder_states"]`` holds the embedding layer's output and every layer's (T x B x C
    each). ``src_lengths`` defaults to the non-pad count of each row (``pad_idx``: the
    encoder's own by default). ``model`` is a fairseq encoder-decoder or an encoder; its
    training mode is restored afterwards."""
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


def recorded_selections(encoder_out: dict) -> Dict[int, Tensor]:
    """{layer: bool selection} kept in an encoder output's records (:func:`run_encoder`), in
    record order, pads included: (B, h, T, S) for a pair selector, (B, 2, T) for a token
    selector (ReSA: row 0 heads/queries, row 1 dependents/keys); a record without a kept
    selection is left out."""
    return {record.layer: record.selection for record in encoder_out.get("selection_stats", [])
            if record.selection is not None}


def collate(sentences: Sequence[Tensor], pad_idx: int,
            left_pad: bool = True) -> Tuple[Tensor, Tensor]:
    """(B, T) padded tokens and (B,) lengths of 1-D token tensors; left padding as fairseq's
    translation task does."""
    lengths = torch.tensor([s.numel() for s in sentences])
    tokens = torch.full((len(sentences), int(lengths.max())), pad_idx, dtype=torch.long)
    for row, s in enumerate(sentences):
        if left_pad:
            tokens[row, tokens.size(1) - s.numel():] = s
        else:
            tokens[row, :s.numel()] = s
    return tokens, lengths


def padded_batches(sentences: Iterable[Tensor], pad_idx: int, batch_size: int,
                   left_pad: bool = True) -> Iterator[Tuple[Tensor, Tensor]]:
    """:func:`collate` of consecutive groups of ``batch_size`` sentences (1-D tokens), in the
    given order (the last group may be smaller); the sentences are read as they come."""
    batch: List[Tensor] = []
    for sentence in sentences:
        batch.append(sentence)
        if len(batch) == batch_size:
            yield collate(batch, pad_idx, left_pad)
            batch = []
    if batch:
        yield collate(batch, pad_idx, left_pad)


def sentence_positions(src_tokens: Tensor, pad_idx: int) -> List[Tensor]:
    """Per row of a padded batch (B, T), the 1-D indices of its non-pad positions (either
    padding side), in order."""
    keep = src_tokens.ne(pad_idx)
    return [keep[row].nonzero().squeeze(-1) for row in range(src_tokens.size(0))]


def unpad(pair_map: Tensor, positions: Tensor) -> Tensor:
    """One row's (h, T, S) (query, key) map -> (h, n, n) on CPU: the rows and columns at
    ``positions`` (n of them, :func:`sentence_positions`)."""
    return pair_map[:, positions][:, :, positions].cpu()


@contextmanager
def recording_attention(model):
    """Within the block, each encoder layer with attention weights records them at every
    forward into the yielded dict {layer: (B, h, T, S)}: ``MultiheadAttention`` layers (san,
    ssan, the selectors: their final weights) per head, DiSAN and Bi-BloSAN layers as feature
    means (module doc)."""
    records: Dict[int, Tensor] = {}
    handles = []
    flags = []

    def make_multidim_hook(index):
        def hook(module, args, kwargs, output):
            query = kwargs["query"] if "query" in kwargs else args[0]
            pad = kwargs.get("key_padding_mask")
            pad = None if pad is None else pad.to(query.device).bool()
            with torch.no_grad():
                records[index] = module.attention_maps(query.transpose(0, 1), pad).float()
        return hook

    def pre_hook(module, args, kwargs):
        kwargs = dict(kwargs)
        kwargs["need_weights"] = True
        kwargs["need_head_weights"] = True
        return args, kwargs

    def make_hook(index):
        def hook(module, args, kwargs, output):
            weights = output[1]
            if weights is not None:  # (h, B, T, S)
                records[index] = weights.detach().transpose(0, 1).float()
        return hook

    try:
        for index, layer in enumerate(encoder_layers(model)):
            attn = self_attention(layer)
            if isinstance(attn, (DiSANAttention, BiBloSANAttention)):
                handles.append(attn.register_forward_hook(make_multidim_hook(index),
                                                          with_kwargs=True))
                continue
            if not isinstance(attn, MultiheadAttention):
                continue
            flags.append((attn, attn.skip_embed_dim_check))
            attn.skip_embed_dim_check = True  # fairseq's per-head path (see module doc)
            handles.append(attn.register_forward_pre_hook(pre_hook, with_kwargs=True))
            handles.append(attn.register_forward_hook(make_hook(index), with_kwargs=True))
        yield records
    finally:
        for handle in handles:
            handle.remove()
        for attn, value in flags:
            attn.skip_embed_dim_check = value


@dataclass
class SentenceMaps:
    """One sentence's maps, pads removed; n = its length in pieces (``</s>`` included).

    selection: {layer: bool (h, n, n)} pair selection (ssan, the selectors: a key with a
        nonzero final weight; resa as one pair map);
    attention: {layer: float (h, n, n)} attention weights (san, ssan, the selectors; disan and
        biblosan: feature means, "heads" named in HEAD_NAMES);
    token_selection: {layer: bool (2, n)} (resa: row 0 heads/queries, row 1 dependents/keys);
    states: the embedding layer's and every layer's output, (L + 1, n, C), if asked for."""

    selection: Dict[int, Tensor] = field(default_factory=dict)
    attention: Dict[int, Tensor] = field(default_factory=dict)
    token_selection: Dict[int, Tensor] = field(default_factory=dict)
    states: Optional[Tensor] = None


def resa_pair_selection(token_selection: Tensor) -> Tensor:
    """(2, n) heads/dependents -> (1, n, n) bool: head i and dependent j and i != j."""
    heads, deps = token_selection[0], token_selection[1]
    pairs = heads.unsqueeze(-1) & deps.unsqueeze(-2)
    return (pairs & ~torch.eye(heads.numel(), dtype=torch.bool)).unsqueeze(0)


def batch_maps(model, src_tokens: Tensor, src_lengths: Tensor, pad_idx: int,
               attention: bool = True, states: bool = False) -> List[SentenceMaps]:
    """The maps of each sentence of a padded batch (B, T), pads removed (either padding side),
    on CPU; one encoder forward (:func:`run_encoder`). ``attention``: also the attention
    weights (UnsupportedEncoder for an unknown layer kind); ``states``: also the layer outputs."""
    if attention:
        layer_kinds(model)  # UnsupportedEncoder for an unknown layer
    with recording_attention(model) if attention else nullcontext() as weights:
        out = run_encoder(model, src_tokens, src_lengths, return_all_hiddens=states)
    selections = recorded_selections(out)
    hidden = torch.stack(out["encoder_states"]).transpose(0, 2) if states else None  # (B, T, L+1, C)
    result = []
    for row, idx in enumerate(sentence_positions(src_tokens, pad_idx)):
        maps = SentenceMaps()
        for layer, sel in selections.items():
            if sel.dim() == 4:  # pair selector (B, h, T, S)
                maps.selection[layer] = unpad(sel[row], idx)
            else:  # token selector (B, 2, T)
                tokens = sel[row][:, idx].cpu()
                maps.token_selection[layer] = tokens
                maps.selection[layer] = resa_pair_selection(tokens)
        for layer, w in (weights or {}).items():
            maps.attention[layer] = unpad(w[row], idx)
        if hidden is not None:
            maps.states = hidden[row, idx].transpose(0, 1).cpu()  # (L+1, n, C)
        result.append(maps)
    return result


def sentence_maps(model, sentences: Iterable[Tensor], pad_idx: int, batch_size: int = 32,
                  attention: bool = True, states: bool = False,
                  left_pad: bool = True) -> Iterator[SentenceMaps]:
    """:func:`batch_maps` over 1-D token tensors (``</s>`` included), in order, in batches of
    ``batch_size`` (:func:`padded_batches`; left padding by default, as fairseq's translation
    task reads sources)."""
    for tokens, lengths in padded_batches(sentences, pad_idx, batch_size, left_pad):
        yield from batch_maps(model, tokens, lengths, pad_idx, attention, states)


def to_words(matrix: Tensor, word_index: Sequence[int], n_words: Optional[int] = None) -> Tensor:
    """A (n, n) piece-level (query, key) matrix -> (W, W) word level: special symbols (word
    index -1, e.g. ``</s>``) dropped, keys *summed* over a word's pieces (attention mass),
    queries *averaged* over a word's pieces. A word without piece gets zeros."""
    index = torch.as_tensor(list(word_index))
    words = int(index.max()) + 1 if n_words is None else n_words
    member = torch.zeros(words, len(index))
    ok = index >= 0
    member[index[ok], ok.nonzero().squeeze(-1)] = 1.0
    per_word = member.sum(1, keepdim=True).clamp_min(1.0)
    return (member / per_word) @ matrix.float() @ member.T


def maps_json(pieces: Sequence[str], maps: SentenceMaps, kinds: Dict[int, str],
              sentence: Optional[str] = None) -> dict:
    """JSON-friendly: per layer its kind and, per head, the pieces, the 0/1 selection matrix
    and the attention matrix (rows: queries, columns: keys); ReSA layers also list the
    selected heads and dependents (0/1 per piece)."""
    layers = []
    for layer in sorted(kinds):
        entry = {"layer": layer, "kind": kinds[layer], "heads": []}
        sel, att = maps.selection.get(layer), maps.attention.get(layer)
        n_heads = max(t.size(0) for t in (sel, att) if t is not None) if (sel is not None or att is not None) else 0
        names = HEAD_NAMES.get(kinds[layer])
        for h in range(n_heads):
            head = {"head": h, "pieces": list(pieces)}
            if names is not None:
                head["name"] = names[h]
            if sel is not None and h < sel.size(0):
                head["selection"] = sel[h].int().tolist()
            if att is not None:
                head["attention"] = [[round(float(x), 6) for x in row] for row in att[h]]
            entry["heads"].append(head)
        if layer in maps.token_selection:
            tokens = maps.token_selection[layer]
            entry["selected_heads"] = tokens[0].int().tolist()
            entry["selected_dependents"] = tokens[1].int().tolist()
        layers.append(entry)
    out = {"pieces": list(pieces), "layers": layers}
    if sentence is not None:
        out = {"sentence": sentence, **out}
    return out


#: inches per heat-map cell of the grid and per piece; figure margins (inches)
PANEL_INCHES_PER_PIECE = 0.16
PANEL_MIN_INCHES = 2.0
MARGIN_INCHES = (1.2, 1.0)  # width (colorbar, labels), height (title)
DPI = 100


def grid_size_inches(rows: int, cols: int, n: int):
    """The figure size (width, height) in inches of a rows x cols grid of n x n panels."""
    panel = max(PANEL_MIN_INCHES, PANEL_INCHES_PER_PIECE * n + 1.0)
    return cols * panel + MARGIN_INCHES[0], rows * panel + MARGIN_INCHES[1]


def heat_panel(ax, matrix: Tensor, labels: Sequence[str], vmax: float = 1.0,
               fontsize: float = 5, key_labels: Optional[Sequence[str]] = None):
    """Draw one (n, m) (query, key) map on a matplotlib axis: rows queries, columns keys,
    values 0..vmax on viridis, rows ticked with the n ``labels``, columns with ``key_labels``
    (default: ``labels``, a square map). Returns the image (for a colorbar). The panel of
    :func:`plot_grid` and of ``selection.plot_selection_heatmap``."""
    image = ax.imshow(matrix.float().numpy(), vmin=0, vmax=vmax, cmap="viridis",
                      interpolation="nearest")
    key_labels = labels if key_labels is None else key_labels
    ax.set_xticks(range(len(key_labels)))
    ax.set_yticks(range(len(labels)))
    ax.set_xticklabels(key_labels, rotation=90, fontsize=fontsize)
    ax.set_yticklabels(labels, fontsize=fontsize)
    return image


def plot_grid(panels: Dict[int, Tensor], pieces: Sequence[str], path, what: str,
              title: Optional[str] = None, vmax: float = 1.0,
              kinds: Optional[Dict[int, str]] = None,
              key_pieces: Optional[Sequence[str]] = None):
    """Write a PNG: a grid of heat maps, one row per layer (sorted), one column per head,
    cell (query, key), axes labelled with the pieces. ``panels``: {layer: (h, n, m)}, n query
    ``pieces`` and m ``key_pieces`` (default the same: a self-attention map); ``kinds`` (layer
    kinds): heads of DiSAN/Bi-BloSAN layers titled by their HEAD_NAMES. The image is exactly
    ``grid_size_inches(layers, max heads, max(n, m)) * DPI`` pixels. Returns (rows, cols)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = sorted(panels)
    if not layers:
        raise ValueError(f"no {what} maps to plot")
    key_pieces = pieces if key_pieces is None else key_pieces
    n, m = len(pieces), len(key_pieces)
    cols = max(panels[layer].size(0) for layer in layers)
    rows = len(layers)
    fig, axes = plt.subplots(rows, cols, figsize=grid_size_inches(rows, cols, max(n, m)),
                             squeeze=False, dpi=DPI)
    image = None
    for r, layer in enumerate(layers):
        data = panels[layer]
        if data.shape[-1] != m or data.shape[-2] != n:
            raise ValueError(f"layer {layer}: {tuple(data.shape)} map for {n} x {m} pieces")
        for c in range(cols):
            ax = axes[r][c]
            if c >= data.size(0):
                ax.axis("off")
                continue
            image = heat_panel(ax, data[c], pieces, vmax=vmax, fontsize=5, key_labels=key_pieces)
            names = HEAD_NAMES.get((kinds or {}).get(layer))
            ax.set_title(f"layer {layer} " + (names[c] if names else f"head {c}"), fontsize=8)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label=what)
    fig.suptitle(title or what, fontsize=9)
    fig.savefig(path, dpi=DPI)  # no bbox_inches="tight": the size stays the grid's
    plt.close(fig)
    return rows, cols
