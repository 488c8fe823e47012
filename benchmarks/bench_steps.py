#!/usr/bin/env python
"""Paired steps: SSAN against the baseline in one process, batch by batch.

``bench_ssan.py`` times whole ``fairseq-train`` processes one after another; on a shared
machine two runs of the same model can differ by 10 %, more than the gaps it looks for. Here
every system is a fairseq ``Trainer`` in one process, built from the same data-bin and
training flags, and all of them take the same batches in turn:

- a training step (``Trainer.train_step``: forward, backward, clipping, optimizer update);
- a teacher-forced scoring forward (eval mode, no gradient: the model's forward and its
  log-probabilities, the arithmetic of ``fairseq-generate --score-reference``).

Calls on one batch run back to back (the order rotates each round), so each batch gives a
ratio ``baseline time / system time`` (throughput relative to the baseline: words/s and
sentences/s, the batch being the same) under one machine state. The table gives the ratio of
the summed times with a bootstrap 95 % interval over batches. It also gives each measure's
arithmetic ceiling: the ratio of the floating-point operations (``torch.utils.flop_counter``)
of one training step and of one scoring forward on the first batch, i.e. the throughput ratio
if time were the matrix products alone.

    python benchmarks/bench_steps.py runs/bench/builtin/data-bin --steps 60
    python benchmarks/bench_steps.py DATA --system "narrow=--ssan-policy-dim 32" --json out.json

Systems: ``baseline`` and ``ssan`` as in ``bench_ssan.py`` (the demo's model size), plus each
``--system NAME=FLAGS`` (SSAN with extra flags); or, with ``--plan PLAN.json`` (``--study``),
the systems of a runner plan's study with the plan's own flags, as ``bench_ssan.py --plan``
takes them. Threads: torch's default, or ``OMP_NUM_THREADS``. Memory is not measured here (one
process): ``bench_ssan.py`` does that.

    python benchmarks/bench_steps.py runs/bench/news/data-bin --plan examples/everywhere/bench_plan.json
"""

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ssan import MODEL, ROOT, TRAINING, plan_systems, with_ssan_systems  # noqa: E402

from ssan_plugin.cli.arguments import ArgumentParser, positive_int  # noqa: E402
from ssan_plugin.experiments.archive import project_path  # noqa: E402
from ssan_plugin.experiments.tables.bench import steps_table  # noqa: E402
from ssan_plugin.stats.significance import paired_ratio_interval  # noqa: E402

MEASURES = ("train_step", "score_forward")


def build_trainer(data_bin: Path, flags, max_tokens: int, seed: int, common=(*MODEL, *TRAINING)):
    """A fairseq Trainer for ``fairseq-train DATA_BIN FLAGS COMMON`` (CPU)."""
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, input_args=[
        str(data_bin), "--user-dir", str(ROOT / "ssan_plugin"), "--cpu", *flags, *common,
        "--max-tokens", str(max_tokens), "--seed", str(seed), "--disable-validation"])
    cfg = convert_namespace_to_omegaconf(args)
    utils.set_torch_seed(seed)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    return Trainer(cfg, task, model, criterion)


def count_flops(step) -> int:
    """Floating-point operations of ``step()`` (torch's counter)."""
    from torch.utils import flop_counter as fc

    # torch counts its fused attention on GPUs only; fairseq's attention runs the CPU one
    aten = torch.ops.aten
    cpu_sdpa = {
        aten._scaled_dot_product_flash_attention_for_cpu:
            lambda q, k, v, *a, out_shape=None, **kw: fc.sdpa_flop_count(q, k, v),
        aten._scaled_dot_product_flash_attention_for_cpu_backward:
            lambda g, q, k, v, *a, out_shape=None, **kw: fc.sdpa_backward_flop_count(g, q, k, v),
    }
    counter = fc.FlopCounterMode(display=False, custom_mapping=cpu_sdpa)
    with counter:
        step()
    return counter.get_total_flops()


def training_step_arithmetic(trainer, sample):
    """One forward + backward of ``sample`` (train mode), the arithmetic of a training step."""
    model, criterion = trainer.model, trainer.criterion
    model.train()
    loss, _, _ = criterion(model, copy.deepcopy(sample))
    loss.backward()
    model.zero_grad(set_to_none=True)


def score_forward(model, sample):
    """Teacher-forced scoring's arithmetic: eval forward and log-probabilities, no gradient,
    and no selection records, as in ``fairseq-generate --score-reference`` (the selective
    criterion of a training step switches them on for validation; scoring runs with the
    layers' default, which in evaluation makes none)."""
    from ssan_plugin.modules.selection import selection_statistics

    model.eval()
    with torch.no_grad(), selection_statistics(model, None):
        net_output = model(**sample["net_input"])
        model.get_normalized_probs(net_output, log_probs=True)


