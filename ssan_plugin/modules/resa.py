"""ReSA: reinforced self-attention (maths: docs/design.md).

Batch first: x (B, T, C), pad (B, T) bool True at pads or None; ``valid`` = 1 - pad.

- Two untied RSS modules (heads = queries, dependents = keys): f_i = [x_i; mean(x); x_i * mean(x)]
  (mean over non-pad tokens), logit_i = w^T elu(W f_i + b) + b', p_i = sigmoid(logit_i).
- Selection z (0/1, pads never selected):
  warm-up (``num_updates`` < ``warmup_updates``; ``num_updates`` is a buffer saved in
  checkpoints, set by fairseq's task.train_step to the 0-based index of the update being
  computed, so exactly ``warmup_updates`` updates are warm): all tokens;
  training, ``reinforce``: z_i ~ Bernoulli(p_i) independently; log pi(z) per sentence, summed
  over both modules, is reported for the REINFORCE criterion (no other gradient reaches the
  RSS); training, ``gumbel``: straight-through Gumbel-sigmoid with temperature tau (forward 0/1,
  backward gradient of the relaxed sample); inference: z = 1[p > 0.5], or Bernoulli samples
  with ``sample_at_inference``.
- Per direction (``none``: one block of width C, diagonal excluded; ``bi``: forward and backward
  blocks of C/2, concatenated): a DiSA block (modules.disan.DirectionalSelfAttention) where head
  i attends dependent j only if z^h_i = z^d_j = 1 and j != i (and the direction allows it);
  an unselected head gets the mean of h over the other valid tokens (of its direction);
  fusion gate as DiSAN; zero at pads; then the output projection C -> C.
- With hard 0/1 selections the attention runs on the gathered selected heads and dependents
  only (cost ~ selected heads x selected dependents), with their original positions for masks.

Every forward reports a ``SelectionStats`` record (modules.selection): pairs are the attended
(head, dependent) pairs i != j; decisions and the entropy are over the token slots of both
samplers; ``queries_selected``/``keys_selected``/``tokens`` count heads, dependents and tokens;
the regulariser terms are the expected pair rate and count under p (the straight-through values
with ``gumbel``), detached during the warm-up; with ``reinforce`` in training, ``log_prob`` (B,)
is log pi(z) summed over both samplers (0 * logits during the warm-up, which keeps the RSS in
the graph for DDP) and ``sentence_token_rate`` (B,) the selected fraction of each sentence's
token slots, the sparsity term of the reward.
"""

from typing import Optional, Tuple

import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .disan import DirectionalSelfAttention, valid_weight
from .multidim_attention import at_least_float32
from .selection import (
    SelectionReporter,
    SelectionStats,
    binary_entropy_from_logits,
    gumbel_sigmoid_straight_through,
)
from .variant_self_attention import VariantSelfAttention
from ..errors import OptionError

ESTIMATORS = ("reinforce", "gumbel")
RESA_DIRECTIONS = ("none", "bi")


