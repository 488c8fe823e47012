"""Calibration of the significance tests (README, "Significance"): the share of true nulls each
test calls significant, from the JSON of ``scripts/calibrate_significance.py --json``
(``--simulate``: synthetic nulls; default: two real outputs swapped sentence by sentence)."""

from pathlib import Path
from typing import Sequence

from .archives import archive_json, archived_value
from .blocks import ResultsError

#: (key of ``rejection_rate``, column header) of a simulated calibration
SIMULATED_TESTS = (("seed_level", "seed-level test"),
                   ("pooled_sentences", "pooled sentence-level bootstrap (seeds fixed)"),
                   ("seeds_only", "t-test over the per-seed deltas (test set fixed)"))


#: a simulated archive made before its cells held ``sentence_to_seed``: how many of each cell's
#: nulls are replayed to measure it (``calibration.variance_parts``; None: every null)
PARTS_REPLAYED = None


def cell_parts(path: Path, run: dict, k: int) -> dict:
    """``sentence_to_seed`` of cell ``k`` (``calibration.summarise_parts``): as archived, or,
    for an archive without it, measured on the cell's own nulls replayed (its spreads, seeds,
    samples, sentences and seed; the seed is ``n_seeds`` where the archive names none, as the
    script chose it)."""
    from ...stats.calibration import variance_parts

    cell = archived_value(path, "cells", k, number=False, data=run)
    if "sentence_to_seed" in cell:
        return {key: archived_value(path, "cells", k, "sentence_to_seed", key, data=run)
                for key in ("median", "q1", "q3", "nulls")}
    spreads = archived_value(path, "cells", k, "spreads", number=False, data=run)
    if not isinstance(spreads, dict) or not spreads:
        raise ResultsError(f"{path}: key 'cells.{k}.spreads' must name the simulated spreads")
    seeds = int(archived_value(path, "cells", k, "n_seeds", data=run))
    seed = int(archived_value(path, "cells", k, "seed", data=run)) if "seed" in cell else seeds
    nulls = int(archived_value(path, "nulls", data=run))
    if PARTS_REPLAYED is not None:
        nulls = min(nulls, PARTS_REPLAYED)
    return variance_parts(seeds, {key: float(v) for key, v in spreads.items()}, nulls,
                          int(archived_value(path, "samples", data=run)),
                          int(archived_value(path, "n_sentences", data=run)), seed)


def simulated_table(path: Path) -> str:
    """Markdown, one row per (scenario, seeds a side) cell of a ``--simulate`` archive: the
    share of its nulls each test rejects at the archive's alpha, and the seed-level test's
    sentence part over its seed part (variances; median and quartiles over the nulls, whose
    mean a few nulls with a seed part near 0 decide, :func:`cell_parts`)."""
    run = archive_json(path)
    if archived_value(path, "simulated", number=False, data=run) is not True:
        raise ResultsError(f"{path}: not a --simulate archive (key 'simulated' is not true)")
    cells = archived_value(path, "cells", number=False, data=run)
    if not isinstance(cells, list) or not cells:
        raise ResultsError(f"{path}: key 'cells' must list the simulated cells")
    alpha = archived_value(path, "alpha", data=run)
    nulls, sentences = (archived_value(path, k, data=run) for k in ("nulls", "n_sentences"))
    rows = ["| scenario | seeds a side | nulls | test sentences | " +
            " | ".join(f"{name}: p < {alpha:g}" for _, name in SIMULATED_TESTS) +
            " | seed-level test: sentence part / seed part (variances), median (quartiles) |",
            "|---|---|---|---|" + "---|" * len(SIMULATED_TESTS) + "---|"]
    for k, cell in enumerate(cells):
        scenario = archived_value(path, "cells", k, "scenario", number=False, data=run)
        seeds = archived_value(path, "cells", k, "n_seeds", data=run)
        rates = [archived_value(path, "cells", k, "rejection_rate", key, data=run)
                 for key, _ in SIMULATED_TESTS]
        parts = cell_parts(path, run, k)
        over = "" if parts["nulls"] == nulls else f", over {parts['nulls']:g} nulls"
        rows.append(f"| {scenario} | {seeds} | {nulls} | {sentences} | " +
                    " | ".join(f"{rate:.1%}" for rate in rates) +
                    f" | {parts['median']:.2f} ({parts['q1']:.2f} to {parts['q3']:.2f}{over}) |")
    return "\n".join(rows)


def sentence_level_table(paths: Sequence[Path]) -> str:
    """Markdown, one row per sentence-level archive (two real outputs, swapped at random): its
    test set, the two outputs, and the share of nulls the paired bootstrap and approximate
    randomisation reject at the archive's alpha."""
    rows = ["| test set | outputs swapped | sentences | nulls | resamples / trials | paired "
            "bootstrap: p < 0.05 | approximate randomisation: p < 0.05 |",
            "|---|---|---|---|---|---|---|"]
    for path in paths:
        run = archive_json(path)
        if archived_value(path, "alpha", data=run) != 0.05:
            raise ResultsError(f"{path}: alpha must be 0.05, the level this table reports")
        ref = archived_value(path, "ref", number=False, data=run)
        hyps = archived_value(path, "hyp", number=False, data=run)
        if not isinstance(hyps, list) or len(hyps) != 2:
            raise ResultsError(f"{path}: key 'hyp' must name the two outputs swapped")
        sentences, nulls, samples = (archived_value(path, k, data=run)
                                     for k in ("n_sentences", "nulls", "samples"))
        rates = [archived_value(path, "rejection_rate", test, data=run)
                 for test in ("bootstrap", "randomization")]
        rows.append(f"| `{ref}` | " + ", ".join(f"`{h}`" for h in hyps) +
                    f" | {sentences} | {nulls} | {samples} | {rates[0]:.1%} | {rates[1]:.1%} |")
    return "\n".join(rows)
