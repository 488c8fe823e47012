#!/usr/bin/env python
"""Efficiency study (Bi-BloSAN paper, Fig. 6): time and peak memory of ONE encoder layer.

For each sequence length T and each layer kind -- fairseq's self-attention (san), SSAN (ssan;
ssan_native with ``--ssan-kernel native``), DiSAN naive (disan_naive), DiSAN memory-efficient (disan_blocked), Bi-BloSAN (biblosan), ReSA
(resa), and every selector of ``selective_transformer`` (``sel_*``, see selector_kinds; ``--kinds
selectors`` names them all) -- one training-mode forward + backward of a full encoder layer
(sublayer, residual, layer norm, FFN of 4 x width) on a random B x T x width input without pads.
``--mode eval`` times instead an evaluation-mode forward without gradient (what decoding and
teacher-forced scoring run) on the same input with pads: every other sentence's last quarter.

The ``sel_*`` kinds are built by the selector registry (modules/selectors/registry.py), from
every selector option at its declared default except those SELECTOR_OPTIONS sets, exactly as
``--encoder-selector NAME`` builds a layer; ``fixed_mask``'s mask covers the length measured
(``--max-source-positions`` = T, at least the memory worker's warm-up length). SSAN, its
selectors (``sel_gumbel``, ``sel_soft``) and ``sel_fixed_mask`` use the torch kernel, as ``ssan``
does. Selective layers train as the selective criterion trains them without regularisers (the
recipes): no gradient to the rate and entropy terms.

Every point runs in its own subprocess (``--worker``). Peak memory on CPU: the worker
resets the kernel's peak-RSS mark (write "5" to /proc/self/clear_refs), runs the step and
reads VmHWM from /proc/self/status; the reported peak is VmHWM minus the RSS just before the
step, i.e. the extra physical memory the step needed. glibc's mmap threshold is pinned
(MALLOC_MMAP_THRESHOLD_=65536) so that large tensors are mmapped and returned on free, and the
RSS follows the live tensors instead of allocator caches. Time: in a second worker with the
default allocator (as in training), one warm-up step at the same length, then the median of
repeated steps (at least 3, until --min-time seconds).

Writes CSV + PNG (matplotlib) and prints the ratios for the README. OMP_NUM_THREADS=1.
"""

import argparse
import csv
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ssan_plugin.cli.arguments import ArgumentParser, positive_float, positive_int

#: bench kinds of the selector registry whose options differ from the selector's declared
#: defaults: kind -> (selector name, options). Every other registered selector NAME is measured
#: as ``sel_NAME`` with its defaults (:func:`selector_kinds`), so a new selector needs no line.
SELECTOR_OPTIONS = {
    "sel_gumbel": ("gumbel", {"ssan_kernel": "torch"}),
    "sel_soft": ("soft", {"ssan_kernel": "torch"}),
    "sel_topk": ("topk", {"topk": 8.0}),
    "sel_entmax15": ("entmax", {"entmax_fixed_alpha": True, "entmax_alpha": 1.5}),
    "sel_sparsemax": ("entmax", {"entmax_fixed_alpha": True, "entmax_alpha": 2.0}),
    "sel_fixed_mask": ("fixed_mask", {"fixed_mask_kernel": "torch"}),
}


def selector_kinds() -> dict:
    """kind -> (selector name, options): ``sel_NAME`` for every registered selector, in registry
    order, then the extra kinds of :data:`SELECTOR_OPTIONS` (other settings of a selector)."""
    from ssan_plugin.modules.selectors.registry import SELECTORS

    kinds = {f"sel_{name}": SELECTOR_OPTIONS.get(f"sel_{name}", (name, {})) for name in SELECTORS}
    kinds.update({k: v for k, v in SELECTOR_OPTIONS.items() if k not in kinds})
    return kinds


SELECTOR_KINDS = selector_kinds()
#: the encoder variants of the efficiency study (the default of --kinds)
VARIANT_KINDS = ["san", "ssan", "ssan_native", "disan_naive", "disan_blocked", "biblosan", "resa"]
KINDS = [*VARIANT_KINDS, *SELECTOR_KINDS]
#: names for several kinds in --kinds
KIND_GROUPS = {"selectors": list(SELECTOR_KINDS)}
#: the memory worker's warm-up length (lazy initialisations)
WARMUP_LENGTH = 8
REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- worker side
def selector_attention(kind: str, heads: int, length: int):
    """The attention builder (embed_dim, cfg) -> module of a ``sel_*`` kind: the registry's
    ``build_attention`` on every selector option's declared default plus the kind's own values,
    for sentences of up to ``length`` tokens."""
    import dataclasses

    from ssan_plugin.modules.selectors import selector_class, selector_options

    name, overrides = SELECTOR_KINDS[kind]
    args = argparse.Namespace(max_source_positions=max(length, WARMUP_LENGTH))
    for options in selector_options():
        for field in dataclasses.fields(options):
            if field.name != "_name":
                setattr(args, field.name, field.default)
    for option, value in overrides.items():
        setattr(args, option, value)
    return lambda embed_dim, cfg: selector_class(name).build_attention(args, embed_dim, heads)


