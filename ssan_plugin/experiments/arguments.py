"""The options of the seed-run runners (``examples/srl/run_srl.py``, ``examples/pairs/run_pairs.py``),
spelt and checked once. The translation plan runner (``ssan-run-experiments``) takes its sizes,
seeds and threads from its plan and has only ``--only``, ``--limit``, ``--status`` and
``--dry-run`` of its own.

A refused value is argparse's one line, ``PROG: error: argument --seeds: ...`` (exit 2), as for
every command (``ssan_plugin.cli.arguments``).
"""

import argparse
from pathlib import Path
from typing import Iterable, List

from ..cli.arguments import ArgumentParser, positive_int


def runner_parser(doc: str) -> ArgumentParser:
    """A runner's parser: the first line of ``doc`` as description, the rest shown as written."""
    return ArgumentParser(description=doc.strip().split("\n")[0],
                          formatter_class=argparse.RawDescriptionHelpFormatter)


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
