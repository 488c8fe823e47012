"""What the project commits speaks of the project only: no work item or session named in any
tracked text file (docs, results, code, tests), no absolute path of the machine that made it."""

import re
import subprocess

import pytest

from conftest import ROOT

# a work item in any form ("issue 12", "the issue", "issues"), a numbered or this session
WORK_ITEMS = re.compile(r"\b(sessions? \d+|this session|issues?)\b", re.I)
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(work|home|root|tmp|Users)/\w")
TEXT = (".py", ".md", ".json", ".jsonl", ".sh", ".txt", ".toml", ".cfg", ".c", ".log", ".csv")


def tracked_text_files():
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    return [ROOT / n for n in names if (n.endswith(TEXT) or n in ("Makefile", "README.md"))
            and (ROOT / n).is_file()]  # a file deleted in the working tree is still listed


def matching_lines(paths, pattern):
    """``path:line: text`` of every line of ``paths`` that ``pattern`` finds."""
    hits = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                                      .splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    return hits


def test_no_work_items_or_sessions_named():
    paths = [p for p in tracked_text_files() if p.name != "test_committed_text.py"]
    hits = matching_lines(paths, WORK_ITEMS)
    assert not hits, "\n".join(hits[:30])


@pytest.mark.parametrize("line, named", [
    ("remaining options of the issue are checked", True),
    ("see issue #12", True), ("Issues 3 and 4", True), ("in session 7", True),
    ("written in this session", True),
    ('@pytest.fixture(scope="session")', False), ("where the last session stopped", False),
    ("the tissue of the model", False),
])
def test_work_item_pattern(line, named):
    assert bool(WORK_ITEMS.search(line)) == named


def test_no_absolute_machine_paths_in_archives_and_docs():
    paths = [p for p in tracked_text_files()
             if p.relative_to(ROOT).parts[0] in ("examples", "docs", "data-bin")
             or p.name == "README.md"]
    hits = matching_lines(paths, MACHINE_PATH)
    assert not hits, "\n".join(hits[:30])
