"""ssan_plugin/hub.py: load() registers the plugin and hands every option to the Translator
(defaults: evaluate_bleu's decoding, errors for over-long input); bad options are refused by
the options' own check, before any file is read."""

import pytest

import ssan_plugin.hub as hub
from ssan_plugin.translation.textio import PipelineError
from ssan_plugin.translation.translator import TranslateOptions


def test_load_passes_every_option(monkeypatch, tmp_path):
    made, registered = [], []
    monkeypatch.setattr(hub, "register", lambda: registered.append(True))
    monkeypatch.setattr(hub, "Translator",
                        lambda *args, **kwargs: made.append((args, kwargs)) or "translator")
    data = tmp_path / "bin"
    data.mkdir()
    (data / "manifest.json").write_text("{}")
    assert hub.load("c.pt", data) == "translator"
    (checkpoint, data_dir, options), kwargs = made[0]
    assert (checkpoint, data_dir, kwargs) == ("c.pt", data, {"compare_recorded_data": True})
    assert options == TranslateOptions(beam=5, lenpen=1.0, max_len_a=0.0, max_len_b=200,
                                       batch_size=64, too_long="error", threads=1, cpu=None)
    hub.load("c.pt", data, beam=2, lenpen=0.6, max_len_a=1.2, max_len_b=10, batch_size=3,
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


@pytest.mark.parametrize("make, found", [
    ("plain", "has no manifest.json"),  # what fairseq-preprocess writes: dictionaries, binaries
    ("missing", "is not a directory"),
])
def test_a_data_dir_without_manifest_is_one_line(tmp_path, make, found):
    """Refused by load itself, before the checkpoint is read, in one line that names the
    alternative (a plain data-bin records no preprocessing for raw text)."""
    data = tmp_path / "data-bin"
    if make == "plain":
        data.mkdir()
        for name in ("dict.en.txt", "dict.de.txt", "train.en-de.en.bin", "train.en-de.en.idx"):
            (data / name).write_text("")
    with pytest.raises(PipelineError) as err:
        hub.load(tmp_path / "none.pt", data)
    message = str(err.value)
    assert message == (f"ssan_plugin.hub.load: data_dir {data} {found}: it must be a data-bin "
                       f"written by ssan-prepare-translation, whose manifest records how raw text "
                       f"becomes the model's tokens; for a plain fairseq-preprocess data-bin use "
                       f"fairseq's TransformerModel.from_pretrained (README, \"Translating raw text\")")
    assert "\n" not in message and err.traceback[-1].name == "check_data_dir"
    assert err.traceback[-2].name == "load"


def test_the_public_names():
    assert set(hub.__all__) == {"load", "Translator", "TranslateOptions", "TranslationReport",
                                "PipelineError", "TOO_LONG"}
    assert all(hasattr(hub, name) for name in hub.__all__)
