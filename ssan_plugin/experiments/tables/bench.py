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

from .archives import archive_json, archived_value
from .blocks import ResultsError

PROCESS_MEASURES = (  # (label, key of the medians, format)
    ("training words/s", "train_wps", "{:.0f}"),
    ("teacher-forced scoring sentences/s", "score_sps", "{:.1f}"),
    ("generation sentences/s, fixed length 12", "gen_sps_fixed_len", "{:.1f}"),
    ("generation sentences/s, free length", "gen_sps", "{:.1f}"),
    ("peak RSS (MiB)", "peak_rss_mib", "{:.0f}"),
)
#: the decoding modes ``bench_ssan.py --modes`` may leave out
OPTIONAL_MODES = ("score_sps", "gen_sps_fixed_len", "gen_sps")
STEP_MEASURES = (("training step", "train_step"), ("teacher-forced scoring forward", "score_forward"))


def _others(record: dict, path) -> List[str]:
    systems = archived_value(path, "systems", number=False, data=record)
    if not isinstance(systems, dict) or "baseline" not in systems:
        raise ResultsError(f"{path}: key 'systems' must name the systems, 'baseline' among them")
    return [name for name in systems if name != "baseline"]


def _flags(flags) -> str:
    """A system's flags as a reader wants them: the architecture's name first, then the rest,
    without the criterion (it follows from the architecture)."""
    flags, shown, k = list(flags), [], 0
    while k < len(flags):
        if flags[k] == "--criterion" and k + 1 < len(flags):
            k += 2
            continue
        shown.append(flags[k + 1] if flags[k] == "--arch" and k + 1 < len(flags) else flags[k])
        k += 2 if flags[k] == "--arch" else 1
    return " ".join(shown)


def process_caption(path: Path, record: dict) -> str:
    """One line: the corpus, its mean source length, the protocol and each system's flags."""
    corpus = archived_value(path, "corpus", number=False, data=record)
    pieces = archived_value(path, "mean_source_pieces", data=record)
    s = {k: archived_value(path, "settings", k, data=record)
         for k in ("repeats", "updates", "decode_repeats", "max_tokens")}
    systems = archived_value(path, "systems", number=False, data=record)
    return (f"Corpus `{corpus}` ({pieces:.1f} source pieces a test sentence); per system "
            f"{s['repeats']} trainings of {s['updates']} updates (max {s['max_tokens']} tokens) "
            f"and {s['decode_repeats']} decodings per mode, systems alternating; "
            + ", ".join(f"`{name}` = `{_flags(flags)}`" for name, flags in systems.items()) + ".")


def process_table(path: Path, record: dict = None) -> str:
    """Markdown: per measure the baseline's and each system's median, the ratio system /
    baseline (memory: also above an idle ``import fairseq, ssan_plugin``) and every individual
    measurement; above it :func:`process_caption` when the archive records its corpus.
    ``record``: the JSON already read, ``path`` names it in errors."""
    record = archive_json(path) if record is None else record
    others = _others(record, path)
    names = ["baseline", *others]
    caption = [process_caption(path, record), ""] if "corpus" in record else []
    out = caption + ["| measure | " + " | ".join(names) + " | "
           + " | ".join(f"{n} / baseline" for n in others) + " | each measurement |",
           "|---" * (2 + len(names) + len(others)) + "|"]
    measured = archived_value(path, "median", "baseline", number=False, data=record)
    for label, key, fmt in PROCESS_MEASURES:
        if key not in measured and key in OPTIONAL_MODES:
            continue  # a decoding mode this invocation did not measure (bench_ssan.py --modes)
        med = {n: archived_value(path, "median", n, key, data=record) for n in names}
        runs = {n: archived_value(path, "runs", n, key, number=False, data=record) for n in names}
        each = " / ".join(", ".join(fmt.format(v) for v in runs[n]) for n in names)
        out.append(f"| {label} | " + " | ".join(fmt.format(med[n]) for n in names) + " | "
                   + " | ".join(f"{med[n] / med['baseline']:.3f}" for n in others)
                   + f" | {each} |")
    idle = archived_value(path, "idle_rss_mib", data=record)
    med = {n: archived_value(path, "median", n, "peak_rss_mib", data=record) - idle for n in names}
    out.append(f"| peak RSS above an idle import ({idle:.0f} MiB) | "
               + " | ".join(f"{med[n]:.0f}" for n in names) + " | "
               + " | ".join(f"{med[n] / med['baseline']:.3f}" for n in others) + " | |")
    return "\n".join(out)


def steps_caption(path: Path, record: dict) -> str:
    """One line: the data, the batches, the threads and each system's flags."""
    import numpy as np

    tokens = archived_value(path, "target_tokens", number=False, data=record)
    if not isinstance(tokens, list) or not tokens:
        raise ResultsError(f"{path}: key 'target_tokens' must be a non-empty list")
    v = {k: archived_value(path, k, data=record) for k in ("steps", "warmup", "max_tokens", "threads")}
    systems = archived_value(path, "systems", number=False, data=record)
    return (f"Data `{archived_value(path, 'data', number=False, data=record)}`; {v['steps']} batches "
            f"(after {v['warmup']} untimed rounds) of up to {v['max_tokens']} tokens, "
            f"{float(np.mean(tokens)):.0f} target tokens a batch on average, {v['threads']} "
            f"threads; " + ", ".join(f"`{name}` = `{_flags(flags)}`"
                                     for name, flags in systems.items()) + ".")


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
    caption = [steps_caption(path, record), ""] if "max_tokens" in record else []
    out = caption + ["| measure | baseline ms | " + " | ".join(
        f"{n}: ratio [95% interval] | {n}: ceiling | {n}: share of ceiling" for n in others)
        + " |", "|---|---|" + "---|---|---|" * len(others)]
    for label, m in STEP_MEASURES:
        times = archived_value(path, "times_s", "baseline", m, number=False, data=record)
        if not isinstance(times, list) or not times:
            raise ResultsError(f"{path}: key 'times_s.baseline.{m}' must be a non-empty list")
        cells = []
        for n in others:
            r = [archived_value(path, "ratios", n, m, k, data=record) for k in ("ratio", "low", "high")]
            ceiling = archived_value(path, "flop_ceiling", n, m, data=record)
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
                value = float(row[key])
            except (TypeError, ValueError):
                value = math.nan
            if not math.isfinite(value):
                raise ResultsError(f"{path}: {kind} at T = {length}: {key} "
                                   f"{row[key]!r} is not a number")
            return value
    return math.nan


