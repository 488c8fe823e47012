"""ssan_plugin/pairs/transfer.py: a translation checkpoint's encoder.* tensors into a pair
encoder (a small stand-in module with fairseq's state-dict names): exactly the shared tensors
are copied, the encoder's own new ones keep their values, the checkpoint's extra ones are
dropped and logged, and a checkpoint of another shape is refused before anything changes."""

import logging

import pytest
import torch

from ssan_plugin.errors import InputError
from ssan_plugin.pairs.transfer import (TransferError, init_encoder_from_translation,
                                        layer_indices, translation_encoder_state)


class Layer(torch.nn.Module):
    def __init__(self, dim, policy):
        super().__init__()
        self.fc1 = torch.nn.Linear(dim, dim)
        if policy:  # as SSAN's policy projection: a tensor a Transformer lacks
            self.policy_proj = torch.nn.Linear(dim, 1)


class Encoder(torch.nn.Module):
    def __init__(self, layers=2, dim=4, vocab=10, policy=False):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(vocab, dim)
        self.layers = torch.nn.ModuleList(Layer(dim, policy) for _ in range(layers))


def save_translation(path, encoder, extra=()):
    """A translation checkpoint whose encoder is ``encoder`` (plus ``extra`` encoder tensors)."""
    model = {f"encoder.{k}": v.clone() for k, v in encoder.state_dict().items()}
    model.update({f"encoder.{k}": torch.ones(2) for k in extra})
    model["decoder.embed_tokens.weight"] = torch.zeros(10, 4)
    torch.save({"model": model}, path)
    return path


def test_encoder_state_without_the_prefix(tmp_path):
    source = Encoder()
    state = translation_encoder_state(save_translation(tmp_path / "mt.pt", source))
    assert set(state) == set(source.state_dict())
    assert all(torch.equal(state[k], v) for k, v in source.state_dict().items())
    torch.save({"model": {"decoder.x": torch.zeros(1)}}, tmp_path / "lm.pt")
    with pytest.raises(TransferError, match=r"--encoder-init .*lm.pt: the checkpoint has no encoder\.\* weights"):
        translation_encoder_state(tmp_path / "lm.pt")
    with pytest.raises(InputError, match="--encoder-init .*none.pt"):
        translation_encoder_state(tmp_path / "none.pt")


def test_layer_indices():
    assert layer_indices(["layers.0.fc1.weight", "layers.10.fc1.bias", "layers.2.x",
                          "embed_tokens.weight", "layer_norm.weight"]) == [0, 2, 10]
    assert layer_indices([]) == []


def test_shared_tensors_copied_new_kept_extra_dropped(tmp_path, caplog):
    torch.manual_seed(0)
    source = Encoder(policy=False)
    path = save_translation(tmp_path / "mt.pt", source, extra=["version"])
    target = Encoder(policy=True)
    fresh = {k: v.clone() for k, v in target.state_dict().items()}
    with caplog.at_level(logging.INFO, logger="ssan_plugin.pairs.transfer"):
        report = init_encoder_from_translation(target, path)
    shared = set(source.state_dict())
    new = {k for k in fresh if "policy_proj" in k}
    assert set(report.loaded) == shared and report.loaded == sorted(report.loaded)
    assert set(report.new) == new and report.dropped == ["version"]
    for name, value in target.state_dict().items():
        expected = source.state_dict()[name] if name in shared else fresh[name]
        assert torch.equal(value, expected), name
    log = caplog.text
    assert f"--encoder-init {path}: {len(shared)} encoder tensors loaded" in log
    assert "new (freshly initialised): encoder.layers.1.policy_proj.weight" in log
    assert "dropped (the pair encoder has no such tensor): encoder.version" in log


def unchanged(encoder, before):
    return all(torch.equal(v, before[k]) for k, v in encoder.state_dict().items())


def test_another_number_of_layers_is_refused(tmp_path):
    path = save_translation(tmp_path / "mt.pt", Encoder(layers=1))
    target = Encoder(layers=2)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(TransferError, match=r"mt.pt: the checkpoint's encoder has 1 layers, the "
                                            r"pair encoder 2 \(--encoder-layers\)"):
        init_encoder_from_translation(target, path)
    assert unchanged(target, before)


def test_other_shapes_are_refused_and_named(tmp_path):
    path = save_translation(tmp_path / "mt.pt", Encoder(dim=4, vocab=12))
    target = Encoder(dim=4, vocab=10)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(TransferError) as err:
        init_encoder_from_translation(target, path)
    message = str(err.value)
    assert "embed_tokens.weight (12, 4) vs (10, 4)" in message and " ..." not in message
    assert "--translation-data" in message and unchanged(target, before)
    # a wider encoder: every tensor differs, three are named, then " ..."
    path = save_translation(tmp_path / "wide.pt", Encoder(dim=6))
    with pytest.raises(TransferError) as err:
        init_encoder_from_translation(target, path)
    assert ("shapes differ (checkpoint vs pair encoder) for embed_tokens.weight (10, 6) vs "
            "(10, 4), layers.0.fc1.weight (6, 6) vs (4, 4), layers.0.fc1.bias (6,) vs (4,) ...; "
            "the pair encoder needs") in str(err.value)