class ReinforcedSequenceSampler(nn.Module):
    """RSS: (B, T, C), valid (B, T) -> selection logits (B, T) float32."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.hidden = nn.Linear(3 * dim, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x: Tensor, valid: Tensor) -> Tensor:
        w = valid.unsqueeze(-1).to(x.dtype)
        mean = (x * w).sum(1, keepdim=True) / w.sum(1, keepdim=True).clamp(min=1)
        feats = torch.cat([x, mean.expand_as(x), x * mean], dim=-1)
        return at_least_float32(self.out(F.elu(self.hidden(feats))).squeeze(-1))


def mean_of_others(h: Tensor, valid: Tensor, direction: str) -> Tensor:
    """Mean of h over the other valid tokens j != i (j < i for fw, j > i for bw); 0 if none."""
    hf = at_least_float32(h) * valid.unsqueeze(-1)
    cnt_all = valid.unsqueeze(-1)
    if direction == "none":
        total = hf.sum(1, keepdim=True) - hf
        count = valid.sum(1, keepdim=True).unsqueeze(-1) - cnt_all
    elif direction == "fw":
        total = hf.cumsum(1) - hf
        count = valid.cumsum(1).unsqueeze(-1) - cnt_all
    else:  # bw
        total = hf.sum(1, keepdim=True) - hf.cumsum(1)
        count = valid.sum(1, keepdim=True).unsqueeze(-1) - valid.cumsum(1).unsqueeze(-1)
    mean = total / count.clamp(min=1)
    return torch.where(count > 0, mean, torch.zeros_like(mean)).to(h.dtype)


def compact(mask: Tensor) -> Tuple[Tensor, Tensor]:
    """Selected positions first, in order: (B, L) indices (a prefix of a permutation) and ok."""
    counts = mask.sum(1)
    length = max(1, int(counts.max()))
    idx = torch.argsort((~mask).to(torch.uint8), dim=1, stable=True)[:, :length]
    ok = torch.arange(length, device=mask.device).unsqueeze(0) < counts.unsqueeze(1)
    return idx, ok


class ReSAAttention(SelectionReporter, VariantSelfAttention):
    token_selector = True

    def __init__(
        self,
        embed_dim: int,
        estimator: str = "reinforce",
        warmup_updates: int = 0,
        tau: float = 0.5,
        sample_at_inference: bool = False,
        direction: str = "none",
        rss_hidden: int = 0,
        c: float = 5.0,
        implementation: str = "blocked",
        query_block: int = 0,
    ):
        super().__init__(embed_dim)
        if estimator not in ESTIMATORS:
            raise OptionError(f"--resa-estimator must be one of {ESTIMATORS}, got {estimator!r}")
        if direction not in RESA_DIRECTIONS:
            raise OptionError(f"--resa-direction must be one of {RESA_DIRECTIONS}, got {direction!r}")
        if warmup_updates < 0:
            raise OptionError(f"--resa-warmup-updates must be >= 0, got {warmup_updates}")
        if not 0 < tau < math.inf:
            raise OptionError(f"--resa-tau must be finite and > 0, got {tau}")
        if rss_hidden < 0:
            raise OptionError(f"--resa-rss-hidden must be >= 0 (0 = embed dim), got {rss_hidden}")
        if direction == "bi" and embed_dim % 2:
            raise OptionError(f"--resa-direction bi: --encoder-embed-dim must be even, got {embed_dim}")
        self.estimator, self.tau = estimator, float(tau)
        self.warmup_updates, self.sample_at_inference = int(warmup_updates), bool(sample_at_inference)
        hidden = rss_hidden or embed_dim
        self.head_rss = ReinforcedSequenceSampler(embed_dim, hidden)
        self.dep_rss = ReinforcedSequenceSampler(embed_dim, hidden)
        if direction == "none":
            dirs, width = ["none"], embed_dim
        else:
            dirs, width = ["fw", "bw"], embed_dim // 2
        self.blocks = nn.ModuleList(
            DirectionalSelfAttention(embed_dim, width, d, c, implementation, query_block,
                                     ("implementation", "--resa-query-block"))
            for d in dirs
        )
        self.register_buffer("num_updates", torch.zeros((), dtype=torch.long))

    def set_num_updates(self, num_updates: int) -> None:
        self.num_updates.fill_(int(num_updates))

    @property
    def in_warmup(self) -> bool:
        return int(self.num_updates) < self.warmup_updates

    def select(self, logits: Tensor, valid: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        """-> z (B, T) float32 (0 at pads), log pi(z) per sentence (B,) or None."""
        if self.in_warmup:
            return valid, (logits * 0.0).sum(1)
        if self.training and self.estimator == "gumbel":
            return gumbel_sigmoid_straight_through(logits, self.tau) * valid, None
        if self.training or self.sample_at_inference:
            with torch.no_grad():
                z = torch.bernoulli(torch.sigmoid(logits)) * valid
            log_prob = z * F.logsigmoid(logits) + (1.0 - z) * F.logsigmoid(-logits)
            return z, (log_prob * valid).sum(1) if self.training else None
        return (logits > 0).to(logits.dtype) * valid, None

    def encode(self, x: Tensor, pad: Optional[Tensor]) -> Tensor:
        valid = valid_weight(x, pad)
        head_logits, dep_logits = self.head_rss(x, valid), self.dep_rss(x, valid)
        z_head, lp_head = self.select(head_logits, valid)
        z_dep, lp_dep = self.select(dep_logits, valid)
        outs = [self._direction(block, x, valid, z_head, z_dep, pad) for block in self.blocks]
        log_prob = None if lp_head is None else lp_head + lp_dep
        if self.wants_statistics():
            self.report_selection(self._statistics(head_logits, dep_logits, z_head, z_dep, valid, log_prob))
        return torch.cat(outs, dim=-1)

    def _direction(self, block, x, valid, z_head, z_dep, pad) -> Tensor:
        h = block.features(x)
        if z_head.requires_grad or z_dep.requires_grad:  # straight-through: every pair
            att = block.context(h, z_dep)
        else:
            att = self._selected_context(block, h, z_head > 0, z_dep > 0, valid > 0)
        zh = z_head.unsqueeze(-1).to(h.dtype)
        s = zh * att + (1.0 - zh) * mean_of_others(h, valid, block.direction)
        u = block.fuse(h, s)
        return u if pad is None else u.masked_fill(pad.unsqueeze(-1), 0.0)

    @staticmethod
    def _selected_context(block, h: Tensor, heads: Tensor, deps: Tensor, tokens: Tensor) -> Tensor:
        """Attention of the selected heads over the selected dependents only, scattered back."""
        if torch.equal(heads, tokens) and torch.equal(deps, tokens):  # all selected: no gather
            return block.context(h, deps.float())
        q_idx, q_ok = compact(heads)
        k_idx, k_ok = compact(deps)
        dim = h.size(-1)
        hq = h.gather(1, q_idx.unsqueeze(-1).expand(-1, -1, dim))
        hk = h.gather(1, k_idx.unsqueeze(-1).expand(-1, -1, dim))
        att = block.context(hk, k_ok.float(), query_ok=q_ok, q_pos=q_idx, k_pos=k_idx, queries=hq)
        # rows of unselected slots are 0 and land on distinct unselected positions
        return h.new_zeros(h.shape).scatter(1, q_idx.unsqueeze(-1).expand(-1, -1, dim), att)

    def _statistics(self, head_logits, dep_logits, z_head, z_dep, valid, log_prob) -> SelectionStats:
        n = valid.sum(1)  # (B,) tokens per sentence
        with torch.no_grad():
            zh, zd = (z_head > 0.5).float() * valid, (z_dep > 0.5).float() * valid
            head_sel, dep_sel = zh.sum(1), zd.sum(1)
            pairs_selected = (head_sel * dep_sel - (zh * zd).sum(1)).sum()
        entropy = (binary_entropy_from_logits(head_logits) + binary_entropy_from_logits(dep_logits)) * valid
        entropy_sum = entropy.sum()
        decisions = 2.0 * n.sum()
        if self.estimator == "gumbel" and z_head.requires_grad:
            p_head, p_dep = z_head * valid, z_dep * valid  # straight-through values
        else:
            p_head, p_dep = torch.sigmoid(head_logits) * valid, torch.sigmoid(dep_logits) * valid
        # expected keys (dependents j != i) attended by each head i, under independent selections
        row_count = p_head * (p_dep.sum(1, keepdim=True) - p_dep)  # (B, T)
        n_queries = n.sum().clamp(min=1)
        pair_count = row_count.sum() / n_queries
        pair_rate = (row_count / (n - 1).clamp(min=1).unsqueeze(1)).sum() / n_queries
        neg_entropy = -entropy_sum / decisions.clamp(min=1)
        if self.in_warmup:  # the RSS is not trained during the warm-up
            pair_rate, pair_count, neg_entropy = pair_rate.detach(), pair_count.detach(), neg_entropy.detach()
        return SelectionStats(
            pairs_selected=pairs_selected,
            pairs_possible=(n * (n - 1)).sum(),
            decisions=decisions,
            entropy_sum=entropy_sum.detach(),
            pair_rate=pair_rate,
            pair_count=pair_count,
            neg_entropy=neg_entropy,
            queries_selected=head_sel.sum(),
            keys_selected=dep_sel.sum(),
            tokens=n.sum(),
            log_prob=log_prob,
            sentence_token_rate=None if log_prob is None else (head_sel + dep_sel) / (2.0 * n.clamp(min=1)),
            in_warmup=self.in_warmup,
            selection=torch.stack([zh, zd], dim=1).bool() if self.keep_selection else None,
        )
