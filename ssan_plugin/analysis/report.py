"""The analysis report: markdown tables and a probing figure from the JSON files that
``examples/analysis/run_analysis.sh`` writes into one directory.

File names (``NAME`` a system, the first one the reference):
``probe_SET.NAME.json`` (ssan-probe), ``trees.NAME.json`` (ssan-induce-trees),
``selection_stats.NAME.json`` (ssan-selection-stats, systems with selection only).
Missing files are reported, never skipped silently: a table needs every system's file.
"""

from dataclasses import dataclass
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from ..errors import PipelineError

#: probing sets in report order: (file stem, title)
PROBING_SETS = (
    ("bshift", "bigram shift (Multi30k English)"),
    ("wrd", "word reordering, moved word's position (Multi30k English)"),
    ("wrd_shared", "word reordering, moved word's position (shared news set)"),
    ("tree_depth", "tree depth (EWT)"),
    ("top_const", "top constituents (EWT)"),
)
#: the word classes of ``word_classes.word_class``, in the order of every selection table
WORD_CLASSES = ("content", "function", "punctuation")
#: word-distance buckets of every selection-by-distance table (this report's and the selector
#: head-to-head's): (label, lowest, highest inclusive or None), doubling in width
DISTANCE_BUCKETS = (("0", 0, 0), ("1", 1, 1), ("2–3", 2, 3), ("4–7", 4, 7), ("8–15", 8, 15),
                    ("≥ 16", 16, None))


def distance_bucket(distance: int) -> str:
    """The :data:`DISTANCE_BUCKETS` label of a word distance (>= 0)."""
    for label, low, high in DISTANCE_BUCKETS:
        if low <= distance and (high is None or distance <= high):
            return label
    raise ValueError(f"word distance {distance} is negative")


