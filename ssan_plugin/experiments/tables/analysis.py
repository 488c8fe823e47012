"""Tables of ``examples/analysis/RESULTS.md`` from its archive: the JSON files that
``examples/analysis/run_analysis.sh`` writes (``probe_SET.NAME.json``, ``trees.NAME.json``,
``selection_stats.NAME.json``, rendered by :mod:`ssan_plugin.analysis.report`) and its
``systems.json`` (``{"systems": [{"name", "checkpoint"}, ...]}``, the reference first,
checkpoints relative to the project root).

A checkpoint ``runs/experiments/STUDY/PAIR/SYSTEM@SEED/checkpoint_best.pt`` of the translation
runner is looked up in the translation archive (``examples/translation/experiments``, the same
layout) for the model's test BLEU, chrF and evaluation selection rate.
"""

from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ...errors import PipelineError
from ...analysis.report import AnalysisResults, report_markdown
from .archives import archive_json, archived_value
from .blocks import ResultsError
from .selectors import evaluation_selection_rate

#: where the translation runner writes its runs (relative to the project root)
RUNS_ROOT = Path("runs") / "experiments"


def analysis_systems(archive: Path) -> List[Tuple[str, str]]:
    """[(name, checkpoint)] of ``archive/systems.json``, in report order."""
    path = Path(archive) / "systems.json"
    systems = archived_value(path, "systems", number=False)
    if not isinstance(systems, list) or not systems:
        raise ResultsError(f"{path}: key 'systems' must be a non-empty list")
    out = []
    for k, entry in enumerate(systems):
        name = archived_value(path, "systems", k, "name", number=False)
        checkpoint = archived_value(path, "systems", k, "checkpoint", number=False)
        if not (isinstance(name, str) and name and isinstance(checkpoint, str) and checkpoint):
            raise ResultsError(f"{path}: systems.{k} needs a non-empty 'name' and 'checkpoint'")
        if Path(checkpoint).is_absolute():
            raise ResultsError(f"{path}: systems.{k}.checkpoint {checkpoint!r} must be relative "
                               f"to the project root")
        out.append((name, checkpoint))
    if len({n for n, _ in out}) != len(out):
        raise ResultsError(f"{path}: a system name appears twice")
    return out


def translation_run(checkpoint: str, translation_archive: Path) -> Optional[Path]:
    """The archived run directory of a translation runner's checkpoint, None for a checkpoint
    from elsewhere."""
    parent = Path(checkpoint).parent
    try:
        relative = parent.relative_to(RUNS_ROOT)
    except ValueError:
        return None
    return Path(translation_archive) / relative


def models_table(systems: List[Tuple[str, str]], translation_archive: Path) -> str:
    """Markdown, one row per system: its checkpoint, and from the translation archive its test
    BLEU and chrF (``test.json``) and its evaluation selection rate (``valid_sel`` of the
    validation that chose the checkpoint; 1 for a model without selection)."""
    out = ["| system | checkpoint | test BLEU | test chrF | evaluation selection rate (valid) |",
           "|---|---|---|---|---|"]
    for name, checkpoint in systems:
        run = translation_run(checkpoint, translation_archive)
        if run is None:
            out.append(f"| `{name}` | `{checkpoint}` | — | — | — |")
            continue
        path = run / "test.json"
        record = archive_json(path)
        entries = archived_value(path, "systems", number=False, data=record)
        if not isinstance(entries, list) or len(entries) != 1:
            raise ResultsError(f"{path}: key 'systems' must hold the run's one system")
        bleu = archived_value(path, "systems", 0, "bleu", data=record)
        chrf = archived_value(path, "systems", 0, "chrf", data=record)
        rate = evaluation_selection_rate(run)
        out.append(f"| `{name}` | `{checkpoint}` | {bleu:.2f} | {chrf:.2f} | "
                   f"{'1 (every pair)' if rate is None else f'{rate:.3f}'} |")
    return "\n".join(out)


def analysis_blocks(archive: Path, translation_archive: Path) -> Dict[str, str]:
    """``analysis-models`` and ``analysis-report`` (the report's tables under level-3 headings)
    of an archive directory; {} when it holds no ``systems.json`` yet."""
    archive = Path(archive)
    if not (archive / "systems.json").is_file():
        return {}
    systems = analysis_systems(archive)
    try:
        results = AnalysisResults.read(archive, [n for n, _ in systems])
    except PipelineError as err:  # names the missing or unreadable file
        raise ResultsError(str(err)) from None
    return {"analysis-models": models_table(systems, translation_archive),
            "analysis-report": report_markdown(results, level=3).rstrip("\n")}
