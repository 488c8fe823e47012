"""The selector contract: which keys each query attends to, and with which weights.

A selector decides, per attention head and (query, key) pair, how much of the softmax each key
gets, at one of three **sites** (:data:`SITES`): ``encoder`` self-attention, ``decoder``
self-attention (causal) and ``cross`` (encoder-decoder) attention. Shapes (fairseq's):

- ``logits``: E = (q / sqrt(d)) k^T (+ fairseq's additive ``attn_mask``), (B, h, T, S), T
  queries, S keys, float32 whatever the input dtype (float64 for float64 inputs);
- ``key_padding_mask``: bool, True at the keys a query may not use: (B, S) pads, or for the
  decoder site a mask broadcastable to (B, 1, T, S) that also hides each query's future
  (``selective_weights.hidden_keys`` views either as 4-D); None when every key is visible.
  A selector never gives a hidden key weight, and counts and ranks only the visible ones;
- ``query``: the layer's input to the attention, T x B x C (after the layer norm of a pre-norm
  layer), for selectors whose decision reads the tokens themselves (SSAN's policy, the gate);
- ``site``: a :class:`SiteContext`: the site, the keys' own input (or the per-key state the
  selector computed from it, cached while decoding step by step) and every query's and key's
  position in its sentence. ``None``: encoder self-attention of ``query`` over itself.

A selector's decision is written once, in plain torch, as :meth:`Selector.reference`: it returns
a :class:`Selection` (the attention weights, the relaxed selection behind ``--select-scale``,
the logits of its binary decisions behind the entropy statistics and ``--nce-scale``, and for
the gate a factor on each head's output), in training and in evaluation (``self.training``).
That is what the selector *is*. Faster implementations of the same maths are its **fast
paths**, each checked against the reference (values, gradients, selection and statistics, on
the same noise) by one registry-driven test, ``tests/unit/modules/selectors/test_fast_paths.py``:

- ``fast_paths`` / :meth:`Selector.fast_path`: named implementations of the reference on the
  logits (SSAN's fused torch Function ``torch`` and C kernel ``native`` of training);
  :meth:`Selector.forward` is what runs, the reference unless the selector dispatches;
- :meth:`Selector.evaluation_mask`: for a selector whose evaluation weights are the softmax over
  a set of keys that does not depend on the logits (SSAN's 1[E_p > 0], the fixed mask), that set
  as an additive mask; the attention then runs torch's fused attention without ever forming the
  logits or the weights.

:class:`SelectorMultiheadAttention` is the one attention module of every selector, SSAN
included. It counts every selector's statistics in one place (:func:`selection_record`) into the
typed record the selective criterion reads (``SelectionStats``):

- a (query, key) pair counts as **selected when its final weight is nonzero** (after the gate,
  before dropout), unless the selector says which pairs it selected (``Selection.selected``:
  SSAN's sample A, which is where its weights are nonzero; ``soft``'s sigmoid(E_p) > 0.5);
- ``pair_rate`` / ``pair_count`` (the ``--select-scale`` term): per head, the mean over non-pad
  queries of ``keep`` summed over the non-pad keys (divided by their number for the rate);
  with ``keep`` None (top-k, entmax), the number of selected keys, which has no gradient;
- ``decisions`` / ``entropy_sum`` / ``neg_entropy``: the binary entropies of ``decision_logits``
  over the non-pad decisions (none for top-k and entmax);
- ``selection``, when ``keep_selection`` is set (the analysis tools, ``analysis/maps.py``): the
  selected pairs, bool (B, h, T, S), pad queries and keys False.

Every selector declares its own options once, in the dataclass ``options`` (fairseq's
``FairseqDataclass``; names must not start with ``encoder_`` / ``decoder_``, which fairseq's
TransformerConfig would move away), and reads them in :meth:`Selector.from_args`.
"""

import logging
from dataclasses import dataclass
from typing import ClassVar, Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import Tensor

from ..encoder_layer import check_encoder_self_attention_call
from ..selection import (
    SelectionReporter,
    SelectionStats,
    binary_entropy_from_logits,
    binary_entropy_value,
)
from ..selective_weights import entropy_sum_no_grad, hidden_keys
from ...errors import OptionError

logger = logging.getLogger(__name__)


@dataclass
class Selection:
    """One forward's selection (tensors in the logits' dtype unless stated).

    probs: (B, h, T, S) attention weights before dropout. Pad keys have weight exactly 0; a
        row sums to 1 over its non-pad keys, or is all zero when nothing is selected. Rows of
        pad queries are computed but never read. (None only on the evaluation-mask path, where
        the module never forms the weights.)
    keep: the relaxed selection in [0, 1] that ``--select-scale`` penalises, broadcastable to
        (B, h, T, S) ((B, h, T, 1) for one decision per query); may carry a gradient. None:
        the selected pairs (no gradient).
    decision_logits: logits of the selector's Bernoulli decisions, broadcastable to
        (B, h, T, S) with a last dimension of S (one decision per pair) or 1 (one per query);
        their entropies are the record's ``entropy_sum``. None: no decisions.
    output_gate: (B, h, T, 1) factors on each head's output (after attention dropout), or None.
    selected: bool, broadcastable to (B, h, T, S): the pairs the selector counts as selected,
        where that is not "final weight nonzero" (the default, None).
    row_entropy: (B, h, T) float32, the decision entropies of each query summed over its non-pad
        keys, without gradient, where a fast path computed them on the way (the native kernel);
        else None and the statistics take them from ``decision_logits``.
    """

    probs: Optional[Tensor]
    keep: Optional[Tensor] = None
    decision_logits: Optional[Tensor] = None
    output_gate: Optional[Tensor] = None
    selected: Optional[Tensor] = None
    row_entropy: Optional[Tensor] = None


