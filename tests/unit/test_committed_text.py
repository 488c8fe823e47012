"""What the project commits speaks of the project only: no work item or session named in any
tracked text file (docs, results, code, tests), no absolute path of the machine that made it."""

import re
import subprocess

from conftest import ROOT

WORK_ITEMS = re.compile(r"\b(sessions? \d+|issues? #?\d+|this session)\b", re.I)
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(work|home|root|tmp|Users)/\w")
TEXT = (".py", ".md", ".json", ".jsonl", ".sh", ".txt", ".toml", ".cfg", ".c", ".log", ".csv")


def tracked_text_files():
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    return [ROOT / n for n in names if n.endswith(TEXT) or n in ("Makefile", "README.md")]


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


def test_no_absolute_machine_paths_in_archives_and_docs():
    paths = [p for p in tracked_text_files()
             if p.relative_to(ROOT).parts[0] in ("examples", "docs", "data-bin")
             or p.name == "README.md"]
    hits = matching_lines(paths, MACHINE_PATH)
    assert not hits, "\n".join(hits[:30])
