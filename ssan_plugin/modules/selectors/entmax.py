"""``entmax``: alpha-entmax instead of the softmax (Correia et al. 2019, Adaptively Sparse
Transformers; Peters et al. 2019), from the ``entmax`` package.

alpha-entmax(z)_j = [(alpha - 1) z_j - tau]_+ ^ (1 / (alpha - 1)), tau such that the row sums
to 1: keys far enough below the row maximum get weight exactly 0. alpha -> 1 is the softmax,
alpha = 2 sparsemax (the Euclidean projection of z on the simplex). By default each head
learns its own alpha = 1 + sigmoid(a) in (1, 2), starting at ``--entmax-alpha`` (the paper's
parametrisation; the package's bisection gives the gradient to alpha);
``--entmax-fixed-alpha`` keeps ``--entmax-alpha`` for every head instead: 1.5 and 2 use the
package's exact sort-based ``entmax15`` / ``sparsemax``, other values its bisection. Pads get
-inf logits, hence weight 0, and so do a decoder query's later keys. Training and evaluation compute the same thing. A key counts as
selected when its weight is nonzero; that support has no gradient, so ``--select-scale`` /
``--nce-scale`` have nothing to train (refused by name).
"""

import math
from dataclasses import dataclass, field
from typing import Dict, List

import torch
import torch.nn as nn
from fairseq.dataclass import FairseqDataclass
from torch import Tensor

from ..selective_weights import hidden_keys
from .base import Selection, Selector, normalisation_dtype
from ...errors import OptionError

#: bisection steps of alpha-entmax with a learnt or unusual alpha (the package's advice for
#: float32 is 24; each step is a few passes over (B, h, T, S))
BISECTION_STEPS = 30


@dataclass
class EntmaxOptions(FairseqDataclass):
    entmax_alpha: float = field(
        default=1.5,
        metadata={"help": "entmax selector: alpha in (1, 2] (1.5: 1.5-entmax; 2: sparsemax): "
                          "every head's starting value when alpha is learnt (then < 2), or the "
                          "value itself with --entmax-fixed-alpha"},
    )
    entmax_fixed_alpha: bool = field(
        default=False,
        metadata={"help": "entmax selector: keep --entmax-alpha for every head instead of "
                          "learning alpha per head"},
    )


def _entmax():
    try:
        import entmax
    except ImportError:  # a dependency of the plugin (setup.py); missing after --no-deps installs
        raise OptionError("the entmax selector needs the 'entmax' package: pip install "
                          "--no-deps entmax") from None
    return entmax


class EntmaxSelector(Selector):
    name = "entmax"
    options = EntmaxOptions

    def __init__(self, num_heads: int, alpha: float = 1.5, learn_alpha: bool = True):
        super().__init__()
        if learn_alpha and not 1 < alpha < 2:
            raise OptionError(f"--entmax-alpha: a learnt alpha = 1 + sigmoid(a) starts in (1, 2), "
                              f"got {alpha} (use --entmax-fixed-alpha for sparsemax, alpha 2)")
        if not 1 < alpha <= 2:
            raise OptionError(f"--entmax-alpha must lie in (1, 2], got {alpha}")
        self.learn_alpha = bool(learn_alpha)
        _entmax()  # refused at build time, not at the first forward
        if self.learn_alpha:
            start = math.log((alpha - 1) / (2 - alpha))  # sigmoid(start) = alpha - 1
            self.alpha_logit = nn.Parameter(torch.full((num_heads,), start))
        else:
            self.alpha = float(alpha)

    @classmethod
    def from_args(cls, args, embed_dim, num_heads):
        return cls(num_heads, args.entmax_alpha, learn_alpha=not args.entmax_fixed_alpha)

    def head_alpha(self) -> Tensor:
        """(h,) each head's alpha (learnt), or a 0-dim tensor (fixed)."""
        if self.learn_alpha:
            return 1 + torch.sigmoid(self.alpha_logit)
        return torch.tensor(self.alpha)

    def learnt_values(self) -> Dict[str, List[float]]:
        """{"alpha": each head's learnt alpha} (none when alpha is fixed)."""
        if not self.learn_alpha:
            return {}
        return {"alpha": [float(a) for a in self.head_alpha().detach().cpu()]}

    def extra_repr(self) -> str:
        return "alpha learnt per head" if self.learn_alpha else f"alpha={self.alpha:g}"

    def reference(self, logits, key_padding_mask, query, rate_gradient=True, noise=None, site=None):
        heads = logits.size(1)
        z = normalisation_dtype(logits)
        if key_padding_mask is not None:
            z = z.masked_fill(hidden_keys(key_padding_mask), float("-inf"))
        entmax = _entmax()
        if self.learn_alpha:
            alpha = self.head_alpha().view(1, heads, 1, 1)
            probs = entmax.entmax_bisect(z, alpha, -1, BISECTION_STEPS)
        elif self.alpha == 2:
            probs = entmax.sparsemax(z, dim=-1)
        elif self.alpha == 1.5:
            probs = entmax.entmax15(z, dim=-1)
        else:
            probs = entmax.entmax_bisect(z, self.alpha, -1, BISECTION_STEPS)
        return Selection(probs)
