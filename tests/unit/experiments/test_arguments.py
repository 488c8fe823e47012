"""ssan_plugin/experiments/arguments.py: the runners' shared options parse and refuse in one line,
and the SRL and pair runners use them."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, cli_env

from ssan_plugin.experiments.arguments import (
    add_run_options,
    name_list_arg,
    runner_parser,
    seed_list,
)


def parser():
    ap = runner_parser("Run things.\n\nMore text.")
    add_run_options(ap, out="runs/x", archive=Path("examples/x/experiments"))
    ap.add_argument("--seeds", default="1,2,3", type=seed_list)
    ap.add_argument("--encoders", default="san", type=name_list_arg(("san", "ssan"), "encoder"))
    return ap


def test_defaults_and_values_parse():
    args = parser().parse_args([])
    assert (args.out, args.archive, args.threads, args.dry_run) == (
        Path("runs/x"), Path("examples/x/experiments"), 2, False)
    assert args.seeds == [1, 2, 3] and args.encoders == ["san"]
    args = parser().parse_args(["--seeds", "4,0", "--encoders", "ssan,san", "--threads", "1"])
    assert args.seeds == [4, 0] and args.encoders == ["ssan", "san"] and args.threads == 1


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "1,x"], "argument --seeds: must be comma-separated integers"),
    (["--seeds", "1,-2"], "argument --seeds: seeds must be >= 0"),
    (["--seeds", "1,1"], "argument --seeds: seed 1 is named twice"),
    (["--encoders", "san,dan"], "argument --encoders: unknown encoder(s) 'dan'; choose from san, ssan"),
    (["--encoders", "san,"], "argument --encoders: unknown encoder(s) ''"),
    (["--encoders", "san,san"], "argument --encoders: encoder 'san' is named twice"),
    (["--threads", "0"], "argument --threads: must be an integer >= 1"),
    # the archive (committed) is never the working folder: a kept file copied onto itself
    (["--out", "{d}/o", "--archive", "{d}/o/runs"], "--archive {d}/o/runs is where --out's runs "
                                                    "train ({d}/o/runs)"),
    (["--out", "{d}/o", "--archive", "{d}/o/"], "--archive {d}/o is the --out folder ({d}/o)"),
    (["--out", "{d}/o", "--archive", "{d}/file"], "--archive {d}/file exists and is not a "
                                                  "directory"),
    (["--out", "{d}/file"], "--out {d}/file exists and is not a directory"),
])
def test_bad_values_are_one_line(argv, message, capsys, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit) as info:
        parser().parse_args([a.format(d=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message.format(d=tmp_path) in err, err
    assert len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # nothing created


@pytest.mark.parametrize("runner, argv, message", [
    ("examples/srl/run_srl.py", ["--encoders", "san,xyz"], "unknown encoder(s) 'xyz'"),
    ("examples/srl/run_srl.py", ["--updates", "0"], "argument --updates: must be an integer >= 1"),
    ("examples/pairs/run_pairs.py", ["--targets", "entailment,sts"], "unknown target(s) 'sts'"),
    ("examples/pairs/run_pairs.py", ["--seeds", "a"], "argument --seeds: must be comma-separated"),
    ("examples/srl/run_srl.py", ["--archive", "{d}/o/runs"], "--archive {d}/o/runs is where "
                                                             "--out's runs train"),
    ("examples/pairs/run_pairs.py", ["--archive", "{d}/o"], "--archive {d}/o is the --out folder"),
])
def test_the_runners_refuse_bad_options_in_one_line(runner, argv, message, tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / runner), "--out", str(tmp_path / "o"),
                           *[a.format(d=tmp_path) for a in argv]],
                          capture_output=True, text=True, env=cli_env(), timeout=300)
    assert proc.returncode == 2
    assert message.format(d=tmp_path) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
