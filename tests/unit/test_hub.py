"""ssan_plugin/hub.py: load() registers the plugin and hands every option to the Translator
(defaults: evaluate_bleu's decoding, errors for over-long input); bad options are refused by
the options' own check, before any file is read."""

import pytest

import ssan_plugin.hub as hub
from ssan_plugin.translation.textio import PipelineError
from ssan_plugin.translation.translator import TranslateOptions


def test_load_passes_every_option(monkeypatch):
    made, registered = [], []
    monkeypatch.setattr(hub, "register", lambda: registered.append(True))
    monkeypatch.setattr(hub, "Translator",
                        lambda *args, **kwargs: made.append((args, kwargs)) or "translator")
    assert hub.load("c.pt", "bin") == "translator"
    (checkpoint, data, options), kwargs = made[0]
    assert (checkpoint, data, kwargs) == ("c.pt", "bin", {"compare_recorded_data": True})
    assert options == TranslateOptions(beam=5, lenpen=1.0, max_len_a=0.0, max_len_b=200,
                                       batch_size=64, too_long="error", threads=1, cpu=None)
    hub.load("c.pt", "bin", beam=2, lenpen=0.6, max_len_a=1.2, max_len_b=10, batch_size=3,
             too_long="truncate", threads=2, cpu=True, compare_recorded_data=False)
    (_, _, options), kwargs = made[1]
    assert options == TranslateOptions(beam=2, lenpen=0.6, max_len_a=1.2, max_len_b=10,
                                       batch_size=3, too_long="truncate", threads=2, cpu=True)
    assert kwargs == {"compare_recorded_data": False} and registered == [True, True]


def test_bad_options_before_any_file(tmp_path):
    with pytest.raises(PipelineError, match="too_long must be one of"):
        hub.load(tmp_path / "none.pt", tmp_path / "none", too_long="skip")
    with pytest.raises(PipelineError, match="beam must be >= 1, got 0"):
        hub.load(tmp_path / "none.pt", tmp_path / "none", beam=0)


def test_the_public_names():
    assert set(hub.__all__) == {"load", "Translator", "TranslateOptions", "TranslationReport",
                                "PipelineError", "TOO_LONG"}
    assert all(hasattr(hub, name) for name in hub.__all__)
