"""Label-smoothed cross-entropy plus the SSAN selector regularisers (DESIGN.md section 1).

fairseq criteria return a SUM that the trainer divides by ``sample_size``; a batch-mean
regulariser R is therefore added as ``R * sample_size``:

    loss = CE_sum + sample_size * sum_layers(select_scale * S_l + nce_scale * N_l)

S_l: per head, the mean over non-pad queries of the fraction of non-pad keys selected
(``--select-penalty-form rate``, default) or of their number (``count``, the reference's form),
summed over heads. N_l: mean over pairs and heads of -H(pi), the negative binary entropy of the
policy. Logged per selective layer L: ``sel_L`` (selection rate over non-pad pairs); overall
``sel`` and ``pol_ent`` (mean policy entropy, nats).
"""

import math
import re
from dataclasses import dataclass, field

import torch
from fairseq import metrics, utils
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from omegaconf import II


@dataclass
class SelectiveLabelSmoothedCrossEntropyConfig(LabelSmoothedCrossEntropyCriterionConfig):
    select_scale: float = field(
        default=0.0, metadata={"help": "weight of the selection regulariser (>= 0)"}
    )
    nce_scale: float = field(
        default=0.0, metadata={"help": "weight of the negative policy entropy (>= 0)"}
    )
    select_penalty_form: str = field(
        default="rate",
        metadata={"help": "selection regulariser per query: 'rate' (fraction of keys) or "
                          "'count' (number of keys, the reference's form)"},
    )
    sentence_avg: bool = II("optimization.sentence_avg")


SELECTION_KEY = re.compile(r"^sel_selected_(\d+)$")


def selection_regulariser(stats, select_scale: float, nce_scale: float, form: str):
    """sum over selective layers of select_scale * S_l + nce_scale * N_l (a scalar tensor)."""
    key = "select_rate" if form == "rate" else "select_count"
    total = 0.0
    for layer in stats:
        if select_scale:
            total = total + select_scale * layer[key]
        if nce_scale:
            total = total + nce_scale * layer["neg_entropy"]
    return total


def selection_logging(stats):
    """Summable logging entries for each selective layer."""
    out = {}
    for layer in stats:
        i = layer["layer"]
        out[f"sel_selected_{i}"] = utils.item(layer["selected"])
        out[f"sel_pairs_{i}"] = utils.item(layer["pairs"])
        out[f"sel_entropy_{i}"] = utils.item(layer["entropy_sum"])
    return out


def reduce_selection_metrics(logging_outputs) -> None:
    layers = sorted(
        {int(m.group(1)) for log in logging_outputs for k in log for m in [SELECTION_KEY.match(k)] if m}
    )
    all_selected = all_pairs = all_entropy = 0.0
    for i in layers:
        selected = sum(log.get(f"sel_selected_{i}", 0) for log in logging_outputs)
        pairs = sum(log.get(f"sel_pairs_{i}", 0) for log in logging_outputs)
        entropy = sum(log.get(f"sel_entropy_{i}", 0) for log in logging_outputs)
        if pairs > 0:
            metrics.log_scalar(f"sel_{i}", selected / pairs, pairs, round=3)
        all_selected, all_pairs, all_entropy = all_selected + selected, all_pairs + pairs, all_entropy + entropy
    if all_pairs > 0:
        metrics.log_scalar("sel", all_selected / all_pairs, all_pairs, round=3)
        metrics.log_scalar("pol_ent", all_entropy / all_pairs, all_pairs, round=3)


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
        select_scale=0.0,
        nce_scale=0.0,
        select_penalty_form="rate",
    ):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        if not 0 <= label_smoothing < 1:
            raise ValueError(f"--label-smoothing must lie in [0, 1), got {label_smoothing}")
        for name, value in (("--select-scale", select_scale), ("--nce-scale", nce_scale)):
            if not 0 <= value < math.inf:
                raise ValueError(f"{name} must be finite and >= 0, got {value}")
        if select_penalty_form not in ("rate", "count"):
            raise ValueError(
                f"--select-penalty-form must be 'rate' or 'count', got {select_penalty_form!r}"
            )
        self.select_scale = float(select_scale)
        self.nce_scale = float(nce_scale)
        self.select_penalty_form = select_penalty_form

    def forward(self, model, sample, reduce=True):
        net_output = model(**sample["net_input"])
        loss, nll_loss = self.compute_loss(model, net_output, sample, reduce=reduce)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        stats = net_output[1].get("selection_stats") or []
        regulariser = selection_regulariser(
            stats, self.select_scale, self.nce_scale, self.select_penalty_form
        )
        if torch.is_tensor(regulariser):
            loss = loss + regulariser * sample_size
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
            "ssan_reg": utils.item(regulariser * sample_size) if torch.is_tensor(regulariser) else 0.0,
            **selection_logging(stats),
        }
        if self.report_accuracy:
            n_correct, total = self.compute_accuracy(model, net_output, sample)
            logging_output["n_correct"] = utils.item(n_correct.data)
            logging_output["total"] = utils.item(total.data)
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        sample_size = sum(log.get("sample_size", 0) for log in logging_outputs)
        reg = sum(log.get("ssan_reg", 0) for log in logging_outputs)
        if reg and sample_size:
            metrics.log_scalar("ssan_reg", reg / sample_size, sample_size, round=4)
        reduce_selection_metrics(logging_outputs)
