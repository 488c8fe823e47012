"""The selector interface: which keys each query attends to, and with which weights.

A selector decides, per attention head and (query, key) pair of encoder self-attention, how
much of the softmax each key gets. Shapes (fairseq's, as in ``selective_attention.py``):

- ``logits``: E = (q / sqrt(d)) k^T (+ fairseq's additive ``attn_mask``), (B, h, T, S), T
  queries, S keys (S == T), float32 whatever the input dtype (float64 for float64 inputs);
- ``key_padding_mask``: bool (B, S), True at pads, or None when the batch has no pad;
- ``query``: the layer's input to the attention, T x B x C (after the layer norm of a pre-norm
  layer), for selectors whose decision depends on the token itself (the gate).

A selector returns a :class:`Selection`: the attention weights (the same call serves training
and evaluation, ``self.training`` tells them apart), the relaxed selection behind the
``--select-scale`` term, the logits of its binary decisions (for the entropy statistics and
``--nce-scale``) and, for the gate, a factor on each head's output.
:class:`SelectorMultiheadAttention` runs any selector as fairseq's encoder self-attention and
turns its Selection into the typed record the selective criterion reads (``SelectionStats``):

- a (query, key) pair counts as **selected when its final weight is nonzero** (after the gate,
  before dropout), so the logged rates ``sel_L`` mean the same for every selector;
- ``pair_rate`` / ``pair_count`` (the ``--select-scale`` term): per head, the mean over non-pad
  queries of ``keep`` summed over the non-pad keys (divided by their number for the rate);
  with ``keep`` None (top-k, entmax), the number of nonzero weights, which has no gradient;
- ``decisions`` / ``entropy_sum`` / ``neg_entropy``: the binary entropies of ``decision_logits``
  over the non-pad decisions (none for top-k and entmax);
- ``selection``, when ``keep_selection`` is set (the analysis tools, ``analysis/maps.py``): that
  pattern itself, bool (B, h, T, S), the selected non-pad pairs (pad queries and keys False).

Two kinds of selector share the registry (``registry.py``):

- *logit selectors* (top-k, entmax, gate, fixed mask) implement :meth:`Selector.forward`; their
  attention module is :class:`SelectorMultiheadAttention`, built by the default
  :meth:`Selector.build_attention`;
- *module selectors* (gumbel and soft: SSAN) override :meth:`Selector.build_attention` and
  return their own attention module, SSAN's ``SelectiveMultiheadAttention``, whose fused
  training Function, native kernel and fused evaluation path compute the same maths faster
  than a per-logits call could (its policy network reads the layer input, not the logits).
  They are registry entries only and are never instantiated.

Every selector declares its own options once, in the dataclass ``options`` (fairseq's
``FairseqDataclass``; names must not start with ``encoder_`` / ``decoder_``, which fairseq's
TransformerConfig would move away), and reads them in :meth:`Selector.from_args`.
"""

import logging
from dataclasses import dataclass
from typing import ClassVar, Dict, List, Optional

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
from ...cli.errors import OptionError

logger = logging.getLogger(__name__)


@dataclass
class Selection:
    """One forward's selection (tensors in the logits' dtype unless stated).

    probs: (B, h, T, S) attention weights before dropout. Pad keys have weight exactly 0; a
        row sums to 1 over its non-pad keys, or is all zero when nothing is selected. Rows of
        pad queries are computed but never read.
    keep: the relaxed selection in [0, 1] that ``--select-scale`` penalises, broadcastable to
        (B, h, T, S) ((B, h, T, 1) for one decision per query); may carry a gradient. None:
        the pattern of nonzero weights (no gradient).
    decision_logits: logits of the selector's Bernoulli decisions, broadcastable to
        (B, h, T, S) with a last dimension of S (one decision per pair) or 1 (one per query);
        their entropies are the record's ``entropy_sum``. None: no decisions.
    output_gate: (B, h, T, 1) factors on each head's output (after attention dropout), or None.
    """

    probs: Tensor
    keep: Optional[Tensor] = None
    decision_logits: Optional[Tensor] = None
    output_gate: Optional[Tensor] = None


