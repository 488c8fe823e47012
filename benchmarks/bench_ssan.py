#!/usr/bin/env python
"""SSAN vs the baseline Transformer in one run: training words/s, teacher-forced scoring and
beam-search generation sentences/s and peak memory, as ratios (SSAN / baseline). Same size,
same data, same number of updates.

Corpora (``--corpus``): ``builtin``, the demo's synthetic corpus (short sentences;
``--train-pairs`` and ``--eval-pairs`` size its splits), and
``news``, news-length text: newstest2013 En-De from ``--shared`` (3,000 sentence pairs, split
2,600 / 200 / 200 in file order, sentencepiece 4,000), about 34 source pieces a training sentence.

Runs alternate (baseline, ssan, baseline, ssan, ...) so that machine noise hits both; each
measure is the median over repeats. Trainings are repeated ``--repeats`` times; decoding, a
few seconds per call, is then repeated ``--decode-repeats`` times on the last trained
checkpoint of each system, alternating systems and decoding modes, in fresh processes. Training words/s is fairseq's own (median of its logged
intervals, the first skipped); generation sentences/s is fairseq-generate's own count, with free-length decoding and
with every hypothesis forced to the same length (the same decoding work for both models);
peak memory is the peak resident set size of each training process (os.wait4), reported both
whole and above the resident size of an idle `import fairseq, ssan_plugin` process.

    python benchmarks/bench_ssan.py                         # built-in corpus, ~6 min on 2 cores
    python benchmarks/bench_ssan.py --corpus news           # news-length sentences
    python benchmarks/bench_ssan.py --repeats 3 --updates 300

``--plan PLAN.json [--study NAME]`` measures instead the systems of a runner plan's study
(``ssan-run-experiments``; the first, named ``baseline``, is the reference), each trained with
the plan's own flags (its ``train`` flags, the study's and the system's, arch and criterion), e.g.
every selector of the head-to-head (``examples/selectors/experiments.json``). ``--systems
NAME,NAME`` measures only those and the baseline (e.g. one selector again after its code
changed, into a JSON of its own). ``--modes`` chooses the decoding measures (default: all
three).
"""

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tqdm import tqdm

from ssan_plugin.cli.arguments import ArgumentParser, positive_int
from ssan_plugin.experiments.archive import relativize_text
from ssan_plugin.experiments.tables.bench import process_table

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# The demo's model size is the *_small architectures (ssan_plugin/models/architectures.py).
MODEL = ["--share-all-embeddings", "--dropout", "0.1"]
TRAINING = ["--optimizer", "adam", "--lr", "0.0005", "--label-smoothing", "0.1"]

# Free decoding: each model stops where it likes, so the work differs with what it learnt.
# Fixed length (every hypothesis exactly 12 tokens): the same decoding work for both models.
# Teacher-forced scoring is fast (a few seconds for the 200 test sentences), so it is timed on
# the training split (2,600 news sentences; 8,000 built-in ones): a longer, steadier measure.
GENERATION = {
    "gen_sps": [],
    "gen_sps_fixed_len": ["--min-len", "12", "--max-len-a", "0", "--max-len-b", "12"],
    "score_sps": ["--score-reference"],  # teacher-forced: the encoder and one decoder pass
}
SUBSET = {"gen_sps": "test", "gen_sps_fixed_len": "test", "score_sps": "train"}
NEWS_SPLITS = (("train", 0, 2600), ("valid", 2600, 2800), ("test", 2800, 3000))
SYSTEMS = {
    "baseline": ["--arch", "transformer_small", "--criterion", "label_smoothed_cross_entropy"],
    "ssan": ["--arch", "ssan_transformer_small", "--criterion", "selective_label_smoothed_cross_entropy"],
}


def with_ssan_systems(specs, error, option: str) -> dict:
    """SYSTEMS plus one SSAN system per ``NAME=FLAGS`` spec (SSAN's flags + FLAGS)."""
    systems = dict(SYSTEMS)
    for spec in specs:
        name, sep, flags = spec.partition("=")
        if not sep or not name or name in systems:
            error(f"{option} {spec!r}: give NAME=FLAGS with a new NAME")
        systems[name] = SYSTEMS["ssan"] + shlex.split(flags)
    return systems


def plan_systems(path, study_name, error) -> dict:
    """{system: fairseq-train flags} of a runner plan's study, in its order: arch, criterion,
    the plan's ``train`` flags, the study's and the system's; the first system must be called
    ``baseline`` (the reference of every ratio)."""
    from ssan_plugin.experiments.plan import Plan
    from ssan_plugin.translation.textio import PipelineError

    try:
        plan = Plan.load(path)
    except PipelineError as err:
        error(f"--plan: {err}")
    try:
        study = plan.study(study_name) if study_name else plan.studies[0]
    except PipelineError as err:
        error(f"--study: {err}")
    if study.systems[0] != "baseline":
        error(f"--plan: study {study.name!r}'s first system is {study.systems[0]!r}; the "
              f"reference must be called 'baseline'")
    return {name: ["--arch", plan.systems[name].arch, "--criterion",
                   plan.systems[name].criterion, *plan.train, *study.flags,
                   *plan.systems[name].flags] for name in study.systems}


