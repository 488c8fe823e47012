"""What the project commits speaks of the project only: no work item or working period named in any
tracked text file (docs, results, code, tests), no absolute path of the machine that made it."""

import re
import subprocess

import pytest

from conftest import ROOT

# a work item in any form (with a number, with an article, plural), a numbered working period or
# the current one; the words are spelt with a character class so that this file names none
WORK_ITEMS = re.compile(r"\b(ses[s]ions? \d+|this ses[s]ion|is[s]ues?)\b", re.I)
ITEM, PERIOD = "is" "sue", "ses" "sion"  # (test cases below, built so that this file names neither)
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


def test_no_work_items_or_periods_named():
    hits = matching_lines(tracked_text_files(), WORK_ITEMS)  # this file included
    assert not hits, "\n".join(hits[:30])


@pytest.mark.parametrize("line, named", [
    (f"remaining options of the {ITEM} are checked", True),
    (f"see {ITEM} #12", True), (f"{ITEM.title()}s 3 and 4", True), (f"in {PERIOD} 7", True),
    (f"written in this {PERIOD}", True),
    (f'@pytest.fixture(scope="{PERIOD}")', False), (f"where the last {PERIOD} stopped", False),
    (f"the t{ITEM} of the model", False),
])
def test_work_item_pattern(line, named):
    assert bool(WORK_ITEMS.search(line)) == named


def test_no_absolute_machine_paths_in_archives_and_docs():
    paths = [p for p in tracked_text_files()
             if p.relative_to(ROOT).parts[0] in ("examples", "docs", "data-bin")
             or p.name == "README.md"]
    hits = matching_lines(paths, MACHINE_PATH)
    assert not hits, "\n".join(hits[:30])
