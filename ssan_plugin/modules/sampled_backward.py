"""What both training kernels of SSAN's sampled selective softmax keep for backward and return.

The torch kernel (``_SampledSelectiveSoftmax`` in selective_weights.py) and the native one
(``NativeSampledSelectiveSoftmax`` in native.py) save the same tensors and return the sample in
the same form; the one function lives here, below both, so neither imports the other for it.
"""

from typing import Optional

import torch
from torch import Tensor


def save_sampled_for_backward(ctx, out: Tensor, weight: Tensor, chosen: Tensor,
                              slope: Optional[Tensor]) -> Tensor:
    """What both training kernels (selective_weights.py's and native.py's) keep and return:
    saves ATT, w and, when the sample carries a gradient (``slope`` given), the slope; returns
    the sample A, float32 and differentiable with a slope, else the bool ``chosen`` as a
    constant."""
    if slope is not None:
        ctx.save_for_backward(out, weight, slope)
        return chosen.to(torch.float32)
    ctx.save_for_backward(out, weight)
    ctx.mark_non_differentiable(chosen)
    return chosen
