"""``fixed_mask``: a learnt, input-independent mask over position pairs (after SparseBERT's
differentiable attention mask, Shi et al. 2021): does content-dependent selection matter?

Each head has logits M_{h,p,q} for every pair of a query position p < N_q and a key position
q < N_k: at the encoder N_q = N_k = ``--max-source-positions``, at the decoder
``--max-target-positions`` both, at the cross site (target, source) (positions count the
sentence's own tokens from 0, whatever the padding side; at the decoder site the mask's future
half is never used). They play the part of SSAN's policy logits E_p, the same for every sentence:
training samples A = 1[M + L > 0] per sentence and pair (L logistic noise, a hard
Gumbel-sigmoid sample) with the straight-through gradient of sigmoid((M + L) / tau), the
straight-through cap at SSAN's default 0; evaluation uses A = 1[M > 0]; the weights are the
softmax over the selected non-pad keys (SSAN's ``selective_softmax``; an empty row is zero).
Fast paths, as SSAN's: the training kernels ``torch`` and ``native`` of
``sampled_selective_softmax`` (``--fixed-mask-kernel``) and the evaluation mask 1[M > 0].
The masks start at N(``--fixed-mask-init-bias``, 1). The rate term (``--select-scale``) is that
of A, with its straight-through gradient, and the entropies are those of sigmoid(M) over the
non-pad pairs of each sentence, as for SSAN. Cost: h N_q N_k parameters a layer.
"""

import math
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn as nn
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from torch import Tensor

from ..selective_weights import (KERNELS, check_kernel, hidden_keys, resolve_kernel,
                                 sampled_selective_softmax, selective_softmax)
from .base import Selection, Selector, SiteContext, site_of, site_position_limits
from ...errors import OptionError

#: the straight-through cap of the sample (SSAN's default, docs/design.md 1.4 and 1.8)
STRAIGHT_THROUGH_CAP = 0.0
#: the most mask logits a layer may have (h N^2): 2^26, 256 MiB of float32 (h = 16, N = 2048)
MAX_MASK_ELEMENTS = 1 << 26


@dataclass
class FixedMaskOptions(FairseqDataclass):
    fixed_mask_tau: float = field(
        default=0.5, metadata={"help": "fixed_mask selector: Gumbel-sigmoid temperature, > 0"}
    )
    fixed_mask_init_bias: float = field(
        default=0.0,
        metadata={"help": "fixed_mask selector: mean of the initial mask logits (drawn with "
                          "standard deviation 1)"},
    )
    fixed_mask_kernel: ChoiceEnum(KERNELS) = field(
        default="auto",
        metadata={"help": "fixed_mask selector: training kernel of the sample, as --ssan-kernel"},
    )


