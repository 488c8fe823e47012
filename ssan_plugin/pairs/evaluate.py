"""Sentence-pair checkpoints -> predictions, metrics and paired comparisons.

``evaluate_checkpoints(data, [(name, checkpoint), ...], subset, ...)``: every pair of the subset
is predicted by every checkpoint (eval mode, batches in any order, results put back in input
order and checked complete); per system the metrics of its heads (``metrics.system_metrics``:
accuracy, per-class F1, confusion matrix; Pearson, Spearman, MSE); each later system against
the first with the paired bootstrap (``metrics.compare``); a predictions file per system, one
line per pair in input order, ``pair_ID <TAB> predicted_label <TAB> predicted_score`` (``-`` for
a head the model does not have; score with 4 decimals).

``evaluate_predictions(data, [(name, predictions.tsv), ...], subset, ...)`` scores such files
(written earlier, e.g. kept by an experiment runner without its checkpoints) the same way: the
file must list exactly the subset's pairs, in input order. Scores are read as written (4
decimals), so relatedness metrics can differ from the checkpoint's own in the 4th decimal.

Seeds pooled: systems named ``GROUP@SEED`` (e.g. ``ssan@1``) form groups (a name without ``@``
is a group of its own). The JSON then adds ``groups``: per group ``name``, ``n_seeds``,
``systems``, the ``mean`` and ``std`` (sample standard deviation; 0 for one seed) over its
seeds of accuracy, macro F1, Pearson, Spearman and MSE (those its members have), and for every
group after the first a ``comparison`` against the first: per metric the seed-level test
(``seed_level``, the verdict, Holm-corrected over every group and metric) and the seed-averaged
metric compared by a paired bootstrap that draws the same pairs for every seed, seeds held
fixed (``p_value``, a sentence-level p; ``metrics.compare_groups``).
"""

import csv
import json
import math
import os
import statistics
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import torch
from fairseq import checkpoint_utils, utils

from ..errors import InputError, one_line
from ..cli.files import Input, check_input_dir, guard_outputs, output_file, read_text
from ..cli.checkpoints import load_checkpoint
from ..stats.seed_groups import group_order, has_groups, parse_member, seed_level_cells, verdict
from ..stats.significance import holm
from . import datadir
from .corpus import LABELS
from .metrics import compare, compare_groups, system_metrics

MISSING = "-"


class EvaluationError(InputError, ValueError):
    """A missing or malformed input, or a checkpoint that is not a pair classifier."""


def check_subset(data: str, subset: str) -> None:
    try:
        check_input_dir(data, "--data")
    except InputError as err:
        raise EvaluationError(str(err)) from None
    files = [datadir.gold_path(data, subset), datadir.dict_path(data)]
    files += [datadir.side_prefix(data, subset, side) + ext for side in datadir.SIDES
              for ext in (".bin", ".idx")]
    missing = [os.path.basename(p) for p in files if not os.path.isfile(p)]
    if missing:
        prepared = sorted(s for s in datadir.SPLITS if os.path.isfile(datadir.gold_path(data, s)))
        none = "none (not a directory of ssan-prepare-pairs)"
        raise EvaluationError(f"--subset {subset}: {data} has no prepared {subset!r} split "
                              f"(missing {', '.join(missing[:3])}); prepared splits: "
                              f"{', '.join(prepared) or none}")


def check_dictionary(state: dict, checkpoint: str, data: str) -> None:
    """The checkpoint's word embedding has one row per entry of ``data``'s dictionary;
    EvaluationError naming both sizes otherwise (a model trained on another data directory)."""
    from ..cli.checkpoints import embedding_mismatch

    path = datadir.dict_path(data)
    try:
        mismatch = embedding_mismatch(state, "encoder.embed_tokens.weight", path)
    except InputError as err:
        raise EvaluationError(str(err)) from None
    if mismatch is not None:
        raise EvaluationError(f"--checkpoint {checkpoint} was trained on another dictionary: "
                              f"expected a word embedding of {mismatch[1]} rows ({path}, with "
                              f"the 4 special symbols), found {mismatch[0]}; evaluate it on the "
                              f"data directory it was trained on")


