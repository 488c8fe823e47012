"""Label-smoothed cross-entropy + SSAN regularisers + REINFORCE for ReSA's RSS (DESIGN.md section 4).

Per sentence b (training only, when the model reports ``log_prob`` in its selection stats):

    L_b  = label-smoothed loss of sentence b, summed over its target tokens, divided by their
           number with ``--resa-reward-loss token_mean`` (default; lambda then has the same
           scale for every length) or not (``sum``)
    R_b  = -L_b - lambda * frac_b            frac_b: selected fraction of b's tokens over both
                                             RSS modules, averaged over the ReSA layers
    A_b  = R_b - baseline_b                  ``batch``: leave-one-out batch mean (unbiased);
                                             ``running``: running mean of past batch means;
                                             ``none``: 0 (the reference)
    PG   = -mean_b(A_b * log pi(z_b))        log pi summed over both RSS and all ReSA layers,
                                             A detached: only the RSS receives this gradient
    loss = CE_sum + SSAN regularisers + policy_weight * PG * sample_size

fairseq divides the returned sum by ``sample_size``, so PG is a per-sentence mean. During the
ReSA warm-up the model's log_prob is 0 * logits: PG is 0 (the RSS stays in the graph for DDP)
and the baseline does not move. ``loss`` in the logs excludes PG (comparable across models).

Logged: ``resa_pg``; ``resa_reward`` (mean R); ``resa_msq_raw`` = mean R^2 and
``resa_msq_adv`` = mean A^2 (the gradient estimator's variance scales with these second
moments; their ratio ``resa_var_ratio`` < 1 is the variance the baseline saves); per ReSA layer
L: ``resa_head_L``, ``resa_dep_L`` (token selection rates) and ``resa_pair_L`` (fraction of
i != j pairs attended), plus SSAN's ``sel_L``/``sel``/``pol_ent``.
"""

import math
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import torch
from fairseq import metrics, utils
from fairseq.criterions import register_criterion
from torch import Tensor

from .selective_label_smoothed_cross_entropy import (
    SelectiveLabelSmoothedCrossEntropyConfig,
    SelectiveLabelSmoothedCrossEntropyCriterion,
)

BASELINES = ("batch", "running", "none")
REWARD_LOSSES = ("token_mean", "sum")


@dataclass
class ReSALabelSmoothedCrossEntropyConfig(SelectiveLabelSmoothedCrossEntropyConfig):
    resa_lambda: float = field(
        default=0.01, metadata={"help": "sparsity penalty lambda in the reward (>= 0; paper: "
                                        "0.005, 0.01, 0.02)"}
    )
    resa_baseline: str = field(
        default="batch", metadata={"help": "REINFORCE baseline: batch (leave-one-out batch "
                                           "mean), running (running mean), none"}
    )
    resa_baseline_momentum: float = field(
        default=0.9, metadata={"help": "momentum of the running baseline, in [0, 1)"}
    )
    resa_policy_weight: float = field(
        default=1.0, metadata={"help": "weight of the policy-gradient loss (>= 0)"}
    )
    resa_reward_loss: str = field(
        default="token_mean", metadata={"help": "sentence loss in the reward: token_mean or sum"}
    )


def leave_one_out_mean(values: Tensor) -> Tensor:
    """b_i = mean of the other entries (0 for a single entry)."""
    n = values.numel()
    if n < 2:
        return torch.zeros_like(values)
    return (values.sum() - values) / (n - 1)


def policy_gradient_loss(rewards: Tensor, baseline: Tensor, log_prob: Tensor) -> Tuple[Tensor, Tensor]:
    """-mean((R - b) * log pi) with R - b detached -> (loss, advantages)."""
    advantages = (rewards - baseline).detach()
    return -(advantages * log_prob).mean(), advantages


