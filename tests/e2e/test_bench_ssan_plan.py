"""benchmarks/bench_ssan.py --plan: the systems of a runner plan's study, each with the plan's
own flags (what the selector head-to-head's cost table is measured with); the option errors it
refuses before any work; benchmarks/bench_steps.py --plan likewise. The measurements themselves
at a toy size are test_bench_layers.py's (the same code paths past the systems)."""

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


def test_systems_keeps_the_baseline_and_the_named_in_the_plans_order():
    """--systems re-measures a subset into a JSON of its own: the baseline stays (every ratio's
    reference), the rest keep the plan's order whatever order they are named in."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_ssan import only_systems, plan_systems

    systems = plan_systems(PLAN, None, pytest.fail)
    kept = only_systems(systems, "sparsemax,topk", pytest.fail)
    assert list(kept) == ["baseline", "topk", "sparsemax"]
    assert all(kept[name] == systems[name] for name in kept)


@pytest.mark.parametrize("args,message", [
    (["--plan", str(PLAN), "--ssan-system", "x=--ssan-tau 1"], "with --plan, the plan names them"),
    (["--plan", str(PLAN), "--study", "nope"], "no study 'nope' (it has prenorm, postnorm)"),
    (["--study", "prenorm"], "--study needs --plan"),
    (["--modes", "score"], "--modes 'score': choose from gen_sps,gen_sps_fixed_len,score_sps"),
    (["--plan", str(PLAN), "--systems", "topk,nope"], "--systems 'topk,nope': choose from "
     "baseline,gumbel,soft,topk,entmax,entmax15,sparsemax,gate,fixed_mask (nope unknown)"),
    (["--systems", ","], "--systems ',': choose from baseline,ssan"),
])
def test_option_errors_are_one_line(tmp_path, args, message):
    proc = subprocess.run([sys.executable, ROOT / "benchmarks" / "bench_ssan.py", "--workdir",
                           tmp_path, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())  # nothing prepared


def test_bench_steps_takes_the_plans_systems_and_refuses_mixing(tmp_path):
    """benchmarks/bench_steps.py --plan: the study's systems with the plan's flags and nothing
    of the built-in model's; --system beside --plan, or --study alone, is one line."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_steps
    from bench_ssan import plan_systems

    plan = ROOT / "examples" / "everywhere" / "bench_plan.json"
    seen = {}

    def build(data_bin, flags, max_tokens, seed, common):
        seen[tuple(flags)] = tuple(common)
        raise SystemExit(0)  # stop before any training

    data = tmp_path / "data-bin"
    data.mkdir()
    (data / "dict.en.txt").write_text("a 1\n")
    argv = sys.argv
    try:
        sys.argv = ["bench_steps.py", str(data), "--plan", str(plan)]
        bench_steps.build_trainer, original = build, bench_steps.build_trainer
        with pytest.raises(SystemExit):
            bench_steps.main()
    finally:
        sys.argv, bench_steps.build_trainer = argv, original
    first = next(iter(plan_systems(plan, None, pytest.fail).values()))
    assert seen == {tuple(first): ()}
    for args, message in ((["--plan", str(plan), "--system", "x=--ssan-tau 1"], "with --plan, the plan names them"),
                          (["--study", "sites"], "--study needs --plan")):
        proc = subprocess.run([sys.executable, ROOT / "benchmarks" / "bench_steps.py", data, *args],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
