"""What a translation model's decoder attends to under forced decoding: word alignments from
its encoder-decoder attention, and the selection maps of its decoder sites.

For a sentence pair given as words (the tokens of a gold alignment), each word of each side is
encoded on its own as preparation encodes text (:class:`~.inputs.AnalysisInput`), so every piece
belongs to one given word. The decoder is teacher-forced on the target pieces
(``</s> y_1 .. y_{n-1}`` in, ``y_1 .. y_n </s>`` predicted), and each decoder layer's cross
attention is read where target piece y_t is predicted: a (target pieces x source pieces) map
per layer, ``</s>`` left out on both sides. Two maps (``MAPS``):

- ``weights``: the attention weights averaged over heads (what fairseq's ``--print-alignment``
  reads), for any model; a target piece is linked to the source piece of its largest weight
  (the lowest index among equal ones);
- ``selection``: the share of heads whose selector selects the pair (a model with
  ``--cross-selector``); a target piece is linked to every source piece that most heads select
  (a share above one half), possibly none.

Piece links become word links: two words are linked when any of their pieces are. The layer is
chosen by a rule fixed before any score is seen, :data:`LAYER_RULE` (the penultimate decoder
layer, the best layer for attention alignments in Garg et al. 2019; the only layer of a one-layer
decoder); every layer is scored and reported beside it.
"""

import contextlib
from dataclasses import dataclass
from typing import Dict, List, Sequence, Set, Tuple

import torch
from torch import Tensor

from ..errors import PipelineError
from ..modules.selection import SelectionReporter, selection_statistics
from .inputs import AnalysisInput, Encoded
from .maps import keeping_selection

Link = Tuple[int, int]
MAPS = ("weights", "selection")
#: how the reported layer is chosen, fixed in advance (see the module docstring)
LAYER_RULE = "penultimate decoder layer"


def rule_layer(n_layers: int) -> int:
    """The 0-based decoder layer :data:`LAYER_RULE` picks of ``n_layers``."""
    return max(n_layers - 2, 0)


def cross_selectors(model) -> List[SelectionReporter]:
    """The decoder's cross attentions that select, in layer order (empty: fairseq's)."""
    layers = model.decoder.layers
    return [layers[i].encoder_attn for i in range(len(layers))
            if isinstance(layers[i].encoder_attn, SelectionReporter)]


def head_mean(weights: Tensor) -> Tensor:
    """One sentence's cross attention weights averaged over heads, (T, S) float32: from fairseq's
    (B, T, S) (already averaged) or (h, B, T, S) (the alignment layer asks for head weights)."""
    if weights.dim() == 4:
        weights = weights.mean(0)
    return weights[0].float()


@torch.no_grad()
def cross_attention_maps(model, source: Tensor, target: Tensor, kind: str) -> List[Tensor]:
    """Per decoder layer, the (T, S) ``kind`` map (MAPS) of one teacher-forced sentence pair:
    ``source`` and ``target`` 1-D token tensors, ``</s>`` last; rows: the target tokens
    predicted (``</s>`` included), columns: the source tokens (``</s>`` included)."""
    if kind not in MAPS:
        raise ValueError(f"map must be one of {', '.join(MAPS)}, got {kind!r}")
    layers = model.decoder.layers
    eos = model.decoder.dictionary.eos()
    prev = torch.cat([target.new_tensor([eos]), target[:-1]]).unsqueeze(0)
    src = source.unsqueeze(0)
    maps: Dict[int, Tensor] = {}
    hooks, saved_need = [], []
    check_map(model, kind)
    for index in range(len(layers)):
        layer = layers[index]
        saved_need.append(layer.need_attn)
        layer.need_attn = kind == "weights"  # fairseq's layer then asks its cross attention for weights
        if kind == "weights":
            hooks.append(layer.encoder_attn.register_forward_hook(
                lambda module, args, output, index=index: maps.__setitem__(index, head_mean(output[1]))))
    keep = keeping_selection(model) if kind == "selection" else contextlib.nullcontext()
    try:
        with keep, selection_statistics(model, kind == "selection"):
            _, extra = model(src, torch.tensor([source.numel()]), prev)
    finally:
        for hook in hooks:
            hook.remove()
        for index, need in enumerate(saved_need):
            layers[index].need_attn = need
    if kind == "selection":
        for record in extra["selection_stats"]:
            if record.site == "cross":
                maps[record.layer] = record.selection[0].float().mean(0)  # share of heads, (T, S)
    if sorted(maps) != list(range(len(layers))):
        raise PipelineError(f"the model reported cross attention for layers {sorted(maps)} of "
                            f"{len(layers)}")
    return [maps[i] for i in range(len(layers))]