#: where attention selects: encoder self-attention, decoder self-attention (causal: a query
#: never sees a later key) and encoder-decoder ("cross") attention
SITES = ("encoder", "decoder", "cross")
#: the option that names each site's selector
SITE_OPTIONS = {"encoder": "--encoder-selector", "decoder": "--decoder-selector",
                "cross": "--cross-selector"}


def sentence_positions(key_padding_mask: Optional[Tensor], length: int, device) -> Tensor:
    """(B or 1, length) long: each token's position in its own sentence, counted from its first
    non-pad token (fairseq pads sources on the left); pads hold their neighbour's position."""
    if key_padding_mask is None:
        return torch.arange(length, device=device).unsqueeze(0)
    return ((~key_padding_mask).cumsum(-1) - 1).clamp_min(0)


@dataclass
class SiteContext:
    """What a selector may read besides the logits: where it attends and which keys it sees.

    site: one of SITES.
    key: S x B x C, the keys' input (the query itself in self-attention, the encoder output at
        the cross site); None when ``key_state`` holds what the selector needs of every key.
    key_state: the selector's :meth:`Selector.key_state` of every key, kept by the attention
        module across decoding steps (None: not computed yet, or the selector keeps none).
    query_positions / key_positions: (B or 1, T) / (B or 1, S) long, positions in the
        sentence (source positions from the first non-pad token; target positions from 0, a
        decoding step's query at the number of tokens before it).
    """

    site: str
    key: Optional[Tensor]
    query_positions: Tensor
    key_positions: Tensor
    key_state: Optional[Tensor] = None

    @classmethod
    def encoder(cls, query: Tensor, key_padding_mask: Optional[Tensor]) -> "SiteContext":
        """Encoder self-attention of ``query`` (T x B x C) over itself."""
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise ValueError("encoder self-attention takes a (B, S) pad mask")
        positions = sentence_positions(key_padding_mask, query.size(0), query.device)
        return cls("encoder", query, positions, positions)

    @property
    def self_attention(self) -> bool:
        return self.site != "cross"


