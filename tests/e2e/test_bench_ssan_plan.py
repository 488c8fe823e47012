"""benchmarks/bench_ssan.py --plan: the systems of a runner plan's study, each with the plan's
own flags (what the selector head-to-head's cost table is measured with); the option errors it
refuses before any work. The measurement itself at a toy size is test_bench_layers.py's
test_model_bench_toy_size (the same code path past the systems)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "examples" / "selectors" / "experiments.json"


def test_plan_systems_are_the_studys_with_the_plans_flags():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_ssan import plan_systems

    from ssan_plugin.experiments.plan import Plan

    plan = Plan.load(PLAN)
    study = plan.studies[0]  # without --study: the plan's first (prenorm, every selector)
    assert study.name == "prenorm"
    systems = plan_systems(PLAN, None, pytest.fail)
    assert list(systems) == study.systems and list(systems)[0] == "baseline"
    for name, flags in systems.items():
        system = plan.systems[name]
        assert flags == ["--arch", system.arch, "--criterion", system.criterion, *plan.train,
                         *study.flags, *system.flags]
    assert systems["fixed_mask"][-2:] == ["--max-source-positions", "256"]


@pytest.mark.parametrize("args,message", [
    (["--plan", str(PLAN), "--ssan-system", "x=--ssan-tau 1"], "with --plan, the plan names them"),
    (["--plan", str(PLAN), "--study", "nope"], "no study 'nope' (it has prenorm, postnorm)"),
    (["--study", "prenorm"], "--study needs --plan"),
    (["--modes", "score"], "--modes 'score': choose from gen_sps,gen_sps_fixed_len,score_sps"),
])
def test_option_errors_are_one_line(tmp_path, args, message):
    proc = subprocess.run([sys.executable, ROOT / "benchmarks" / "bench_ssan.py", "--workdir",
                           tmp_path, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())  # nothing prepared
