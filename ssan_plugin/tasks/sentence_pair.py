"""fairseq task ``sentence_pair``: entailment and/or relatedness of sentence pairs.

Data directory: the layout of ``ssan_plugin.pairs.datadir`` (``ssan-prepare-pairs``).
``--pair-target entailment|relatedness|both`` chooses the model's heads (``heads``):
``entailment`` 3 logits (labels in ``pairs.corpus.LABELS`` order), ``relatedness`` 5 logits
(``--relatedness-loss kl``, Tai et al. 2015) or 1 output (``mse``, regression to [1, 5]).

A batch: ``net_input = {src_tokens, src_lengths, src2_tokens, src2_lengths}`` (both sentences
right-padded, EOS kept as for translation sources), ``target = {"entailment": (B,) label ids,
"relatedness": (B,) float scores}`` (the targets of the chosen heads), ``ntokens`` = tokens of
both sentences.

``--encoder-init CKPT`` (training only: not when a model is rebuilt from its own checkpoint)
loads a trained translation encoder of the same shape into the pair encoder
(``pairs.transfer``), logging what is new.
"""

import logging
import os
from dataclasses import dataclass, field
from typing import Dict, Optional

import numpy as np
import torch
from fairseq.data import (
    Dictionary,
    FairseqDataset,
    IdDataset,
    NestedDictionaryDataset,
    NumelDataset,
    NumSamplesDataset,
    RawLabelDataset,
    RightPadDataset,
    SortDataset,
    data_utils,
)
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.tasks import FairseqTask, register_task
from omegaconf import II, MISSING

from ..pairs import datadir
from ..pairs.corpus import LABELS
from ..pairs.relatedness import RELATEDNESS_LOSSES, check_relatedness_loss, relatedness_outputs

logger = logging.getLogger(__name__)

PAIR_TARGETS = ("entailment", "relatedness", "both")


@dataclass
class SentencePairConfig(FairseqDataclass):
    data: str = field(default=MISSING, metadata={"help": "data directory from ssan-prepare-pairs"})
    pair_target: ChoiceEnum(list(PAIR_TARGETS)) = field(
        default="entailment",
        metadata={"help": "what the model predicts: entailment (3 labels), relatedness (1-5) "
                          "or both (the sum of the two losses)"})
    relatedness_loss: ChoiceEnum(list(RELATEDNESS_LOSSES)) = field(
        default="kl",
        metadata={"help": "kl: KL to Tai et al.'s 5-level target distribution, score = its "
                          "expectation; mse: regression of 1 + 4 sigmoid(output)"})
    encoder_init: Optional[str] = field(
        default=None,
        metadata={"help": "start the pair encoder from this translation checkpoint's encoder "
                          "(same shape and dictionary: prepare with --translation-data)"})
    no_shuffle: bool = field(
        default=False, metadata={"help": "batch in file order instead of by length, shuffled"})
    seed: int = II("common.seed")