class Selector(nn.Module):
    """Base of every selector; see the module docstring.

    Class attributes: ``name`` (the registry key), ``options`` (the dataclass of its own
    options, or None), ``rate_has_gradient`` / ``entropy_has_gradient`` (whether the record's
    ``pair_rate`` / ``neg_entropy`` can carry a gradient, i.e. whether ``--select-scale`` /
    ``--nce-scale`` can train this selector), ``fast_paths`` (the names :meth:`fast_path`
    takes), ``kind`` (the analysis tools' name of its layers; None: ``name``),
    ``legacy_state`` ({name under the attention module in older checkpoints: name under
    ``selector.``}, renamed at load), ``tiny_flags`` (the flags of a tiny training run that
    exercises it, for the tests that run every selector; its options' defaults otherwise),
    ``samples`` (whether training draws random noise: two ranks, or two runs with other seeds,
    then select differently).

    A selector is built for one site (``from_args`` reads it from ``args.selector_site``,
    :func:`site_of`); a selector that reads the keys' input (SSAN's K_p) computes what it needs
    of each key once in :meth:`key_state`, which the attention module keeps while decoding.
    """

    name: ClassVar[str]
    options: ClassVar[Optional[type]] = None
    rate_has_gradient: ClassVar[bool] = False
    entropy_has_gradient: ClassVar[bool] = False
    fast_paths: ClassVar[Tuple[str, ...]] = ()
    kind: ClassVar[Optional[str]] = None
    legacy_state: ClassVar[Dict[str, str]] = {}
    tiny_flags: ClassVar[Tuple[str, ...]] = ()
    samples: ClassVar[bool] = False

    @classmethod
    def from_args(cls, args, embed_dim: int, num_heads: int) -> "Selector":
        """The selector of one layer from the parsed options (``args``: fairseq's namespace, or
        the TransformerConfig made from it; every field of ``options`` is set)."""
        raise NotImplementedError(f"selector {cls.name!r} does not build from options")

    @classmethod
    def build_attention(cls, args, embed_dim: int, num_heads: int, dropout: float = 0.0,
                        q_noise: float = 0.0, qn_block_size: int = 8, site: str = "encoder",
                        kdim: Optional[int] = None) -> "SelectorMultiheadAttention":
        """The attention module of one layer at ``site``: :class:`SelectorMultiheadAttention`
        around ``from_args`` (``kdim``: the keys' width at the cross site)."""
        if site_of(args) != site:
            raise ValueError(f"{cls.name}: args are for the {site_of(args)} site, not {site}")
        return SelectorMultiheadAttention(embed_dim, num_heads, cls.from_args(args, embed_dim, num_heads),
                                          dropout=dropout, q_noise=q_noise,
                                          qn_block_size=qn_block_size, site=site, kdim=kdim)

    @classmethod
    def layer_kind(cls) -> str:
        """The analysis tools' name of this selector's layers."""
        return cls.kind or cls.name

    def key_state(self, key: Tensor) -> Optional[Tensor]:
        """What this selector needs of each key, from the keys' input ``key`` (S x B x C), as a
        tensor whose first dimension is the batch (B, ...): the attention module appends a
        decoding step's to the earlier steps' (dimension 2) and reorders it with the beam.
        Default None: the selector reads nothing of the keys but the logits and positions."""
        return None

    def learnt_values(self) -> Dict[str, List[float]]:
        """Learnt per-head quantities a reader wants beside the selection rates, as
        {name: one value per head} (the entmax selector's alpha when it is learnt); default
        none. ``ssan-selection-stats`` archives them per layer."""
        return {}

    def reference(self, logits: Tensor, key_padding_mask: Optional[Tensor], query: Tensor,
                  rate_gradient: bool = True, noise: Optional[Tensor] = None,
                  site: Optional[SiteContext] = None) -> Selection:
        """The selection of one forward pass, in plain torch: the definition (shapes in the
        module docstring). ``logits`` may be read but not modified in place. ``rate_gradient``:
        whether ``keep`` should carry its gradient (the criterion weights the rate); a selector
        may skip that work when False. ``noise``: for a sampling selector, the logistic noise of
        its training sample, broadcastable to (B, h, T, S) (tests; drawn when None). ``site``:
        see :class:`SiteContext` (None: encoder self-attention, ``SiteContext.encoder``)."""
        raise NotImplementedError

    def forward(self, logits: Tensor, key_padding_mask: Optional[Tensor], query: Tensor,
                rate_gradient: bool = True, row_entropy: bool = False,
                site: Optional[SiteContext] = None) -> Selection:
        """The selection that runs: the reference, unless the selector dispatches to one of its
        fast paths. ``row_entropy``: the statistics would like ``Selection.row_entropy`` if a
        fast path computes it on the way."""
        return self.reference(logits, key_padding_mask, query, rate_gradient, site=site)

    def fast_path(self, path: str, logits: Tensor, key_padding_mask: Optional[Tensor], query: Tensor,
                  rate_gradient: bool = True, noise: Optional[Tensor] = None,
                  row_entropy: bool = False, site: Optional[SiteContext] = None) -> Selection:
        """Fast path ``path`` (one of ``fast_paths``): the reference's selection, faster."""
        raise ValueError(f"selector {self.name!r} has no fast path {path!r} (it has: "
                         f"{', '.join(self.fast_paths) or 'none'})")

    def evaluation_mask(self, key_padding_mask: Optional[Tensor], query: Tensor, keep_logits: bool,
                        site: Optional[SiteContext] = None
                        ) -> Optional[Tuple[Tensor, Optional[Tensor]]]:
        """In evaluation, for a selector whose weights are the softmax over a set of keys that
        does not depend on the logits (an empty set: a zero row): (mask, decision_logits), the
        mask additive, broadcastable to (B, h, T, S), float32, 0 at the selected visible pairs
        and -inf elsewhere (hidden keys included); ``decision_logits`` as ``Selection``'s when
        ``keep_logits`` (the record reads them), else None. ``key_padding_mask`` is (B, S) pads
        here: the module adds a causal site's future itself. Default None: no such path."""
        return None


def name_tensor(name: str) -> Tensor:
    """A selector's name as a uint8 tensor of its UTF-8 bytes (a buffer in the state dict)."""
    return torch.tensor(list(name.encode("utf-8")), dtype=torch.uint8)


def tensor_name(t: Tensor) -> str:
    """The name that :func:`name_tensor` stored."""
    return bytes(t.to(torch.uint8).tolist()).decode("utf-8", errors="replace")


def normalisation_dtype(t: Tensor) -> Tensor:
    """``t`` in the precision of normalisations: float32, or float64 for float64 inputs."""
    return t if t.dtype == torch.float64 else t.float()


def site_of(args) -> str:
    """The site a selector is built for: ``args.selector_site`` (set per site by the model;
    encoder self-attention where it is absent)."""
    site = getattr(args, "selector_site", None) or "encoder"
    if site not in SITES:
        raise ValueError(f"selector site must be one of {', '.join(SITES)}, got {site!r}")
    return site


def site_position_limits(args) -> Tuple[int, int]:
    """(query positions, key positions) of the site's sentences: the source's for the encoder,
    the target's for the decoder, (target, source) for the cross site."""
    site = site_of(args)
    source, target = int(args.max_source_positions), int(getattr(args, "max_target_positions", 0) or 0)
    return {"encoder": (source, source), "decoder": (target, target), "cross": (target, source)}[site]


