"""The code trains what the archive says, seed for seed: the first 100 updates of SSAN's default
start (examples/stability/rerun_plan.json, ``ssan_cap0@1``), run with the plan's own commands
(its corpus, its preparation, its training flags and threads), log exactly the archived losses,
selection rates and gradient norms.

A change of the order in which parameters are drawn, or of the rounding of the arithmetic,
fails here (docs/design.md, "What a seed gives"). Where such a change is meant, the archived
seeds no longer describe the code: train that plan again, re-record the demo, and regenerate
the results.

Bit-for-bit equality holds only on the kind of CPU the archive was trained on (torch's kernels
and the native one, built for the CPU at hand, may round differently elsewhere); on another the
test skips and says why."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from ssan_plugin.experiments.plan import Plan
from ssan_plugin.experiments.train_log import parse_record

PLAN = ROOT / "examples" / "stability" / "rerun_plan.json"
RUN = "rerun/builtin/ssan_cap0@1"
UPDATES = 100  # two log records of the plan's --log-interval 50
#: the CPU the archived seeds were trained on: vendor (/proc/cpuinfo) and torch's capability
ARCHIVE_CPU = ("AuthenticAMD", "AVX512")
FIELDS = ("loss", "nll_loss", "sel_0", "sel_1", "sel_2", "sel", "pol_ent", "gnorm", "lr")


def archived_records(plan, run):
    curve = run.directory(Path(plan.archive)) / "curve.jsonl"
    records = [json.loads(line) for line in curve.read_text().splitlines()]
    return [r for r in records if r["kind"] == "train_inner"
            and int(r["num_updates"]) <= UPDATES]


def this_cpu():
    """(vendor, torch's CPU capability) of this machine; vendor '' where /proc/cpuinfo is not."""
    import torch

    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.is_file() else []
    vendor = next((l.split(":", 1)[1].strip() for l in lines if l.startswith("vendor_id")), "")
    return vendor, torch.backends.cpu.get_cpu_capability()


def test_the_default_start_trains_its_archived_first_updates_again(tmp_path):
    if this_cpu() != ARCHIVE_CPU:
        pytest.skip(f"the archived seeds were trained on a {' '.join(ARCHIVE_CPU)} CPU; this "
                    f"one is {' '.join(this_cpu()) or 'unknown'}, whose kernels may round otherwise")
    plan = Plan.load(PLAN)
    (run,) = [r for r in plan.runs() if r.key == RUN]
    expected = archived_records(plan, run)
    assert [int(r["num_updates"]) for r in expected] == [50, 100]
    env = {**os.environ, "OMP_NUM_THREADS": str(plan.threads), "PYTHONWARNINGS": "ignore"}
    raw, data = tmp_path / "corpus", tmp_path / "data"
    for cmd in (plan.make_command(run.pair, raw, sys.executable),
                plan.prepare_command(run.pair, raw, data, sys.executable),
                plan.train_command(run, data, tmp_path / "run", UPDATES, sys.executable)
                + ["--no-save"]):
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env,
                              cwd=ROOT, timeout=900)
        assert proc.returncode == 0, f"{cmd[:3]} failed:\n{proc.stderr[-3000:]}"
    parsed = (parse_record(line) for line in (proc.stdout + proc.stderr).splitlines())
    logged = [record for kind, record in filter(None, parsed) if kind == "train_inner"]
    assert [r["num_updates"] for r in logged] == ["50", "100"], proc.stdout[-2000:]
    for mine, archived in zip(logged, expected):
        differ = {k: (mine.get(k), archived.get(k)) for k in FIELDS
                  if mine.get(k) != archived.get(k)}
        assert not differ, (
            f"update {archived['num_updates']}: this code logs {differ} (this code, archive) "
            f"where {RUN} logged the archive's values: the code no longer trains the archived "
            f"seeds (docs/design.md, 'What a seed gives')")
