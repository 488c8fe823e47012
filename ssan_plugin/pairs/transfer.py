"""A trained translation encoder into the pair model's encoder (``--encoder-init``).

The pair encoder and the translation model's encoder are the same fairseq encoder classes
(``VariantTransformerEncoder`` / fairseq's TransformerEncoder), so their state-dict names agree:
every ``encoder.*`` tensor of the translation checkpoint whose name the pair encoder has is
copied; the shapes must agree (same width, layers, FFN, positions and dictionary: prepare the
pair data with ``--translation-data`` of the translation's data-bin). Pair-encoder tensors the
checkpoint lacks (e.g. SSAN's policy projections when starting from a plain Transformer) keep
their fresh initialisation and are logged as new; checkpoint tensors the pair encoder lacks
are logged as dropped. The pooling and the classifier MLP are always new (not part of the
encoder). The checkpoint is loaded with torch's weights_only check (``ssan_plugin.cli``).
"""

import logging
from dataclasses import dataclass
from typing import List

import torch

from ..errors import InputError
from ..cli.checkpoints import load_checkpoint

logger = logging.getLogger(__name__)

PREFIX = "encoder."


class TransferError(InputError):
    """A checkpoint whose encoder does not fit the pair encoder."""


@dataclass
class TransferReport:
    loaded: List[str]
    new: List[str]
    dropped: List[str]


def translation_encoder_state(path) -> dict:
    """{name without ``encoder.``: tensor} of a translation checkpoint's encoder."""
    state = load_checkpoint(path, what="--encoder-init")
    encoder = {k[len(PREFIX):]: v for k, v in state["model"].items() if k.startswith(PREFIX)}
    if not encoder:
        raise TransferError(f"--encoder-init {path}: the checkpoint has no encoder.* weights "
                            "(a translation checkpoint is expected)")
    return encoder


def layer_indices(names) -> List[int]:
    return sorted({int(name.split(".")[1]) for name in names if name.startswith("layers.")})


@torch.no_grad()
def init_encoder_from_translation(encoder: torch.nn.Module, path) -> TransferReport:
    source = translation_encoder_state(path)
    target = encoder.state_dict()
    if layer_indices(source) != layer_indices(target):
        raise TransferError(
            f"--encoder-init {path}: the checkpoint's encoder has {len(layer_indices(source))} "
            f"layers, the pair encoder {len(layer_indices(target))} (--encoder-layers); the pair "
            "encoder needs the translation encoder's shape")
    mismatched = [f"{k} {tuple(source[k].shape)} vs {tuple(v.shape)}" for k, v in target.items()
                  if k in source and source[k].shape != v.shape]
    if mismatched:
        raise TransferError(
            f"--encoder-init {path}: shapes differ (checkpoint vs pair encoder) for "
            f"{', '.join(mismatched[:3])}{' ...' if len(mismatched) > 3 else ''}; the pair "
            "encoder needs the translation encoder's shape (e.g. pair_classifier_small for a "
            "*_small translation model) and dictionary (ssan-prepare-pairs --translation-data)")
    loaded = sorted(k for k in target if k in source)
    new = sorted(k for k in target if k not in source)
    dropped = sorted(k for k in source if k not in target)
    encoder.load_state_dict({k: source.get(k, v) for k, v in target.items()}, strict=True)
    logger.info("--encoder-init %s: %d encoder tensors loaded", path, len(loaded))
    for name in new:
        logger.info("new (freshly initialised): encoder.%s", name)
    for name in dropped:
        logger.info("dropped (the pair encoder has no such tensor): encoder.%s", name)
    logger.info("new (freshly initialised): the pooling and the classifier MLP and heads")
    return TransferReport(loaded, new, dropped)