def measure_flops(trainer, sample):
    """{measure: floating-point operations} of one training step and one scoring forward."""
    return {"train_step": count_flops(lambda: training_step_arithmetic(trainer, sample)),
            "score_forward": count_flops(lambda: score_forward(trainer.model, copy.deepcopy(sample)))}


def main():
    ap = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="a fairseq translation data-bin (e.g. made by bench_ssan.py)")
    ap.add_argument("--steps", type=positive_int, default=60, help="timed batches")
    ap.add_argument("--warmup", type=int, default=5, help="untimed rounds first")
    ap.add_argument("--max-tokens", type=positive_int, default=4096)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--system", action="append", default=[], metavar="NAME=FLAGS",
                    help="also measure SSAN with these extra training flags (repeatable)")
    ap.add_argument("--json", help="write the measurements here")
    ap.add_argument("--plan", metavar="PLAN.json",
                    help="measure the systems of this runner plan's study, with its flags")
    ap.add_argument("--study", help="the study of --plan (default: its first)")
    args = ap.parse_args()
    if args.warmup < 0:
        ap.error("--warmup must be >= 0")
    if args.plan and args.system:
        ap.error("--system adds to the built-in systems; with --plan, the plan names them")
    if args.study and not args.plan:
        ap.error("--study needs --plan")
    if args.plan:
        systems, common = plan_systems(args.plan, args.study, ap.error), ()
    else:
        systems, common = with_ssan_systems(args.system, ap.error, "--system"), (*MODEL, *TRAINING)
    data_bin = Path(args.data)
    if not (data_bin / "dict.txt").exists() and not list(data_bin.glob("dict.*.txt")):
        ap.error(f"{data_bin} is not a fairseq data-bin (no dictionary)")

    trainers = {name: build_trainer(data_bin, flags, args.max_tokens, args.seed, common)
                for name, flags in systems.items()}
    first = next(iter(trainers.values()))  # its task loads the train split: one batch list for all
    need = args.warmup + args.steps
    batches, epoch = [], 0
    while len(batches) < need:  # epochs repeat when the split holds fewer batches
        epoch += 1
        itr = first.get_train_iterator(epoch=epoch, load_dataset=epoch == 1)
        batches.extend(b for b in itr.next_epoch_itr(shuffle=True) if b)
    batches = batches[:need]
    flops = {name: measure_flops(t, batches[0]) for name, t in trainers.items()}

    names = list(trainers)
    times = {name: {m: [] for m in MEASURES} for name in names}
    tokens = []
    for i, batch in enumerate(tqdm(batches, desc="paired steps")):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            trainer = trainers[name]
            sample = copy.deepcopy(batch)
            start = time.perf_counter()
            trainer.train_step([sample])
            train_s = time.perf_counter() - start
            sample = copy.deepcopy(batch)
            start = time.perf_counter()
            score_forward(trainer.model, sample)
            score_s = time.perf_counter() - start
            if i >= args.warmup:
                times[name]["train_step"].append(train_s)
                times[name]["score_forward"].append(score_s)
        if i >= args.warmup:
            tokens.append(int(batch["ntokens"]))

    rng = np.random.default_rng(0)
    ratios = {name: {m: paired_ratio_interval(times["baseline"][m], times[name][m], rng)
                     for m in MEASURES} for name in names if name != "baseline"}
    ceiling = {name: {m: flops["baseline"][m] / flops[name][m] for m in MEASURES}
               for name in names if name != "baseline"}
    record = {
        "data": project_path(data_bin), "steps": args.steps,
        **({"plan": project_path(Path(args.plan)), "study": args.study} if args.plan else {}),
        "warmup": args.warmup, "max_tokens": args.max_tokens,
        "threads": torch.get_num_threads(), "systems": systems, "times_s": times,
        "target_tokens": tokens, "flops": flops, "flop_ceiling": ceiling,
        "flop_batch": {"src_tokens": list(batches[0]["net_input"]["src_tokens"].shape),
                       "target": list(batches[0]["target"].shape)},
        "ratios": {n: {m: dict(zip(("ratio", "low", "high"), r)) for m, r in v.items()}
                   for n, v in ratios.items()}}
    print("\nthroughput ratios system / baseline (summed times, bootstrap 95 % interval)\n"
          + steps_table(Path(args.json or "bench_steps"), record))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
