"""The options of the seed-run runners (``examples/srl/run_srl.py``, ``examples/pairs/run_pairs.py``),
spelt and checked once. The translation plan runner (``ssan-run-experiments``) takes its sizes,
seeds and threads from its plan and has only ``--only``, ``--limit``, ``--status`` and
``--dry-run`` of its own.

A refused value is argparse's one line, ``PROG: error: argument --seeds: ...`` (exit 2), as for
every command (``ssan_plugin.cli.arguments``); so are ``--out`` and ``--archive`` that cannot
work together (:func:`run_folders_problem`), before any work starts.
"""

import argparse
import os
from pathlib import Path
from typing import Iterable, List, Optional

from ..cli.arguments import ArgumentParser, positive_int
from ..errors import InputError
from ..cli.files import check_output_dir


class RunnerParser(ArgumentParser):
    """A runner's parser: once parsed, ``--out`` and ``--archive`` (:func:`add_run_options`)
    are checked together (:func:`run_folders_problem`), a problem being argparse's one line."""

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        if isinstance(getattr(parsed, "out", None), Path) and \
                isinstance(getattr(parsed, "archive", None), Path):
            problem = run_folders_problem(parsed.out, parsed.archive)
            if problem:
                self.error(problem)
        return parsed


def runner_parser(doc: str) -> ArgumentParser:
    """A runner's parser: the first line of ``doc`` as description, the rest shown as written."""
    return RunnerParser(description=doc.strip().split("\n")[0],
                        formatter_class=argparse.RawDescriptionHelpFormatter)


def run_folders_problem(out: Path, archive: Path) -> Optional[str]:
    """Why ``--out`` and ``--archive`` cannot be a seed runner's folders, or None: either exists
    and is not a directory (or cannot be written), or the archive is ``OUT`` itself or
    ``OUT/runs``, where the runs train (each kept file would be copied onto itself, and the
    committed archive would hold the checkpoints)."""
    try:
        check_output_dir(out, "--out")
        check_output_dir(archive, "--archive")
    except InputError as err:
        return str(err)
    same = os.path.realpath(archive)
    for folder, what in ((out, "the --out folder"), (out / "runs", "where --out's runs train")):
        if same == os.path.realpath(folder):
            return (f"--archive {archive} is {what} ({folder}); the archive (committed) and "
                    f"the working folder (checkpoints) must be two folders")
    return None


def name_list_arg(choices: Iterable[str], what: str):
    """argparse type: ``a,b,c`` -> ["a", "b", "c"], each one of ``choices``, none twice."""
    choices = list(choices)

    def parse(text: str) -> List[str]:
        names = [name.strip() for name in text.split(",")]
        unknown = [name for name in names if name not in choices]
        if unknown or not all(names):
            raise argparse.ArgumentTypeError(
                f"unknown {what}(s) {', '.join(repr(n) for n in unknown or [''])}; choose from "
                f"{', '.join(choices)}")
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise argparse.ArgumentTypeError(f"{what} {twice[0]!r} is named twice in {text!r}")
        return names

    return parse


def seed_list(text: str) -> List[int]:
    """argparse type: ``1,2,3`` -> [1, 2, 3]; integers >= 0, none twice."""
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be comma-separated integers such as 1,2,3, got {text!r}") from None
    if any(seed < 0 for seed in seeds):
        raise argparse.ArgumentTypeError(f"seeds must be >= 0, got {text!r}")
    twice = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"seed {twice[0]} is named twice in {text!r}")
    return seeds


def add_run_options(parser: argparse.ArgumentParser, out: str, archive: Path) -> None:
    """``--out`` (working folder: data, checkpoints; not kept), ``--archive`` (finished runs'
    results, committed), ``--threads`` (OMP_NUM_THREADS of each training), ``--dry-run``."""
    parser.add_argument("--out", default=out, type=Path,
                        help=f"data and checkpoints, not kept (default {out})")
    parser.add_argument("--archive", default=archive, type=Path,
                        help="finished runs' results, predictions, curves and comparisons "
                             "(committed)")
    parser.add_argument("--threads", type=positive_int, default=2,
                        help="OMP_NUM_THREADS of each training (default 2)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
