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

from ..errors import InputError
from ..cli.files import Input, check_input_dir, guard_outputs, output_file
from ..cli.checkpoints import embedding_mismatch, load_checkpoint
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


def read_manifest(data: str) -> dict:
    """``data``'s manifest.json ({} when there is none), checked where this module reads it:
    a JSON object whose ``splits`` (if present) maps split names to objects with an integer
    ``sentences``. EvaluationError naming the file and the key otherwise."""
    path = datadir.manifest_path(data)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (ValueError, OSError) as err:  # JSONDecodeError, UnicodeDecodeError
        raise EvaluationError(f"{path} is not valid JSON ({err}); prepare the data again with "
                              f"ssan-prepare-srl") from None
    if not isinstance(manifest, dict):
        raise EvaluationError(f"{path}: expected a JSON object, found "
                              f"{type(manifest).__name__}")
    splits = manifest.get("splits", {})
    if not isinstance(splits, dict):
        raise EvaluationError(f"{path}: key 'splits' must be an object of splits, found "
                              f"{type(splits).__name__}")
    for name, record in splits.items():
        if not isinstance(record, dict):
            raise EvaluationError(f"{path}: key 'splits.{name}' must be an object, found "
                                  f"{type(record).__name__}")
        sentences = record.get("sentences", 0)
        if isinstance(sentences, bool) or not isinstance(sentences, int) or sentences < 0:
            raise EvaluationError(f"{path}: key 'splits.{name}.sentences' must be a "
                                  f"non-negative integer, found {sentences!r}")
    return manifest


def check_subset(data: str, subset: str) -> dict:
    """The manifest's record of ``subset``; EvaluationError if ``data`` has no such prepared
    split (its props, instances table and indexed datasets)."""
    files = [datadir.props_path(data, subset), datadir.instances_path(data, subset)]
    files += [datadir.dataset_prefix(data, subset, name) + ext
              for name in datadir.INDEXED for ext in (".bin", ".idx")]
    manifest = read_manifest(data)
    missing = [os.path.basename(p) for p in files if not os.path.isfile(p)]
    if missing:
        prepared = ", ".join(manifest.get("splits", {})) or "none found"
        raise EvaluationError(f"--subset {subset}: {data} has no prepared {subset!r} split "
                              f"(missing {', '.join(missing[:3])}); prepared splits: {prepared}")
    return manifest.get("splits", {}).get(subset, {})


def load_srl_checkpoint(checkpoint: str, data: str, cpu: bool = False):
    """(model in eval mode, SRLTask on ``data``, whether on CUDA); EvaluationError otherwise
    (ssan_plugin.cli.checkpoints.load_checkpoint's checks: a file, not empty or truncated, safe to load,
    task ``srl`` and an ``srl_tagger*`` architecture; a word embedding as large as ``data``'s
    word dictionary). The task class is the one registered as
    ``srl`` (tasks/srl.py registers it; this package sits below tasks/ and never imports it)."""
    if not os.path.exists(data):
        raise EvaluationError(f"{data} does not exist")
    _checked(check_input_dir, data, "--data")
    if not os.path.exists(checkpoint):
        raise EvaluationError(f"{checkpoint} does not exist")
    state = _checked(load_checkpoint, checkpoint, expect_task="srl", expect_arch="srl_tagger*",
                     what="--checkpoint")
    words = datadir.word_dict_path(data)
    mismatch = _checked(embedding_mismatch, state, "encoder.embed_tokens.weight", words)
    if mismatch is not None:
        raise EvaluationError(f"--checkpoint {checkpoint} was trained on another dictionary: "
                              f"expected a word embedding of {mismatch[1]} rows ({words}, with "
                              f"the 4 special symbols), found {mismatch[0]}; evaluate it on the "
                              f"data directory it was trained on")
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
    # existing outputs may be replaced (the command asks for --overwrite); an input never is
    _checked(guard_outputs, [output_file("--gold-props", gold_props),
                             output_file("--pred-props", pred_props),
                             output_file("--json", json_path)],
             [Input("--data", data), Input("--checkpoint", checkpoint)], overwrite=True,
             create_parents=False)
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
