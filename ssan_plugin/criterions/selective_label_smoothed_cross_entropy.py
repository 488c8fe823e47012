"""``selective_label_smoothed_cross_entropy``: one criterion for every encoder variant.

Label-smoothed cross-entropy (fairseq's), plus what the model's selection records ask for
(``extra["selection_stats"]``, a list of modules.selection.SelectionStats, one per selective
layer, encoder and decoder sites alike; empty for fairseq's Transformer, DiSAN and Bi-BloSAN):

    loss = CE_sum + sample_size * sum_layers(select_scale * S_l + nce_scale * N_l)
                  + sample_size * policy_weight * PG                (REINFORCE, see below)

fairseq divides the returned sum by ``sample_size``, so each batch-mean term is added times
``sample_size``. S_l: the layer's pair selection rate (``--select-penalty-form rate``: per head,
mean over non-pad queries of the fraction of non-pad keys selected, summed over heads) or count
(``count``, the reference's form); the same quantity for every selector. N_l: mean -H(pi).

REINFORCE switches on in training when a record carries ``log_prob`` (ReSA's samplers with
``--resa-estimator reinforce``). Per sentence b, with L_b its label-smoothed loss (divided by
its target tokens with ``--resa-reward-loss token_mean``, the default) and frac_b the selected
fraction of its token slots averaged over the sampling layers:

    R_b = -L_b - resa_lambda * frac_b;    A_b = R_b - baseline_b (``--resa-baseline``: batch =
    leave-one-out batch mean, running = running mean of past batch means, none = 0)
    PG  = -mean_b(A_b * log pi(z_b)),     A detached: only the samplers get this gradient.

During a sampler warm-up PG is 0 * log pi (the samplers stay in the graph for DDP). ``loss`` in
the logs includes the regularisers and excludes PG. Logged: ``sel_L`` (pair selection rate of
layer L; L is "3" for encoder layer 3, "dec3" / "cross3" for decoder layer 3's self / cross
attention), ``sel`` (over every selective layer), ``pol_ent`` (mean policy entropy, nats), ``ssan_reg``; for token selectors
``resa_head_L``, ``resa_dep_L`` (token rates); with REINFORCE ``resa_pg``, ``resa_reward``,
``resa_msq_raw`` = mean R^2, ``resa_msq_adv`` = mean A^2 and their ratio ``resa_var_ratio``
(below 1: the variance the baseline saves).

A term that has nothing to act on is an error, never a silent no-op: a regulariser weight on a
model without selector, or statistics without gradient in training (``--checkpoint-activations``
recomputes layers without autograd, which would cut the regularisers and REINFORCE off).
"""

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
from fairseq import metrics, utils
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
    label_smoothed_nll_loss,
)
from fairseq.dataclass import ChoiceEnum
from omegaconf import II
from torch import Tensor

from ..modules.selection import (SelectionReporter, SelectionRequest, SelectionStats, label_order,
                                 request_selection)
from ..errors import OptionError

PENALTY_FORMS = ("rate", "count")
BASELINES = ("batch", "running", "none")
REWARD_LOSSES = ("token_mean", "sum")


@dataclass
class SelectiveLabelSmoothedCrossEntropyConfig(LabelSmoothedCrossEntropyCriterionConfig):
    select_scale: float = field(
        default=0.0, metadata={"help": "weight of the pair selection regulariser (>= 0)"}
    )
    nce_scale: float = field(
        default=0.0, metadata={"help": "weight of the negative policy entropy (>= 0)"}
    )
    select_penalty_form: ChoiceEnum(list(PENALTY_FORMS)) = field(
        default="rate",
        metadata={"help": "selection regulariser per query: 'rate' (fraction of keys) or "
                          "'count' (number of keys, the reference's form)"},
    )
    resa_lambda: float = field(
        default=0.01, metadata={"help": "REINFORCE: sparsity penalty lambda in the reward "
                                        "(>= 0; paper: 0.005, 0.01, 0.02)"}
    )
    resa_baseline: ChoiceEnum(list(BASELINES)) = field(
        default="batch", metadata={"help": "REINFORCE baseline: batch (leave-one-out batch "
                                           "mean), running (running mean), none"}
    )
    resa_baseline_momentum: float = field(
        default=0.9, metadata={"help": "REINFORCE: momentum of the running baseline, in [0, 1)"}
    )
    resa_policy_weight: float = field(
        default=1.0, metadata={"help": "REINFORCE: weight of the policy-gradient loss (>= 0)"}
    )
    resa_reward_loss: ChoiceEnum(list(REWARD_LOSSES)) = field(
        default="token_mean",
        metadata={"help": "REINFORCE: sentence loss in the reward, token_mean or sum"},
    )
    sentence_avg: bool = II("optimization.sentence_avg")


