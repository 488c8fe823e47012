"""The selection contract shared by every selector (SSAN's policy network, ReSA's samplers).

A selective layer reports, for each forward pass, one :class:`SelectionStats` record. The
encoder collects the records of its layers into ``encoder_out["selection_stats"]`` (a list,
in layer order), the model copies that list into its ``extra``, and the criterion reads the
typed fields: the regulariser terms, the counts it logs, and, for sampled selectors in
training, the log-probability that switches REINFORCE on. See docs/architecture.md.

Conventions: counts are over non-pad positions only; a *pair* is a (query, key) pair of one
attention head; ``pair_rate`` / ``pair_count`` are the two forms of ``--select-scale``'s
regulariser and mean the same thing for every selector (see :func:`pair_regulariser`).

Also here: the noise, straight-through and entropy helpers both selectors use.
"""

from contextlib import contextmanager
from dataclasses import dataclass
from typing import List, Optional

import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch import Tensor
from torch.autograd.function import once_differentiable


@dataclass
class SelectionStats:
    """One selective layer's statistics for one forward pass.

    Detached counts (0-dim float tensors), summed over the batch:
        pairs_selected: (query, key) pairs that attend, summed over heads.
        pairs_possible: the non-pad (query, key) pairs the selector decides on, over heads.
        decisions: the number of Bernoulli decisions the policy made (pairs for SSAN, token
            slots of both samplers for ReSA); ``entropy_sum`` is summed over them.
        entropy_sum: sum of the policy's binary entropies H(pi), nats.
    Differentiable regulariser terms (0-dim, may carry gradients):
        pair_rate: per head, mean over non-pad queries of the fraction of non-pad keys
            selected, summed over heads (``--select-penalty-form rate``).
        pair_count: the same with the number of keys instead of the fraction (``count``,
            the reference's form).
        neg_entropy: mean over decisions of -H(pi).
    Token selectors only (None for pair selectors), detached counts:
        queries_selected, keys_selected: tokens chosen as queries (ReSA's heads) and as keys
            (dependents); tokens: non-pad tokens.
    Sampled selectors in training only:
        log_prob: (B,) log pi(z) of the sample per sentence, with gradient to the policy.
            Its presence is what switches the criterion's REINFORCE term on.
        sentence_token_rate: (B,) selected fraction of each sentence's token slots (the
            sparsity term of the reward), detached.
        in_warmup: the selector is in its select-all warm-up (log_prob is 0 * logits).
    For analysis, when the module's ``keep_selection`` is True:
        selection: the 0/1 selection, bool; (B, h, T, S) for pair selectors, (B, 2, T) for
            token selectors (row 0: queries/heads, row 1: keys/dependents).
    layer: 0-based layer index, set by the encoder or decoder; site: "encoder", "decoder"
        (decoder self-attention) or "cross" (encoder-decoder attention); ``label`` names both
        ("3", "dec3", "cross3") in logs and analysis.
    """

    pairs_selected: Tensor
    pairs_possible: Tensor
    decisions: Tensor
    entropy_sum: Tensor
    pair_rate: Tensor
    pair_count: Tensor
    neg_entropy: Tensor
    queries_selected: Optional[Tensor] = None
    keys_selected: Optional[Tensor] = None
    tokens: Optional[Tensor] = None
    log_prob: Optional[Tensor] = None
    sentence_token_rate: Optional[Tensor] = None
    in_warmup: bool = False
    selection: Optional[Tensor] = None
    layer: int = -1
    site: str = "encoder"

    @property
    def label(self) -> str:
        return layer_label(self.site, self.layer)

    def regulariser(self, form: str) -> Tensor:
        """The ``--select-scale`` term of this layer: ``pair_rate`` or ``pair_count``."""
        if form == "rate":
            return self.pair_rate
        if form == "count":
            return self.pair_count
        raise ValueError(f"selection regulariser form must be 'rate' or 'count', got {form!r}")


