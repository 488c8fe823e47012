"""``srl_cross_entropy``: token-level cross-entropy for the ``srl`` task, plus the selector
regularisers of the chosen encoder (the SSAN criterion's code, reused by inheritance).

The model gives (B, T, L) label scores; every non-pad word is one prediction:

    loss = sum over words of CE(word) + sample_size * sum_layers(select_scale * S_l + nce_scale * N_l)

with ``sample_size`` = number of words (``--sentence-avg``: instances). Words whose gold label
did not occur in training (it is ``<unk>`` in the label dictionary) are left out of the
cross-entropy and of the accuracy. Logged: ``loss``, ``nll_loss`` (base 2, per word), token
``accuracy`` (argmax, unconstrained; ``--report-accuracy``), ``ssan_reg``, ``sel``/``sel_L``/
``pol_ent`` as for translation. ``--label-smoothing`` is available (default 0).
"""

from dataclasses import dataclass

from fairseq.criterions import register_criterion

from .selective_label_smoothed_cross_entropy import (
    SelectiveLabelSmoothedCrossEntropyConfig,
    SelectiveLabelSmoothedCrossEntropyCriterion,
)


@dataclass
class SRLCrossEntropyConfig(SelectiveLabelSmoothedCrossEntropyConfig):
    pass


@register_criterion("srl_cross_entropy", dataclass=SRLCrossEntropyConfig)
class SRLCrossEntropyCriterion(SelectiveLabelSmoothedCrossEntropyCriterion):
    def __init__(self, task, sentence_avg, label_smoothing, ignore_prefix_size=0,
                 report_accuracy=False, select_scale=0.0, nce_scale=0.0,
                 select_penalty_form="rate"):
        if ignore_prefix_size:
            raise ValueError("--ignore-prefix-size does not apply to srl_cross_entropy")
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size,
                         report_accuracy, select_scale, nce_scale, select_penalty_form)
        self.unk_idx = task.target_dictionary.unk()

    def get_lprobs_and_target(self, model, net_output, sample):
        """(B*T, L) log-probabilities and (B*T,) targets; unknown labels become padding."""
        lprobs, target = super().get_lprobs_and_target(model, net_output, sample)
        return lprobs, target.masked_fill(target.eq(self.unk_idx), self.padding_idx)