@register_criterion("resa_label_smoothed_cross_entropy", dataclass=ReSALabelSmoothedCrossEntropyConfig)
class ReSALabelSmoothedCrossEntropyCriterion(SelectiveLabelSmoothedCrossEntropyCriterion):
    def __init__(
        self,
        task,
        sentence_avg,
        label_smoothing,
        ignore_prefix_size=0,
        report_accuracy=False,
        select_scale=0.0,
        nce_scale=0.0,
        select_penalty_form="rate",
        resa_lambda=0.01,
        resa_baseline="batch",
        resa_baseline_momentum=0.9,
        resa_policy_weight=1.0,
        resa_reward_loss="token_mean",
    ):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy,
                         select_scale, nce_scale, select_penalty_form)
        for name, value in (("--resa-lambda", resa_lambda), ("--resa-policy-weight", resa_policy_weight)):
            if not 0 <= value < math.inf:
                raise ValueError(f"{name} must be finite and >= 0, got {value}")
        if resa_baseline not in BASELINES:
            raise ValueError(f"--resa-baseline must be one of {BASELINES}, got {resa_baseline!r}")
        if not 0 <= resa_baseline_momentum < 1:
            raise ValueError(f"--resa-baseline-momentum must lie in [0, 1), got {resa_baseline_momentum}")
        if resa_reward_loss not in REWARD_LOSSES:
            raise ValueError(f"--resa-reward-loss must be one of {REWARD_LOSSES}, got {resa_reward_loss!r}")
        self.resa_lambda = float(resa_lambda)
        self.baseline_mode = resa_baseline
        self.momentum = float(resa_baseline_momentum)
        self.policy_weight = float(resa_policy_weight)
        self.reward_loss = resa_reward_loss
        self.running_baseline: Optional[float] = None
        self._last: Optional[Tuple[Tensor, list]] = None

    def compute_loss(self, model, net_output, sample, reduce=True):
        """As the parent's; also keeps the per-sentence loss and the selection stats."""
        loss, nll_loss = super().compute_loss(model, net_output, sample, reduce=False)
        bsz = sample["target"].size(0)
        per_sentence = loss.view(bsz, -1).sum(1)
        if self.reward_loss == "token_mean":
            target = sample["target"][:, self.ignore_prefix_size:]
            per_sentence = per_sentence / target.ne(self.padding_idx).sum(1).clamp(min=1)
        self._last = (per_sentence.detach(), net_output[1].get("selection_stats") or [])
        if reduce:
            return loss.sum(), nll_loss.sum()
        return loss, nll_loss

    def baseline(self, rewards: Tensor) -> Tensor:
        if self.baseline_mode == "batch":
            return leave_one_out_mean(rewards)
        if self.baseline_mode == "running":
            batch_mean = float(rewards.mean())
            if self.running_baseline is None:
                self.running_baseline = batch_mean
            value = torch.full_like(rewards, self.running_baseline)
            self.running_baseline = self.momentum * self.running_baseline + (1 - self.momentum) * batch_mean
            return value
        return torch.zeros_like(rewards)

    def policy_loss(self, stats: List[dict], sentence_loss: Tensor):
        """-> (PG scalar tensor or None, logging dict) for the ReSA layers in ``stats``."""
        layers = [s for s in stats if "log_prob" in s]
        if not layers:
            return None, {}
        log_prob = sum(s["log_prob"] for s in layers)
        if not log_prob.requires_grad:
            return None, {}
        if all(bool(s.get("warmup", torch.tensor(False))) for s in layers):
            return (log_prob * 0.0).sum(), {}
        frac = sum(s["select_frac"] for s in layers) / len(layers)
        rewards = -sentence_loss.to(frac.dtype) - self.resa_lambda * frac
        pg, advantages = policy_gradient_loss(rewards, self.baseline(rewards), log_prob)
        return pg, {
            "resa_n": rewards.numel(),
            "resa_r": utils.item(rewards.sum()),
            "resa_r2": utils.item((rewards**2).sum()),
            "resa_a2": utils.item((advantages**2).sum()),
        }

    def forward(self, model, sample, reduce=True):
        self._last = None
        loss, sample_size, logging_output = super().forward(model, sample, reduce=reduce)
        sentence_loss, stats = self._last
        self._last = None
        for s in stats:
            if "head_selected" in s:
                i = s["layer"]
                for key in ("head_selected", "dep_selected", "tokens", "pair_selected", "pair_total"):
                    logging_output[f"resa_{key}_{i}"] = utils.item(s[key])
        if model.training:
            pg, pg_logs = self.policy_loss(stats, sentence_loss)
            if pg is not None:
                loss = loss + self.policy_weight * pg * sample_size
                logging_output["resa_pg"] = utils.item(pg.detach()) * sample_size
                logging_output.update(pg_logs)
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)

        def total(key):
            return sum(log.get(key, 0) for log in logging_outputs)

        sample_size = total("sample_size")
        if any("resa_pg" in log for log in logging_outputs) and sample_size:
            metrics.log_scalar("resa_pg", total("resa_pg") / sample_size, sample_size, round=4)
        n = total("resa_n")
        if n:
            raw, adv = total("resa_r2") / n, total("resa_a2") / n
            metrics.log_scalar("resa_reward", total("resa_r") / n, n, round=4)
            metrics.log_scalar("resa_msq_raw", raw, n, round=4)
            metrics.log_scalar("resa_msq_adv", adv, n, round=4)
            if raw > 0:
                metrics.log_scalar("resa_var_ratio", adv / raw, n, round=4)
        layers = sorted(
            {int(k.rsplit("_", 1)[1]) for log in logging_outputs for k in log if k.startswith("resa_tokens_")}
        )
        for i in layers:
            tokens, pairs = total(f"resa_tokens_{i}"), total(f"resa_pair_total_{i}")
            if tokens:
                metrics.log_scalar(f"resa_head_{i}", total(f"resa_head_selected_{i}") / tokens, tokens, round=3)
                metrics.log_scalar(f"resa_dep_{i}", total(f"resa_dep_selected_{i}") / tokens, tokens, round=3)
            if pairs:
                metrics.log_scalar(f"resa_pair_{i}", total(f"resa_pair_selected_{i}") / pairs, pairs, round=3)
