"""Decode an SRL split with a checkpoint and score it as srl-eval.pl does.

Every instance (predicate) of the split is decoded with BIO-constrained Viterbi
(``SRLTask.decode``: the predicate word is always ``V``). The predictions are put back into
the sentences of the split's gold props file (``datadir``: ``S.props`` + ``S.instances.tsv``),
one bracket column per predicate, so the gold and predicted props files list the same
sentences and targets; both are written in the CoNLL-2005 format and scored with ``scorer``
(precision / recall / F1 in percent, ``V`` excluded; equal to ``perl srl-eval.pl GOLD PRED``).

The JSON report: ``data``, ``checkpoint``, ``subset`` + ``SRLEvalResult.to_json()``
(``overall.{precision,recall,f1,correct,excess,missed}``, ``per_label``, ``excluded`` and the
counts).
"""

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import torch
from fairseq import checkpoint_utils, utils

from ..tasks.srl import SRLTask
from . import datadir
from .brackets import bio_to_brackets
from .props import PropsSentence, read_props, write_props
from .scorer import SRLEvalResult, evaluate_files


class EvaluationError(ValueError):
    """A missing input or a checkpoint that is not an SRL tagger."""


def load_srl_checkpoint(checkpoint: str, data: str, cpu: bool = False):
    """(model in eval mode, SRLTask on ``data``, whether on CUDA); EvaluationError otherwise."""
    for path in (data, checkpoint):
        if not os.path.exists(path):
            raise EvaluationError(f"{path} does not exist")
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [checkpoint], arg_overrides={"data": data}
    )
    if not isinstance(task, SRLTask):
        raise EvaluationError(f"{checkpoint} was not trained with --task srl")
    model = models[0]
    use_cuda = torch.cuda.is_available() and not cpu
    if use_cuda:
        model.cuda()
    model.eval()
    return model, task, use_cuda


def decode_subset(task: SRLTask, model, subset: str, batch_size: int,
                  use_cuda: bool) -> Dict[int, List[str]]:
    """{instance id: [BIO tag per word]} for every instance of the subset (checked)."""
    task.load_dataset(subset)
    dataset = task.dataset(subset)
    itr = task.get_batch_iterator(
        dataset=dataset,
        max_sentences=batch_size,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
        ignore_invalid_inputs=False,
        required_batch_size_multiple=1,  # never drop a last partial batch
        seed=1,
        num_workers=0,
    ).next_epoch_itr(shuffle=False)
    decoded = {}
    for sample in itr:
        if use_cuda:
            sample = utils.move_to_cuda(sample)
        decoded.update(task.decode(model, sample))
    if len(decoded) != len(dataset):
        raise RuntimeError(f"decoded {len(decoded)} of {len(dataset)} instances of {subset!r}")
    return decoded


def predicted_props(gold: Sequence[PropsSentence], instances: Sequence[datadir.Instance],
                    decoded: Dict[int, List[str]], where: str) -> List[PropsSentence]:
    """Gold props sentences + decoded tags -> predicted props sentences (same targets).

    ``where`` names the gold file in error messages (ValueError when the instances table,
    the gold props and the decoded tags disagree).
    """
    by_sentence = defaultdict(list)
    for inst in instances:
        by_sentence[inst.sentence].append((inst.predicate, inst.instance))
    if by_sentence and max(by_sentence) >= len(gold):
        raise ValueError(f"{where}: instances refer to sentence {max(by_sentence)}, the gold "
                         f"props have {len(gold)} sentences")
    out = []
    for j, (targets, _) in enumerate(gold):
        preds = sorted(by_sentence.get(j, []))
        positions = [i for i, t in enumerate(targets) if t != "-"]
        if [p for p, _ in preds] != positions:
            raise ValueError(f"{where}: sentence {j}: predicates {positions} in the gold props, "
                             f"instances at {[p for p, _ in preds]}")
        pred_columns = []
        for _, inst in preds:
            tags = decoded[inst]
            if len(tags) != len(targets):
                raise ValueError(f"{where}: instance {inst} has {len(tags)} tags for "
                                 f"{len(targets)} words")
            pred_columns.append(bio_to_brackets(tags))
        out.append((list(targets), pred_columns))
    return out


def evaluate_checkpoint(data: str, checkpoint: str, subset: str, gold_props: str,
                        pred_props: str, json_path: str, batch_size: int = 64,
                        cpu: bool = False) -> Tuple[dict, SRLEvalResult]:
    """Decode ``subset`` of ``data``, write the gold and predicted props files and the JSON
    report (parent folders created); returns (report, result)."""
    model, task, use_cuda = load_srl_checkpoint(checkpoint, data, cpu)
    decoded = decode_subset(task, model, subset, batch_size, use_cuda)
    gold_path = datadir.props_path(data, subset)
    gold = read_props(gold_path)
    instances = datadir.read_instances(datadir.instances_path(data, subset))
    pred = predicted_props(gold, instances, decoded, gold_path)

    for path in (gold_props, pred_props, json_path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_props(gold_props, gold)
    write_props(pred_props, pred)
    result = evaluate_files(gold_props, pred_props)
    report = {"data": os.path.abspath(data), "checkpoint": os.path.abspath(checkpoint),
              "subset": subset, **result.to_json()}
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    return report, result
