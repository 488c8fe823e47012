"""What a translation model's decoder attends to under forced decoding: word alignments from
its encoder-decoder attention, and the selection maps of its decoder sites.

For a sentence pair given as words (the tokens of a gold alignment), each word of each side is
encoded on its own as preparation encodes text (:class:`~.inputs.AnalysisInput`), so every piece
belongs to one given word. The decoder is teacher-forced on the target pieces
(``</s> y_1 .. y_{n-1}`` in, ``y_1 .. y_{n-1} </s>`` predicted); each decoder layer's cross
attention gives a (queries x source pieces) map, source ``</s>`` left out. Two maps (``MAPS``):

- ``weights``: the attention weights averaged over heads (what fairseq's ``--print-alignment``
  reads), for any model; a target piece is linked to the source piece of its largest weight
  (the lowest index among equal ones), or to none when its row is all zero (sparse cross
  attention whose every head selects nothing, or only the source ``</s>``: fairseq's argmax
  would link it to the first piece);
- ``selection``: the share of heads whose selector selects the pair (a model with
  ``--cross-selector``); a target piece is linked to every source piece that most heads select
  (a share above one half), possibly none.

Two readings (``READINGS``) say which query's row stands for target piece y_t:

- ``predicted``: the query that predicts y_t (fairseq's ``--print-alignment``);
- ``shifted``: the query whose decoder input is y_t, one position later (Shift-Att, Chen et al.
  2020: the query that predicts y_t can rest on the source of its input y_{t-1}, which puts
  predicted-position links one token early; whether it does depends on the model).

Piece links become word links: two words are linked when any of their pieces are. What is
reported first is fixed before any score is seen (:data:`LAYER_RULE`, the ``predicted`` reading
at the penultimate decoder layer, the best layer for attention alignments in Garg et al. 2019;
the only layer of a one-layer decoder). Beside it, :func:`held_apart_choice` picks a reading and
layer without looking at the sentences it scores: the pairs are split into :data:`FOLDS` folds
by position (pair k in fold k mod FOLDS), and each fold is aligned with the (reading, layer) of
lowest AER on the other folds' pairs. Every reading and layer is scored and reported.
"""

import contextlib
from dataclasses import dataclass
from typing import Dict, List, Sequence, Set, Tuple

import torch
from torch import Tensor

from ..errors import PipelineError
from ..modules.selection import SelectionReporter, selection_statistics
from ..translation.alignment import GoldAlignment, alignment_scores
from .inputs import AnalysisInput, Encoded
from .maps import keeping_selection

Link = Tuple[int, int]
MAPS = ("weights", "selection")
#: which query's row stands for a target piece (module docstring)
READINGS = ("predicted", "shifted")
#: how the layer reported first is chosen, fixed in advance (see the module docstring)
LAYER_RULE = "penultimate decoder layer"
#: the reading of the rule fixed in advance
RULE_READING = "predicted"
#: folds of the held-apart choice: pair k (0-based) belongs to fold k % FOLDS
FOLDS = 2


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
        largest, best = matrix.max(dim=-1)  # the first maximum on ties
        return {(int(s), t) for t, (s, weight) in enumerate(zip(best, largest)) if weight > 0}
    return {(int(s), int(t)) for t, s in (matrix > 0.5).nonzero().tolist()}


def word_links_of(matrix: Tensor, source: Encoded, target: Encoded, kind: str,
                  reading: str = RULE_READING) -> Set[Link]:
    """Word links (source word, target word) of one sentence's (T, S) map (``</s>`` included:
    dropped here), row t standing for target piece t (``predicted``) or t - 1 (``shifted``)."""
    links = piece_links(reading_rows(matrix, reading), kind)
    return {(source.word_index[s], target.word_index[t]) for s, t in links}


def reading_rows(matrix: Tensor, reading: str) -> Tensor:
    """The (T - 1, S - 1) rows and columns of a sentence's (T, S) map that ``reading`` scores:
    row t for target piece t, source ``</s>`` dropped."""
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {', '.join(READINGS)}, got {reading!r}")
    return (matrix[:-1] if reading == "predicted" else matrix[1:])[:, :-1]


