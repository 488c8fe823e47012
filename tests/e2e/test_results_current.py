"""Every generated table of README.md and examples/*/RESULTS.md is what
scripts/make_results.py makes from the committed archives today (a changed archive, scorer or
default shows up here as a diff). Needs the test references of ../shared/data."""

import subprocess
import sys

import pytest

from conftest import ROOT, cli_env, require_shared


def test_generated_tables_are_current():
    for reference in ("mt/en-de/test.de", "mt/en-ro/test.ro", "mt/en-ja/test.ja",
                      "srl/ewt/dev.gold_conll",
                      "nli/sick/valid.tsv"):  # what the tables are scored on
        require_shared(reference)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_results.py"), "--check"],
                          capture_output=True, text=True, env=cli_env(), timeout=1200, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_fill_blocks_replaces_only_known_blocks_and_refuses_missing_markers():
    from ssan_plugin.experiments.tables.blocks import ResultsError, block_keys, fill_blocks

    text = ("intro\n<!-- begin generated: a -->\nold a\n<!-- end generated: a -->\nmiddle\n"
            "<!-- begin generated: b -->\nold b\n<!-- end generated: b -->\n")
    assert block_keys(text) == ["a", "b"]
    new = fill_blocks(text, {"a": "| new |"})
    assert "| new |" in new and "old a" not in new and "old b" in new and "middle" in new
    assert fill_blocks(new, {"a": "| new |"}) == new
    with pytest.raises(ResultsError, match="no generated block for c"):
        fill_blocks(text, {"c": "x"})
