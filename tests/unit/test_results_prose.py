"""The prose of every examples/*/RESULTS.md quotes only figures that a generated table holds: a
signed figure (a Δ, e.g. "+0.40") or an interval ("[-0.22, +1.02]") written by hand must appear
in a generated block of some RESULTS file or of README.md. When a new seed regenerates a table,
a reading that still quotes the old Δ fails here instead of going stale."""

import re

from conftest import ROOT
from ssan_plugin.experiments.tables.blocks import prose_and_generated

SIGNED = re.compile(r"(?<![\w.\]])[+\-−]\d+\.\d+")
INTERVAL = re.compile(r"\[[+\-−]?\d+\.\d+, [+\-−]?\d+\.\d+\]")
RESULTS = sorted(ROOT.glob("examples/*/RESULTS.md"))


def quoted_figures(prose: str):
    """(line number, figure) of every signed figure and interval of ``prose``; a signed figure
    inside a quoted interval counts once, as the interval."""
    for number, line in enumerate(prose.splitlines(), 1):
        for match in INTERVAL.finditer(line):
            yield number, match.group(0).replace("−", "-")
        for match in SIGNED.finditer(INTERVAL.sub("", line)):
            yield number, match.group(0).replace("−", "-")


def test_quoted_figures_are_in_a_generated_table():
    assert len(RESULTS) >= 6  # the glob found the results pages
    generated = "\n".join(prose_and_generated(p.read_text(encoding="utf-8"))[1]
                          for p in [*RESULTS, ROOT / "README.md"])
    stale = []
    for path in RESULTS:
        prose, _ = prose_and_generated(path.read_text(encoding="utf-8"))
        stale += [f"{path.relative_to(ROOT)}: {figure!r} (line {number} of its prose)"
                  for number, figure in quoted_figures(prose) if figure not in generated]
    assert not stale, "\n".join(stale)


def test_the_check_finds_a_figure_no_table_holds():
    prose, generated = prose_and_generated(
        "Δ was +0.40 [-0.22, +1.02] and then -1.5, at 2.5.\n<!-- begin generated: t -->\n"
        "| +0.40 [-0.22, +1.02] |\n<!-- end generated: t -->\n")
    figures = [f for _, f in quoted_figures(prose)]
    assert figures == ["[-0.22, +1.02]", "+0.40", "-1.5"]  # 2.5: unsigned, not a Δ
    assert [f for f in figures if f not in generated] == ["-1.5"]
