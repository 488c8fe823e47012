"""Running ssan-prepare-srl and the tools on hand-built CoNLL-2005 snippets, and the
module-scoped ``tiny05`` data-bin fixture (tests/e2e/test_srl_cli.py and
tests/unit/criterions/test_srl_cross_entropy.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


DATA = REPO.parent / "shared" / "data"


EWT = DATA / "srl" / "ewt"


BIN = Path(sys.executable).parent


ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))


WORDS = "I\nsaw\nher\nleave\n\nShe\nleft\n\nRain\n"


PROPS = ("-   (A0*)   *\nsee (V*)    *\n-  (A1*   (A0*)\nleave *)   (V*)\n\n"
         "-  (A0*)\nleave (V*)\n\n-\n")


VALID_PROPS = "-  (A0*)    *\nsee (V*)    *\n-  (A1*  (A2*)\nleave *)  (V*)\n\n-  (A0*)\nleave (V*)\n\n-\n"


def run(args, check=True):
    proc = subprocess.run(args, cwd=REPO, env=ENV, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return proc


def prepare(fmt, dest, train, valid=None, test=None):
    args = [sys.executable, "-m", "ssan_plugin.commands.prepare_srl", "--format", fmt, "--train", str(train),
            "--dest", str(dest)]
    for name, spec in (("--valid", valid), ("--test", test)):
        if spec:
            args += [name, str(spec)]
    return run(args)


@pytest.fixture(scope="module")
def tiny05(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("tiny05")
    (tmp_path / "t.words").write_text(WORDS)
    (tmp_path / "t.props").write_text(PROPS)
    (tmp_path / "v.words").write_text(WORDS)
    (tmp_path / "v.props").write_text(VALID_PROPS)
    dest = tmp_path / "bin"
    prepare("conll2005", dest, tmp_path / "t", f"{tmp_path / 'v.words'},{tmp_path / 'v.props'}")
    return dest