class Selector(nn.Module):
    """Base of every selector; see the module docstring.

    Class attributes: ``name`` (the registry key), ``options`` (the dataclass of its own
    options, or None), ``rate_has_gradient`` / ``entropy_has_gradient`` (whether the record's
    ``pair_rate`` / ``neg_entropy`` can carry a gradient, i.e. whether ``--select-scale`` /
    ``--nce-scale`` can train this selector).
    """

    name: ClassVar[str]
    options: ClassVar[Optional[type]] = None
    rate_has_gradient: ClassVar[bool] = False
    entropy_has_gradient: ClassVar[bool] = False

    @classmethod
    def from_args(cls, args, embed_dim: int, num_heads: int) -> "Selector":
        """The selector of one layer from the parsed options (``args``: fairseq's namespace, or
        the TransformerConfig made from it; every field of ``options`` is set)."""
        raise NotImplementedError(f"selector {cls.name!r} does not build from options")

    @classmethod
    def build_attention(cls, args, embed_dim: int, num_heads: int, dropout: float = 0.0,
                        q_noise: float = 0.0, qn_block_size: int = 8) -> nn.Module:
        """The self-attention module of one encoder layer (fairseq's self-attention call, a
        ``SelectionReporter``). Default: :class:`SelectorMultiheadAttention` around
        ``from_args``."""
        return SelectorMultiheadAttention(embed_dim, num_heads, cls.from_args(args, embed_dim, num_heads),
                                          dropout=dropout, q_noise=q_noise,
                                          qn_block_size=qn_block_size)

    def learnt_values(self) -> Dict[str, List[float]]:
        """Learnt per-head quantities a reader wants beside the selection rates, as
        {name: one value per head} (the entmax selector's alpha when it is learnt); default
        none. ``ssan-selection-stats`` archives them per layer."""
        return {}

    def forward(self, logits: Tensor, key_padding_mask: Optional[Tensor], query: Tensor,
                rate_gradient: bool = True) -> Selection:
        """The selection of one forward pass (shapes in the module docstring). ``logits`` may
        be read but not modified in place. ``rate_gradient``: whether ``keep`` should carry its
        gradient (the criterion weights the rate); a selector may skip that work when False."""
        raise NotImplementedError


def normalisation_dtype(t: Tensor) -> Tensor:
    """``t`` in the precision of normalisations: float32, or float64 for float64 inputs."""
    return t if t.dtype == torch.float64 else t.float()


def masked_softmax(logits: Tensor, key_padding_mask: Optional[Tensor]) -> Tensor:
    """Softmax over the non-pad keys, (B, h, T, S): fairseq's own attention weights."""
    if key_padding_mask is not None:
        bsz, src_len = key_padding_mask.shape
        logits = logits.masked_fill(key_padding_mask.view(bsz, 1, 1, src_len), float("-inf"))
    return torch.softmax(normalisation_dtype(logits), dim=-1)


