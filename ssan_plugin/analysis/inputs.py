"""Inputs of the analysis tools: a checkpoint with its data-bin, raw text or CoNLL words encoded
exactly as ``ssan-prepare-translation`` encoded the training data.

The data-bin's manifest says how raw words become pieces
(:class:`ssan_plugin.translation.pipeline.TextPipeline`: normalisation, pretokenisation,
sentencepiece); the model reads the pieces' dictionary indices followed by ``</s>``.

- Raw text (:meth:`AnalysisInput.encode_lines`): each line is encoded whole; pieces map back to
  the words they spell through sentencepiece's word-start marker
  (:func:`~ssan_plugin.analysis.selection.piece_word_index`).
- Words of a CoNLL file (:meth:`AnalysisInput.encode_words`): each word is encoded on its own
  (sentencepiece never joins pieces across whitespace, and a pretokeniser that splits a word
  keeps all its tokens in that word), so every piece belongs to exactly one given word.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import List, Sequence

import torch
from torch import Tensor

from ..errors import PipelineError
from ..cli.checkpoints import embedding_mismatch, load_checkpoint
from ..translation.pipeline import TextPipeline, encode_lines
from .selection import load_model, piece_word_index

EOS = "</s>"


@dataclass
class Encoded:
    """One sentence as the model reads it: ``tokens`` (1-D, ``</s>`` last), its ``pieces``
    (dictionary symbols, ``</s>`` included) and, per piece, the 0-based index of its word
    (-1 for ``</s>``)."""

    tokens: Tensor
    pieces: List[str]
    word_index: List[int]

    @property
    def n_words(self) -> int:
        return max(self.word_index, default=-1) + 1


def check_translation_checkpoint(checkpoint: Path, data: Path, src: str, tgt: str) -> None:
    """One line, before fairseq builds the model, for a checkpoint these tools cannot read with
    ``data``: not a translation checkpoint (an SRL tagger, a pair classifier: what was expected
    and found), or trained on another dictionary (embedding rows against dictionary entries)."""
    state = load_checkpoint(checkpoint, expect_task="translation", what="--checkpoint")
    for side, lang in (("encoder", src), ("decoder", tgt)):
        dict_path = data / f"dict.{lang}.txt"
        mismatch = embedding_mismatch(state, f"{side}.embed_tokens.weight", dict_path)
        if mismatch is not None:
            raise PipelineError(f"--checkpoint {checkpoint} was trained on another dictionary: "
                                f"expected {'an' if side == 'encoder' else 'a'} {side} "
                                f"embedding of {mismatch[1]} rows ({dict_path}, "
                                f"with the 4 special symbols), found {mismatch[0]}; give "
                                f"the --data it was trained on")


class AnalysisInput:
    """A trained model (eval mode, CPU) with its data-bin's text pipeline and dictionary."""

    def __init__(self, data, checkpoint):
        data, checkpoint = Path(data), Path(checkpoint)
        if not data.is_dir():
            raise PipelineError(f"--data {data}: not a directory")
        if not checkpoint.is_file():
            raise PipelineError(f"--checkpoint {checkpoint}: no such file")
        self.pipeline = TextPipeline.from_data_dir(data)
        check_translation_checkpoint(checkpoint, data, self.pipeline.manifest["src"],
                                     self.pipeline.manifest["tgt"])
        self.model, self.task = load_model(checkpoint, data)
        self.dictionary = self.task.source_dictionary
        self.pad_idx = self.dictionary.pad()
        self.encoder = getattr(self.model, "encoder", self.model)
        self.max_positions = int(self.encoder.max_positions())

    def _side(self, side: str):
        """(the side's language config, its dictionary, its max positions, what a sentence of
        it is called in errors) for ``side`` "source" or "target"."""
        if side == "source":
            return self.pipeline.src, self.dictionary, self.max_positions, "sentence", "source"
        if side == "target":
            decoder = getattr(self.model, "decoder", None)
            if decoder is None:
                raise PipelineError("this model has no decoder: no target side to encode")
            return (self.pipeline.tgt, self.task.target_dictionary, int(decoder.max_positions()),
                    "target sentence", "target")
        raise ValueError(f"side must be 'source' or 'target', got {side!r}")

    def _encode(self, pieces: Sequence[str], dictionary, word_index: List[int]) -> Encoded:
        tokens = dictionary.encode_line(" ".join(pieces), add_if_not_exist=False,
                                        append_eos=True).long()
        return Encoded(tokens, list(pieces) + [EOS], word_index + [-1])

    def _check(self, encoded: List[Encoded], side: str = "source") -> List[Encoded]:
        _, _, limit, what, kind = self._side(side)
        if not encoded:
            raise PipelineError("empty input: no sentence to analyse")
        for k, e in enumerate(encoded, 1):
            if e.tokens.numel() > limit:
                raise PipelineError(
                    f"{what} {k} is {e.tokens.numel()} pieces long (with </s>), more than the "
                    f"model's {limit} {kind} positions")
        return encoded

    def encode_lines(self, lines: Sequence[str], side: str = "source") -> List[Encoded]:
        """Raw sentences (one per item) of ``side`` ("source", or "target": the decoder's
        dictionary and positions) -> Encoded; PipelineError for an empty input, an empty
        sentence, or one longer than the model's positions."""
        config, dictionary, _, what, _ = self._side(side)
        for k, line in enumerate(lines, 1):
            if not line.strip():
                raise PipelineError(f"{what} {k} is empty")
        out = []
        for line in encode_lines(config, self.pipeline.sp, list(lines)):
            pieces = line.split()
            out.append(self._encode(pieces, dictionary, piece_word_index(pieces)))
        return self._check(out, side)

    def encode_words(self, sentences: Sequence[Sequence[str]], side: str = "source") -> List[Encoded]:
        """Tokenised sentences (lists of words) of ``side`` -> Encoded, each word encoded on
        its own so that ``word_index`` refers to the given words."""
        config, dictionary, _, _, _ = self._side(side)
        flat = [w for words in sentences for w in words]
        encoded_words = iter(encode_lines(config, self.pipeline.sp, flat)) if flat else iter(())
        out = []
        for words in sentences:
            pieces, index = [], []
            for w, _word in enumerate(words):
                word_pieces = next(encoded_words).split()
                pieces += word_pieces
                index += [w] * len(word_pieces)
            out.append(self._encode(pieces, dictionary, index))
        return self._check(out, side)


def add_model_args(parser):
    """--data and --checkpoint, the inputs every analysis script takes."""
    parser.add_argument("--data", required=True, help="data-bin written by ssan-prepare-translation")
    parser.add_argument("--checkpoint", required=True, help="fairseq checkpoint (.pt)")