def _load(path: Path) -> dict:
    if not path.is_file():
        raise PipelineError(f"{path}: missing (run examples/analysis/run_analysis.sh first)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise PipelineError(f"{path}: not JSON ({err.msg}, line {err.lineno})") from None


@dataclass
class AnalysisResults:
    """Every JSON of one analysis directory, by system (in the given order)."""

    systems: List[str]
    probes: Dict[str, Dict[str, dict]]       # set -> system -> probe JSON
    trees: Dict[str, dict]                   # system -> induce_trees JSON
    selection: Dict[str, dict]               # system -> selection_stats JSON (selective systems)

    @classmethod
    def read(cls, directory, systems: Sequence[str], probing_sets: Optional[Sequence[str]] = None):
        directory = Path(directory)
        if not systems:
            raise PipelineError("name at least one system")
        sets = list(probing_sets) if probing_sets is not None else [s for s, _ in PROBING_SETS]
        probes = {s: {name: _load(directory / f"probe_{s}.{name}.json") for name in systems} for s in sets}
        trees = {name: _load(directory / f"trees.{name}.json") for name in systems}
        selection = {name: _load(directory / f"selection_stats.{name}.json") for name in systems[1:]}
        return cls(list(systems), probes, trees, selection)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def probing_table(results: AnalysisResults, probing_set: str) -> str:
    """One probing set: a row per layer, test accuracy [95% CI] per system (percent), with the
    majority baseline and test size in the header line."""
    by_system = results.probes[probing_set]
    first = by_system[results.systems[0]]
    for name, data in by_system.items():
        if data["n_test"] != first["n_test"] or len(data["layers"]) != len(first["layers"]):
            raise PipelineError(f"probe_{probing_set}.{name}.json: {data['n_test']} test examples and "
                                f"{len(data['layers'])} layers, the reference has {first['n_test']} and "
                                f"{len(first['layers'])}: not the same probing file or model depth")
    lines = [f"n_test = {first['n_test']}, majority class {_pct(first['majority'])}%, "
             f"classifier {first.get('classifier', '?')}", "",
             "| layer | " + " | ".join(results.systems) + " |",
             "|---|" + "---|" * len(results.systems)]
    for i, layer in enumerate(first["layers"]):
        cells = []
        for name in results.systems:
            row = by_system[name]["layers"][i]
            lo, hi = row["ci95"]
            cells.append(f"{_pct(row['accuracy'])} [{_pct(lo)}, {_pct(hi)}]")
        lines.append(f"| {layer['layer']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def trees_table(results: AnalysisResults) -> str:
    """Split-point tree induction: F1 (P / R) per layer and system, right-branching baseline."""
    first = results.trees[results.systems[0]]
    lines = [f"{first['n_sentences']} sentences; unlabelled micro F1 (precision / recall), %", "",
             "| layer | " + " | ".join(results.systems) + " |", "|---|" + "---|" * len(results.systems)]
    for i, layer in enumerate(first["layers"]):
        cells = []
        for name in results.systems:
            row = results.trees[name]["layers"][i]
            cells.append(f"{row['f1']:.2f} ({row['precision']:.2f} / {row['recall']:.2f})")
        lines.append(f"| {layer['layer']} | " + " | ".join(cells) + " |")
    rb = first["right_branching"]
    lines.append(f"| right-branching | {rb['f1']:.2f} ({rb['precision']:.2f} / {rb['recall']:.2f})"
                 + " | " * (len(results.systems) - 1) + " |")
    return "\n".join(lines)


def _rate(table: dict, label: str) -> str:
    row = table.get(label)
    return f"{100 * row['rate']:.1f}" if row and row["possible"] else "–"


def distance_rates(layer: dict) -> List[Optional[float]]:
    """Selection rate per :data:`DISTANCE_BUCKETS` bucket from the per-distance counts."""
    sums = {label: [0, 0] for label, _, _ in DISTANCE_BUCKETS}
    for row in layer["distance"]:
        bucket = sums[distance_bucket(row["distance"])]
        bucket[0] += row["selected"]
        bucket[1] += row["possible"]
    return [selected / possible if possible else None for selected, possible in sums.values()]


def selection_table(results: AnalysisResults) -> str:
    """Per selective system and layer: key and query selection rates (%) of content, function
    and punctuation words, and the key rate by word distance."""
    classes = WORD_CLASSES
    head = (["system", "layer"] + [f"keys: {c}" for c in classes] + [f"queries: {c}" for c in classes]
            + [f"distance {b[0]}" for b in DISTANCE_BUCKETS])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in results.systems[1:]:
        for layer in results.selection[name]["layers"]:
            keys, queries = layer["keys"]["by_class"], layer["queries"]["by_class"]
            cells = ([name, str(layer["layer"])] + [_rate(keys, c) for c in classes]
                     + [_rate(queries, c) for c in classes]
                     + ["–" if r is None else f"{100 * r:.1f}" for r in distance_rates(layer)])
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_probing(results: AnalysisResults, path) -> None:
    """One panel per probing set: test accuracy by layer with the 95% interval per system, and
    the majority baseline as a dashed line."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(results.probes)
    fig, axes = plt.subplots(1, len(sets), figsize=(3.6 * len(sets), 3.2), squeeze=False)
    titles = dict(PROBING_SETS)
    for ax, s in zip(axes[0], sets):
        for k, name in enumerate(results.systems):
            data = results.probes[s][name]
            xs = [row["layer"] + 0.08 * (k - (len(results.systems) - 1) / 2) for row in data["layers"]]
            acc = [100 * row["accuracy"] for row in data["layers"]]
            err = [[100 * (row["accuracy"] - row["ci95"][0]) for row in data["layers"]],
                   [100 * (row["ci95"][1] - row["accuracy"]) for row in data["layers"]]]
            ax.errorbar(xs, acc, yerr=err, marker="o", capsize=2, label=name)
        ax.axhline(100 * results.probes[s][results.systems[0]]["majority"], ls="--", c="grey", lw=1,
                   label="majority")
        ax.set_title(titles.get(s, s), fontsize=8)
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_xticks([row["layer"] for row in results.probes[s][results.systems[0]]["layers"]])
    axes[0][0].set_ylabel("test accuracy (%)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report_markdown(results: AnalysisResults, level: int = 2) -> str:
    """The whole report: probing tables, tree induction, selection by word class and distance;
    its sections are headings of ``level`` (2: ``##``), the probing sets one level below."""
    if not 1 <= level <= 5:
        raise ValueError(f"heading level {level} is not 1 to 5")
    h, sub = "#" * level, "#" * (level + 1)
    titles = dict(PROBING_SETS)
    parts = [f"{h} Probing accuracy per layer (%, 95% Wilson interval)"]
    for s in results.probes:
        parts += [f"{sub} {titles.get(s, s)}", probing_table(results, s)]
    parts += [f"{h} Tree induction from attention (split-point, EWT dev)", trees_table(results)]
    if results.selection:
        parts += [f"{h} Selection by word class and distance (EWT dev, eval mode, %)",
                  selection_table(results)]
    return "\n\n".join(parts) + "\n"
