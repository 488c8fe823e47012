"""Run a translation comparison plan, one training at a time, resumable across sessions.

    ssan-run-experiments --plan examples/translation/experiments.json --out runs/experiments
    ssan-run-experiments --plan ... --out ... --status      # what is done, what is left
    ssan-run-experiments --plan ... --out ... --only en-de --limit 2

A plan may borrow a system's runs from another plan (never trained here, checked to be the
same runs when the plan loads) and archive selection statistics per run (plan keys ``borrow``
of a study and ``selection``; see the runner's docstring).

Kill it at any time and start it again: finished runs are skipped, a killed training resumes
from its last checkpoint; its training dies with it (even on SIGKILL), and a run that a live
process is still training is refused in one line naming it. Pooled tables per study and pair
are rewritten in OUT/results/ as seeds finish. See ssan_plugin/experiments/plan.py for the plan
format, runner.py for the steps.
"""

import argparse
import sys

from ssan_plugin.cli.arguments import ArgumentParser, input_file_arg, positive_int, script_main
from ssan_plugin.cli.files import Input, guard_outputs, output_dir
from ssan_plugin.commands import command_prog
from ssan_plugin.experiments.plan import Plan
from ssan_plugin.experiments.runner import Runner


prog = command_prog(__file__)  # this command's name, as it was started


#: what the runner writes at the top of OUT, besides one folder per study
TOP_LEVEL = ("data", "logs", "results", "runs.jsonl", ".lock")


@script_main(prog=prog)
def main(argv=None):
    ap = ArgumentParser(prog=prog(), description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", required=True, metavar="PLAN.json", type=input_file_arg)
    ap.add_argument("--out", required=True, metavar="DIR")
    ap.add_argument("--only", metavar="TEXT", action="append",
                    help="only runs whose key (STUDY/PAIR/SYSTEM@SEED) contains TEXT "
                         "(repeat: any of them)")
    ap.add_argument("--limit", type=positive_int, metavar="N", help="stop after N trainings")
    ap.add_argument("--status", action="store_true", help="print each run's state and exit")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = ap.parse_args(argv)
    plan = Plan.load(args.plan)
    # OUT and the archive are designed to be added to (a run resumes where it stopped): they
    # may hold earlier work; the plan may not sit where the runner writes, and the archive
    # (committed) is never OUT (checkpoints)
    studies = {study.name for study in plan.studies}
    written = set(TOP_LEVEL) | studies
    archived = studies | {"results"}
    guard_outputs([output_dir("--out", args.out, adds=True,
                              writes=lambda relative: relative.split("/")[0] in written),
                   plan.archive and output_dir(
                       "the plan's archive", plan.archive, adds=True,
                       writes=lambda relative: relative.split("/")[0] in archived)],
                  [Input("--plan", args.plan)], create_parents=not (args.status or args.dry_run))
    runner = Runner(plan, args.out, dry_run=args.dry_run)
    if args.status:
        rows = runner.status()
        for row in rows:
            line = f"{row['state']:8} {row['run']}"
            if "source" in row:
                line += f"  <- {row['source']}: {row['source_state']} there"
            if "selection" in row:
                line += f"  (selection: {row['selection']})"
            print(line)
        done = sum(r["state"] in ("decoded", "archived") or r.get("source_state") in
                   ("decoded", "archived") for r in rows)
        borrowed = [r for r in rows if r["state"] == "borrowed"]
        note = ""
        if borrowed:
            there = sum(r["source_state"] in ("decoded", "archived") for r in borrowed)
            note = f" ({len(borrowed)} borrowed, never trained here: {there} decoded in their plan)"
        print(f"{done}/{len(rows)} runs done{note}")
        analysed = [r["selection"] for r in rows if "selection" in r]
        if analysed:
            print(f"selection statistics: {analysed.count('archived')}/{len(analysed)} archived, "
                  f"{analysed.count('todo')} to make now, {analysed.count('pending')} after "
                  f"their runs, {analysed.count('no checkpoint')} without a checkpoint here")
        return 0
    try:
        runner.run(only=args.only, limit=args.limit)
    except KeyboardInterrupt:
        print("interrupted; run again to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
