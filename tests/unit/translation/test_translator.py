"""ssan_plugin/translation/translator.py on a tiny untrained transformer (built in-process, 30
source positions) and a stand-in data-bin (sentencepiece model, dictionaries, manifest): one
output per input in order, empty inputs not decoded, line ends stripped and inner breaks
refused, over-long inputs refused before decoding / truncated to the model's positions /
given an empty output, the report's messages, and a foreign checkpoint refused before loading.
Where the model's own output does not matter, decoding is replaced by an echo of the source
pieces, so that each output can be checked against its input."""

import json
import logging
import re

import pytest
import torch
from fairseq import options, tasks
from fairseq.dataclass.configs import GenerationConfig
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from omegaconf import OmegaConf

from conftest import PLUGIN_DIR, TINY_MODEL
from ssan_plugin.translation.languages import LanguageConfig
from ssan_plugin.translation.textio import PipelineError
from ssan_plugin.translation.translator import (TranslateOptions, TranslationReport, Translator,
                                                _generation_config)

POSITIONS = 30
EN = LanguageConfig.create("en", segmented=False)
DE = LanguageConfig.create("de", segmented=False)
SOURCES = [f"The house number {i} is green." for i in range(20)]
TARGETS = [f"Das Haus Nummer {i} ist grün." for i in range(20)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A data-bin as ssan-prepare-translation leaves it, as far as the translator reads it."""
    import sentencepiece as spm

    data = tmp_path_factory.mktemp("translator") / "bin"
    data.mkdir()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(SOURCES + TARGETS),
                                   model_prefix=str(data / "spm"), vocab_size=40,
                                   hard_vocab_limit=False, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(data / "spm.model"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
              if not (sp.is_control(i) or sp.is_unknown(i))]
    for lang in ("en", "de"):
        (data / f"dict.{lang}.txt").write_text("".join(f"{p} 1\n" for p in pieces), "utf-8")
    manifest = {"src": "en", "tgt": "de", "languages": {"en": EN.as_dict(), "de": DE.as_dict()},
                "sentencepiece": {"model": str(data / "spm.model")}}
    (data / "manifest.json").write_text(json.dumps(manifest))
    return data


def model_state(data):
    """An untrained fairseq transformer's checkpoint state for ``data``."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(data), "--user-dir", str(PLUGIN_DIR), "--task", "translation", "--arch", "transformer",
        "--source-lang", "en", "--target-lang", "de", *TINY_MODEL, "--seed", "1",
        "--max-source-positions", str(POSITIONS), "--max-target-positions", "64"])
    cfg = convert_namespace_to_omegaconf(args)
    torch.manual_seed(1)
    model = tasks.setup_task(cfg.task).build_model(cfg.model)
    return {"cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True), "args": None,
            "model": model.state_dict(), "extra_state": {},
            "optimizer_history": [{"criterion_name": "CrossEntropyCriterion",
                                   "optimizer_name": "Adam", "num_updates": 0,
                                   "lr_scheduler_state": {"best": None}}]}


@pytest.fixture(scope="module")
def checkpoint(data):
    path = data.parent / "checkpoint.pt"
    torch.save(model_state(data), path)
    return path


@pytest.fixture(scope="module")
def translator(checkpoint, data):
    return Translator(checkpoint, data, TranslateOptions(beam=2, max_len_b=6, batch_size=2, cpu=True))


@pytest.fixture
def echo(translator, monkeypatch):
    """Decoding replaced by the source pieces of each input (end of sentence dropped); the
    token tensors it was given are in the list returned."""
    given = []

    def generate(tokens, opts):
        given.extend(tokens)
        d = translator.task.source_dictionary
        return [" ".join(d[int(i)] for i in t[:-1]) for t in tokens]

    monkeypatch.setattr(translator, "_generate", generate)
    return given


def pieces_of(translator, sentence):
    return translator.pipeline.encode_source([sentence])[0].split()


def echoed(translator, sentence):
    """What the echo gives for ``sentence``: its pieces, decoded and detokenised as German."""
    return DE.detokenise(translator.pipeline.sp.decode_pieces(pieces_of(translator, sentence)))


LONG = "The house number 17 is green. The house number 18 is green."  # known pieces only


# ---------------------------------------------------------------- options and report

def test_options_are_validated_before_anything_is_loaded(tmp_path):
    with pytest.raises(PipelineError, match="threads must be >= 1, got 0"):
        Translator(tmp_path / "none.pt", tmp_path, TranslateOptions(threads=0))
    with pytest.raises(PipelineError, match="beam must be >= 1, got 0"):
        TranslateOptions(beam=0).validate()
    with pytest.raises(PipelineError, match="too_long must be one of error, truncate, empty"):
        TranslateOptions(too_long="skip").validate()


def test_generation_config_is_fairseq_generates_with_our_options():
    gen = _generation_config(TranslateOptions(beam=3, lenpen=0.6, max_len_a=1.5, max_len_b=7))
    assert (gen.beam, gen.lenpen, gen.max_len_a, gen.max_len_b, gen.nbest) == (3, 0.6, 1.5, 7, 1)
    defaults = OmegaConf.structured(GenerationConfig())
    for key in defaults:
        if key not in ("beam", "lenpen", "max_len_a", "max_len_b", "nbest"):
            assert gen[key] == defaults[key], key


