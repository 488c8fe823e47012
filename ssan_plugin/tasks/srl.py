"""fairseq task ``srl``: one tagging instance per predicate.

Data directory: the layout of ``ssan_plugin.srl.datadir`` (written by
``ssan-prepare-srl``): the word and label Dictionaries, and per split the aligned
``words`` / ``predicate`` / ``labels`` indexed datasets (one item per instance, one entry per
word, no EOS; predicate entries are 1 at the predicate word, else 0).

A batch: ``net_input = {src_tokens: (B, T) word ids, src_lengths: (B,), predicate: (B, T) 0/1}``
and, when the directory has the ``chars`` datasets, ``chars``: (B, T, L) character ids of every
word (``srl.characters``; read by models with ``--srl-char-dim``),
``target``: (B, T) label ids, padded with the label dictionary's pad index. Outside the
training split, ``srl_gold``: the instances' gold propositions (``srl.validation``), so that
validation logs span ``precision`` / ``recall`` / ``f1`` (percent) as ``ssan-evaluate-srl``
computes them: every batch is decoded with constrained Viterbi (``decode``) and scored by the
CoNLL scorer, the (correct, excess, missed) counts are summed over the batches in
``reduce_metrics`` and the metrics derived from the sums (``--no-eval-f1`` turns this off).
``--best-checkpoint-metric f1 --maximize-best-checkpoint-metric`` chooses checkpoints by it.
"""

import logging
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np
import torch
from fairseq.data import (
    Dictionary,
    IdDataset,
    ListDataset,
    NestedDictionaryDataset,
    NumelDataset,
    NumSamplesDataset,
    RightPadDataset,
    SortDataset,
    data_utils,
)
from fairseq.dataclass import FairseqDataclass
from fairseq.logging import metrics
from fairseq.tasks import FairseqTask, register_task
from omegaconf import II, MISSING

from ..srl import datadir
from ..srl.characters import WordCharactersDataset
from ..srl.scorer import Counts
from ..srl.validation import instance_counts, read_gold_instances
from ..srl.viterbi import BIOConstraints, viterbi_decode

logger = logging.getLogger(__name__)

PREDICATE_PAD = datadir.NOT_PREDICATE  # padding value of the predicate-indicator sequences
GOLD = "srl_gold"  # sample key of the gold propositions (validation splits)
COUNTS = ("correct", "excess", "missed")  # logging-output keys srl_correct, ... (summed)


@dataclass
class SRLConfig(FairseqDataclass):
    data: str = field(default=MISSING, metadata={"help": "data directory from ssan-prepare-srl"})
    no_shuffle: bool = field(
        default=False, metadata={"help": "batch in file order instead of by length, shuffled"}
    )
    no_eval_f1: bool = field(
        default=False,
        metadata={"help": "validation without span precision / recall / F1 (constrained "
                          "decoding + the CoNLL scorer on every validation batch)"},
    )
    seed: int = II("common.seed")
    train_subset: str = II("dataset.train_subset")


