"""Cost tables of the benchmarks' committed outputs (``make bench``): every ratio is a system's
against the baseline measured in the same invocation (these machines are noisy; never compare
two invocations' absolute numbers).

- :func:`process_table`: ``benchmarks/bench_ssan.py --json`` (whole ``fairseq-train`` and
  ``fairseq-generate`` processes: words/s, sentences/s, peak resident memory; medians);
- :func:`steps_table`: ``benchmarks/bench_steps.py --json`` (paired steps in one process: time
  ratios with a bootstrap interval over batches, and the arithmetic ceiling, the ratio of
  floating-point operations);
- :func:`layers_table`: ``benchmarks/bench_encoder_layers.py``'s ``bench_encoder_layers.csv``
  (one encoder layer per process: time and peak memory against SAN per length).
"""

import csv
import math
from pathlib import Path
from typing import Dict, List, Sequence

from .archives import archive_json, archived
from .blocks import ResultsError

PROCESS_MEASURES = (  # (label, key of the medians, format)
    ("training words/s", "train_wps", "{:.0f}"),
    ("teacher-forced scoring sentences/s", "score_sps", "{:.1f}"),
    ("generation sentences/s, fixed length 12", "gen_sps_fixed_len", "{:.1f}"),
    ("generation sentences/s, free length", "gen_sps", "{:.1f}"),
    ("peak RSS (MiB)", "peak_rss_mib", "{:.0f}"),
)
STEP_MEASURES = (("training step", "train_step"), ("teacher-forced scoring forward", "score_forward"))


def _others(record: dict, path) -> List[str]:
    systems = archived(path, "systems", number=False, data=record)
    if not isinstance(systems, dict) or "baseline" not in systems:
        raise ResultsError(f"{path}: key 'systems' must name the systems, 'baseline' among them")
    return [name for name in systems if name != "baseline"]


def process_table(path: Path, record: dict = None) -> str:
    """Markdown: per measure the baseline's and each system's median, the ratio system /
    baseline (memory: also above an idle ``import fairseq, ssan_plugin``) and every individual
    measurement. ``record``: the JSON already read, ``path`` names it in errors."""
    record = archive_json(path) if record is None else record
    others = _others(record, path)
    names = ["baseline", *others]
    out = ["| measure | " + " | ".join(names) + " | "
           + " | ".join(f"{n} / baseline" for n in others) + " | each measurement |",
           "|---" * (2 + len(names) + len(others)) + "|"]
    for label, key, fmt in PROCESS_MEASURES:
        med = {n: archived(path, "median", n, key, data=record) for n in names}
        runs = {n: archived(path, "runs", n, key, number=False, data=record) for n in names}
        each = " / ".join(", ".join(fmt.format(v) for v in runs[n]) for n in names)
        out.append(f"| {label} | " + " | ".join(fmt.format(med[n]) for n in names) + " | "
                   + " | ".join(f"{med[n] / med['baseline']:.3f}" for n in others)
                   + f" | {each} |")
    idle = archived(path, "idle_rss_mib", data=record)
    med = {n: archived(path, "median", n, "peak_rss_mib", data=record) - idle for n in names}
    out.append(f"| peak RSS above an idle import ({idle:.0f} MiB) | "
               + " | ".join(f"{med[n]:.0f}" for n in names) + " | "
               + " | ".join(f"{med[n] / med['baseline']:.3f}" for n in others) + " | |")
    return "\n".join(out)


def steps_table(path: Path, record: dict = None) -> str:
    """Markdown: per measure the baseline's median milliseconds and for each system the
    throughput ratio (baseline time / system time, summed over the paired batches) with its
    bootstrap 95 % interval, the arithmetic ceiling (baseline / system floating-point
    operations on the first batch) and the ratio as a share of that ceiling. ``record``: the
    JSON already read (the benchmark prints its own table with it), ``path`` names it in
    errors."""
    import numpy as np

    record = archive_json(path) if record is None else record
    others = _others(record, path)
    out = ["| measure | baseline ms | " + " | ".join(
        f"{n}: ratio [95% interval] | {n}: ceiling | {n}: share of ceiling" for n in others)
        + " |", "|---|---|" + "---|---|---|" * len(others)]
    for label, m in STEP_MEASURES:
        times = archived(path, "times_s", "baseline", m, number=False, data=record)
        if not isinstance(times, list) or not times:
            raise ResultsError(f"{path}: key 'times_s.baseline.{m}' must be a non-empty list")
        cells = []
        for n in others:
            r = [archived(path, "ratios", n, m, k, data=record) for k in ("ratio", "low", "high")]
            ceiling = archived(path, "flop_ceiling", n, m, data=record)
            cells.append(f"{r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}] | {ceiling:.3f} | "
                         f"{r[0] / ceiling:.3f}")
        out.append(f"| {label} | {1e3 * float(np.median(times)):.1f} | " + " | ".join(cells)
                   + " |")
    return "\n".join(out)


def read_layers_csv(path: Path) -> List[Dict[str, str]]:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path} cannot be read: {err}") from None
    for number, row in enumerate(rows, 2):
        if None in row or any(row.get(k) in (None, "") for k in ("kind", "length", "status")):
            raise ResultsError(f"{path}:{number}: expected the columns kind, length, ..., status")
    return rows


def _layer_value(rows, path, kind: str, length: int, key: str) -> float:
    for row in rows:
        if row["kind"] == kind and int(row["length"]) == length:
            if row["status"] != "ok":
                return math.nan
            try:
                return float(row[key])
            except (TypeError, ValueError):
                raise ResultsError(f"{path}: {kind} at T = {length}: {key} "
                                   f"{row[key]!r} is not a number") from None
    return math.nan


def layers_table(path: Path, kinds: Sequence[str] = ()) -> str:
    """Markdown: per length T, each kind's time and peak memory as multiples of SAN's (the
    ``san`` rows of the same invocation); ``kinds``: which and in which order (default: all
    but SAN, in file order); a point that failed or was skipped shows its status."""
    rows = read_layers_csv(path)
    kinds = list(kinds) or list(dict.fromkeys(r["kind"] for r in rows if r["kind"] != "san"))
    if not any(r["kind"] == "san" for r in rows):
        raise ResultsError(f"{path}: no 'san' rows to compare against")
    lengths = sorted({int(r["length"]) for r in rows})
    out = ["| T | " + " | ".join(f"{k}: time / SAN | {k}: memory / SAN" for k in kinds) + " |",
           "|---|" + "---|---|" * len(kinds)]
    for t in lengths:
        cells = []
        for k in kinds:
            time, mem = (_layer_value(rows, path, k, t, key) for key in ("time_s", "peak_mb"))
            base_time, base_mem = (_layer_value(rows, path, "san", t, key)
                                   for key in ("time_s", "peak_mb"))
            status = next((r["status"] for r in rows if r["kind"] == k
                           and int(r["length"]) == t), "not measured")
            if math.isnan(time) or not base_time:
                cells.append(f"{status} | ")
            else:
                cells.append(f"{time / base_time:.2f} | {mem / base_mem:.2f}")
        out.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(out)
