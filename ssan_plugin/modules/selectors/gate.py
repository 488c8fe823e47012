"""``gate``: a sigmoid gate on each head's output after ordinary softmax attention (the
headwise gate of Qiu et al. 2025, Gated Attention).

g_{h,i} = sigmoid(x_i W_g + b_g)_h, one gate per head and query, from the token's input to the
attention (after the layer norm in a pre-norm layer); head h's output for query i is
g_{h,i} sum_j softmax_j(E_{h,i,j}) v_j, i.e. its weights are g_{h,i} times fairseq's. The gate
scales a head down, it does not drop keys: every non-pad pair keeps a nonzero weight and counts
as selected (rate 1), so the logged rate is the zero-weight rule's, the same for every
selector. What the gate decides is in the rest of the record: ``--select-scale`` penalises the
gated share of attention, the mean of g (differentiable: it pushes gates towards 0), and the
entropy statistics (``pol_ent``, ``--nce-scale``) are those of the h decisions per query.
``--gate-init-bias B`` starts every gate near sigmoid(B) (0: one half); with g = 1 the layer is
fairseq's self-attention exactly.
"""

import math
from dataclasses import dataclass, field

import torch.nn as nn
from fairseq.dataclass import FairseqDataclass

from .base import Selection, Selector, masked_softmax, normalisation_dtype
from ...errors import OptionError


@dataclass
class GateOptions(FairseqDataclass):
    gate_init_bias: float = field(
        default=0.0,
        metadata={"help": "gate selector: initial bias of every head's gate logit, so that "
                          "gates start near sigmoid(B) (0: one half)"},
    )


class GateSelector(Selector):
    name = "gate"
    options = GateOptions
    tiny_flags = ("--gate-init-bias", "1")
    rate_has_gradient = True
    entropy_has_gradient = True

    def __init__(self, embed_dim: int, num_heads: int, init_bias: float = 0.0):
        super().__init__()
        if not math.isfinite(init_bias):
            raise OptionError(f"--gate-init-bias must be finite, got {init_bias}")
        self.gate_proj = nn.Linear(embed_dim, num_heads)
        nn.init.xavier_uniform_(self.gate_proj.weight)
        nn.init.constant_(self.gate_proj.bias, float(init_bias))

    @classmethod
    def from_args(cls, args, embed_dim, num_heads):
        return cls(embed_dim, num_heads, args.gate_init_bias)

    def reference(self, logits, key_padding_mask, query, rate_gradient=True, noise=None, site=None):
        gate_logits = normalisation_dtype(self.gate_proj(query)).permute(1, 2, 0).unsqueeze(-1)  # (B, h, T, 1)
        gate = gate_logits.sigmoid()
        return Selection(masked_softmax(logits, key_padding_mask), keep=gate,
                         decision_logits=gate_logits, output_gate=gate)