@register_task("sentence_pair", dataclass=SentencePairConfig)
class SentencePairTask(FairseqTask):
    def __init__(self, cfg: SentencePairConfig, dictionary: Dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary

    @classmethod
    def setup_task(cls, cfg: SentencePairConfig, **kwargs):
        path = datadir.dict_path(cfg.data)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} not found: --task sentence_pair expects a directory "
                                    "written by ssan-prepare-pairs")
        dictionary = Dictionary.load(path)
        logger.info("sentence_pair: %d types, target %s", len(dictionary), cfg.pair_target)
        return cls(cfg, dictionary)

    @property
    def heads(self) -> Dict[str, int]:
        """Output size of each head the model needs."""
        heads = {}
        if self.cfg.pair_target in ("entailment", "both"):
            heads["entailment"] = len(LABELS)
        if self.cfg.pair_target in ("relatedness", "both"):
            heads["relatedness"] = relatedness_outputs(self.relatedness_loss)
        return heads

    @property
    def relatedness_loss(self) -> str:
        """``--relatedness-loss`` (``kl`` or ``mse``): the relatedness head's size (``heads``),
        how the model reads it (``PairClassifierModel.relatedness_loss``) and which loss the
        criterion takes (``SentencePairLossCriterion.relatedness_loss``)."""
        return check_relatedness_loss(self.cfg.relatedness_loss)

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return None  # labels and scores, no target vocabulary

    def max_positions(self):
        return None

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if self.cfg.encoder_init and not from_checkpoint:
            from ..pairs.transfer import init_encoder_from_translation

            init_encoder_from_translation(model.encoder, self.cfg.encoder_init)
        return model

    def load_dataset(self, split, combine=False, **kwargs):
        sides = []
        for side in datadir.SIDES:
            prefix = datadir.side_prefix(self.cfg.data, split, side)
            ds = data_utils.load_indexed_dataset(prefix, self.dictionary)
            if ds is None:
                raise FileNotFoundError(f"sentence_pair split {split!r}: {prefix}.{{bin,idx}} not "
                                        "found (run ssan-prepare-pairs)")
            sides.append(ds)
        gold = datadir.read_gold(datadir.gold_path(self.cfg.data, split))
        s1, s2 = sides
        if not len(s1) == len(s2) == len(gold):
            raise ValueError(f"sentence_pair split {split!r}: {len(s1)} first sentences, "
                             f"{len(s2)} second sentences, {len(gold)} gold rows")
        target = {}
        if "entailment" in self.heads:
            if any(p.label is None for p in gold):
                raise ValueError(f"split {split!r} has pairs without entailment label")
            target["entailment"] = RawLabelDataset([LABELS.index(p.label) for p in gold])
        if "relatedness" in self.heads:
            if any(p.score is None for p in gold):
                raise ValueError(f"split {split!r} has pairs without relatedness score "
                                 "(SNLI has none): use --pair-target entailment")
            target["relatedness"] = RawLabelDataset([float(p.score) for p in gold])
        pad = self.dictionary.pad()
        sizes = np.maximum(s1.sizes, s2.sizes)
        dataset = NestedDictionaryDataset(
            {
                "id": IdDataset(),
                "net_input": {
                    "src_tokens": RightPadDataset(s1, pad_idx=pad),
                    "src_lengths": NumelDataset(s1, reduce=False),
                    "src2_tokens": RightPadDataset(s2, pad_idx=pad),
                    "src2_lengths": NumelDataset(s2, reduce=False),
                },
                "target": target,
                "nsentences": NumSamplesDataset(),
                "ntokens": _TotalTokens(s1, s2),
            },
            sizes=[sizes],
        )
        if not self.cfg.no_shuffle:  # batches of similar lengths, in a seeded random order
            with data_utils.numpy_seed(self.cfg.seed):
                shuffle = np.random.permutation(len(dataset))
            dataset = SortDataset(dataset, sort_order=[shuffle, sizes])
        logger.info("sentence_pair: split %s, %d pairs", split, len(dataset))
        self.datasets[split] = dataset
        return dataset

    @torch.no_grad()
    def predict(self, model, sample) -> Dict[int, dict]:
        """{pair index in the split: {"label": label or None, "score": float or None}}."""
        predictions = model.predict(model(**sample["net_input"]))
        labels = predictions.get("label")
        scores = predictions.get("score")
        out = {}
        for row, index in enumerate(sample["id"].tolist()):
            out[index] = {"label": None if labels is None else LABELS[int(labels[row])],
                          "score": None if scores is None else float(scores[row])}
        return out


class _TotalTokens(FairseqDataset):
    """Tokens of both sentences, summed over the batch (fairseq's ``ntokens``)."""

    def __init__(self, s1, s2):
        self.s1, self.s2 = s1, s2

    def __getitem__(self, index):
        return self.s1[index].numel() + self.s2[index].numel()

    def __len__(self):
        return len(self.s1)

    def collater(self, samples):
        return sum(samples)