#: the prefix of each site's layer labels (the encoder's labels are its layer indices alone, as
#: they were before decoder selection)
SITE_PREFIX = {"encoder": "", "decoder": "dec", "cross": "cross"}


def layer_label(site: str, layer: int) -> str:
    """A selective layer's name in logs and analysis: "3" (encoder), "dec3", "cross3"."""
    return f"{SITE_PREFIX[site]}{layer}"


def label_order(label: str):
    """Sort key of layer labels: encoder, decoder, cross, each by index."""
    for order, prefix in enumerate(SITE_PREFIX.values()):
        if label.startswith(prefix) and label[len(prefix):].isdigit():
            return (order, int(label[len(prefix):]))
    raise ValueError(f"not a layer label: {label!r}")


# Records travel in the model's output. torch DDP with find_unused_parameters passes every
# output tensor through its bookkeeping by flattening the output as a pytree: registered, a
# record's tensors are seen, so a term the loss does not use (e.g. ReSA's log-probability under
# a plain CE criterion) is known to be unused instead of stalling the gradient reduction.
pytree.register_dataclass(SelectionStats)


@dataclass(frozen=True)
class SelectionRequest:
    """What a consumer of the records asks of every selective layer (:func:`request_selection`):
    ``statistics`` as ``SelectionReporter.report_statistics``; ``rate_gradient`` /
    ``entropy_gradient``: whether the record's ``pair_rate`` / ``pair_count`` and ``neg_entropy``
    keep their gradients in training (the selective criterion asks for those its loss weighs;
    a layer refuses, by name, a gradient its selector cannot give)."""

    statistics: Optional[bool] = None
    rate_gradient: bool = True
    entropy_gradient: bool = True


class SelectionReporter:
    """Mixin of attention modules that select: the encoder takes each forward's record with
    :meth:`pop_selection` (so the output, not the module, owns the record and its graph); a
    consumer states what it needs with :meth:`accept` (a ``SelectionRequest``)."""

    _selection: Optional[SelectionStats] = None
    #: analysis tools set this to get the 0/1 selection itself in each record
    keep_selection: bool = False
    #: None (default): a record in training, or when ``keep_selection`` is set; True: in
    #: every forward (the selective criteria request it in ``check_model``, so that validation
    #: logs the selection); False: never (decoding). Nothing else in evaluation reads the records
    #: (teacher-forced scoring, the hub, analysis without ``keep_selection``), and they cost
    #: passes over (B, h, T, S). See :func:`selection_statistics`.
    report_statistics: Optional[bool] = None
    #: whether ``pair_rate`` / ``pair_count`` and ``neg_entropy`` carry gradients in training.
    #: The selective criterion requests what its loss weights (``--select-scale``,
    #: ``--nce-scale``), so that no graph is kept for a term no loss uses; any other consumer
    #: keeps the default, every term differentiable.
    rate_gradient: bool = True
    entropy_gradient: bool = True
    #: whether its records carry the token counts of a token selector (ReSA's samplers)
    token_selector: bool = False

    def accept(self, request: SelectionRequest) -> None:
        """Take ``request`` (see SelectionRequest); raises an OptionError, naming the option,
        for a gradient this layer cannot give."""
        self.report_statistics = request.statistics
        self.rate_gradient = request.rate_gradient
        self.entropy_gradient = request.entropy_gradient

    def wants_statistics(self) -> bool:
        """Whether this forward should report a record (see ``report_statistics``)."""
        if self.report_statistics is None:
            return self.training or self.keep_selection
        return self.report_statistics

    def report_selection(self, stats: SelectionStats) -> None:
        self._selection = stats

    def pop_selection(self) -> Optional[SelectionStats]:
        stats, self._selection = self._selection, None
        return stats


def request_selection(module, request: SelectionRequest) -> List[SelectionReporter]:
    """Hand ``request`` to every selective layer of ``module``; returns those layers."""
    reporters = [m for m in module.modules() if isinstance(m, SelectionReporter)]
    for m in reporters:
        m.accept(request)
    return reporters


