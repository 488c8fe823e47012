"""``resa_label_smoothed_cross_entropy``: a deprecated alias, kept so that existing command
lines keep working. ``selective_label_smoothed_cross_entropy`` now serves every encoder and
switches REINFORCE on by itself; the options are the same."""

import logging
from dataclasses import dataclass

from fairseq.criterions import register_criterion

from .selective_label_smoothed_cross_entropy import (
    SelectiveLabelSmoothedCrossEntropyConfig,
    SelectiveLabelSmoothedCrossEntropyCriterion,
)

logger = logging.getLogger(__name__)


@dataclass
class ReSALabelSmoothedCrossEntropyConfig(SelectiveLabelSmoothedCrossEntropyConfig):
    pass


@register_criterion("resa_label_smoothed_cross_entropy", dataclass=ReSALabelSmoothedCrossEntropyConfig)
class ReSALabelSmoothedCrossEntropyCriterion(SelectiveLabelSmoothedCrossEntropyCriterion):
    @classmethod
    def build_criterion(cls, cfg, task):
        logger.warning(
            "--criterion resa_label_smoothed_cross_entropy is deprecated: use "
            "selective_label_smoothed_cross_entropy (same options; REINFORCE is automatic)"
        )
        return super().build_criterion(cfg, task)