def load_pair_checkpoint(checkpoint: str, data: str, cpu: bool = False):
    """(model in eval mode, task on ``data``, on CUDA?); EvaluationError for a checkpoint that is
    missing, unsafe, truncated, not of task ``sentence_pair`` or trained on another
    dictionary."""
    try:
        state = load_checkpoint(checkpoint, expect_task="sentence_pair",
                                expect_arch="pair_classifier*", what="--checkpoint")
    except InputError as err:
        raise EvaluationError(str(err)) from None
    check_dictionary(state, checkpoint, data)
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [checkpoint], arg_overrides={"data": data})
    model = models[0]
    use_cuda = torch.cuda.is_available() and not cpu
    if use_cuda:
        model.cuda()
    model.eval()
    return model, task, use_cuda


def predict_subset(task, model, subset: str, batch_size: int, use_cuda: bool) -> Dict[int, dict]:
    task.load_dataset(subset)
    dataset = task.dataset(subset)
    itr = task.get_batch_iterator(
        dataset=dataset, max_sentences=batch_size, max_positions=None,
        ignore_invalid_inputs=False, required_batch_size_multiple=1, seed=1, num_workers=0,
    ).next_epoch_itr(shuffle=False)
    predictions = {}
    for sample in itr:
        if use_cuda:
            sample = utils.move_to_cuda(sample)
        predictions.update(task.predict(model, sample))
    if sorted(predictions) != list(range(len(dataset))):
        raise RuntimeError(f"predicted {len(predictions)} of {len(dataset)} pairs of {subset!r}")
    return predictions


def as_columns(predictions: Dict[int, dict]) -> Dict[str, list]:
    """{"label": [...] or None, "score": [...] or None} in input order."""
    rows = [predictions[i] for i in range(len(predictions))]
    return {key: None if rows[0][key] is None else [row[key] for row in rows]
            for key in ("label", "score")}


