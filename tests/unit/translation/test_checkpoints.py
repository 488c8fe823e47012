"""ssan_plugin/translation/checkpoints.py: a checkpoint is refused before decoding when its
languages, embedding sizes or recorded dictionaries are not the data-bin's; stand-in
checkpoints (a dict with embedding matrices and a task config) instead of trained ones."""

import argparse

import pytest
import torch
from omegaconf import OmegaConf

from ssan_plugin.translation.checkpoints import (_task_cfg, check_checkpoint,
                                                 load_checkpoint_state)
from ssan_plugin.translation.textio import PipelineError

SPECIALS = 4  # <s> <pad> </s> <unk>


def write_dict(directory, lang, words):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"dict.{lang}.txt").write_text("".join(f"{w} 1\n" for w in words))


def data_bin(directory, en=("a", "b", "c"), de=("x", "y")):
    write_dict(directory, "en", en)
    write_dict(directory, "de", de)
    return directory


def save(path, encoder_rows, decoder_rows=None, data=None, src="en", tgt="de", task="translation",
         as_args=False):
    model = {"encoder.embed_tokens.weight": torch.zeros(encoder_rows, 2)}
    if decoder_rows is not None:  # None: shared embeddings stored once
        model["decoder.embed_tokens.weight"] = torch.zeros(decoder_rows, 2)
    fields = {"data": None if data is None else str(data), "source_lang": src, "target_lang": tgt}
    if as_args:  # a checkpoint of the argparse era
        state = {"model": model, "args": argparse.Namespace(task=task, arch="transformer", **fields)}
    else:
        state = {"model": model, "cfg": {"task": {"_name": task, **fields},
                                         "model": {"_name": "transformer"}}}
    torch.save(state, path)
    return path


def test_task_cfg_from_cfg_args_or_neither():
    fields = {"data": "bin", "source_lang": "en", "target_lang": "de"}
    assert _task_cfg({"cfg": {"task": dict(fields, _name="translation")}}) == fields
    assert _task_cfg({"cfg": OmegaConf.create({"task": dict(fields, extra=1)})}) == fields
    assert _task_cfg({"args": argparse.Namespace(**fields, arch="x")}) == fields
    assert _task_cfg({"args": argparse.Namespace(data="bin")}) == dict(
        data="bin", source_lang=None, target_lang=None)
    assert _task_cfg({"cfg": {"task": None}}) == dict.fromkeys(fields)
    assert _task_cfg({}) == dict.fromkeys(fields)


def test_load_state_errors_are_pipeline_errors(tmp_path):
    with pytest.raises(PipelineError, match="none.pt"):
        load_checkpoint_state(tmp_path / "none.pt")
    path = save(tmp_path / "srl.pt", 7, task="srl")
    with pytest.raises(PipelineError, match="expected a checkpoint of task 'translation', found "
                                            "task 'srl'"):
        load_checkpoint_state(path)
    assert load_checkpoint_state(path, expect_task=None)["cfg"]["task"]["_name"] == "srl"


def test_a_matching_checkpoint_passes(tmp_path):
    data = data_bin(tmp_path / "bin")
    path = save(tmp_path / "ok.pt", SPECIALS + 3, SPECIALS + 2, data=data)
    assert check_checkpoint(path, data, "en", "de") == {"data": str(data), "source_lang": "en",
                                                         "target_lang": "de"}
    # the argparse era, and shared embeddings (no decoder matrix: nothing to compare)
    assert check_checkpoint(save(tmp_path / "old.pt", SPECIALS + 3, as_args=True), data, "en", "de")


def test_other_languages_are_refused(tmp_path):
    data = data_bin(tmp_path / "bin")
    path = save(tmp_path / "c.pt", SPECIALS + 3, SPECIALS + 2, tgt="ro")
    with pytest.raises(PipelineError) as err:
        check_checkpoint(path, data, "en", "de")
    assert str(err.value) == f"{path} was trained with target language 'ro', but {data} has 'de'"


def test_an_embedding_of_another_size_is_refused(tmp_path):
    data = data_bin(tmp_path / "bin")
    path = save(tmp_path / "c.pt", SPECIALS + 3, SPECIALS + 5)
    with pytest.raises(PipelineError) as err:
        check_checkpoint(path, data, "en", "de")
    assert str(err.value).startswith(
        f"{path} was trained on another dictionary: its decoder embedding has 9 rows, but "
        f"{data / 'dict.de.txt'} has 6 entries (with the 4 special symbols)")


def test_a_missing_dictionary_is_named(tmp_path):
    data = data_bin(tmp_path / "bin")
    (data / "dict.de.txt").unlink()
    with pytest.raises(PipelineError, match=f"missing dictionary {data / 'dict.de.txt'}"):
        check_checkpoint(save(tmp_path / "c.pt", SPECIALS + 3), data, "en", "de")


def test_the_recorded_data_dir_must_hold_the_same_dictionaries(tmp_path):
    ours = data_bin(tmp_path / "ours")
    same_size = data_bin(tmp_path / "theirs", en=("a", "b", "q"))  # another word, same size
    path = save(tmp_path / "c.pt", SPECIALS + 3, SPECIALS + 2, data=same_size)
    with pytest.raises(PipelineError) as err:
        check_checkpoint(path, ours, "en", "de")
    assert str(err.value) == (
        f"{path} was trained on {same_size}, whose dict.en.txt differs from {ours / 'dict.en.txt'}: "
        f"another dictionary (pass --skip-recorded-data-check if {same_size} no longer holds the "
        "training data)")
    assert check_checkpoint(path, ours, "en", "de", compare_recorded_data=False)
    # a copy with the same bytes, or a recorded directory that is gone: accepted
    copy = data_bin(tmp_path / "copy")
    assert check_checkpoint(save(tmp_path / "d.pt", SPECIALS + 3, SPECIALS + 2, data=copy),
                            ours, "en", "de")
    gone = save(tmp_path / "e.pt", SPECIALS + 3, SPECIALS + 2, data=tmp_path / "gone")
    assert check_checkpoint(gone, ours, "en", "de")["data"] == str(tmp_path / "gone")
