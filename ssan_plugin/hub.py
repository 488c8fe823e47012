"""Translate raw text from Python with a trained checkpoint and the data-bin it was trained on.

    import ssan_plugin.hub
    model = ssan_plugin.hub.load("checkpoints/ssan/checkpoint_best.pt", "data-bin/multi30k_en_de")
    model.translate(["A man in an orange hat.", "Two dogs play in the snow."])
    # -> ['Ein Mann mit einem orangefarbenen Hut.', 'Zwei Hunde spielen im Schnee.']

The sentences get exactly the preprocessing recorded in ``DATA_DIR/manifest.json``
(normalisation, Moses tokenisation, the sentencepiece model) and the translations are
detokenised as ``ssan-evaluate-bleu`` does; decoding is fairseq's own (batching,
SequenceGenerator). See ``ssan_plugin.translation.translator`` for empty and over-long inputs.

A plain ``fairseq-preprocess`` data-bin records no preprocessing, so raw text cannot be made into
its tokens here: ``load`` refuses it in one line. fairseq's own
``TransformerModel.from_pretrained(checkpoint_dir, checkpoint_file=..., data_name_or_path=...,
user_dir="ssan_plugin")`` loads such checkpoints (README, "Translating raw text").
"""

from pathlib import Path
from typing import Optional

from . import register
from .errors import PipelineError
from .translation.pipeline import MANIFEST
from .translation.translator import (TOO_LONG, TranslateOptions, TranslationReport,
                                     Translator)

__all__ = ["load", "Translator", "TranslateOptions", "TranslationReport", "PipelineError",
           "TOO_LONG"]


def load(checkpoint, data_dir, beam: int = 5, lenpen: float = 1.0, max_len_a: float = 0.0,
         max_len_b: int = 200, batch_size: int = 64, too_long: str = "error",
         threads: int = 1, cpu: Optional[bool] = None,
         compare_recorded_data: bool = True) -> Translator:
    """A ``Translator`` for ``checkpoint`` (a fairseq checkpoint of any plugin architecture or
    fairseq's ``transformer``) and ``data_dir`` (the data-bin written by
    ``ssan-prepare-translation`` that it was trained on).

    ``.translate(list_of_raw_sentences)`` returns one detokenised translation per sentence.
    Raises ``PipelineError`` (with a message for people) on a missing/foreign checkpoint, a
    data dir without manifest, or (with ``too_long="error"``) an over-long sentence."""
    options = TranslateOptions(beam=beam, lenpen=lenpen, max_len_a=max_len_a,
                               max_len_b=max_len_b, batch_size=batch_size, too_long=too_long,
                               threads=threads, cpu=cpu)
    options.validate()
    check_data_dir(data_dir)
    register()
    return Translator(checkpoint, data_dir, options,
                      compare_recorded_data=compare_recorded_data)


def check_data_dir(data_dir) -> None:
    """``data_dir`` holds the manifest of ``ssan-prepare-translation``; else PipelineError, one
    line saying what it is and what loads a plain fairseq data-bin instead."""
    path = Path(data_dir)
    if (path / MANIFEST).is_file():
        return
    found = f"has no {MANIFEST}" if path.is_dir() else "is not a directory"
    raise PipelineError(
        f"ssan_plugin.hub.load: data_dir {path} {found}: it must be a data-bin written by "
        f"ssan-prepare-translation, whose manifest records how raw text becomes the model's "
        f"tokens; for a plain fairseq-preprocess data-bin use fairseq's "
        f"TransformerModel.from_pretrained (README, \"Translating raw text\")")