def write_predictions(path, gold, columns: Dict[str, list]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for i, pair in enumerate(gold):
            label = MISSING if columns["label"] is None else columns["label"][i]
            score = MISSING if columns["score"] is None else f"{columns['score'][i]:.4f}"
            f.write(f"{pair.pair_id}\t{label}\t{score}\n")


def predictions_path(base: str, name: str, several: bool) -> str:
    if not several:
        return base
    stem, ext = os.path.splitext(base)
    return f"{stem}.{name}{ext or '.tsv'}"


def _start(data: str, systems: Sequence[Tuple[str, str]], subset: str, outputs: Sequence[str]):
    """Checks shared by both entry points; returns the subset's gold pairs and their columns."""
    check_subset(data, subset)
    names = [name for name, _ in systems]
    if len(set(names)) != len(names):
        raise EvaluationError(f"system names repeat: {', '.join(names)}")
    try:  # replacing existing outputs is the caller's choice; an input never
        guard_outputs([output_file("output", path) for path in outputs],
                      [Input("--data", data)] + [Input(name, path, f"{name}={path}")
                                                 for name, path in systems],
                      overwrite=True, create_parents=False)
    except InputError as err:
        raise EvaluationError(str(err)) from None
    gold_file = datadir.gold_path(data, subset)
    try:
        gold = datadir.read_gold(gold_file)
    except (ValueError, IndexError, csv.Error) as err:  # UnicodeDecodeError: a ValueError
        text = one_line(err)
        if gold_file not in text:
            text = (f"{gold_file}: not a gold file of prepare_pairs.py ({type(err).__name__}: "
                    f"{text})")
        raise EvaluationError(f"{text}; prepare the data again") from None
    return gold, {"label": [p.label for p in gold], "score": [p.score for p in gold]}


def _check_heads(gold_columns, heads, subset: str, data: str) -> None:
    """The gold subset has a value for every pair in each predicted head."""
    for head in heads:
        if any(v is None for v in gold_columns[head]):
            raise EvaluationError(f"--subset {subset} of {data} has pairs without "
                                  f"{'entailment label' if head == 'label' else 'relatedness score'}")


GROUPED_METRICS = (("entailment", "accuracy"), ("entailment", "macro_f1"),
                   ("relatedness", "pearson"), ("relatedness", "spearman"), ("relatedness", "mse"))


def seed_groups(names: Sequence[str]) -> Dict[str, List[str]]:
    """{group: member names} for systems named GROUP@SEED (``ssan_plugin.stats.seed_groups``), in
    order of first appearance (a name without '@' is a group of its own); {} when no name has
    '@'."""
    if not has_groups(names):
        return {}
    return {group: [names[i] for i in members] for group, members in group_order(names).items()}


def _groups(result: dict, gold_columns, columns: Dict[str, dict], bootstrap_samples: int,
            seed: int) -> List[dict]:
    """The JSON's ``groups`` (module docstring), each after the first compared with it."""
    entries = []
    groups = seed_groups(list(columns))
    for name, members in groups.items():
        entry = {"name": name, "n_seeds": len(members), "systems": members, "mean": {}, "std": {}}
        for task, metric in GROUPED_METRICS:
            values = [result["systems"][m].get(task, {}).get(metric) for m in members]
            if all(v is not None for v in values):
                entry["mean"][metric] = statistics.fmean(values)
                entry["std"][metric] = statistics.stdev(values) if len(values) > 1 else 0.0
        if entries:
            first = entries[0]
            entry["comparison"] = {"against": first["name"], **compare_groups(
                gold_columns, [columns[m] for m in first["systems"]],
                [columns[m] for m in members], bootstrap_samples, seed,
                [parse_member(m).seed for m in first["systems"]],
                [parse_member(m).seed for m in members])}
        entries.append(entry)
    # Holm over every seed-level comparison the table reports (groups x metrics)
    tested = [(metric, test["seed_level"]) for e in entries[1:]
              for metric, test in e["comparison"].items()
              if metric != "against" and "seed_level" in test]
    for (metric, test), adjusted in zip(tested, holm([t["p"] for _, t in tested])):
        test["p_holm"] = adjusted
        test["verdict"] = verdict(test, higher_is_better=metric != "mse")
    return entries


def _finish(result: dict, gold_columns, columns: Dict[str, dict], json_out: str,
            bootstrap_samples: int, seed: int) -> dict:
    """Each later system against the first (paired bootstrap), seed groups when systems are
    named GROUP@SEED; write and return the JSON."""
    names = list(columns)
    for name in names[1:]:
        result["comparisons"][name] = {"against": names[0], **compare(
            gold_columns, columns[names[0]], columns[name], bootstrap_samples, seed)}
    groups = _groups(result, gold_columns, columns, bootstrap_samples, seed)
    if groups:
        result["groups"] = groups
    Path(json_out).parent.mkdir(parents=True, exist_ok=True)
    with open(json_out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    return result


def evaluate_checkpoints(data: str, systems: Sequence[Tuple[str, str]], subset: str,
                         json_out: str, predictions_out: str = None, batch_size: int = 64,
                         cpu: bool = False, bootstrap_samples: int = 1000,
                         seed: int = 12345) -> dict:
    """See the module docstring; returns the JSON written to ``json_out``."""
    gold, gold_columns = _start(data, systems, subset,
                                [json_out] + ([predictions_out] if predictions_out else []))
    loaded = [(name, path, load_pair_checkpoint(path, data, cpu)) for name, path in systems]
    result = {"data": str(Path(data).resolve()), "subset": subset, "pairs": len(gold),
              "systems": {}, "comparisons": {}}
    columns: Dict[str, dict] = {}
    for name, path, (model, task, use_cuda) in loaded:
        _check_heads(gold_columns, [head for head, key in (("label", "entailment"),
                                                           ("score", "relatedness"))
                                    if key in task.heads], subset, data)
        predicted = predict_subset(task, model, subset, batch_size, use_cuda)
        columns[name] = as_columns(predicted)
        result["systems"][name] = {"checkpoint": str(path), "target": str(task.cfg.pair_target),
                                   **system_metrics(gold_columns, columns[name])}
        if predictions_out:
            out = predictions_path(predictions_out, name, len(systems) > 1)
            write_predictions(out, gold, columns[name])
            result["systems"][name]["predictions"] = out
    return _finish(result, gold_columns, columns, json_out, bootstrap_samples, seed)


def read_predictions(path: str, gold) -> Dict[str, list]:
    """A predictions file (``write_predictions``' format) -> columns as ``as_columns`` gives,
    checked line by line against the gold pairs: same pair ids in the same order, labels from
    the label set, scores numbers, each column all ``-`` or all given."""
    try:
        lines = read_text(path, "--pred").splitlines()  # UTF-8 checked, a BOM dropped
    except InputError as err:
        raise EvaluationError(str(err)) from None
    if len(lines) != len(gold):
        raise EvaluationError(f"{path}: {len(lines)} lines for the {len(gold)} pairs of the subset")
    labels, scores = [], []
    for number, (line, pair) in enumerate(zip(lines, gold), 1):
        fields = line.split("\t")
        if len(fields) != 3:
            raise EvaluationError(f"{path}:{number}: expected pair_ID, label, score (3 tab-"
                                  f"separated fields), got {len(fields)}")
        pair_id, label, score = fields
        if pair_id != str(pair.pair_id):
            raise EvaluationError(f"{path}:{number}: pair {pair_id!r} where the subset has "
                                  f"{pair.pair_id!r} (predictions must be in input order)")
        if label != MISSING and label not in LABELS:
            raise EvaluationError(f"{path}:{number}: unknown label {label!r} (expected one of "
                                  f"{', '.join(LABELS)} or {MISSING})")
        labels.append(None if label == MISSING else label)
        try:
            value = None if score == MISSING else float(score)
        except ValueError:
            raise EvaluationError(f"{path}:{number}: score {score!r} is not a number") from None
        if value is not None and not math.isfinite(value):
            raise EvaluationError(f"{path}:{number}: score {score!r} is not a finite number "
                                  f"(metrics of NaN or infinite predictions mean nothing)")
        scores.append(value)
    columns = {}
    for key, values in (("label", labels), ("score", scores)):
        given = [v is not None for v in values]
        if any(given) and not all(given):
            raise EvaluationError(f"{path}:{given.index(False) + 1}: {key} missing ({MISSING}) "
                                  f"where other lines have one")
        columns[key] = values if all(given) else None
    if columns["label"] is None and columns["score"] is None:
        raise EvaluationError(f"{path}: neither labels nor scores")
    return columns


def evaluate_predictions(data: str, systems: Sequence[Tuple[str, str]], subset: str,
                         json_out: str, bootstrap_samples: int = 1000, seed: int = 12345) -> dict:
    """Score existing predictions files of ``subset`` (see the module docstring) exactly as
    :func:`evaluate_checkpoints` scores its own; returns the JSON written to ``json_out``."""
    gold, gold_columns = _start(data, systems, subset, [json_out])
    result = {"data": str(Path(data).resolve()), "subset": subset, "pairs": len(gold),
              "systems": {}, "comparisons": {}}
    columns: Dict[str, dict] = {}
    for name, path in systems:
        columns[name] = read_predictions(path, gold)
        _check_heads(gold_columns, [h for h in ("label", "score") if columns[name][h] is not None],
                     subset, data)
        result["systems"][name] = {"predictions": str(path),
                                   **system_metrics(gold_columns, columns[name])}
    heads = {tuple(h for h in ("label", "score") if c[h] is not None) for c in columns.values()}
    if len(heads) > 1:
        raise EvaluationError("the predictions files do not have the same heads (labels, "
                              "scores): nothing to compare")
    return _finish(result, gold_columns, columns, json_out, bootstrap_samples, seed)


def report(result: dict) -> str:
    """A markdown table of the systems (and deltas / p-values against the first)."""
    lines = ["| system | accuracy | macro F1 | Pearson r | Spearman rho | MSE |",
             "|---|---|---|---|---|---|"]
    for name, system in result["systems"].items():
        ent, rel = system.get("entailment", {}), system.get("relatedness", {})
        test = result["comparisons"].get(name, {})

        def cell(value, metric=None, fmt="{:.2f}"):
            if value is None:
                return "–"
            text = fmt.format(value)
            if metric in test:
                text += f" ({test[metric]['delta']:+.3g}, p={test[metric]['p_value']:.3g})"
            return text

        lines.append(f"| {name} | {cell(ent.get('accuracy'), 'accuracy')} | "
                     f"{cell(ent.get('macro_f1'))} | {cell(rel.get('pearson'), 'pearson', '{:.4f}')} | "
                     f"{cell(rel.get('spearman'), None, '{:.4f}')} | {cell(rel.get('mse'), 'mse', '{:.4f}')} |")
    if result.get("groups"):
        lines += ["", "Seed groups against the first (verdict: the seed-level test, Holm over "
                      "every group and metric; the last column describes these seeds only):",
                  "", "| group | seeds | metric | mean ± sd | Δ [95% seed-level interval] | "
                      "p (seeds) | p (Holm) | per-seed Δ | same sign | verdict | "
                      "p (sentences, seeds fixed) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for group in result["groups"]:
            test = group.get("comparison", {})
            for metric, mean in group["mean"].items():
                cells = ["", "", "", "", "", "", ""]
                if metric in test:
                    seed_level = test[metric].get("seed_level") or {}
                    cells = seed_level_cells(seed_level, 4) + [
                        seed_level.get("verdict", verdict(seed_level)),
                        f"{test[metric]['p_value']:.3g}"]
                lines.append(f"| {group['name']} | {group['n_seeds']} | {metric} | "
                             f"{mean:.4g} ± {group['std'][metric]:.2g} | " + " | ".join(cells)
                             + " |")
    return "\n".join(lines) + "\n"