class SelectorMultiheadAttention(SelectionReporter, MultiheadAttention):
    """fairseq's encoder self-attention whose weights a logit selector decides.

    The parameters are fairseq's self-attention's (q/k/v/out projections, same names, so a plain
    Transformer checkpoint loads into it) plus the selector's, under ``selector.``. Per forward:
    E = (q / sqrt(d)) k^T (+ ``attn_mask``) in float32, the selector's weights, attention dropout,
    the weighted sum of the values, the selector's output gate if any, ``out_proj``. A forward
    that wants statistics (``wants_statistics()``) reports a ``SelectionStats`` record.
    """

    def __init__(self, embed_dim: int, num_heads: int, selector: Selector, dropout: float = 0.0,
                 q_noise: float = 0.0, qn_block_size: int = 8):
        super().__init__(embed_dim, num_heads, dropout=dropout, self_attention=True,
                         q_noise=q_noise, qn_block_size=qn_block_size)
        self.selector = selector
        self._rate_gradient = selector.rate_has_gradient
        self._entropy_gradient = selector.entropy_has_gradient

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
        """Self-attention of ``query`` (T x B x C) over itself. Returns (T x B x C, weights):
        ``weights`` is None unless ``need_weights`` (then the selector's final weights, gate
        included, averaged over heads, (B, T, S)) or ``need_head_weights`` ((h, B, T, S))."""
        check_encoder_self_attention_call(
            self, query, key, value, incremental_state, static_kv, before_softmax
        )
        tgt_len, bsz, embed_dim = query.shape
        h, d = self.num_heads, self.head_dim
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.to(torch.bool)

        def heads(t: Tensor) -> Tensor:  # T x B x C -> (B, h, T, d)
            return t.reshape(tgt_len, bsz, h, d).permute(1, 2, 0, 3)

        q, k, v = (heads(t) for t in self.in_projection(query).split(embed_dim, dim=-1))
        logits = normalisation_dtype(torch.matmul(q * self.scaling, k.transpose(-1, -2)))  # (B, h, T, S)
        if attn_mask is not None:
            logits = logits + attn_mask
        training_graph = self.training and torch.is_grad_enabled()
        selection = self.selector(logits, key_padding_mask, query,
                                  rate_gradient=training_graph and self.rate_gradient)
        del logits
        probs = self.dropout_module(selection.probs.type_as(v))
        out = torch.matmul(probs, v)  # (B, h, T, d)
        gate = selection.output_gate
        if gate is not None:
            out = out * gate.type_as(out)
        out = self.out_proj(out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, embed_dim))

        if self.wants_statistics():
            self.report_selection(self._statistics(selection, key_padding_mask))

        weights: Optional[Tensor] = None
        if need_weights or need_head_weights:
            weights = selection.probs if gate is None else selection.probs * gate
            weights = weights.type_as(out)
            weights = weights.transpose(0, 1) if need_head_weights else weights.mean(dim=1)
        return out, weights

    def _statistics(self, selection: Selection, key_padding_mask: Optional[Tensor]) -> SelectionStats:
        """This forward's record over non-pad (query, key) pairs, all heads (module docstring).
        A sentence made only of pads contributes nothing (its denominators are clamped)."""
        probs = selection.probs
        bsz, h, tgt_len, src_len = probs.shape
        if key_padding_mask is None:
            valid = probs.new_ones(bsz, src_len)
        else:
            valid = (~key_padding_mask).to(probs.dtype)
        n_keys = valid.sum(-1).clamp_min(1.0)  # (B,)
        n_queries = valid.sum().clamp_min(1.0)
        key_w = valid.view(bsz, 1, 1, src_len)
        query_w = valid.view(bsz, 1, tgt_len)
        pair_w = key_w * query_w.unsqueeze(-1)  # (B, 1, T, S)
        n_pairs = pair_w.sum() * h
        grad = torch.is_grad_enabled()

        with torch.no_grad():  # a pair is selected when its final weight is nonzero
            nonzero = probs > 0
            if selection.output_gate is not None:
                nonzero &= selection.output_gate > 0
            nonzero &= pair_w > 0
            selected = nonzero.sum(dtype=probs.dtype)

        keep = selection.keep
        if keep is None:
            row_count = nonzero.sum(-1, dtype=probs.dtype)  # (B, h, T)
        else:
            if not (grad and self.rate_gradient):
                keep = keep.detach()
            row_count = (keep * key_w).sum(-1)
            if row_count.shape != (bsz, h, tgt_len):
                row_count = row_count.expand(bsz, h, tgt_len)
        pair_count = (row_count * query_w).sum() / n_queries
        pair_rate = (row_count / n_keys.view(bsz, 1, 1) * query_w).sum() / n_queries

        logits = selection.decision_logits
        if logits is None:
            decisions = entropy_sum = neg_entropy = probs.new_zeros(())
        else:
            weight = query_w.unsqueeze(-1)  # (B, 1, T, 1)
            if logits.size(-1) == src_len:
                weight = weight * key_w
            if grad and self.entropy_gradient:
                entropy = binary_entropy_from_logits(normalisation_dtype(logits))
            else:
                entropy = binary_entropy_value(normalisation_dtype(logits.detach()))
            entropy_sum = (entropy * weight).sum()
            decisions = weight.expand(bsz, h, tgt_len, logits.size(-1)).sum()
            neg_entropy = -entropy_sum / decisions.clamp_min(1.0)
        return SelectionStats(
            pairs_selected=selected,
            pairs_possible=n_pairs.detach(),
            decisions=decisions.detach(),
            entropy_sum=entropy_sum.detach(),
            pair_rate=pair_rate,
            pair_count=pair_count,
            neg_entropy=neg_entropy,
            selection=nonzero if self.keep_selection else None,
        )

    def upgrade_state_dict_named(self, state_dict, name):
        """Warm start: a plain fairseq self-attention has no selector parameters; keep ours
        fresh (as SSAN keeps its fresh policy network)."""
        super().upgrade_state_dict_named(state_dict, name)
        prefix = name + "." if name != "" else ""
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
