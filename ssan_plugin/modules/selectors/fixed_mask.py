"""``fixed_mask``: a learnt, input-independent mask over position pairs (after SparseBERT's
differentiable attention mask, Shi et al. 2021): does content-dependent selection matter?

Each head has logits M_{h,p,q} for every pair of token positions p, q < N, N =
``--max-source-positions`` (positions count the sentence's own tokens from 0, whatever the
padding side). They play the part of SSAN's policy logits E_p, the same for every sentence:
training samples A = 1[M + L > 0] per sentence and pair (L logistic noise, a hard
Gumbel-sigmoid sample) with the straight-through gradient of sigmoid((M + L) / tau), the
straight-through cap at SSAN's default 0; evaluation uses A = 1[M > 0]; the weights are the
softmax over the selected non-pad keys (SSAN's ``selective_softmax``; an empty row is zero).
Fast paths, as SSAN's: the training kernels ``torch`` and ``native`` of
``sampled_selective_softmax`` (``--fixed-mask-kernel``) and the evaluation mask 1[M > 0].
The masks start at N(``--fixed-mask-init-bias``, 1). The rate term (``--select-scale``) is that
of A, with its straight-through gradient, and the entropies are those of sigmoid(M) over the
non-pad pairs of each sentence, as for SSAN. Cost: h N^2 parameters a layer.
"""

import math
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn as nn
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from torch import Tensor

from ..selective_weights import (KERNELS, check_kernel, resolve_kernel, sampled_selective_softmax,
                                 selective_softmax)
from .base import Selection, Selector
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
                 init_bias: float = 0.0, kernel: str = "auto"):
        super().__init__()
        if not 0 < tau < math.inf:
            raise OptionError(f"--fixed-mask-tau must be finite and > 0, got {tau}")
        if not math.isfinite(init_bias):
            raise OptionError(f"--fixed-mask-init-bias must be finite, got {init_bias}")
        if int(max_positions) < 1:
            raise OptionError(f"fixed_mask: --max-source-positions must be >= 1, got {max_positions}")
        size = num_heads * int(max_positions) ** 2
        if size > MAX_MASK_ELEMENTS:
            raise OptionError(
                f"fixed_mask: --max-source-positions {max_positions} makes a mask of {num_heads} x "
                f"{max_positions} x {max_positions} = {size:,} logits a layer ({size * 4 / 2**30:.1f} "
                f"GiB, with Adam's state three times that), more than the {MAX_MASK_ELEMENTS:,} "
                f"allowed; set --max-source-positions to what the data needs (the plan uses 256)")
        self.tau = float(tau)
        self.kernel = check_kernel(kernel)
        self.max_positions = int(max_positions)
        self.mask_logits = nn.Parameter(torch.empty(num_heads, self.max_positions, self.max_positions))
        nn.init.normal_(self.mask_logits, mean=float(init_bias), std=1.0)

    @classmethod
    def from_args(cls, args, embed_dim, num_heads):
        return cls(num_heads, args.max_source_positions, tau=args.fixed_mask_tau,
                   init_bias=args.fixed_mask_init_bias, kernel=args.fixed_mask_kernel)

    def upgrade_state_dict_named(self, state_dict, name):
        """A checkpoint's mask of another size (it trained with another --max-source-positions)
        is refused in one line naming both sizes."""
        stored = state_dict.get(name + ".mask_logits" if name else "mask_logits")
        if stored is not None and tuple(stored.shape) != tuple(self.mask_logits.shape):
            raise OptionError(
                f"fixed_mask: the checkpoint's mask covers {stored.size(-1)} positions, this model "
                f"was built for {self.max_positions} (--max-source-positions); use "
                f"--max-source-positions {stored.size(-1)}, as in training")

    def extra_repr(self) -> str:
        return f"positions={self.max_positions}, tau={self.tau:g}"

    def pair_logits(self, key_padding_mask: Optional[Tensor], bsz: int, length: int) -> Tensor:
        """M at each sentence's own positions: (1, h, T, T) without pads, else (B, h, T, T)
        (pad rows and columns hold some position's logits; they are masked downstream)."""
        if key_padding_mask is None:
            longest = length
        else:
            positions = ((~key_padding_mask).cumsum(-1) - 1).clamp_min(0)  # (B, T)
            longest = int((~key_padding_mask).sum(-1).max())
        if longest > self.max_positions:
            raise OptionError(f"fixed_mask: a sentence of {longest} tokens, longer than the "
                              f"{self.max_positions} positions of the mask (--max-source-positions; "
                              f"fairseq's --skip-invalid-size-inputs-valid-test skips such sentences)")
        if key_padding_mask is None:
            return self.mask_logits[:, :length, :length].unsqueeze(0)
        table = self.mask_logits[:, positions.unsqueeze(-1), positions.unsqueeze(-2)]  # (h, B, T, T)
        return table.transpose(0, 1)

    def reference(self, logits, key_padding_mask, query, rate_gradient=True, noise=None):
        return self._select("reference", logits, key_padding_mask, rate_gradient, noise)

    def fast_path(self, path, logits, key_padding_mask, query, rate_gradient=True, noise=None,
                  row_entropy=False):
        if path not in self.fast_paths or not self.training:
            return super().fast_path(path, logits, key_padding_mask, query, rate_gradient, noise)
        return self._select(path, logits, key_padding_mask, rate_gradient, noise)

    def forward(self, logits, key_padding_mask, query, rate_gradient=True, row_entropy=False):
        kernel = resolve_kernel(self.kernel, logits.device) if self.training else "reference"
        return self._select(kernel, logits, key_padding_mask, rate_gradient, None)

    def _select(self, kernel: str, logits: Tensor, key_padding_mask: Optional[Tensor],
                rate_gradient: bool, noise: Optional[Tensor]) -> Selection:
        """Training: the sample and the weighting by ``kernel`` (one of KERNELS, resolved);
        evaluation: A = 1[M > 0] and the selective softmax."""
        bsz, heads, tgt_len, src_len = logits.shape
        mask = self.pair_logits(key_padding_mask, bsz, src_len).float()
        if self.training:
            probs, keep = sampled_selective_softmax(
                logits, mask.expand(bsz, heads, tgt_len, src_len), self.tau, key_padding_mask,
                select_grad=rate_gradient, noise=noise, straight_through_cap=STRAIGHT_THROUGH_CAP,
                kernel=kernel)
        else:
            keep = (mask > 0).expand(bsz, heads, tgt_len, src_len)
            probs = selective_softmax(logits, keep.to(torch.float32), key_padding_mask)
        return Selection(probs, keep=keep, decision_logits=mask)

    def evaluation_mask(self, key_padding_mask, query, keep_logits):
        length, bsz, _ = query.shape
        mask = self.pair_logits(key_padding_mask, bsz, length).float()
        additive = torch.zeros_like(mask).masked_fill_(mask <= 0, float("-inf"))
        if key_padding_mask is not None:
            additive.masked_fill_(key_padding_mask.view(bsz, 1, 1, length), float("-inf"))
        return additive.expand(bsz, -1, -1, -1), (mask if keep_logits else None)