def only_systems(systems: dict, names: str, error) -> dict:
    """``systems`` restricted to the comma-separated ``names`` and the baseline, in their
    order; an unknown or missing name is an error naming the choices."""
    wanted = [n for n in names.split(",") if n]
    unknown = [n for n in wanted if n not in systems]
    if not wanted or unknown:
        error(f"--systems {names!r}: choose from {','.join(systems)}"
              + (f" ({', '.join(unknown)} unknown)" if unknown else ""))
    return {name: flags for name, flags in systems.items()
            if name == "baseline" or name in wanted}


def run_measured(cmd):
    """Run cmd; return (stdout+stderr, peak RSS in MiB of that process)."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(list(map(str, cmd)), stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{text[-3000:]}")
    return text, usage.ru_maxrss / 1024.0


def prepare_corpus(corpus: str, work: Path, shared: Path, train_pairs: int = 8000,
                   eval_pairs: int = 500) -> Path:
    """The data-bin of ``corpus`` under ``work``, built once per setting (``train_pairs``,
    ``eval_pairs``: the built-in corpus's training and valid/test sizes); a ``work`` built with
    other settings is rebuilt, never silently reused."""
    raw, data_bin, stamp = work / "raw", work / "data-bin", work / "corpus.json"
    settings = {"corpus": corpus, **({"train_pairs": train_pairs, "eval_pairs": eval_pairs}
                                     if corpus == "builtin" else {})}
    if (data_bin / "manifest.json").exists() and stamp.exists() and \
            json.loads(stamp.read_text()) == settings:
        return data_bin
    shutil.rmtree(raw, ignore_errors=True)
    if corpus == "builtin":
        src, tgt, vocab = "src", "tgt", "1000"
        subprocess.run([sys.executable, ROOT / "scripts/make_synthetic_corpus.py", "--out", raw,
                        "--train", str(train_pairs), "--valid", str(eval_pairs),
                        "--test", str(eval_pairs)], check=True)
    else:
        src, tgt, vocab = "en", "de", "4000"
        raw.mkdir(parents=True, exist_ok=True)
        for lang in (src, tgt):
            path = shared / "data" / "mt" / "en-de" / f"newstest2013.{lang}"
            if not path.is_file():
                sys.exit(f"bench_ssan.py: error: {path} not found (--shared)")
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            for split, lo, hi in NEWS_SPLITS:
                (raw / f"{split}.{lang}").write_text("".join(lines[lo:hi]), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "ssan_plugin.commands.prepare_translation", "--src", src,
                    "--tgt", tgt, "--train", raw / "train", "--valid", raw / "valid",
                    "--test", raw / "test", "--dest", data_bin, "--vocab-size", vocab,
                    "--overwrite"], check=True, capture_output=True)
    stamp.write_text(json.dumps(settings))
    return data_bin


def mean_source_pieces(data_bin: Path) -> float:
    """Mean length in pieces (EOS included) of the test split's source side."""
    from fairseq.data import data_utils

    manifest = json.loads((data_bin / "manifest.json").read_text())
    src, tgt = manifest["src"], manifest["tgt"]
    dataset = data_utils.load_indexed_dataset(str(data_bin / f"test.{src}-{tgt}.{src}"), None)
    return float(dataset.sizes.mean())


def main():
    ap = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default="runs/bench")
    ap.add_argument("--updates", type=positive_int, default=200, help="per training (>= 20)")
    ap.add_argument("--repeats", type=positive_int, default=2, help="trainings per system")
    ap.add_argument("--decode-repeats", type=positive_int, default=5,
                    help="timed decodings per system and mode (alternating)")
    ap.add_argument("--max-tokens", type=positive_int, default=4096)
    ap.add_argument("--json", help="write the measurements here")
    ap.add_argument("--corpus", choices=("builtin", "news"), default="builtin")
    ap.add_argument("--train-pairs", type=positive_int, default=8000,
                    help="training pairs of the built-in corpus")
    ap.add_argument("--eval-pairs", type=positive_int, default=500,
                    help="valid and test pairs of the built-in corpus (the test split is decoded)")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"),
                    help="the shared data directory (--corpus news)")
    ap.add_argument("--ssan-system", action="append", default=[], metavar="NAME=FLAGS",
                    help="also measure SSAN with these extra training flags, e.g. "
                         "narrow='--ssan-policy-dim 64' (repeatable; NAME a new system name)")
    ap.add_argument("--plan", metavar="PLAN.json",
                    help="measure the systems of this runner plan's study, with its flags")
    ap.add_argument("--study", help="the study of --plan (default: its first)")
    ap.add_argument("--systems", metavar="NAME,NAME",
                    help="measure only these systems (and the baseline, every ratio's "
                         "reference), in the order of the plan or the built-in list")
    ap.add_argument("--modes", default=",".join(GENERATION),
                    help="decoding measures, comma-separated (default: all of "
                         f"{','.join(GENERATION)})")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(GENERATION):
        ap.error(f"--modes {args.modes!r}: choose from {','.join(GENERATION)}")
    if args.plan and args.ssan_system:
        ap.error("--ssan-system adds to the built-in systems; with --plan, the plan names them")
    if args.study and not args.plan:
        ap.error("--study needs --plan")
    if args.plan:
        systems, common = plan_systems(args.plan, args.study, ap.error), []
    else:
        systems, common = with_ssan_systems(args.ssan_system, ap.error, "--ssan-system"), \
            [*MODEL, *TRAINING]
    if args.systems is not None:
        systems = only_systems(systems, args.systems, ap.error)
    work = Path(args.workdir).resolve() / args.corpus
    work.mkdir(parents=True, exist_ok=True)
    data_bin = prepare_corpus(args.corpus, work, Path(args.shared), args.train_pairs,
                              args.eval_pairs)
    _, idle_rss = run_measured([sys.executable, "-c", "import fairseq, ssan_plugin"])

    results = {name: {"train_wps": [], "peak_rss_mib": [], **{k: [] for k in modes}}
               for name in systems}
    jobs = [(r, name) for r in range(args.repeats) for name in systems]
    checkpoints = {}
    for rep, name in tqdm(jobs, desc="bench trainings"):
        save = work / f"ckpt_{name}_{rep}"  # fresh: never resume an earlier run
        shutil.rmtree(save, ignore_errors=True)
        text, rss = run_measured([
            BIN / "fairseq-train", data_bin, "--user-dir", ROOT / "ssan_plugin", "--cpu",
            *systems[name], *common,
            "--max-tokens", args.max_tokens, "--max-update", args.updates, "--save-dir", save,
            "--no-epoch-checkpoints", "--disable-validation",
            "--log-format", "simple", "--log-interval", 10, "--seed", 1,
        ])
        wps = [float(w) for w in re.findall(r"train_inner \|.* wps=([0-9.]+)", text)]
        if not wps:
            sys.exit("bench_ssan.py: error: no training interval was logged (every 10 updates): "
                     "give --updates 20 or more")
        results[name]["train_wps"].append(statistics.median(wps[1:] or wps))
        results[name]["peak_rss_mib"].append(rss)
        if name in checkpoints:
            shutil.rmtree(checkpoints[name].parent)
        checkpoints[name] = save / "checkpoint_last.pt"

    decodes = [(r, key, name) for r in range(args.decode_repeats) for key in modes
               for name in systems]
    for _, key, name in tqdm(decodes, desc="bench decodings"):
        gen, _ = run_measured([
            BIN / "fairseq-generate", data_bin, "--user-dir", ROOT / "ssan_plugin", "--cpu",
            "--path", checkpoints[name], "--gen-subset", SUBSET[key], "--beam", 5,
            "--batch-size", 64, "--required-batch-size-multiple", 1, *GENERATION[key],
        ])
        sps = re.search(r"Translated [0-9,]+ sentences .* \(([0-9.]+) sentences/s", gen)
        if sps is None:
            sys.exit(f"bench_ssan.py: error: no 'Translated ... sentences/s' line in the output "
                     f"of fairseq-generate {' '.join(GENERATION[key])}:\n{gen[-2000:]}")
        results[name][key].append(float(sps.group(1)))
    for checkpoint in checkpoints.values():
        shutil.rmtree(checkpoint.parent)

    med = {n: {k: statistics.median(v) for k, v in m.items()} for n, m in results.items()}
    b = med["baseline"]
    ratios = {}
    for name in systems:
        if name == "baseline":
            continue
        s = med[name]
        ratios[name] = {
            **{key: s[key] / b[key] for key in ("train_wps", *modes)},
            "peak_rss": s["peak_rss_mib"] / b["peak_rss_mib"],
            "peak_rss_above_idle": (s["peak_rss_mib"] - idle_rss) / (b["peak_rss_mib"] - idle_rss),
        }
    record = {
        "corpus": args.corpus, "mean_source_pieces": mean_source_pieces(data_bin),
        "systems": systems, "runs": results, "median": med,
        "ratios": ratios.get("ssan"), "ratios_by_system": ratios, "idle_rss_mib": idle_rss,
        "settings": {"updates": args.updates, "repeats": args.repeats,
                     "decode_repeats": args.decode_repeats, "max_tokens": args.max_tokens,
                     "modes": modes, "plan": args.plan and relativize_text(
                         str(Path(args.plan).resolve())), "study": args.study,
                     "systems": args.systems}}
    # the table of examples/*/RESULTS.md (ssan_plugin.experiments.tables.bench), from this record
    print("\n" + process_table(Path(args.json or "bench_ssan"), record))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