class FixedMaskSelector(Selector):
    name = "fixed_mask"
    options = FixedMaskOptions
    rate_has_gradient = True
    entropy_has_gradient = True
    fast_paths = ("torch", "native")
    tiny_flags = ("--max-source-positions", "64")
    samples = True

    def __init__(self, num_heads: int, max_positions: int, tau: float = 0.5,
                 init_bias: float = 0.0, kernel: str = "auto", key_positions: Optional[int] = None,
                 option: str = "--max-source-positions"):
        super().__init__()
        if not 0 < tau < math.inf:
            raise OptionError(f"--fixed-mask-tau must be finite and > 0, got {tau}")
        if not math.isfinite(init_bias):
            raise OptionError(f"--fixed-mask-init-bias must be finite, got {init_bias}")
        key_positions = max_positions if key_positions is None else key_positions
        if int(max_positions) < 1 or int(key_positions) < 1:
            raise OptionError(f"fixed_mask: {option} must be >= 1, got {max_positions}")
        size = num_heads * int(max_positions) * int(key_positions)
        if size > MAX_MASK_ELEMENTS:
            raise OptionError(
                f"fixed_mask: {option} {max_positions if key_positions == max_positions else f'{max_positions} / {key_positions}'} makes a mask of {num_heads} x {max_positions} x "
                f"{key_positions} = {size:,} logits a layer ({size * 4 / 2**30:.1f} GiB, with "
                f"Adam's state three times that), more than the {MAX_MASK_ELEMENTS:,} allowed; set "
                f"{option} to what the data needs (the plan uses 256)")
        self.tau = float(tau)
        self.kernel = check_kernel(kernel)
        self.option = option
        self.max_positions = int(max_positions)
        self.key_positions = int(key_positions)
        self.mask_logits = nn.Parameter(torch.empty(num_heads, self.max_positions, self.key_positions))
        nn.init.normal_(self.mask_logits, mean=float(init_bias), std=1.0)

    @classmethod
    def from_args(cls, args, embed_dim, num_heads):
        queries, keys = site_position_limits(args)
        option = {"encoder": "--max-source-positions", "decoder": "--max-target-positions",
                  "cross": "--max-target-positions / --max-source-positions"}[site_of(args)]
        return cls(num_heads, queries, tau=args.fixed_mask_tau, init_bias=args.fixed_mask_init_bias,
                   kernel=args.fixed_mask_kernel, key_positions=keys, option=option)

    def upgrade_state_dict_named(self, state_dict, name):
        """A checkpoint's mask of another size (it trained with other position limits) is
        refused in one line naming both sizes."""
        stored = state_dict.get(name + ".mask_logits" if name else "mask_logits")
        if stored is not None and tuple(stored.shape) != tuple(self.mask_logits.shape):
            def size(queries: int, keys: int) -> str:
                return f"{queries}" if queries == keys else f"{queries} x {keys}"

            theirs = size(stored.size(-2), stored.size(-1))
            raise OptionError(
                f"fixed_mask: the checkpoint's mask covers {theirs} positions, this model was built "
                f"for {size(self.max_positions, self.key_positions)} ({self.option}); use "
                f"{self.option} {theirs.replace(' x ', ' / ')}, as in training")

    def extra_repr(self) -> str:
        return f"positions={self.max_positions}x{self.key_positions}, tau={self.tau:g}"

    def pair_logits(self, site: SiteContext) -> Tensor:
        """M at each query's and key's own positions, (B or 1, h, T, S) (pad rows and columns
        hold some position's logits; they are masked downstream)."""
        queries, keys = site.query_positions, site.key_positions
        for positions, limit, what in ((queries, self.max_positions, "query"),
                                       (keys, self.key_positions, "key")):
            longest = int(positions.max()) + 1 if positions.numel() else 0
            if longest > limit:
                raise OptionError(
                    f"fixed_mask: a sentence of {longest} tokens, longer than the {limit} positions "
                    f"of the mask's {what}s ({self.option}; fairseq's "
                    f"--skip-invalid-size-inputs-valid-test skips such sentences)")
        if queries.size(0) == 1 and keys.size(0) == 1:
            return self.mask_logits[:, queries[0]][:, :, keys[0]].unsqueeze(0)
        bsz = max(queries.size(0), keys.size(0))
        queries, keys = queries.expand(bsz, -1), keys.expand(bsz, -1)
        table = self.mask_logits[:, queries.unsqueeze(-1), keys.unsqueeze(-2)]  # (h, B, T, S)
        return table.transpose(0, 1)

    def reference(self, logits, key_padding_mask, query, rate_gradient=True, noise=None, site=None):
        return self._select("reference", logits, key_padding_mask, query, rate_gradient, noise, site)

    def fast_path(self, path, logits, key_padding_mask, query, rate_gradient=True, noise=None,
                  row_entropy=False, site=None):
        if path not in self.fast_paths or not self.training:
            return super().fast_path(path, logits, key_padding_mask, query, rate_gradient, noise)
        return self._select(path, logits, key_padding_mask, query, rate_gradient, noise, site)

    def forward(self, logits, key_padding_mask, query, rate_gradient=True, row_entropy=False,
                site=None):
        kernel = resolve_kernel(self.kernel, logits.device) if self.training else "reference"
        return self._select(kernel, logits, key_padding_mask, query, rate_gradient, None, site)

    def _select(self, kernel: str, logits: Tensor, key_padding_mask: Optional[Tensor],
                query: Tensor, rate_gradient: bool, noise: Optional[Tensor],
                site: Optional[SiteContext]) -> Selection:
        """Training: the sample and the weighting by ``kernel`` (one of KERNELS, resolved);
        evaluation: A = 1[M > 0] and the selective softmax."""
        bsz, heads, tgt_len, src_len = logits.shape
        site = site or SiteContext.encoder(query, key_padding_mask)
        mask = self.pair_logits(site).float()
        if self.training:
            probs, keep = sampled_selective_softmax(
                logits, mask.expand(bsz, heads, tgt_len, src_len), self.tau, key_padding_mask,
                select_grad=rate_gradient, noise=noise, straight_through_cap=STRAIGHT_THROUGH_CAP,
                kernel=kernel)
        else:
            keep = (mask > 0).expand(bsz, heads, tgt_len, src_len)
            probs = selective_softmax(logits, keep.to(torch.float32), key_padding_mask)
        return Selection(probs, keep=keep, decision_logits=mask)

    def evaluation_mask(self, key_padding_mask, query, keep_logits, site=None):
        bsz = query.size(1)
        mask = self.pair_logits(site or SiteContext.encoder(query, key_padding_mask)).float()
        additive = torch.zeros_like(mask).masked_fill_(mask <= 0, float("-inf"))
        if key_padding_mask is not None:
            additive = additive.masked_fill(hidden_keys(key_padding_mask), float("-inf"))
        return additive.expand(bsz, -1, -1, -1), (mask if keep_logits else None)
