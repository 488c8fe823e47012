"""ssan_plugin/runtime/checkpoint_safety.py: with the allow-list, torch's weights_only loader
rebuilds what fairseq checkpoints pickle (argparse.Namespace, omegaconf containers, fairseq's
_TensorPlaceholder); without it they are refused; a pickle that would run code is refused
either way, and the code does not run."""

import argparse
import os
import pickle

import pytest
import torch
from omegaconf import DictConfig, ListConfig, OmegaConf

from ssan_plugin.runtime.checkpoint_safety import (allow_fairseq_checkpoint_globals,
                                                   fairseq_checkpoint_globals)


@pytest.fixture
def no_allow_list():
    """torch's allow-list emptied for the test (the plugin's registration fills it when fairseq
    is imported), restored afterwards."""
    saved = list(torch.serialization.get_safe_globals())
    torch.serialization.clear_safe_globals()
    yield
    torch.serialization.clear_safe_globals()
    torch.serialization.add_safe_globals(saved)


def checkpoint_like():
    return {"args": argparse.Namespace(arch="ssan_transformer", lr=[0.001]),
            "cfg": OmegaConf.create({"task": {"_name": "translation", "langs": ["en", "de"]}}),
            "model": {"encoder.embed_tokens.weight": torch.arange(6.0).view(3, 2)}}


def test_the_globals_fairseq_checkpoints_need():
    from fairseq.distributed.utils import _TensorPlaceholder

    found = fairseq_checkpoint_globals()
    for needed in (argparse.Namespace, DictConfig, ListConfig, _TensorPlaceholder):
        assert needed in found
    assert not any(g in found for g in (os.system, eval, exec, getattr, __import__))


def test_refused_without_the_list_loaded_with_it(tmp_path, no_allow_list):
    path = tmp_path / "checkpoint.pt"
    torch.save(checkpoint_like(), path)
    with pytest.raises(pickle.UnpicklingError, match="Namespace"):
        torch.load(path, weights_only=True)
    allow_fairseq_checkpoint_globals()
    allow_fairseq_checkpoint_globals()  # idempotent
    state = torch.load(path, weights_only=True)
    assert state["args"] == argparse.Namespace(arch="ssan_transformer", lr=[0.001])
    assert isinstance(state["cfg"], DictConfig)
    assert OmegaConf.to_container(state["cfg"]) == {"task": {"_name": "translation",
                                                             "langs": ["en", "de"]}}
    assert torch.equal(state["model"]["encoder.embed_tokens.weight"], torch.arange(6.0).view(3, 2))


class RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_code_in_a_pickle_is_still_refused(tmp_path):
    allow_fairseq_checkpoint_globals()
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "args": RunsCode(marker)}, path)
    with pytest.raises(pickle.UnpicklingError, match="system"):
        torch.load(path, weights_only=True)
    assert not marker.exists()