def check_map(model, kind: str) -> None:
    """A ``selection`` map needs a model whose every decoder layer's cross attention selects."""
    if kind == "selection" and len(cross_selectors(model)) != len(model.decoder.layers):
        raise PipelineError("--map selection needs a model whose every decoder layer's cross "
                            "attention selects (trained with --cross-selector); this one's "
                            "does not: use --map weights")


def piece_links(matrix: Tensor, kind: str) -> Set[Link]:
    """(source piece, target piece) links of a (T, S) map without ``</s>`` (module docstring)."""
    if matrix.numel() == 0:
        return set()
    if kind == "weights":
        best = matrix.argmax(dim=-1)  # the first maximum on ties
        return {(int(s), t) for t, s in enumerate(best)}
    return {(int(s), int(t)) for t, s in (matrix > 0.5).nonzero().tolist()}


def word_links_of(matrix: Tensor, source: Encoded, target: Encoded, kind: str) -> Set[Link]:
    """Word links (source word, target word) of one sentence's (T, S) map (``</s>`` included:
    dropped here)."""
    inner = matrix[:-1, :-1]
    return {(source.word_index[s], target.word_index[t]) for s, t in piece_links(inner, kind)}


@torch.no_grad()
def decoder_selection_maps(model, source: Tensor, target: Tensor) -> Dict[str, Dict[int, Tensor]]:
    """The 0/1 selections of the decoder sites that select, for one teacher-forced pair:
    {"decoder": {layer: (h, T, T)}, "cross": {layer: (h, T, S)}} as float, T the target tokens
    predicted (``</s>`` last), S the source tokens (``</s>`` last); empty dicts for a site
    without selector."""
    eos = model.decoder.dictionary.eos()
    prev = torch.cat([target.new_tensor([eos]), target[:-1]]).unsqueeze(0)
    with keeping_selection(model), selection_statistics(model, True):
        _, extra = model(source.unsqueeze(0), torch.tensor([source.numel()]), prev)
    maps: Dict[str, Dict[int, Tensor]] = {"decoder": {}, "cross": {}}
    for record in extra["selection_stats"]:
        if record.site in maps and record.selection is not None:
            maps[record.site][record.layer] = record.selection[0].float()
    return maps


@dataclass
class ForcedAlignment:
    """Per decoder layer, one set of (source word, target word) links per sentence pair."""

    layers: List[List[Set[Link]]]
    rule_layer: int


def forced_alignments(inp: AnalysisInput, pairs: Sequence[Tuple[Sequence[str], Sequence[str]]],
                      kind: str = "weights", progress=None) -> ForcedAlignment:
    """Word links of every (source words, target words) pair at every decoder layer; the
    model's source side first. ``progress``: an iterable wrapper (tqdm) or None."""
    if not pairs:
        raise PipelineError("no sentence pair to align")
    check_map(inp.model, kind)
    sources = inp.encode_words([p[0] for p in pairs])
    targets = inp.encode_words([p[1] for p in pairs], side="target")
    n_layers = len(inp.model.decoder.layers)
    links: List[List[Set[Link]]] = [[] for _ in range(n_layers)]
    indices = range(len(pairs)) if progress is None else progress(range(len(pairs)))
    for k in indices:
        maps = cross_attention_maps(inp.model, sources[k].tokens, targets[k].tokens, kind)
        for layer, matrix in enumerate(maps):
            links[layer].append(word_links_of(matrix, sources[k], targets[k], kind))
    return ForcedAlignment(links, rule_layer(n_layers))
