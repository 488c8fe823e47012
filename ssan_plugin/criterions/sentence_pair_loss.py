"""``sentence_pair_loss``: the selective criterion for the ``sentence_pair`` task.

Per pair b, the task loss L_b is the sum over the model's heads of

- entailment: fairseq's label-smoothed cross-entropy over the 3 labels (``--label-smoothing``,
  default 0);
- relatedness, ``--relatedness-loss kl`` (task option, read from the task when the criterion
  is built: ``relatedness_loss``): KL(p_b || q_b) between Tai et al.'s (2015) target
  distribution over the scores 1..5 (``pairs.relatedness.relatedness_distribution``) and the
  model's softmax; ``mse``: (score_b - y_b)^2 with score = 1 + 4 sigmoid(output).

Everything else is ``selective_label_smoothed_cross_entropy``'s (its methods, not a copy): the
selection regularisers ``--select-scale`` / ``--nce-scale`` (times sample_size), REINFORCE for
sampled selectors with the pair's loss in the reward (the model gives per-pair log-probabilities
of both sentences' samples), the selection logging, and the errors for a term with nothing to
act on. ``sample_size`` = pairs. Logged: ``loss`` (with regularisers), ``nll_loss`` = mean task
loss per pair (no smoothing), both in base 2 as fairseq logs them; ``accuracy`` (entailment,
percent), ``mse`` (relatedness); ``wpb``/``wps`` count pairs.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from fairseq import metrics, utils
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

from ..pairs.relatedness import relatedness_distribution, relatedness_scores
from .selective_label_smoothed_cross_entropy import (
    SelectiveLabelSmoothedCrossEntropyConfig,
    SelectiveLabelSmoothedCrossEntropyCriterion,
)
from ..errors import OptionError


@dataclass
class SentencePairLossConfig(SelectiveLabelSmoothedCrossEntropyConfig):
    pass


@register_criterion("sentence_pair_loss", dataclass=SentencePairLossConfig)
class SentencePairLossCriterion(SelectiveLabelSmoothedCrossEntropyCriterion):
    @classmethod
    def build_criterion(cls, cfg, task):
        if cfg.ignore_prefix_size:
            raise OptionError("--ignore-prefix-size does not apply to sentence_pair_loss")
        if not hasattr(task, "heads"):
            raise OptionError("sentence_pair_loss needs --task sentence_pair")
        criterion = super().build_criterion(cfg, task)
        criterion.relatedness_loss = task.relatedness_loss  # the task's --relatedness-loss
        return criterion

    def pair_losses(self, logits, target):
        """-> (loss (B,) with smoothing, nll (B,) without, logging entries)."""
        loss = nll = 0.0
        logs = {}
        if "entailment" in logits:
            lprobs = F.log_softmax(logits["entailment"].float(), dim=-1)
            gold = target["entailment"]
            smoothed, plain = label_smoothed_nll_loss(lprobs, gold, self.eps, reduce=False)
            loss, nll = loss + smoothed.squeeze(-1), nll + plain.squeeze(-1)
            logs["n_correct"] = utils.item(lprobs.argmax(-1).eq(gold).sum())
            logs["total"] = gold.numel()
        if "relatedness" in logits:
            output = logits["relatedness"].float()
            gold = target["relatedness"].float()
            predicted = relatedness_scores(output, self.relatedness_loss)
            if self.relatedness_loss == "mse":
                rel = (predicted - gold) ** 2
            else:
                p = relatedness_distribution(gold, output.size(-1))
                rel = F.kl_div(F.log_softmax(output, dim=-1), p, reduction="none").sum(-1)
            loss, nll = loss + rel, nll + rel
            logs["rel_sq_err"] = utils.item(((predicted - gold) ** 2).sum())
            logs["rel_n"] = gold.numel()
        return loss, nll, logs

    def forward(self, model, sample, reduce=True):
        if not self._model_checked:
            self.check_model(model)
        logits, extra = model(**sample["net_input"])
        per_pair, nll, logs = self.pair_losses(logits, sample["target"])
        bsz = per_pair.size(0)
        loss = per_pair.sum() if reduce else per_pair
        sample_size = bsz
        records = extra.get("selection_stats") or []
        training = model.training and torch.is_grad_enabled()
        regulariser = self.regulariser(records, training)
        if torch.is_tensor(regulariser):
            loss = loss + regulariser * sample_size
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll.sum().data,
            "ntokens": bsz,
            "nsentences": bsz,
            "sample_size": sample_size,
            "ssan_reg": utils.item(regulariser * sample_size) if torch.is_tensor(regulariser) else 0.0,
            **self.selection_logging(records),
            **logs,
        }
        sampled = [record for record in records if record.log_prob is not None]
        if training and sampled:
            pg, pg_logs = self.policy_loss(sampled, per_pair.detach())
            loss = loss + self.policy_weight * pg * sample_size
            logging_output["resa_pg"] = utils.item(pg.detach()) * sample_size
            logging_output.update(pg_logs)
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        n = sum(log.get("rel_n", 0) for log in logging_outputs)
        if n:
            metrics.log_scalar("mse", sum(log.get("rel_sq_err", 0) for log in logging_outputs) / n,
                               n, round=4)
