"""Allow-list the globals a fairseq checkpoint pickles, for torch's weights_only loader.

torch >= 2.6 loads with ``weights_only=True``: only tensors, containers and allow-listed
globals are rebuilt; anything else (e.g. ``os.system`` smuggled in through ``__reduce__``) is
refused with ``_pickle.UnpicklingError`` before it can run. Single-process fairseq checkpoints
need ``argparse.Namespace``; distributed resume also sends omegaconf containers and fairseq's
``_TensorPlaceholder`` through ``torch.load``. We add exactly those and never turn the check off.
"""

import argparse
import collections
import typing

import torch


def fairseq_checkpoint_globals():
    """The globals a fairseq checkpoint (or a distributed-resume broadcast) may contain."""
    from omegaconf import DictConfig, ListConfig, nodes
    from omegaconf.base import ContainerMetadata, Metadata

    # Measured (tests/e2e/test_distributed.py): a checkpoint file needs only
    # Namespace; the checkpoint rank 0 broadcasts on distributed resume also pickles omegaconf
    # containers, whose Metadata refers to the classes dict/int/list by name.
    found = [
        argparse.Namespace,
        dict,
        int,
        list,
        collections.defaultdict,
        typing.Any,
        DictConfig,
        ListConfig,
        ContainerMetadata,
        Metadata,
        nodes.AnyNode,
    ]
    try:
        from fairseq.distributed.utils import _TensorPlaceholder

        found.append(_TensorPlaceholder)
    except ImportError:  # older fairseq without it
        pass
    return found


def allow_fairseq_checkpoint_globals() -> None:
    torch.serialization.add_safe_globals(fairseq_checkpoint_globals())
