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
from fairseq.tasks import TASK_REGISTRY

from ..cli.errors import InputError
from ..cli.files import check_input_dir, check_output_file
from ..cli.checkpoints import load_checkpoint
from . import datadir
from .brackets import bio_to_brackets
from .props import PropsSentence, read_props, write_props
from .scorer import SRLEvalResult, evaluate_files


class EvaluationError(InputError, ValueError):
    """A missing or malformed input, or a checkpoint that is not an SRL tagger."""


def _checked(check, *args, **kwargs):
    """``check(*args, **kwargs)`` with its InputError raised as EvaluationError."""
    try:
        return check(*args, **kwargs)
    except EvaluationError:
        raise
    except (InputError, ValueError) as err:
        raise EvaluationError(str(err)) from None


def check_subset(data: str, subset: str) -> dict:
    """The manifest's record of ``subset``; EvaluationError if ``data`` has no such prepared
    split (its props, instances table and indexed datasets)."""
    files = [datadir.props_path(data, subset), datadir.instances_path(data, subset)]
    files += [datadir.dataset_prefix(data, subset, name) + ext
              for name in datadir.INDEXED for ext in (".bin", ".idx")]
    manifest = {}
    if os.path.isfile(datadir.manifest_path(data)):
        with open(datadir.manifest_path(data), encoding="utf-8") as f:
            manifest = _checked(json.load, f)
    missing = [os.path.basename(p) for p in files if not os.path.isfile(p)]
    if missing:
        prepared = ", ".join(manifest.get("splits", {})) or "none found"
        raise EvaluationError(f"--subset {subset}: {data} has no prepared {subset!r} split "
                              f"(missing {', '.join(missing[:3])}); prepared splits: {prepared}")
    return manifest.get("splits", {}).get(subset, {})


def load_srl_checkpoint(checkpoint: str, data: str, cpu: bool = False):
    """(model in eval mode, SRLTask on ``data``, whether on CUDA); EvaluationError otherwise
    (ssan_plugin.cli.load_checkpoint's checks: a file, not empty or truncated, safe to load,
    task ``srl`` and an ``srl_tagger*`` architecture). The task class is the one registered as
    ``srl`` (tasks/srl.py registers it; this package sits below tasks/ and never imports it)."""
    if not os.path.exists(data):
        raise EvaluationError(f"{data} does not exist")
    _checked(check_input_dir, data, "--data")
    if not os.path.exists(checkpoint):
        raise EvaluationError(f"{checkpoint} does not exist")
    _checked(load_checkpoint, checkpoint, expect_task="srl", expect_arch="srl_tagger*",
             what="--checkpoint")
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [checkpoint], arg_overrides={"data": data}
    )
    if not isinstance(task, TASK_REGISTRY["srl"]):
        raise EvaluationError(f"{checkpoint} was not trained with --task srl")
    model = models[0]
    use_cuda = torch.cuda.is_available() and not cpu
    if use_cuda:
        model.cuda()
    model.eval()
    return model, task, use_cuda


def decode_subset(task, model, subset: str, batch_size: int,
                  use_cuda: bool) -> Dict[int, List[str]]:
    """{instance id: [BIO tag per word]} for every instance of the subset (checked); ``task``
    is the ``srl`` task (``SRLTask``) of :func:`load_srl_checkpoint`."""
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
    report (parent folders created); returns (report, result). Every input and output is
    checked before the model is loaded; bad input raises EvaluationError."""
    for option, path in (("--gold-props", gold_props), ("--pred-props", pred_props),
                         ("--json", json_path)):
        _checked(check_output_file, path, option)
    if not os.path.exists(data):
        raise EvaluationError(f"{data} does not exist")
    _checked(check_input_dir, data, "--data")
    recorded = check_subset(data, subset)
    gold_path = datadir.props_path(data, subset)
    gold = _checked(read_props, gold_path)
    if "sentences" in recorded and len(gold) != recorded["sentences"]:
        raise EvaluationError(f"{gold_path} has {len(gold)} sentences, but the prepared "
                              f"{subset!r} split has {recorded['sentences']} (manifest.json): "
                              f"the gold props no longer match the data; prepare it again")
    instances = _checked(datadir.read_instances, datadir.instances_path(data, subset))
    model, task, use_cuda = load_srl_checkpoint(checkpoint, data, cpu)
    decoded = decode_subset(task, model, subset, batch_size, use_cuda)
    pred = _checked(predicted_props, gold, instances, decoded, gold_path)

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