_DEFAULTS = SelectiveLabelSmoothedCrossEntropyConfig  # class attributes hold the defaults


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


def check_finite_nonnegative(**options) -> None:
    for name, value in options.items():
        if not 0 <= value < math.inf:
            raise OptionError(f"--{name.replace('_', '-')} must be finite and >= 0, got {value}")


@register_criterion(
    "selective_label_smoothed_cross_entropy", dataclass=SelectiveLabelSmoothedCrossEntropyConfig
)
class SelectiveLabelSmoothedCrossEntropyCriterion(LabelSmoothedCrossEntropyCriterion):
    def __init__(
        self,
        task,
        sentence_avg,
        label_smoothing,
        ignore_prefix_size=0,
        report_accuracy=False,
        select_scale=_DEFAULTS.select_scale,
        nce_scale=_DEFAULTS.nce_scale,
        select_penalty_form=_DEFAULTS.select_penalty_form,
        resa_lambda=_DEFAULTS.resa_lambda,
        resa_baseline=_DEFAULTS.resa_baseline,
        resa_baseline_momentum=_DEFAULTS.resa_baseline_momentum,
        resa_policy_weight=_DEFAULTS.resa_policy_weight,
        resa_reward_loss=_DEFAULTS.resa_reward_loss,
    ):
        """fairseq passes every field of the config by name; defaults are the config's."""
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        if not 0 <= label_smoothing < 1:
            raise OptionError(f"--label-smoothing must lie in [0, 1), got {label_smoothing}")
        check_finite_nonnegative(select_scale=select_scale, nce_scale=nce_scale,
                                 resa_lambda=resa_lambda, resa_policy_weight=resa_policy_weight)
        for option, value, allowed in (
            ("--select-penalty-form", select_penalty_form, PENALTY_FORMS),
            ("--resa-baseline", resa_baseline, BASELINES),
            ("--resa-reward-loss", resa_reward_loss, REWARD_LOSSES),
        ):
            if value not in allowed:
                raise ValueError(f"{option} must be one of {allowed}, got {value!r}")
        if not 0 <= resa_baseline_momentum < 1:
            raise OptionError(f"--resa-baseline-momentum must lie in [0, 1), got {resa_baseline_momentum}")
        self.select_scale = float(select_scale)
        self.nce_scale = float(nce_scale)
        self.select_penalty_form = str(select_penalty_form)
        self.resa_lambda = float(resa_lambda)
        self.baseline_mode = str(resa_baseline)
        self.momentum = float(resa_baseline_momentum)
        self.policy_weight = float(resa_policy_weight)
        self.reward_loss = str(resa_reward_loss)
        self.running_baseline: Optional[float] = None
        self._model_checked = False
        # {layer label: token selector?} of the model's selective layers (check_model)
        self._selective_layers: Dict[str, bool] = {}

    # -- the pieces of forward ----------------------------------------------------------------

    def check_model(self, model) -> None:
        """Once: a regulariser weight needs a model that selects; the selective layers report
        their records in every forward, validation included, since this criterion logs them
        (by default only training forwards do), and keep a graph only for the terms this loss
        weights: one typed SelectionRequest to every selective layer."""
        if (self.select_scale or self.nce_scale) and not any(
                isinstance(m, SelectionReporter) for m in model.modules()):
            raise ValueError(
                "--select-scale / --nce-scale weight a selector, but this model has none "
                "(use an SSAN or ReSA encoder, or drop the options)"
            )
        request_selection(model, SelectionRequest(statistics=True,
                                                  rate_gradient=bool(self.select_scale),
                                                  entropy_gradient=bool(self.nce_scale)))
        self._selective_layers = {  # (an encoder's keys are its layer indices, a decoder's labels)
            str(label): attention.token_selector for part in model.modules()
            if callable(getattr(part, "selective_layers", None))
            for label, attention in part.selective_layers().items()}
        self._model_checked = True

    @staticmethod
    def require_gradient(term: Tensor, what: str) -> None:
        if not term.requires_grad:
            raise RuntimeError(
                f"the selection {what} carries no gradient in training, so its term would not "
                "train anything; --checkpoint-activations recomputes encoder layers without "
                "autograd and cannot be combined with selection regularisers or REINFORCE"
            )

    def regulariser(self, records: List[SelectionStats], training: bool):
        """sum over layers of select_scale * S_l + nce_scale * N_l (scalar tensor, or 0.0)."""
        total = 0.0
        for record in records:
            if self.select_scale:
                term = record.regulariser(self.select_penalty_form)
                if training and not record.in_warmup:
                    self.require_gradient(term, "rate")
                total = total + self.select_scale * term
            if self.nce_scale:
                if training and not record.in_warmup:
                    self.require_gradient(record.neg_entropy, "entropy")
                total = total + self.nce_scale * record.neg_entropy
        return total

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

    def policy_loss(self, sampled: List[SelectionStats], sentence_loss: Tensor):
        """-> (PG scalar tensor, logging dict) over the records that carry a log-probability."""
        log_prob = sum(record.log_prob for record in sampled)
        self.require_gradient(log_prob, "log-probability")
        if all(record.in_warmup for record in sampled):
            return (log_prob * 0.0).sum(), {}
        frac = sum(record.sentence_token_rate for record in sampled) / len(sampled)
        rewards = -sentence_loss.to(frac.dtype) - self.resa_lambda * frac
        pg, advantages = policy_gradient_loss(rewards, self.baseline(rewards), log_prob)
        return pg, {
            "resa_n": rewards.numel(),
            "resa_r": utils.item(rewards.sum()),
            "resa_r2": utils.item((rewards**2).sum()),
            "resa_a2": utils.item((advantages**2).sum()),
        }

    @torch.no_grad()
    def sentence_losses(self, lprobs: Tensor, target: Tensor, bsz: int) -> Tensor:
        """(B,) loss per sentence (the reward's), summed or averaged over its target tokens;
        lprobs (B*T, V) and target (B*T,) as get_lprobs_and_target returns them."""
        token_loss, _ = label_smoothed_nll_loss(
            lprobs, target, self.eps, ignore_index=self.padding_idx, reduce=False
        )
        per_sentence = token_loss.view(bsz, -1).sum(1)
        if self.reward_loss == "token_mean":
            per_sentence = per_sentence / target.view(bsz, -1).ne(self.padding_idx).sum(1).clamp(min=1)
        return per_sentence

    # -- fairseq's interface ------------------------------------------------------------------

    def forward(self, model, sample, reduce=True):
        if not self._model_checked:
            self.check_model(model)
        net_output = model(**sample["net_input"])
        lprobs, target = self.get_lprobs_and_target(model, net_output, sample)
        loss, nll_loss = label_smoothed_nll_loss(  # exactly fairseq's (its summation order)
            lprobs, target, self.eps, ignore_index=self.padding_idx, reduce=reduce
        )
        bsz = sample["target"].size(0)
        sample_size = bsz if self.sentence_avg else sample["ntokens"]
        records: List[SelectionStats] = net_output[1].get("selection_stats") or []
        training = model.training and torch.is_grad_enabled()

        regulariser = self.regulariser(records, training)
        if torch.is_tensor(regulariser):
            loss = loss + regulariser * sample_size
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": bsz,
            "sample_size": sample_size,
            "ssan_reg": utils.item(regulariser * sample_size) if torch.is_tensor(regulariser) else 0.0,
            **self.selection_logging(records),
        }
        sampled = [record for record in records if record.log_prob is not None]
        if training and sampled:
            pg, pg_logs = self.policy_loss(sampled, self.sentence_losses(lprobs, target, bsz))
            loss = loss + self.policy_weight * pg * sample_size
            logging_output["resa_pg"] = utils.item(pg.detach()) * sample_size
            logging_output.update(pg_logs)
        if self.report_accuracy:
            mask = target.ne(self.padding_idx)
            logging_output["n_correct"] = utils.item(lprobs.argmax(1).eq(target).masked_select(mask).sum())
            logging_output["total"] = utils.item(mask.sum())
        return loss, sample_size, logging_output

    def selection_logging(self, records: List[SelectionStats]) -> Dict[str, float]:
        """Summable logging entries per selective layer: the same keys in every forward, zero
        for a layer that did not run (layer drop), since fairseq sums the logging outputs of
        distributed ranks as one flat tensor of the first rank's keys."""
        out = {}
        for i, token_selector in self._selective_layers.items():
            keys = ["sel_selected", "sel_pairs", "sel_entropy", "sel_decisions"]
            if token_selector:
                keys += ["resa_head_selected", "resa_dep_selected", "resa_tokens"]
            out.update({f"{key}_{i}": 0.0 for key in keys})
        for record in records:
            i = record.label
            out[f"sel_selected_{i}"] = utils.item(record.pairs_selected)
            out[f"sel_pairs_{i}"] = utils.item(record.pairs_possible)
            out[f"sel_entropy_{i}"] = utils.item(record.entropy_sum)
            out[f"sel_decisions_{i}"] = utils.item(record.decisions)
            if record.tokens is not None:
                out[f"resa_head_selected_{i}"] = utils.item(record.queries_selected)
                out[f"resa_dep_selected_{i}"] = utils.item(record.keys_selected)
                out[f"resa_tokens_{i}"] = utils.item(record.tokens)
        return out

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)

        def total(key):
            return sum(log.get(key, 0) for log in logging_outputs)

        sample_size = total("sample_size")
        reg = total("ssan_reg")
        if reg and sample_size:
            metrics.log_scalar("ssan_reg", reg / sample_size, sample_size, round=4)

        layers = sorted({k.rsplit("_", 1)[1] for log in logging_outputs for k in log
                         if k.startswith("sel_pairs_")}, key=label_order)
        all_selected = all_pairs = all_entropy = all_decisions = 0.0
        for i in layers:
            selected, pairs = total(f"sel_selected_{i}"), total(f"sel_pairs_{i}")
            entropy, decisions = total(f"sel_entropy_{i}"), total(f"sel_decisions_{i}")
            if pairs > 0:
                metrics.log_scalar(f"sel_{i}", selected / pairs, pairs, round=3)
            all_selected, all_pairs = all_selected + selected, all_pairs + pairs
            all_entropy, all_decisions = all_entropy + entropy, all_decisions + decisions
            tokens = total(f"resa_tokens_{i}")
            if tokens:
                metrics.log_scalar(f"resa_head_{i}", total(f"resa_head_selected_{i}") / tokens, tokens, round=3)
                metrics.log_scalar(f"resa_dep_{i}", total(f"resa_dep_selected_{i}") / tokens, tokens, round=3)
        if all_pairs > 0:
            metrics.log_scalar("sel", all_selected / all_pairs, all_pairs, round=3)
        if all_decisions > 0:
            metrics.log_scalar("pol_ent", all_entropy / all_decisions, all_decisions, round=3)

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