def unlinked_pieces(matrix: Tensor, kind: str, reading: str = RULE_READING) -> int:
    """How many target pieces of one sentence's (T, S) map get no link (:func:`piece_links`)."""
    rows = reading_rows(matrix, reading)
    return rows.size(0) - len({t for _, t in piece_links(rows, kind)})


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
    """``links[reading][layer][k]``: the (source word, target word) links of pair k;
    ``unlinked[reading][layer]``: the target pieces, over every pair, that got no link."""

    links: Dict[str, List[List[Set[Link]]]]
    rule_layer: int
    unlinked: Dict[str, List[int]]

    @property
    def rule(self) -> Tuple[str, int]:
        """(reading, layer) of the rule fixed in advance."""
        return RULE_READING, self.rule_layer


def forced_alignments(inp: AnalysisInput, pairs: Sequence[Tuple[Sequence[str], Sequence[str]]],
                      kind: str = "weights", progress=None) -> ForcedAlignment:
    """Word links of every (source words, target words) pair at every decoder layer, in both
    readings; the model's source side first. ``progress``: an iterable wrapper (tqdm) or None."""
    if not pairs:
        raise PipelineError("no sentence pair to align")
    check_map(inp.model, kind)
    sources = inp.encode_words([p[0] for p in pairs])
    targets = inp.encode_words([p[1] for p in pairs], side="target")
    n_layers = len(inp.model.decoder.layers)
    links = {reading: [[] for _ in range(n_layers)] for reading in READINGS}
    unlinked = {reading: [0] * n_layers for reading in READINGS}
    indices = range(len(pairs)) if progress is None else progress(range(len(pairs)))
    for k in indices:
        maps = cross_attention_maps(inp.model, sources[k].tokens, targets[k].tokens, kind)
        for layer, matrix in enumerate(maps):
            for reading in READINGS:
                links[reading][layer].append(word_links_of(matrix, sources[k], targets[k], kind, reading))
                unlinked[reading][layer] += unlinked_pieces(matrix, kind, reading)
    return ForcedAlignment(links, rule_layer(n_layers), unlinked)


def fold_of(k: int) -> int:
    """The fold of the held-apart choice that pair k (0-based) belongs to."""
    return k % FOLDS


@dataclass
class HeldApartChoice:
    """Per fold, the (reading, layer) chosen on the other folds and its AER there; ``links``:
    every pair's links from its own fold's choice."""

    choices: List[Tuple[str, int]]
    chosen_on_aer: List[float]
    links: List[Set[Link]]


def held_apart_choice(links: Dict[str, List[List[Set[Link]]]], gold: Sequence[GoldAlignment],
                      rule: Tuple[str, int]) -> HeldApartChoice:
    """Align each fold with the (reading, layer) of lowest AER on the other folds' pairs (ties:
    ``rule`` first, then readings in READINGS order, layers from the first); ``links`` as
    :attr:`ForcedAlignment.links`, ``gold`` one entry a pair. Needs a pair in every fold."""
    n = len(gold)
    if n < FOLDS:
        raise PipelineError(f"the held-apart choice needs at least {FOLDS} sentence pairs, got {n}")
    candidates = [rule] + [(reading, layer) for reading in READINGS
                           for layer in range(len(links[reading])) if (reading, layer) != rule]
    choices, chosen_on, out = [], [], [set() for _ in range(n)]
    for fold in range(FOLDS):
        other = [k for k in range(n) if fold_of(k) != fold]
        scored = [alignment_scores([links[r][l][k] for k in other], [gold[k] for k in other]).aer
                  for r, l in candidates]
        best = min(range(len(candidates)), key=lambda i: (scored[i], i))
        reading, layer = candidates[best]
        choices.append((reading, layer))
        chosen_on.append(scored[best])
        for k in range(n):
            if fold_of(k) == fold:
                out[k] = links[reading][layer][k]
    return HeldApartChoice(choices, chosen_on, out)
