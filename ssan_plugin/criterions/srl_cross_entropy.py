"""``srl_cross_entropy``: the selective criterion for the ``srl`` task's token tagging.

The model gives (B, T, L) label scores; every non-pad word is one prediction, and everything
else (regularisers, REINFORCE, logging) is ``selective_label_smoothed_cross_entropy``'s, with
``sample_size`` = number of words (``--sentence-avg``: instances). Words whose gold label did
not occur in training (``<unk>`` in the label dictionary) are left out of the loss and of the
token ``accuracy`` (``--report-accuracy``; argmax, unconstrained). ``--label-smoothing``
defaults to 0 here as in fairseq.
"""

from dataclasses import dataclass

from fairseq.criterions import register_criterion

from .selective_label_smoothed_cross_entropy import (
    SelectiveLabelSmoothedCrossEntropyConfig,
    SelectiveLabelSmoothedCrossEntropyCriterion,
)
from ..errors import OptionError


@dataclass
class SRLCrossEntropyConfig(SelectiveLabelSmoothedCrossEntropyConfig):
    pass


@register_criterion("srl_cross_entropy", dataclass=SRLCrossEntropyConfig)
class SRLCrossEntropyCriterion(SelectiveLabelSmoothedCrossEntropyCriterion):
    @classmethod
    def build_criterion(cls, cfg, task):
        if cfg.ignore_prefix_size:
            raise OptionError("--ignore-prefix-size does not apply to srl_cross_entropy")
        return super().build_criterion(cfg, task)

    def get_lprobs_and_target(self, model, net_output, sample):
        """(B*T, L) log-probabilities and (B*T,) targets; unknown labels become padding."""
        lprobs, target = super().get_lprobs_and_target(model, net_output, sample)
        unk = self.task.target_dictionary.unk()
        return lprobs, target.masked_fill(target.eq(unk), self.padding_idx)