def test_report_messages():
    assert TranslationReport().messages() == []
    report = TranslationReport(n=20, empty=list(range(12)), too_long=[(13, 40), (15, 31)],
                               too_long_action="truncate", stripped_line_ends=2,
                               max_source_tokens=30)
    assert report.messages() == [
        "2 input(s) ended in a line break (\\r\\n or \\n): removed before translation",
        "12 empty input(s) (lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ... (2 more)): empty output, "
        "not decoded",
        "2 input(s) longer than the model's 30 source positions (lines 14, 16): source truncated "
        "to its first 29 pieces before translation"]
    report.too_long_action = "empty"
    assert report.messages()[-1].endswith("(lines 14, 16): empty output, not decoded")


# ---------------------------------------------------------------- loading

def test_a_foreign_checkpoint_is_refused_before_loading(data, tmp_path):
    state = model_state(data)
    rows = state["model"]["encoder.embed_tokens.weight"].shape[0]
    state["model"]["encoder.embed_tokens.weight"] = torch.zeros(rows + 3, 32)
    torch.save(state, tmp_path / "other.pt")
    with pytest.raises(PipelineError, match=f"other.pt was trained on another dictionary: its "
                                            f"encoder embedding has {rows + 3} rows"):
        Translator(tmp_path / "other.pt", data)
    with pytest.raises(PipelineError, match="manifest.json not found"):
        Translator(tmp_path / "other.pt", tmp_path)


def test_the_limit_is_the_models_source_positions(translator):
    assert translator.max_source_tokens == POSITIONS
    assert translator.options.batch_size == 2 and translator.options.too_long == "error"


# ---------------------------------------------------------------- raw input

def test_one_output_per_input_in_order(translator, echo):
    inputs = [SOURCES[3], "", "   ", SOURCES[4] + "\r\n", SOURCES[5] + "\n", SOURCES[6]]
    outputs, report = translator.translate_with_report(inputs)
    assert outputs == [echoed(translator, SOURCES[3]), "", "", echoed(translator, SOURCES[4]),
                       echoed(translator, SOURCES[5]), echoed(translator, SOURCES[6])]
    assert outputs[0] == "The house number 3 is green."  # the echo of a Moses round trip
    assert report.empty == [1, 2] and report.stripped_line_ends == 2
    assert report.n == 6 and report.translated == 4 == len(echo) and report.too_long == []
    assert translator.last_report is report
    assert translator.translate([]) == []


def test_the_model_decodes_one_output_per_input(translator):
    outputs = translator.translate([SOURCES[1], "", SOURCES[2], SOURCES[1]])
    assert len(outputs) == 4 and outputs[1] == "" and all(isinstance(o, str) for o in outputs)
    assert outputs[0] == outputs[3]  # the same sentence, the same (untrained) output
    assert translator.translate([SOURCES[2]], batch_size=1) == [outputs[2]]


@pytest.mark.parametrize("inputs, message", [
    ([SOURCES[0], "two\nlines"], "sentence 2 contains a line break inside it"),
    (["one\r\rtwo"], "sentence 1 contains a line break inside it"),
    ([SOURCES[0], 7], "sentence 2 is a int, not str"),
    (SOURCES[0], "translate() takes a list of sentences, not one string"),
])
def test_bad_inputs_are_refused(translator, echo, inputs, message):
    with pytest.raises(PipelineError, match=re.escape(message)):
        translator.translate(inputs)
    assert echo == []


def test_bad_overrides_are_refused_and_options_kept(translator, echo):
    with pytest.raises(PipelineError, match="batch size must be >= 1, got 0"):
        translator.translate([SOURCES[0]], batch_size=0)
    translator.translate([SOURCES[0]], too_long="empty")
    assert translator.options.too_long == "error" and translator.options.batch_size == 2


def test_an_over_long_input_is_refused_before_decoding(translator, echo):
    n = len(pieces_of(translator, LONG)) + 1  # pieces + end of sentence
    assert n > POSITIONS
    with pytest.raises(PipelineError) as err:
        translator.translate([SOURCES[0], LONG, SOURCES[1], LONG + " Yes."])
    message = str(err.value)
    assert message.startswith(f"2 input(s) longer than the model's {POSITIONS} source positions "
                              f"(sentencepiece pieces + end of sentence): line 2 ({n} tokens), "
                              f"line 4 (")
    assert "Nothing was translated" in message and f"the first {POSITIONS - 1} pieces" in message
    assert echo == []  # nothing decoded


def test_an_over_long_input_truncated_to_the_positions(translator, echo, caplog):
    with caplog.at_level(logging.WARNING, logger="ssan_plugin.translation.translator"):
        outputs = translator.translate([SOURCES[0], LONG], too_long="truncate")
    kept = pieces_of(translator, LONG)[:POSITIONS - 1]
    assert echo[1].numel() == POSITIONS
    assert [translator.task.source_dictionary[int(i)] for i in echo[1][:-1]] == kept
    assert outputs == [echoed(translator, SOURCES[0]),
                       DE.detokenise(translator.pipeline.sp.decode_pieces(kept))]
    report = translator.last_report
    assert report.too_long == [(1, len(pieces_of(translator, LONG)) + 1)]
    assert report.translated == 2
    assert f"source truncated to its first {POSITIONS - 1} pieces" in caplog.text


def test_an_over_long_input_given_an_empty_output(translator, echo):
    outputs, report = translator.translate_with_report([LONG, SOURCES[2]], too_long="empty")
    assert outputs == ["", echoed(translator, SOURCES[2])]
    assert report.translated == 1 and [i for i, _ in report.too_long] == [0] and len(echo) == 1
