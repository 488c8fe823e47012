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


def test_no_work_items_or_sessions_named():
    hits = []
    for path in tracked_text_files():
        if path.name == "test_committed_text.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                                      .splitlines(), 1):
            if WORK_ITEMS.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits[:30])


def test_no_absolute_machine_paths_in_archives_and_docs():
    hits = []
    for path in tracked_text_files():
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in ("examples", "docs", "data-bin") and rel.name != "README.md":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                                      .splitlines(), 1):
            if MACHINE_PATH.search(line):
                hits.append(f"{rel}:{number}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits[:30])