def build_layer(kind: str, width: int, heads: int, length: int = WARMUP_LENGTH):
    from fairseq.models.transformer import TransformerConfig
    from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

    from ssan_plugin.modules import AttentionVariantEncoderLayer
    from ssan_plugin.modules.selectors import SelectorMultiheadAttention
    from ssan_plugin.modules.selectors.gumbel import GumbelSelector
    from ssan_plugin.modules.biblosan import BiBloSANAttention
    from ssan_plugin.modules.disan import DiSANAttention
    from ssan_plugin.modules.resa import ReSAAttention

    cfg = TransformerConfig()
    cfg.encoder.embed_dim, cfg.encoder.ffn_embed_dim, cfg.encoder.attention_heads = width, 4 * width, heads
    builders = {
        "ssan": lambda d, c: SelectorMultiheadAttention(d, heads, GumbelSelector(d, heads, kernel="torch")),
        "ssan_native": lambda d, c: SelectorMultiheadAttention(d, heads, GumbelSelector(d, heads, kernel="native")),
        "disan_naive": lambda d, c: DiSANAttention(d, implementation="naive"),
        "disan_blocked": lambda d, c: DiSANAttention(d, implementation="blocked"),
        "biblosan": lambda d, c: BiBloSANAttention(d),
        "resa": lambda d, c: ReSAAttention(d),
    }
    if kind == "san":
        return TransformerEncoderLayerBase(cfg)
    build = selector_attention(kind, heads, length) if kind in SELECTOR_KINDS else builders[kind]
    layer = AttentionVariantEncoderLayer(cfg, build)
    if kind.startswith("ssan") or kind in SELECTOR_KINDS:
        # as the selective criterion trains it without regularisers (the recipes)
        layer.self_attn.rate_gradient = layer.self_attn.entropy_gradient = False
    return layer


def rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def padding_mask(batch: int, length: int):
    """(B, T) bool, True at pads: every other sentence (odd rows) loses its last quarter."""
    import torch

    pad = torch.zeros(batch, length, dtype=torch.bool)
    pad[1::2, length - length // 4:] = True
    return pad


def worker(kind: str, length: int, batch: int, width: int, heads: int, min_time: float,
           measure: str, mode: str = "train") -> dict:
    """One point. ``memory``: the extra peak RSS of one step (run with large allocations
    mmapped, so the RSS follows the live tensors). ``time``: the median time of repeated steps
    after a warm-up step of the same length, with the default allocator (as in training).
    ``mode``: ``train`` (forward + backward, no pads) or ``eval`` (forward, no gradient, pads)."""
    import gc

    import torch

    import ssan_plugin  # noqa: F401

    torch.set_num_threads(1)
    torch.manual_seed(0)
    layer = build_layer(kind, width, heads, length).train(mode == "train")

    def step(t):
        if mode == "eval":
            with torch.no_grad():
                layer(torch.randn(t, batch, width), padding_mask(batch, t))
            return None
        x = torch.randn(t, batch, width, requires_grad=True)
        out = layer(x, None)
        loss = out.float().pow(2).mean()
        pop = getattr(layer.self_attn, "pop_selection", None)
        record = pop() if pop is not None else None
        if record is not None and record.log_prob is not None:  # ReSA: the REINFORCE path too
            loss = loss + record.log_prob.sum() * 1e-3
        loss.backward()
        layer.zero_grad(set_to_none=True)
        return record

    result = {"kind": kind, "length": length, "batch": batch, "width": width, "mode": mode}
    if measure == "memory":
        step(WARMUP_LENGTH)  # lazy initialisations
        gc.collect()
        before = rss_kb("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        record = step(length)
        result["peak_mb"] = (rss_kb("VmHWM") - before) / 1024.0
        if record is not None:
            result["selection_rate"] = float(record.pairs_selected / record.pairs_possible)
        return result
    step(length)  # warm-up at full length
    times = []
    while sum(times) < min_time and len(times) < 20 or len(times) < 3:
        start = time.perf_counter()
        step(length)
        times.append(time.perf_counter() - start)
    result.update(time_s=statistics.median(times), reps=len(times))
    return result


# ----------------------------------------------------------------------------- driver side
def naive_estimate_gb(length, batch, width):
    """~8 float32 tensors of B x T x T x C/2 per direction held by the naive DiSAN backward."""
    return 8 * 2 * batch * length * length * (width // 2) * 4 / 1e9


def run_point(kind, length, args):
    """Time and memory of one point, each in its own worker process."""
    result = {"kind": kind, "length": length}
    for measure in ("time", "memory"):
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        if measure == "memory":
            env["MALLOC_MMAP_THRESHOLD_"] = "65536"
        cmd = [sys.executable, __file__, "--worker", kind, str(length), "--batch", str(args.batch),
               "--width", str(args.width), "--heads", str(args.heads), "--min-time",
               str(args.min_time), "--measure", measure, "--mode", args.mode]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return dict(result, status=f"timeout ({measure})")
        if proc.returncode != 0:
            return dict(result, status="failed: " + proc.stderr.strip().splitlines()[-1])
        result.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return dict(result, status="ok")


def median_row(results):
    """One (kind, T): the median time and memory over the repeats that succeeded."""
    ok = [r for r in results if r.get("status") == "ok"]
    if not ok:
        return results[-1]
    row = dict(ok[0])
    for key in ("time_s", "peak_mb"):
        row[key] = statistics.median(r[key] for r in ok)
    row["reps"] = f"{len(ok)} x {ok[0]['reps']}"
    return row


def quiet_libraries():
    """Library log records from WARNING up: importing fairseq leaves the root logger at DEBUG,
    and matplotlib's font search alone then logs about 2,000 lines."""
    logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger("matplotlib").setLevel(logging.WARNING)


def plot(rows, path, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for kind in KINDS:
        pts = sorted((r["length"], r) for r in rows if r["kind"] == kind and r.get("status") == "ok")
        if not pts:
            continue
        xs = [p[0] for p in pts]
        axes[0].plot(xs, [p[1]["time_s"] * 1000 for p in pts], marker="o", ms=3, label=kind)
        axes[1].plot(xs, [p[1]["peak_mb"] for p in pts], marker="o", ms=3, label=kind)
    axes[0].set_ylabel("forward + backward time (ms)" if args.mode == "train" else "eval forward time (ms)")
    axes[1].set_ylabel("peak memory of the step (MB)")
    for ax in axes:
        ax.set_xlabel("sequence length T")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.suptitle(f"one encoder layer ({args.mode}), batch {args.batch}, width {args.width}, CPU, 1 thread")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", nargs=2, metavar=("KIND", "T"), help=argparse.SUPPRESS)
    ap.add_argument("--measure", choices=("time", "memory"), default="time", help=argparse.SUPPRESS)
    ap.add_argument("--mode", choices=("train", "eval"), default="train",
                    help="train: forward + backward without pads; eval: evaluation-mode forward "
                         "without gradient, every other sentence padded by a quarter")
    ap.add_argument("--lengths", default="16,32,64,128,192,256,320,384")
    ap.add_argument("--kinds", default=",".join(VARIANT_KINDS),
                    help="comma-separated layer kinds (" + ", ".join(KINDS) + "); 'selectors': "
                         "every sel_* kind; default: the encoder variants, " + ",".join(VARIANT_KINDS))
    ap.add_argument("--batch", type=positive_int, default=64)
    ap.add_argument("--width", type=positive_int, default=300, help="model width (a multiple of --heads, even)")
    ap.add_argument("--heads", type=positive_int, default=6)
    ap.add_argument("--min-time", type=positive_float, default=1.0, help="repeat a step until this many seconds")
    ap.add_argument("--repeats", type=positive_int, default=1,
                    help="measure every point this many times, alternating kinds and lengths; medians")
    ap.add_argument("--max-naive-gb", type=positive_float, default=4.0,
                    help="skip naive DiSAN points estimated above this memory")
    ap.add_argument("--timeout", type=positive_float, default=300.0, help="seconds per point")
    ap.add_argument("--out", default=str(REPO / "examples" / "variants"))
    args = ap.parse_args()
    quiet_libraries()
    if args.width % args.heads or args.width % 2:
        ap.error("--width must be even and a multiple of --heads")
    if args.worker:
        kind, length = args.worker
        print(json.dumps(worker(kind, int(length), args.batch, args.width, args.heads, args.min_time,
                                args.measure, args.mode)))
        return

    from tqdm import tqdm

    lengths = sorted(int(t) for t in args.lengths.split(","))
    kinds = [k for name in args.kinds.split(",") if name for k in KIND_GROUPS.get(name, [name])]
    kinds = list(dict.fromkeys(kinds))  # once each, in the order given
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"unknown kinds {sorted(unknown)}; choose from {KINDS}")
    runs = {}
    points = [(k, t) for _ in range(args.repeats) for t in lengths for k in kinds]  # alternating
    for kind, length in tqdm(points, desc="bench", unit="point"):
        if kind == "disan_naive" and naive_estimate_gb(length, args.batch, args.width) > args.max_naive_gb:
            runs.setdefault((kind, length), []).append({"kind": kind, "length": length,
                                                        "status": "skipped (memory estimate)"})
            continue
        runs.setdefault((kind, length), []).append(run_point(kind, length, args))
    rows = [median_row(results) for results in runs.values()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fields = ["kind", "length", "batch", "width", "mode", "time_s", "peak_mb", "reps", "selection_rate", "status"]
    with open(out / "bench_encoder_layers.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow(r)
    plot(rows, out / "bench_encoder_layers.png", args)
    # the tables of examples/*/RESULTS.md and examples/variants/README.md, from the CSV
    from ssan_plugin.experiments.tables.bench import layers_growth, layers_table_by_kind

    for line in layers_growth(out / "bench_encoder_layers.csv"):
        print(line)
    if "san" in kinds and len(kinds) > 1:
        print(layers_table_by_kind(out / "bench_encoder_layers.csv"))
    print(f"wrote {out / 'bench_encoder_layers.csv'} and {out / 'bench_encoder_layers.png'}")


if __name__ == "__main__":
    main()
