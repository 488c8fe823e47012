"""Shared fixtures: paths, a tiny synthetic data-bin, and a runner for fairseq's CLI tools."""

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fairseq  # noqa: F401,E402  (first: the plugin registers at once, as under fairseq's CLIs)
import ssan_plugin  # noqa: F401,E402
import helpers.selector_plugin  # noqa: F401,E402  (registers the docs' example selector, window)

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_DIR = ROOT / "ssan_plugin"
# the plugin plus the docs' example selector: the user dir of tests that run every selector
SELECTOR_PLUGIN_DIR = ROOT / "tests" / "helpers" / "selector_plugin"
SHARED_DATA = ROOT.parent / "shared" / "data"
BIN = Path(sys.executable).parent

# Tiny model flags used by every CLI test (fast on one core).
TINY_MODEL = (
    "--encoder-layers 2 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
    "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 4 "
    "--decoder-attention-heads 4 --dropout 0.0"
).split()


def require_shared(relative: str) -> Path:
    """``../shared/data/<relative>`` (a file or a folder), or skip the calling test with a reason
    naming what is missing: the shared data is not part of a fresh clone (see README)."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"needs ../shared/data/{relative} (the shared data; see README)")
    return path


def cli_env():
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONWARNINGS"] = "ignore"
    return env


def run_cli(tool, *args, input=None, check=True, timeout=600):
    """Run a fairseq console script (or a python script path) and return the CompletedProcess."""
    if str(tool).endswith(".py"):
        cmd = [sys.executable, str(tool), *map(str, args)]
    else:
        cmd = [str(BIN / tool), *map(str, args)]
    proc = subprocess.run(
        cmd, input=input, capture_output=True, text=True, env=cli_env(), timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory):
    """Raw synthetic corpus: 400 train, 40 valid, 37 test pairs (37: not a multiple of 8)."""
    out = tmp_path_factory.mktemp("corpus")
    run_cli(ROOT / "scripts" / "make_synthetic_corpus.py", "--out", out,
            "--train", 400, "--valid", 40, "--test", 37)
    return out


@pytest.fixture(scope="session")
def tiny_bin(tiny_corpus, tmp_path_factory):
    """fairseq data-bin of the tiny corpus (word level, joined dictionary)."""
    dest = tmp_path_factory.mktemp("data-bin")
    run_cli("fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt",
            "--trainpref", tiny_corpus / "train", "--validpref", tiny_corpus / "valid",
            "--testpref", tiny_corpus / "test", "--destdir", dest, "--joined-dictionary",
            "--workers", 1)
    return dest


@pytest.fixture(autouse=True)
def _log_handlers_on_open_streams():
    """After each test, a plain logging StreamHandler left on a stream that pytest's capture
    has closed (a script's main or a library's basicConfig run in-process under capsys) is
    pointed back at the current stderr, so that later tests do not get "--- Logging error ---"
    lines in their captured output."""
    yield
    loggers = [logging.getLogger()] + [logger for logger in logging.Logger.manager.loggerDict.values()
                                       if isinstance(logger, logging.Logger)]
    for logger in loggers:
        for handler in logger.handlers:
            stream = getattr(handler, "stream", None)
            if type(handler) is logging.StreamHandler and getattr(stream, "closed", False):
                handler.stream = sys.stderr  # (setStream would flush the closed one)


#: a log record in any format a command run in-process may leave on the root logger: fairseq's
#: (``2026-01-01 12:00:00 | INFO | name | ...``), ssan-warm-start's (``INFO | ...``) or
#: logging's default (``INFO:name:...``, after a bare ``logging.basicConfig()``)
LOG_RECORD = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(,\d+)? \| )?(DEBUG|INFO|WARNING)( \| |:[\w.]+:)")


def message_lines(stderr: str):
    """The lines of a script's stderr that are not INFO/DEBUG/WARNING log records (whether a
    main run in-process logs depends on the logging set-up earlier tests left behind)."""
    return [line for line in stderr.strip().splitlines() if not LOG_RECORD.match(line)]
