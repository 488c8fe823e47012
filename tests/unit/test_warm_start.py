"""ssan_plugin/warm_start.py, the parts that need no checkpoint (continue_as_variant itself runs
end to end in tests/e2e/test_warm_start.py): the variant's arguments keep the base's shape and
take only the variant's own options; the fresh optimizer state keeps the base's
hyper-parameters for exactly the variant's parameters."""

import argparse

import pytest

from ssan_plugin.warm_start import (WarmStartError, check_data, fresh_optimizer_state,
                                   variant_args)


def base_args():
    """A small Transformer's model arguments, as a base checkpoint records them."""
    return argparse.Namespace(arch="transformer", _name="transformer", encoder_embed_dim=32,
                              encoder_ffn_embed_dim=64, encoder_layers=2,
                              encoder_attention_heads=4, decoder_embed_dim=32, decoder_layers=1,
                              dropout=0.1)


def test_the_variant_keeps_the_base_shape_and_takes_its_options():
    base = base_args()
    args = variant_args(base, "ssan_transformer", ["--ssan-tau", "0.25"])
    assert args.arch == args._name == "ssan_transformer" and args.ssan_tau == 0.25
    for name in ("encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_layers",
                 "encoder_attention_heads", "decoder_layers", "dropout"):
        assert getattr(args, name) == getattr(base, name), name
    assert vars(base) == vars(base_args())  # the base's arguments are not changed
    # options not given: the variant's defaults
    assert variant_args(base_args(), "ssan_transformer", []).ssan_tau == 0.5


@pytest.mark.parametrize("arch, flags, message", [
    ("transformer", [], "--arch 'transformer' is not an encoder variant of this plugin"),
    ("no_such_arch", [], "--arch 'no_such_arch' is not an encoder variant"),
    ("ssan_transformer", ["--encoder-layers", "3"],
     "--encoder-layers 3: only ssan_transformer's own options may be given; the model shape is "
     "the base checkpoint's"),
    ("ssan_transformer", ["--ssan-tau", "warm"], "--ssan-tau"),
])
def test_refusals(arch, flags, message):
    with pytest.raises(WarmStartError) as err:
        variant_args(base_args(), arch, flags)
    assert message in str(err.value)


def test_fresh_optimizer_state():
    base = {"state": {0: {"exp_avg": [1.0]}, 1: {"exp_avg": [2.0]}},
            "param_groups": [{"lr": [0.002], "betas": (0.9, 0.98), "eps": 1e-8,
                              "weight_decay": 0.0, "params": [0, 1]}]}
    assert fresh_optimizer_state(base, 3) == {
        "state": {}, "param_groups": [{"lr": [0.002], "betas": (0.9, 0.98), "eps": 1e-8,
                                       "weight_decay": 0.0, "params": [0, 1, 2]}]}
    assert base["param_groups"][0]["params"] == [0, 1]  # the base's state is not changed
    two = {"state": {}, "param_groups": [{"lr": 1, "params": [0]}, {"lr": 2, "params": [1]}]}
    with pytest.raises(WarmStartError, match="the base optimizer has 2 parameter groups; one expected"):
        fresh_optimizer_state(two, 2)


@pytest.mark.parametrize("files, langs, given, message", [
    (["train.en-de.en.idx", "dict.en.txt", "dict.de.txt"], (None, None), True, None),
    (["dict.en.txt", "dict.de.txt"], ("en", "de"), False, None),  # the base's recorded pair
    ([], (None, None), True, "--data {d} is not a fairseq data-bin: no SPLIT.SRC-TGT.LANG.idx"),
    ([], (None, None), False, "the base's data-bin {d} (give --data) is not a fairseq data-bin"),
    (["train.en-de.en.idx", "dict.en.txt"], (None, None), True, "--data {d} has no dict.de.txt;"),
    (["dict.en.txt"], ("en", "de"), True, "--data {d} has no dict.de.txt;"),
    (None, (None, None), False, "the base's data-bin {d} (give --data) is not a directory"),
])
def test_the_data_bin_is_checked_before_fairseq_reads_it(tmp_path, files, langs, given, message):
    """What fairseq's translation task reads first (a language pair, its dictionaries) is
    checked, so that a wrong folder is one line instead of fairseq's traceback."""
    from omegaconf import OmegaConf

    data = tmp_path / "bin"
    if files is not None:
        data.mkdir()
        for name in files:
            (data / name).write_text("")
    cfg = OmegaConf.create({"_name": "translation", "data": str(data),
                            "source_lang": langs[0], "target_lang": langs[1]})
    if message is None:
        check_data(cfg, given)
    else:
        with pytest.raises(WarmStartError) as err:
            check_data(cfg, given)
        assert str(err.value).startswith(message.format(d=data)), str(err.value)