@register_task("srl", dataclass=SRLConfig)
class SRLTask(FairseqTask):
    def __init__(self, cfg: SRLConfig, word_dict: Dictionary, label_dict: Dictionary,
                 char_dict: Optional[Dictionary] = None):
        super().__init__(cfg)
        self.word_dict = word_dict
        self.label_dict = label_dict
        self.char_dict = char_dict  # None: a directory without characters
        self._constraints = None

    @classmethod
    def setup_task(cls, cfg: SRLConfig, **kwargs):
        dicts = []
        for path in (datadir.word_dict_path(cfg.data), datadir.label_dict_path(cfg.data)):
            if not os.path.exists(path):
                raise FileNotFoundError(
                    f"{path} not found: --task srl expects a directory written by "
                    "ssan-prepare-srl"
                )
            dicts.append(Dictionary.load(path))
        chars = datadir.char_dict_path(cfg.data)
        char_dict = Dictionary.load(chars) if os.path.exists(chars) else None
        logger.info("srl: %d words, %d labels, %s", len(dicts[0]),
                    len(dicts[1]) - dicts[1].nspecial,
                    f"{len(char_dict)} characters" if char_dict else "no characters")
        return cls(cfg, *dicts, char_dict)

    @property
    def source_dictionary(self):
        return self.word_dict

    @property
    def target_dictionary(self):
        return self.label_dict

    def load_dataset(self, split, combine=False, **kwargs):
        dictionaries = {datadir.WORDS: self.word_dict, datadir.PREDICATE: None,
                        datadir.LABELS: self.label_dict}
        parts = {}
        for name in datadir.INDEXED:
            prefix = datadir.dataset_prefix(self.cfg.data, split, name)
            ds = data_utils.load_indexed_dataset(prefix, dictionaries[name])
            if ds is None:
                raise FileNotFoundError(
                    f"SRL split {split!r}: {prefix}.{{bin,idx}} not found "
                    "(run ssan-prepare-srl)"
                )
            parts[name] = ds
        words, predicate = parts[datadir.WORDS], parts[datadir.PREDICATE]
        labels = parts[datadir.LABELS]
        if not (np.array_equal(words.sizes, predicate.sizes)
                and np.array_equal(words.sizes, labels.sizes)):
            raise ValueError(f"SRL split {split!r}: words, predicate and labels do not align")
        dataset = NestedDictionaryDataset(
            {
                "id": IdDataset(),
                "net_input": {
                    "src_tokens": RightPadDataset(words, pad_idx=self.word_dict.pad()),
                    "src_lengths": NumelDataset(words, reduce=False),
                    "predicate": RightPadDataset(predicate, pad_idx=PREDICATE_PAD),
                    **self._chars_dataset(split, words.sizes),
                },
                "target": RightPadDataset(labels, pad_idx=self.label_dict.pad()),
                "nsentences": NumSamplesDataset(),
                "ntokens": NumelDataset(words, reduce=True),
                **self._gold_dataset(split, words.sizes),
            },
            sizes=[words.sizes],
        )
        if not self.cfg.no_shuffle:  # batches of similar lengths, in a seeded random order
            with data_utils.numpy_seed(self.cfg.seed):
                shuffle = np.random.permutation(len(dataset))
            dataset = SortDataset(dataset, sort_order=[shuffle, words.sizes])
        logger.info("srl: split %s, %d instances", split, len(dataset))
        self.datasets[split] = dataset
        return dataset

    def _chars_dataset(self, split, sizes) -> dict:
        """{"chars": WordCharactersDataset} when the directory has characters, else {}."""
        if self.char_dict is None:
            return {}
        prefix = datadir.dataset_prefix(self.cfg.data, split, datadir.CHARS)
        chars = data_utils.load_indexed_dataset(prefix, self.char_dict)
        if chars is None:
            raise FileNotFoundError(f"SRL split {split!r}: {prefix}.{{bin,idx}} not found while "
                                    f"{datadir.char_dict_path(self.cfg.data)} exists (prepare "
                                    "the data again with ssan-prepare-srl)")
        return {"chars": WordCharactersDataset(chars, sizes, self.char_dict.eos(),
                                               self.char_dict.pad(), split=split)}

    def _gold_dataset(self, split, sizes) -> dict:
        """{GOLD: per-instance gold propositions} for validation splits with F1, else {}."""
        if getattr(self.cfg, "no_eval_f1", False) or split == getattr(self.cfg, "train_subset", None):
            return {}
        for path in (datadir.props_path(self.cfg.data, split),
                     datadir.instances_path(self.cfg.data, split)):
            if not os.path.exists(path):
                raise FileNotFoundError(f"SRL split {split!r}: {path} not found, needed for "
                                        "the validation F1 (run ssan-prepare-srl, or "
                                        "--no-eval-f1)")
        gold = read_gold_instances(self.cfg.data, split)
        if len(gold) != len(sizes) or any(len(g.targets) != n for g, n in zip(gold, sizes)):
            raise ValueError(f"SRL split {split!r}: the gold props and instances table do not "
                             "match the indexed datasets (prepare the data again)")
        return {GOLD: ListDataset(gold, sizes)}

    def get_batch_iterator(self, dataset, *args, required_batch_size_multiple=1, **kwargs):
        """fairseq's, with ``--required-batch-size-multiple`` applied to the training split only:
        fairseq's batch_by_size leaves out the last (number of instances mod the multiple)
        instances, which a validation F1 over the whole split cannot afford."""
        if dataset is not self.datasets.get(getattr(self.cfg, "train_subset", None)):
            required_batch_size_multiple = 1
        return super().get_batch_iterator(
            dataset, *args, required_batch_size_multiple=required_batch_size_multiple, **kwargs)

    def valid_step(self, sample, model, criterion):
        """The criterion's loss and logging output, plus the batch's span counts
        (``srl_correct``, ``srl_excess``, ``srl_missed``) when the split carries its gold."""
        loss, sample_size, logging_output = super().valid_step(sample, model, criterion)
        if GOLD in sample:
            decoded = self.decode(model, sample)
            tags = [decoded[i] for i in sample["id"].tolist()]
            counts = instance_counts(sample[GOLD], tags)
            for key in COUNTS:
                logging_output["srl_" + key] = getattr(counts, key)
        return loss, sample_size, logging_output

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        if not any("srl_correct" in log for log in logging_outputs):
            return
        for key in COUNTS:
            metrics.log_scalar_sum("_srl_" + key,
                                   int(sum(log.get("srl_" + key, 0) for log in logging_outputs)))

        def derived(index):
            def fn(meters):
                counts = Counts(*(int(meters["_srl_" + key].sum) for key in COUNTS))
                return counts.prf()[index]
            return fn

        for index, name in enumerate(("precision", "recall", "f1")):
            metrics.log_derived(name, derived(index))

    @property
    def constraints(self) -> BIOConstraints:
        """BIO constraints over the label dictionary (special symbols never emitted)."""
        if self._constraints is None:
            self._constraints = BIOConstraints(self.label_dict.symbols)
        return self._constraints

    @torch.no_grad()
    def decode(self, model, sample) -> Dict[int, List[str]]:
        """Constrained Viterbi tags per instance: {instance id: [tag per word]}."""
        net_output = model(**sample["net_input"])
        lprobs = model.get_normalized_probs(net_output, log_probs=True)
        lengths = sample["net_input"]["src_lengths"]
        predicates = sample["net_input"]["predicate"].eq(datadir.IS_PREDICATE).long().argmax(dim=1)
        paths = viterbi_decode(lprobs, lengths, predicates, self.constraints)
        symbols = self.label_dict.symbols
        ids = sample["id"].tolist()
        return {i: [symbols[k] for k in path] for i, path in zip(ids, paths)}
