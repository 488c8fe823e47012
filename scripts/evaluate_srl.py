#!/usr/bin/env python
"""Decode an SRL subset with a checkpoint and score it as srl-eval.pl does (public contract).

    evaluate_srl.py --data DIR --checkpoint PATH --subset test \
        --gold-props OUT --pred-props OUT --json OUT

DIR is a directory from scripts/prepare_srl.py (the one the checkpoint was trained on).
Every instance (predicate) of the subset is decoded with BIO-constrained Viterbi (the
predicate word always V); the gold and predicted propositions are written as CoNLL-2005 props
files (one column per predicate, bracket notation; both files list every sentence of the
subset), then scored: precision, recall, F1 in percent, overall and per label, V excluded
(ssan_plugin.srl.scorer, equal to srl-eval.pl on the same files). The JSON has
``overall.{precision,recall,f1,correct,excess,missed}``, ``per_label``, ``excluded`` and
the counts; the srl-eval.pl table is printed.
"""

import argparse
import csv
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import ssan_plugin  # noqa: E402,F401  (registers task/model; before loading the checkpoint)
import torch  # noqa: E402
from fairseq import checkpoint_utils, utils  # noqa: E402

from ssan_plugin.srl.brackets import bio_to_brackets  # noqa: E402
from ssan_plugin.srl.props import read_props, write_props  # noqa: E402
from ssan_plugin.srl.scorer import evaluate_files  # noqa: E402
from ssan_plugin.tasks.srl import SRLTask  # noqa: E402


def decode_subset(task, model, subset: str, batch_size: int, use_cuda: bool):
    """{instance id: [BIO tag per word]} for every instance of the subset (checked)."""
    task.load_dataset(subset)
    dataset = task.dataset(subset)
    itr = task.get_batch_iterator(
        dataset=dataset,
        max_sentences=batch_size,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
        ignore_invalid_inputs=False,
        required_batch_size_multiple=1,  # DESIGN.md 6: never drop a last partial batch
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


def predicted_props(gold, instances, decoded, where: str):
    """Gold props sentences + decoded tags -> predicted props sentences (same targets)."""
    by_sentence = defaultdict(list)
    for inst in instances:
        by_sentence[inst[1]].append((inst[2], inst[0]))
    if by_sentence and max(by_sentence) >= len(gold):
        raise ValueError(f"{where}: instances refer to sentence {max(by_sentence)}, the gold "
                         f"props have {len(gold)} sentences")
    out = []
    for j, (targets, columns) in enumerate(gold):
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


def read_instances(path: str):
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    if not rows or rows[0] != ["instance", "sentence", "predicate"]:
        raise ValueError(f"{path}: not an instances file from prepare_srl.py")
    return [tuple(int(x) for x in row) for row in rows[1:]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--data", required=True, metavar="DIR")
    parser.add_argument("--checkpoint", required=True, metavar="PATH")
    parser.add_argument("--subset", default="test")
    parser.add_argument("--gold-props", required=True, metavar="OUT")
    parser.add_argument("--pred-props", required=True, metavar="OUT")
    parser.add_argument("--json", required=True, metavar="OUT")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--cpu", action="store_true", help="decode on CPU even with a GPU")
    args = parser.parse_args(argv)

    for path in (args.data, args.checkpoint):
        if not os.path.exists(path):
            parser.exit(2, f"evaluate_srl.py: error: {path} does not exist\n")
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [args.checkpoint], arg_overrides={"data": args.data}
    )
    if not isinstance(task, SRLTask):
        parser.exit(2, f"evaluate_srl.py: error: {args.checkpoint} was not trained with --task srl\n")
    model = models[0]
    use_cuda = torch.cuda.is_available() and not args.cpu
    if use_cuda:
        model.cuda()
    model.eval()

    decoded = decode_subset(task, model, args.subset, args.batch_size, use_cuda)
    gold_path = os.path.join(args.data, f"{args.subset}.props")
    gold = read_props(gold_path)
    instances = read_instances(os.path.join(args.data, f"{args.subset}.instances.tsv"))
    pred = predicted_props(gold, instances, decoded, gold_path)

    for path in (args.gold_props, args.pred_props, args.json):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_props(args.gold_props, gold)
    write_props(args.pred_props, pred)
    result = evaluate_files(args.gold_props, args.pred_props)
    report = {"data": os.path.abspath(args.data), "checkpoint": os.path.abspath(args.checkpoint),
              "subset": args.subset, **result.to_json()}
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    sys.stdout.write(result.report())
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