@contextmanager
def selection_statistics(module, report: Optional[bool] = True):
    """Within the block, the selective layers of ``module`` report a record in every forward
    (``report`` True), in none (False: decoding), or by default (None: in training or with
    ``keep_selection``); restored after. See SelectionReporter."""
    reporters = [m for m in module.modules() if isinstance(m, SelectionReporter)]
    previous = [m.report_statistics for m in reporters]
    for m in reporters:
        m.report_statistics = report
    try:
        yield
    finally:
        for m, value in zip(reporters, previous):
            m.report_statistics = value


def no_selection_statistics(module):
    """``selection_statistics(module, False)``: no record at all (the sequence generator)."""
    return selection_statistics(module, False)


def logistic_noise_like(x: Tensor) -> Tensor:
    """G' - G'' for two iid Gumbel(0, 1) draws, i.e. Logistic(0, 1) noise logit(U), float32.
    U is uniform on [0, 1), clamped below at the smallest normal float (logit's ``eps``, one
    pass with the logit) so that U = 0 gives a finite -87.3 instead of -inf."""
    u = torch.empty(x.shape, dtype=torch.float32, device=x.device).uniform_()
    return u.logit_(eps=torch.finfo(torch.float32).tiny)


def binary_entropy_value(x: Tensor) -> Tensor:
    """H(sigmoid(x)) without a graph, same shape and dtype as ``x``, in five elementwise passes.

    H is even in x; with a = |x|, H = softplus(-a) + a sigmoid(-a), a sum of two positive terms.
    The textbook softplus(x) - x sigmoid(x) subtracts nearly equal numbers where the policy is
    sure (|x| >> 1) and loses about half of float32's digits there (docs/design.md 1.4)."""
    a = x.abs()
    minus_a = a.neg()
    return F.softplus(minus_a).addcmul_(a, minus_a.sigmoid_())


class _BinaryEntropy(torch.autograd.Function):
    """H(sigmoid(x)) with dH/dx = -x sigmoid(x) sigmoid(-x), the product taken as t (1 - t),
    t = sigmoid(-|x|) (1 - sigmoid(|x|) would be 0 in float32 from |x| = 17 on); saves ``x``
    alone (autograd's chain of the textbook form keeps x and sigmoid(x))."""

    @staticmethod
    def forward(ctx, x: Tensor):
        ctx.save_for_backward(x)
        return binary_entropy_value(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        t = x.abs().neg_().sigmoid_()
        return t.addcmul_(t, t, value=-1.0).mul_(x).mul_(grad).neg_()  # -x t (1 - t) g


def binary_entropy_from_logits(logits: Tensor) -> Tensor:
    """H(sigmoid(x)) = -p log p - (1 - p) log(1 - p), p = sigmoid(x), elementwise, in nats;
    accurate to float32's precision at any |x| (see binary_entropy_value), differentiable."""
    return _BinaryEntropy.apply(logits)


class _StraightThrough(torch.autograd.Function):
    """``hard`` (exactly 0/1) in the forward pass, the identity to ``y`` in the backward pass."""

    @staticmethod
    def forward(ctx, y: Tensor, hard: Tensor):
        return hard

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad, None


def gumbel_sigmoid_straight_through(logits: Tensor, tau: float, noise: Optional[Tensor] = None) -> Tensor:
    """Hard Gumbel-sigmoid sample: y = sigmoid((logits + G' - G'') / tau); forward 1[y > 0.5]
    (exactly 0/1, taken as 1[logits + G' - G'' > 0], which it is for any tau > 0), backward the
    gradient of y. Same shape as ``logits``, float32. ``noise``: the logistic noise G' - G'' to
    use (broadcastable to ``logits``; tests), drawn when None."""
    if noise is None:
        noise = logistic_noise_like(logits)
    z = logits.float() + noise.float()
    return _StraightThrough.apply(torch.sigmoid(z / tau), (z > 0).to(torch.float32))
