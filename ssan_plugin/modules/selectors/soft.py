"""``soft``: SSAN's sigmoid weighting (``--ssan-selection soft`` of ``ssan_transformer``).

The same policy network as ``gumbel`` (and the same options, ``SSANSelectorOptions``), without
noise or a threshold: A = sigmoid(E_p) weights every non-pad key, in training and in
evaluation, ATT_ij = A_ij exp(E_ij) / sum_j' A_ij' exp(E_ij') (docs/design.md, section 1.3).
``GumbelSelector``'s reference with ``selection = "soft"`` (no fast path: nothing is sampled).
Its record, as SSAN's soft mode has always logged it, counts a pair as selected when
sigmoid(E_p) > 0.5 (every weight is nonzero, so by the zero-weight rule alone the rate would be
1); ``--select-scale`` penalises sum_j sigmoid(E_p), differentiably.
"""

from .gumbel import GumbelSelector


class SoftSelector(GumbelSelector):
    """SSAN with soft selection: A = sigmoid(E_p)."""

    name = "soft"
    selection = "soft"
    fast_paths = ()
    tiny_flags = ()
    samples = False