def fold_beam(x: Tensor, beam: int) -> Tensor:
    """T x (B * beam) x C -> (beam * T) x B x C: the queries of a sentence's ``beam``
    hypotheses (fairseq's layout: hypothesis j of sentence b at b * beam + j) as that sentence's
    queries, row j * T + t holding hypothesis j's query t."""
    length, hypotheses, width = x.shape
    return x.view(length, hypotheses // beam, beam, width).permute(2, 0, 1, 3).reshape(-1, hypotheses // beam, width)


def unfold_beam(x: Tensor, beam: int) -> Tensor:
    """(B, h, beam * T, ...) -> (B * beam, h, T, ...): :func:`fold_beam`'s rows back per hypothesis."""
    bsz, heads, rows = x.shape[:3]
    x = x.view(bsz, heads, beam, rows // beam, *x.shape[3:]).transpose(1, 2)
    return x.reshape(bsz * beam, heads, rows // beam, *x.shape[4:])


def masked_softmax(logits: Tensor, key_padding_mask: Optional[Tensor]) -> Tensor:
    """Softmax over the visible keys, (B, h, T, S): fairseq's own attention weights."""
    hidden = hidden_keys(key_padding_mask)
    if hidden is not None:
        logits = logits.masked_fill(hidden, float("-inf"))
    return torch.softmax(normalisation_dtype(logits), dim=-1)


def selection_record(selection: Selection, key_padding_mask: Optional[Tensor],
                     shape: Tuple[int, int, int, int], rate_gradient: bool,
                     entropy_gradient: bool, keep_selection: bool,
                     query_padding_mask: Optional[Tensor] = None) -> SelectionStats:
    """The record of one forward over the visible (query, key) pairs of real queries, all heads
    (module docstring), for every selector. ``key_padding_mask``: the hidden keys as the
    selector got them ((B, S) or 4-D); ``query_padding_mask``: (B, T) pad queries, None when
    every query is real; ``shape``: (B, h, T, S); ``rate_gradient`` / ``entropy_gradient``:
    whether ``pair_rate`` / ``neg_entropy`` keep their gradients (when autograd records);
    ``keep_selection``: put the selected pairs in the record. A sentence made only of pads
    contributes nothing (its denominators are clamped)."""
    bsz, h, tgt_len, src_len = shape
    reference = selection.probs if selection.probs is not None else selection.decision_logits
    dtype = torch.float64 if reference is not None and reference.dtype == torch.float64 else torch.float32
    device = reference.device if reference is not None else selection.selected.device
    hidden = hidden_keys(key_padding_mask)
    key_w = (torch.ones((1, 1, 1, src_len), dtype=dtype, device=device) if hidden is None
             else (~hidden).to(dtype))  # (B or 1, 1, T or 1, S)
    if query_padding_mask is None:
        query_w = torch.ones((bsz, 1, tgt_len), dtype=dtype, device=device)
    else:
        query_w = (~query_padding_mask.to(torch.bool)).to(dtype).view(bsz, 1, tgt_len)
    pair_w = key_w * query_w.unsqueeze(-1)  # (B, 1, T, S)
    n_keys = key_w.sum(-1).clamp_min(1.0)  # visible keys of each query, (B or 1, 1, T or 1)
    n_queries = query_w.sum().clamp_min(1.0)
    n_pairs = pair_w.sum() * h
    grad = torch.is_grad_enabled()

    with torch.no_grad():
        if selection.selected is not None:
            chosen = selection.selected.to(torch.bool)
        else:  # a pair is selected when its final weight is nonzero
            chosen = selection.probs > 0
            if selection.output_gate is not None:
                chosen = chosen & (selection.output_gate > 0)
        chosen = (chosen & (pair_w > 0)).expand(bsz, h, tgt_len, src_len)
        chosen_rows = chosen.sum(-1, dtype=dtype)  # (B, h, T), pad queries 0
        pairs_selected = chosen_rows.sum()

    keep = selection.keep
    if keep is None or (keep is selection.selected and not keep.requires_grad):
        row_count = chosen_rows  # (the 0/1 selection counted above)
    else:
        if not (grad and rate_gradient):
            keep = keep.detach()
        row_count = (keep * key_w).sum(-1)
        if row_count.shape != (bsz, h, tgt_len):
            row_count = row_count.expand(bsz, h, tgt_len)
    pair_count = (row_count * query_w).sum() / n_queries
    pair_rate = (row_count / n_keys * query_w).sum() / n_queries

    logits = selection.decision_logits
    if logits is None:
        decisions = entropy_sum = neg_entropy = torch.zeros((), dtype=dtype, device=device)
    else:
        per_pair = logits.size(-1) == src_len
        weight = pair_w if per_pair else query_w.unsqueeze(-1)  # (B, 1, T, S or 1)
        if grad and entropy_gradient:
            entropy_sum = (binary_entropy_from_logits(normalisation_dtype(logits)) * weight).sum()
        elif selection.row_entropy is not None:  # summed over non-pad keys by a fast path
            entropy_sum = (selection.row_entropy * query_w).sum()
        elif per_pair:  # chunked, without a graph
            entropy_sum = entropy_sum_no_grad(logits.detach().expand(bsz, h, tgt_len, src_len), pair_w)
        else:
            entropy_sum = (binary_entropy_value(normalisation_dtype(logits.detach())) * weight).sum()
        decisions = weight.expand(bsz, h, tgt_len, logits.size(-1)).sum()
        neg_entropy = -entropy_sum / decisions.clamp_min(1.0)
    return SelectionStats(
        pairs_selected=pairs_selected,
        pairs_possible=n_pairs.detach(),
        decisions=decisions.detach(),
        entropy_sum=entropy_sum.detach(),
        pair_rate=pair_rate,
        pair_count=pair_count,
        neg_entropy=neg_entropy,
        selection=chosen if keep_selection else None,
    )


class SelectorMultiheadAttention(SelectionReporter, MultiheadAttention):
    """fairseq's attention at one site (SITES) whose weights a selector decides: the one
    attention module of every selector.

    The parameters are fairseq's attention's (q/k/v/out projections, same names, so a plain
    Transformer checkpoint loads into it) plus the selector's, under ``selector.``. Per forward:
    in evaluation, the selector's ``evaluation_mask`` if it has one and torch's fused attention
    over it (a decoding step, or weights asked for: matmul, softmax, matmul); otherwise
    E = (q / sqrt(d)) k^T (+ ``attn_mask``) in float32, the selector's weights, attention
    dropout, the weighted sum of the values, the selector's output gate if any. Then
    ``out_proj``. A forward that wants statistics
    (``wants_statistics()``) reports a ``SelectionStats`` record (:func:`selection_record`).

    Decoder sites decode step by step as fairseq's attention does: the incremental state keeps
    the keys, values and pad mask of the steps so far (fairseq's ``prev_key``, ``prev_value``,
    ``prev_key_padding_mask``) and the selector's ``key_state`` (``prev_key_state``); the cross
    site computes them once from the encoder output (``static_kv``), once per sentence when
    the model passes on the generator's beam (``set_beam_size``). The ``decoder`` site is
    causal: query i never uses a key after it, which the module hides from the selector (and
    the evaluation mask) whatever ``attn_mask`` says. ``query_padding_mask`` (B, T), set by the
    decoder for a forward, tells the statistics which target queries are pads.
    """

    def __init__(self, embed_dim: int, num_heads: int, selector: Selector, dropout: float = 0.0,
                 q_noise: float = 0.0, qn_block_size: int = 8, site: str = "encoder",
                 kdim: Optional[int] = None):
        if site not in SITES:
            raise ValueError(f"site must be one of {', '.join(SITES)}, got {site!r}")
        cross = site == "cross"
        super().__init__(embed_dim, num_heads, kdim=kdim if cross else None,
                         vdim=kdim if cross else None, dropout=dropout, self_attention=not cross,
                         encoder_decoder_attention=cross, q_noise=q_noise,
                         qn_block_size=qn_block_size)
        self.site = site
        self.selector = selector
        self._rate_gradient = selector.rate_has_gradient
        self._entropy_gradient = selector.entropy_has_gradient
        self.query_padding_mask: Optional[Tensor] = None
        # which selector trained this layer travels with the checkpoint: a checkpoint loads as
        # what it is, never as another selector with fresh parameters (upgrade_state_dict_named)
        self.register_buffer("selector_name", name_tensor(selector.name))

    def extra_repr(self) -> str:
        return f"site={self.site}"

    def set_beam_size(self, beam_size: int) -> None:
        """The beam of the decodings to come (the model passes on what fairseq's generator
        sets). At the cross site, as fairseq's "beamable" attention does, a decoding keeps one
        copy of the encoder's keys (and key state) per sentence, not per hypothesis, when each
        ``beam_size`` consecutive hypotheses share their encoder output (checked at the first
        step): a step's queries are folded as (beam x T) queries of each sentence
        (:func:`fold_beam`). The self sites keep one state per hypothesis."""
        self.beam_size = int(beam_size) if self.site == "cross" else 1

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        """Beam search's reorder: hypothesis i of the next step continues hypothesis
        ``new_order[i]``. The cross site's state (``prev_beam`` rows per sentence) selects the
        sentences whose hypotheses go on, and unfolds to one row per hypothesis should a
        reorder ever mix sentences within a beam."""
        if self.site != "cross":
            return super().reorder_incremental_state(incremental_state, new_order)
        saved = self._get_input_buffer(incremental_state)
        if "prev_key" not in saved:
            return incremental_state
        beam = int(saved["prev_beam"][0, 0])
        rows = torch.div(new_order, beam, rounding_mode="floor")  # each hypothesis's row
        if beam > 1:
            groups = rows.view(-1, beam) if rows.numel() % beam == 0 else None
            if groups is not None and bool((groups == groups[:, :1]).all()):
                rows = groups[:, 0]
            else:
                beam = 1
        if beam > 1 and rows.numel() == saved["prev_key"].size(0) and bool(
                (rows == torch.arange(rows.numel(), device=rows.device)).all()):
            return incremental_state  # the same sentences: nothing moves
        saved = {name: None if t is None else t.index_select(0, rows) for name, t in saved.items()}
        if beam == 1:
            saved["prev_beam"] = torch.ones_like(saved["prev_beam"])
        self._set_input_buffer(incremental_state, saved)
        return incremental_state

    # The selective criterion sets these to what its loss weights (SelectionReporter); a term
    # this selector cannot give a gradient is refused here, by name, rather than training nothing.
    @property
    def rate_gradient(self) -> bool:
        return self._rate_gradient

    @rate_gradient.setter
    def rate_gradient(self, value: bool) -> None:
        if value and not self.selector.rate_has_gradient:
            raise OptionError(
                f"--select-scale weights the selection rate, but the {self.selector.name} "
                f"selector's rate has no gradient (its selection is not trained through a "
                f"relaxation); use --select-scale 0 with it (docs/selectors.md)")
        self._rate_gradient = bool(value)

    @property
    def entropy_gradient(self) -> bool:
        return self._entropy_gradient

    @entropy_gradient.setter
    def entropy_gradient(self, value: bool) -> None:
        if value and not self.selector.entropy_has_gradient:
            raise OptionError(
                f"--nce-scale weights the entropy of the selector's decisions, but the "
                f"{self.selector.name} selector makes no binary decisions with a gradient; use "
                f"--nce-scale 0 with it (docs/selectors.md)")
        self._entropy_gradient = bool(value)

    def in_projection(self, x: Tensor) -> Tensor:
        """q, k, v in one matmul: (..., C) -> (..., 3C)."""
        weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        bias = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        return F.linear(x, weight, bias)

    def key_value_projection(self, x: Tensor) -> Tensor:
        """k, v in one matmul: (..., kdim) -> (..., 2C)."""
        weight = torch.cat([self.k_proj.weight, self.v_proj.weight])
        bias = torch.cat([self.k_proj.bias, self.v_proj.bias])
        return F.linear(x, weight, bias)

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        incremental_state=None,
        need_weights: bool = False,
        static_kv: bool = False,
        attn_mask: Optional[Tensor] = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
    ):
        """Attention of ``query`` (T x B x C) over ``key`` (S x B x C: itself at the self sites,
        the encoder output at the cross site). Returns (T x B x C, weights): ``weights`` is None
        unless ``need_weights`` (then the selector's final weights, gate included, averaged over
        heads, (B, T, S)) or ``need_head_weights`` ((h, B, T, S))."""
        if self.site == "encoder":
            check_encoder_self_attention_call(
                self, query, key, value, incremental_state, static_kv, before_softmax)
        elif before_softmax:
            raise ValueError(f"{type(self).__name__} returns weights, not logits (before_softmax)")
        hypotheses, embed_dim = query.shape[1:]
        h, d = self.num_heads, self.head_dim
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.to(torch.bool)
        beam = self._decoding_beam(incremental_state, hypotheses, key, key_padding_mask)
        if beam > 1:  # one copy of the encoder's keys per sentence (set_beam_size)
            query = fold_beam(query, beam)
            if key is not None and key.size(1) == hypotheses:
                key = key[:, ::beam]
            if key_padding_mask is not None and key_padding_mask.size(0) == hypotheses:
                key_padding_mask = key_padding_mask[::beam]
        tgt_len, bsz = query.shape[:2]
        q, k, v, key_padding_mask, site = self._project(query, key, key_padding_mask,
                                                        incremental_state, beam)
        src_len = k.size(2)
        # keys a query may not use: pads, and at the decoder site each query's future
        hidden = key_padding_mask
        causal = None
        if self.site == "decoder" and tgt_len > 1:  # (one query, the last, has no future)
            causal = site.key_positions.view(1, 1, 1, src_len) > site.query_positions.view(-1, 1, tgt_len, 1)
            hidden = causal if hidden is None else hidden.view(bsz, 1, 1, src_len) | causal
        want_weights = need_weights or need_head_weights
        record = self.wants_statistics()
        masked = None
        if not self.training and (attn_mask is None or causal is not None):
            masked = self.selector.evaluation_mask(key_padding_mask, query, keep_logits=record, site=site)
        if masked is not None:
            mask, decision_logits = masked
            if causal is not None:
                mask = mask.masked_fill(causal, float("-inf"))
            out, selection = self._masked_attention(q, k, v, mask, decision_logits, record=record,
                                                    fused=incremental_state is None and not want_weights)
        else:
            logits = normalisation_dtype(torch.matmul(q * self.scaling, k.transpose(-1, -2)))  # (B, h, T, S)
            if attn_mask is not None:
                logits = logits + attn_mask
            grad = torch.is_grad_enabled()
            selection = self.selector(
                logits, hidden, query,
                rate_gradient=self.training and grad and self.rate_gradient,
                row_entropy=record and not (grad and self.entropy_gradient), site=site)
            del logits  # attention-sized: free it before the statistics
            probs = self.dropout_module(selection.probs.type_as(v))
            out = torch.matmul(probs, v)  # (B, h, T, d)
            if selection.output_gate is not None:
                out = out * selection.output_gate.type_as(out)
        if beam > 1:
            out = unfold_beam(out, beam)
        out = self.out_proj(out.permute(2, 0, 1, 3).reshape(tgt_len // beam, hypotheses, embed_dim))

        if record:
            query_pads = key_padding_mask if self.site == "encoder" else self.query_padding_mask
            if query_pads is not None and query_pads.shape != (bsz, tgt_len):
                query_pads = None  # a decoding step's queries: none of them is a pad
            self.report_selection(selection_record(
                selection, hidden, (bsz, h, tgt_len, src_len), self.rate_gradient,
                self.entropy_gradient, self.keep_selection, query_padding_mask=query_pads))

        weights: Optional[Tensor] = None
        if want_weights:
            weights = selection.probs
            if selection.output_gate is not None:
                weights = weights * selection.output_gate
            weights = weights.type_as(out)
            if beam > 1:
                weights = unfold_beam(weights, beam)
            weights = weights.transpose(0, 1) if need_head_weights else weights.mean(dim=1)
        return out, weights

    def _heads(self, t: Tensor) -> Tensor:
        """L x B x C -> (B, h, L, d)."""
        return t.reshape(t.size(0), t.size(1), self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def _decoding_beam(self, incremental_state, hypotheses: int, key: Optional[Tensor],
                       key_padding_mask: Optional[Tensor]) -> int:
        """How many hypotheses one decoding step folds into one row of keys: at the cross site
        while decoding step by step, what the first step chose (``prev_beam``); there, the
        beam if every ``beam`` consecutive hypotheses share their encoder output, else 1."""
        if self.site != "cross" or incremental_state is None:
            return 1
        saved = self._get_input_buffer(incremental_state)
        if "prev_beam" in saved:
            beam = int(saved["prev_beam"][0, 0])
            if saved["prev_beam"].size(0) * beam != hypotheses:
                raise ValueError(f"{type(self).__name__} (cross site): the decoding state holds "
                                 f"{saved['prev_beam'].size(0)} x {beam} hypotheses, this step "
                                 f"{hypotheses} (reorder it with reorder_incremental_state)")
            return beam
        beam = self.beam_size
        if beam <= 1 or hypotheses % beam or key is None or key.size(1) != hypotheses:
            return 1

        def shared(t: Tensor, dim: int) -> bool:  # every beam's members equal along ``dim``
            groups = t.unflatten(dim, (-1, beam))
            return torch.equal(groups, groups.narrow(dim + 1, 0, 1).expand_as(groups))

        if not shared(key, 1) or (key_padding_mask is not None and not shared(key_padding_mask, 0)):
            return 1
        return beam

    def _project(self, query: Tensor, key: Optional[Tensor], key_padding_mask: Optional[Tensor],
                 incremental_state, beam: int = 1):
        """q, k, v (B, h, T|S, d), the keys' pad mask (B, S) and the SiteContext, with the
        decoding state of the steps so far (read and written back). ``beam`` > 1: ``query`` is
        a cross-site step's :func:`fold_beam` (its T is beam x the step's length)."""
        tgt_len, bsz, embed_dim = query.shape
        if self.site == "encoder":
            q, k, v = (self._heads(t) for t in self.in_projection(query).split(embed_dim, dim=-1))
            return q, k, v, key_padding_mask, SiteContext.encoder(query, key_padding_mask)
        if self.site == "decoder":
            if key is not None and key is not query:
                raise ValueError(f"{type(self).__name__} (decoder site) is self-attention: key is "
                                 f"query (fairseq's cross_self_attention is not supported)")
            q, k, v = (self._heads(t) for t in self.in_projection(query).split(embed_dim, dim=-1))
            key_state = self.selector.key_state(query)
        else:
            q = self._heads(self.q_proj(query))
            k = v = key_state = None
        saved = self._get_input_buffer(incremental_state) if incremental_state is not None else {}
        offset = 0  # target tokens before this forward's queries (decoding step by step)
        if self.site == "cross" and "prev_key" in saved:  # the encoder output's, from the first step
            k, v, key_state = saved["prev_key"], saved["prev_value"], saved.get("prev_key_state")
            key_padding_mask = saved.get("prev_key_padding_mask")
            offset = int(saved["prev_steps"][0, 0])
        elif self.site == "cross":
            if key is None:
                raise ValueError(f"{type(self).__name__} (cross site) needs the encoder output as key")
            k, v = (self._heads(t) for t in self.key_value_projection(key).split(embed_dim, dim=-1))
            key_state = self.selector.key_state(key)
            if incremental_state is not None:  # read at every step: laid out once for matmul
                k, v = k.contiguous(), v.contiguous()
                key_state = key_state.contiguous() if key_state is not None else None
        elif "prev_key" in saved:  # decoder site: this step's keys after the earlier steps'
            offset = saved["prev_key"].size(2)
            k = torch.cat([saved["prev_key"], k], dim=2)
            v = torch.cat([saved["prev_value"], v], dim=2)
            if key_state is not None:
                key_state = torch.cat([saved["prev_key_state"], key_state], dim=2)
            key_padding_mask = MultiheadAttention._append_prev_key_padding_mask(
                key_padding_mask, saved.get("prev_key_padding_mask"), bsz, k.size(2), False)
            if key_padding_mask is not None:  # (fairseq's join of a mask and None is float)
                key_padding_mask = key_padding_mask.to(torch.bool)
        if incremental_state is not None:
            saved = {"prev_key": k, "prev_value": v, "prev_key_padding_mask": key_padding_mask}
            if key_state is not None:
                saved["prev_key_state"] = key_state
            if self.site == "cross":  # (B, 1) each: reordered with the rest
                saved["prev_steps"] = torch.full((bsz, 1), offset + tgt_len // beam,
                                                 dtype=torch.long, device=query.device)
                saved["prev_beam"] = torch.full((bsz, 1), beam, dtype=torch.long, device=query.device)
            self._set_input_buffer(incremental_state, saved)
        src_len = k.size(2)
        if self.site == "decoder":  # target positions: token indices (fairseq pads targets right)
            keys = torch.arange(src_len, device=query.device).unsqueeze(0)
        else:
            keys = sentence_positions(key_padding_mask, src_len, query.device)
        queries = torch.arange(offset, offset + tgt_len // beam, device=query.device).unsqueeze(0)
        if beam > 1:
            queries = queries.repeat(1, beam)
        context = SiteContext(self.site, query if self.site == "decoder" else key, queries, keys,
                              key_state=key_state)
        return q, k, v, key_padding_mask, context

    def _masked_attention(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor,
                          decision_logits: Optional[Tensor], record: bool, fused: bool = True):
        """The evaluation-mask path: softmax of ``scaling`` q k^T over the mask's keys, times v;
        a query with no key gets a zero row, as the reference gives. q, k, v (B, h, T, d)
        unscaled. ``fused``: in torch's fused attention, which never forms the logits or the
        weights (whole sentences); else as matmul, softmax, matmul, which costs less for the
        few queries of a decoding step and gives the weights. Returns the output (B, h, T, d)
        and the Selection the record reads (with the weights unless fused)."""
        probs = None
        if fused:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype), scale=self.scaling)
            if not out.is_cpu:  # torch's fused CPU kernel gives a fully masked row zeros (tests
                out = torch.nan_to_num(out, nan=0.0)  # check); other devices' may give NaN
        else:  # a row of -inf only: softmax gives NaN, the reference a zero row
            logits = torch.matmul(q * self.scaling, k.transpose(-1, -2)) + mask.to(q.dtype)
            probs = torch.softmax(logits, dim=-1).nan_to_num_(nan=0.0)
            out = torch.matmul(probs, v)
        selected = mask == 0 if record else None
        return out, Selection(probs, decision_logits=decision_logits, selected=selected)

    def upgrade_state_dict_named(self, state_dict, name):
        """A checkpoint's layer trained with another selector is refused, naming both.
        Older checkpoints: the selector's ``legacy_state`` names move under ``selector.``; their
        selector's name (not stored before) is taken to be this one's, unless the layer holds
        parameters this selector does not have (another selector's: refused too; a selector
        without parameters cannot be told from fairseq's attention). Warm start: a plain fairseq
        self-attention has no selector parameters; keep ours fresh."""
        super().upgrade_state_dict_named(state_dict, name)
        prefix = name + "." if name != "" else ""
        for old, new in self.selector.legacy_state.items():
            if prefix + old in state_dict:
                state_dict[prefix + "selector." + new] = state_dict.pop(prefix + old)
        stored = state_dict.get(prefix + "selector_name")
        if stored is not None and tensor_name(stored) != self.selector.name:
            raise OptionError(
                f"{prefix}selector_name: the checkpoint's layer was trained with the "
                f"{tensor_name(stored)} selector, this model has {self.selector.name}; a "
                f"checkpoint decodes and resumes as what it trained (leave {SITE_OPTIONS[self.site]}, "
                f"--ssan-selection and --model-overrides' selector unchanged)")
        if stored is None:
            own = set(self.state_dict())
            foreign = sorted(key[len(prefix):] for key in state_dict
                             if key.startswith(prefix) and key[len(prefix):] not in own)
            if foreign:
                shown = ", ".join(foreign[:4]) + (f" and {len(foreign) - 4} more" if len(foreign) > 4 else "")
                raise OptionError(
                    f"{prefix}: the checkpoint's layer holds parameters the {self.selector.name} "
                    f"selector's attention does not have ({shown}): it was trained as another "
                    f"attention (another selector or encoder variant); a checkpoint decodes and "
                    f"resumes as what it trained")
            state_dict[prefix + "selector_name"] = self.selector_name.detach().clone()
        if prefix + "q_proj.weight" not in state_dict:
            return
        missing = [pname for pname in self.selector.state_dict()
                   if prefix + "selector." + pname not in state_dict]
        for pname, tensor in self.selector.state_dict().items():
            if pname in missing:
                state_dict[prefix + "selector." + pname] = tensor.detach().clone()
        if missing:
            logger.info("%sselector (%s): not in the checkpoint (a plain transformer), "
                        "initialised fresh", prefix, self.selector.name)
