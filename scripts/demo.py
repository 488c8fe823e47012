#!/usr/bin/env python
"""The main job: a baseline Transformer (SAN) and an SSAN, same size, same budget; BLEU table.

Steps (each shows progress): build the raw corpus (the built-in synthetic one unless --data),
prepare it (scripts/prepare_translation.py: sentencepiece + fairseq-preprocess), train
`transformer` and `ssan_transformer` with identical options and number of updates, decode the
test split with fairseq-generate (every sentence; scripts/evaluate_bleu.py checks), score with
sacrebleu and print: BLEU (paired bootstrap vs the baseline), chrF, selection rate, training
words/s, parameters.

    python scripts/demo.py --out runs/demo                 # built-in corpus
    python scripts/demo.py --out runs/mt --data DIR        # DIR/{train,valid,test}.{src,tgt}
    python scripts/demo.py --out runs/de --data ../shared/data/mt/en-de --src en --tgt de
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
BIN = Path(sys.executable).parent

# The size (the `_small` architectures) trains in a few minutes on 2 CPU cores.
MODEL = "--share-all-embeddings --dropout 0.1".split()
OPTIM = (
    "--optimizer adam --adam-betas (0.9,0.98) --lr 0.002 --lr-scheduler inverse_sqrt "
    "--warmup-updates 300 --clip-norm 1.0 --label-smoothing 0.1 --max-tokens 4096"
).split()
SYSTEMS = {
    "baseline": ["--arch", "transformer_small", "--criterion", "label_smoothed_cross_entropy"],
    "ssan": ["--arch", "ssan_transformer_small", "--criterion", "selective_label_smoothed_cross_entropy"],
}


def log(msg):
    print(f"[demo] {msg}", flush=True)


def run(cmd, log_file=None):
    """Run a command, streaming its output (and saving it to log_file); fail loudly."""
    log(" ".join(map(str, cmd)))
    env = dict(os.environ, PYTHONUNBUFFERED="1")  # stream the child's log lines as they come
    with subprocess.Popen(list(map(str, cmd)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1, env=env) as proc:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "tensorboardX" not in line:
                sys.stdout.write(line)
                sys.stdout.flush()
        proc.wait()
    text = "".join(lines)
    if log_file:
        Path(log_file).write_text(text)
    if proc.returncode != 0:
        sys.exit(f"[demo] command failed with exit code {proc.returncode}: {cmd[0]}")
    return text


def check_raw(data: Path, src: str, tgt: str):
    missing = [f"{data}/{s}.{l}" for s in ("train", "valid", "test") for l in (src, tgt)
               if not (data / f"{s}.{l}").is_file()]
    if missing:
        sys.exit(f"[demo] --data must hold {{train,valid,test}}.{{{src},{tgt}}} (choose the suffixes "
                 f"with --src/--tgt); missing: " + ", ".join(missing))


def training_summary(text: str) -> dict:
    """Median training words/s over logged intervals (first one skipped), parameters,
    and the last validation selection rate (SSAN only)."""
    wps = [float(m) for m in re.findall(r"train_inner \|.* wps=([0-9.]+)", text)]
    params = re.search(r"num\. shared model params: ([0-9,]+)", text) or re.search(
        r"num\. model params: ([0-9,]+)", text)
    sel = re.findall(r"valid on 'valid' subset .*?\| sel ([0-9.]+)", text)
    return {
        "train_wps": statistics.median(wps[1:] or wps) if wps else float("nan"),
        "params": int(params.group(1).replace(",", "")) if params else None,
        "sel": float(sel[-1]) if sel else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/demo", help="working directory (checkpoints, logs)")
    ap.add_argument("--data", help="raw corpus DIR/{train,valid,test}.{src,tgt}; default: built-in")
    ap.add_argument("--src", default="src", help="source file suffix in --data (default src)")
    ap.add_argument("--tgt", default="tgt", help="target file suffix in --data (default tgt)")
    ap.add_argument("--data-bin", help="where to write the prepared data (default OUT/data-bin)")
    ap.add_argument("--max-update", type=int, default=900, help="updates per system (same for both)")
    ap.add_argument("--vocab-size", type=int, default=1000)
    ap.add_argument("--train-size", type=int, default=20000, help="built-in corpus: training pairs")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fresh", action="store_true", help="delete OUT first")
    args = ap.parse_args()

    out = Path(args.out).resolve()
    if args.fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()

    if args.data:
        raw = Path(args.data).resolve()
        check_raw(raw, args.src, args.tgt)
    else:
        raw = out / "raw"
        if args.src != "src" or args.tgt != "tgt":
            sys.exit("[demo] --src/--tgt choose file suffixes of --data; the built-in corpus is src/tgt")
        if not (raw / "test.tgt").exists():
            log("1/4 building the synthetic corpus (sparse content words among fillers, reordered)")
            run([sys.executable, SCRIPTS / "make_synthetic_corpus.py", "--out", raw,
                 "--train", args.train_size])

    data_bin = Path(args.data_bin).resolve() if args.data_bin else out / "data-bin"
    if not (data_bin / "manifest.json").exists():
        log("2/4 preparing: sentencepiece + fairseq-preprocess")
        run([sys.executable, SCRIPTS / "prepare_translation.py", "--src", args.src, "--tgt", args.tgt,
             "--train", raw / "train", "--valid", raw / "valid", "--test", raw / "test",
             "--dest", data_bin, "--vocab-size", args.vocab_size, "--overwrite"])

    summaries = {}
    for name, flags in SYSTEMS.items():
        save = out / "checkpoints" / name
        log(f"3/4 training {name} for {args.max_update} updates")
        text = run([BIN / "fairseq-train", data_bin, "--user-dir", ROOT / "ssan_plugin", "--cpu",
                    *flags, *MODEL, *OPTIM, "--max-update", args.max_update, "--seed", args.seed,
                    "--save-dir", save, "--no-epoch-checkpoints", "--log-format", "simple",
                    "--log-interval", 50, "--keep-last-epochs", 1], log_file=out / f"train_{name}.log")
        summaries[name] = training_summary(text)

    log("4/4 decoding the test split and scoring (sacrebleu)")
    report_path = out / "bleu.json"
    run([sys.executable, SCRIPTS / "evaluate_bleu.py", "--data", data_bin, "--ref", raw / f"test.{args.tgt}",
         "--cpu", "--json", report_path, "--beam", 5,
         *[a for name in SYSTEMS for a in ("--system", f"{name}={out / 'checkpoints' / name / 'checkpoint_best.pt'}")]])
    report = json.loads(report_path.read_text())

    base_wps = summaries["baseline"]["train_wps"]
    rows = ["| system | BLEU | Δ BLEU (p) | chrF | selection rate | train words/s (× baseline) | parameters |",
            "|---|---|---|---|---|---|---|"]
    for sys_report in report["systems"]:
        s = summaries[sys_report["name"]]
        delta = (f"{sys_report['delta']:+.2f} (p={sys_report['p_value']:.3f})"
                 if "delta" in sys_report else "–")
        sel = f"{s['sel']:.3f}" if s["sel"] is not None else "1 (all pairs)"
        rows.append(f"| {sys_report['name']} | {sys_report['bleu']:.2f} | {delta} | {sys_report['chrf']:.2f} | "
                    f"{sel} | {s['train_wps']:.0f} ({s['train_wps'] / base_wps:.2f}×) | {s['params']:,} |")
    table = "\n".join(rows)
    (out / "RESULTS.md").write_text(
        f"Test split, {report['systems'][0]['n']} sentences, {args.max_update} updates each, seed {args.seed}.\n"
        f"BLEU signature: {report['signature']}\n\n{table}\n")
    print("\n" + table)
    print(f"\nBLEU signature: {report['signature']}")
    log(f"done in {(time.time() - start) / 60:.1f} min; details in {out}")


if __name__ == "__main__":
    main()