def _point_status(rows, kind: str, length: int) -> str:
    """The status of one (kind, length) point (``ok``, a timeout, a skip), or ``not measured``."""
    return next((r["status"] for r in rows if r["kind"] == kind and int(r["length"]) == length),
                "not measured")


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
            status = _point_status(rows, k, t)
            if math.isnan(time) or not base_time:
                cells.append(f"{status} | ")
            else:
                cells.append(f"{time / base_time:.2f} | {mem / base_mem:.2f}")
        out.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def layers_table_by_kind(path: Path, kinds: Sequence[str] = ()) -> str:
    """:func:`layers_table` turned round for many kinds: one row per kind (default: all but
    SAN, in file order), its time at each length as a multiple of SAN's, then its peak memory;
    a point that failed or was skipped shows its status."""
    rows = read_layers_csv(path)
    kinds = list(kinds) or list(dict.fromkeys(r["kind"] for r in rows if r["kind"] != "san"))
    if not any(r["kind"] == "san" for r in rows):
        raise ResultsError(f"{path}: no 'san' rows to compare against")
    lengths = sorted({int(r["length"]) for r in rows})
    out = ["| kind | " + " | ".join(f"time / SAN, T = {t}" for t in lengths) + " | "
           + " | ".join(f"memory / SAN, T = {t}" for t in lengths) + " |",
           "|---|" + "---|" * (2 * len(lengths))]
    for k in kinds:
        cells = []
        for key in ("time_s", "peak_mb"):
            for t in lengths:
                value, base = (_layer_value(rows, path, kind, t, key) for kind in (k, "san"))
                status = _point_status(rows, k, t)
                cells.append(status if math.isnan(value) else "—" if math.isnan(base) or not base
                             else f"{value / base:.2f}")  # —: no SAN value to divide by
        out.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def layers_absolute_table(path: Path, kinds: Sequence[str] = ()) -> str:
    """Markdown: per kind (columns; default every kind, in file order) its peak memory (MB) at
    each length, then its time (ms) at each length; a point that failed or was skipped shows
    its status."""
    rows = read_layers_csv(path)
    kinds = list(kinds) or list(dict.fromkeys(r["kind"] for r in rows))
    lengths = sorted({int(r["length"]) for r in rows})
    out = ["| measure | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    for key, label, scale in (("peak_mb", "peak MB", 1.0), ("time_s", "ms", 1e3)):
        for t in lengths:
            cells = []
            for k in kinds:
                v = _layer_value(rows, path, k, t, key)
                status = _point_status(rows, k, t)
                cells.append(status if math.isnan(v) else f"{scale * v:.0f}")
            out.append(f"| {label}, T = {t} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def layers_growth(path: Path) -> List[str]:
    """The efficiency study's summary, one line each: DiSAN's memory-efficient form against the
    naive one (peak memory and time) at T = 256 and at the longest length the naive form was
    measured; for each kind, how its peak memory grows from the longest length's half (or the
    nearest below) to the longest: the exponent log(m_long / m_short) / log(T_long / T_short),
    1 linear, 2 quadratic."""
    rows = read_layers_csv(path)
    lengths = sorted({int(r["length"]) for r in rows})
    kinds = list(dict.fromkeys(r["kind"] for r in rows))

    def value(kind, t, key):
        return _layer_value(rows, path, kind, t, key)

    lines = []
    naive_lengths = [t for t in lengths if not math.isnan(value("disan_naive", t, "peak_mb"))]
    for t in sorted({256, max(naive_lengths, default=None)} - {None}):
        naive, blocked = value("disan_naive", t, "peak_mb"), value("disan_blocked", t, "peak_mb")
        if math.isnan(naive) or math.isnan(blocked):
            continue
        time = value("disan_blocked", t, "time_s") / value("disan_naive", t, "time_s")
        lines.append(f"T = {t}: DiSAN memory-efficient / naive peak memory {blocked / naive:.3f} "
                     f"({blocked:.0f} MB against {naive:.0f} MB), time {time:.2f}x")
    long = max(lengths)
    short = max([t for t in lengths if t <= long // 2], default=min(lengths))
    for kind in kinds if short < long else ():
        m_long, m_short = value(kind, long, "peak_mb"), value(kind, short, "peak_mb")
        if math.isnan(m_long) or math.isnan(m_short) or m_long <= 0 or m_short <= 0:
            continue
        slope = math.log(m_long / m_short) / math.log(long / short)
        lines.append(f"{kind}: peak memory {m_short:.0f} MB at T = {short}, {m_long:.0f} MB at "
                     f"T = {long}: growth exponent {slope:.2f}; time "
                     f"{1e3 * value(kind, long, 'time_s'):.0f} ms at T = {long}")
    return lines
