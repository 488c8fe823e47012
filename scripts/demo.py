#!/usr/bin/env python
"""The main job: a baseline Transformer (SAN) and an SSAN, same size, same budget; BLEU table.

Phases, one progress line each on the screen (every child's output goes to OUT/logs/PHASE.log;
--verbose streams it): build the raw corpus (the built-in synthetic one unless --data), prepare
it (ssan-prepare-translation: sentencepiece + fairseq-preprocess), train `transformer`
and `ssan_transformer` with identical options and number of updates (side by side, one core
each, on a machine with two or more cores), decode the test split with fairseq-generate,
score with sacrebleu (ssan-evaluate-bleu: BLEU with a paired bootstrap against the
baseline, chrF), and look at what SSAN selects. Then the result table, and OUT/report.md with
the commands that reproduce each system by hand and the figures.

A second run reuses what is done (the corpus, the prepared data, finished trainings and
decodings; an interrupted training resumes from its last checkpoint); --fresh starts over.

    python scripts/demo.py --out runs/demo                 # built-in corpus
    python scripts/demo.py --out runs/mt --data DIR        # DIR/{train,valid,test}.{src,tgt}
    python scripts/demo.py --out runs/de --data ../shared/data/mt/en-de --src en --tgt de
"""

import argparse
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from ssan_plugin.cli.arguments import ArgumentParser, int_arg, nonnegative_int, positive_int
from ssan_plugin.commands import PACKAGE as COMMANDS, console_name

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
BIN = Path(sys.executable).parent

# The size (the `_small` architectures) trains in a few minutes on 2 CPU cores.
MODEL = "--share-all-embeddings --dropout 0.1".split()
OPTIM = (
    "--optimizer adam --adam-betas (0.9,0.98) --lr 0.002 --lr-scheduler inverse_sqrt "
    "--warmup-updates 150 --clip-norm 1.0 --label-smoothing 0.1 --max-tokens 2048"
).split()
SYSTEMS = {
    "baseline": ["--arch", "transformer_small", "--criterion", "label_smoothed_cross_entropy"],
    "ssan": ["--arch", "ssan_transformer_small", "--criterion", "selective_label_smoothed_cross_entropy"],
}
BEAM = 5
BUILTIN_MAX_LEN = {"max_len_a": 1.0, "max_len_b": 10}  # built-in corpus: targets shorter than sources
TAIL = 30  # lines of a failed phase's log shown on the screen
# Committed seeds of this recipe trained by the current code (the runner's plan
# examples/stability/rerun_plan.json, study rerun, which borrows the baseline's from
# demo_plan.json): the demo's system -> the plan's system trained exactly as the demo trains it
SPREAD_PLAN = ROOT / "examples" / "stability" / "rerun_plan.json"
SPREAD_STUDY = "rerun"
SPREAD_SYSTEMS = {"baseline": "baseline", "ssan": "ssan_cap0"}
# What make demo printed with this recipe on a fresh checkout, shown in the README
README_RUN = ROOT / "examples" / "stability" / "demo_run.json"
MARKER = ".ssan_demo"  # marks OUT as the demo's own directory (what --fresh may delete)
DATA_BIN_MARKER = ".ssan_demo_data"  # marks a --data-bin outside OUT as the demo's
BAR = "{desc:<16}{percentage:3.0f}%|{bar:20}| {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}{postfix}]"


def display_path(path) -> str:
    """A path as the user would type it from the repository root."""
    from ssan_plugin.experiments.archive import project_path

    return project_path(path, ROOT)


def display_command(cmd, env=None) -> str:
    """The command as one would type it by hand: console scripts by name, paths shortened."""
    words = [str(c) for c in cmd]
    if words[:3] == [sys.executable, "-m", "fairseq_cli.generate"]:
        words = ["fairseq-generate"] + words[3:]
    elif words[:2] == [sys.executable, "-m"] and words[2].startswith(COMMANDS + "."):
        words = [console_name(words[2])] + words[3:]
    elif words and Path(words[0]).parent == BIN:
        words[0] = Path(words[0]).name
    elif words and words[0] == sys.executable:
        words[0] = "python"
    words = [display_word(w) for w in words]
    prefix = [f"{k}={v}" for k, v in (env or {}).items()]
    return shlex.join(prefix + words)


def display_word(word: str) -> str:
    """A command word with its path shortened as :func:`display_path` does: a path, or the
    path of a ``NAME=PATH`` word (``--hyp baseline=/.../baseline.test.tgt``)."""
    if word.startswith("/"):
        return display_path(word)
    name, sep, value = word.partition("=")
    if sep and value.startswith("/") and "/" not in name:
        return f"{name}={display_path(value)}"
    return word


# --- phases: children with a progress line ----------------------------------------------

class PhaseFailed(Exception):
    def __init__(self, phase, code):
        super().__init__(phase.name)
        self.phase, self.code = phase, code


class Phase:
    """One child process: output to its log file (and the screen with --verbose), progress
    parsed from its output by ``parse`` (override), one tqdm line on the screen."""

    unit = "steps"

    def __init__(self, name, cmd, log_path, total=1, env=None, append=False):
        self.name, self.cmd, self.log_path, self.total = name, [str(c) for c in cmd], Path(log_path), total
        self.env = dict(env or {})
        self.append = append
        self.n = 0
        self.postfix = ""
        self.proc = None
        self.reader = None
        self.started = None
        self.seconds = None

    def parse(self, line):
        pass

    def start(self, verbose):
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log = open(self.log_path, "a" if self.append else "w", encoding="utf-8")
        self.log.write(f"$ {display_command(self.cmd, self.env)}\n")
        self.log.flush()
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.env)
        self.started = time.time()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1, env=env, cwd=ROOT)
        self.reader = threading.Thread(target=self._read, args=(verbose,), daemon=True)
        self.reader.start()

    def _read(self, verbose):
        for line in self.proc.stdout:
            self.log.write(line)
            if verbose:
                sys.stdout.write(f"[{self.name}] {line}")
                sys.stdout.flush()
            try:
                self.parse(line)
            except (ValueError, KeyError):  # a line that only looks like progress
                pass
        self.log.flush()

    def poll(self):
        """None while running; else the exit code (output fully read)."""
        if self.proc.poll() is None:
            return None
        self.reader.join()
        self.log.close()
        if self.seconds is None:
            self.seconds = time.time() - self.started
        return self.proc.returncode

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.poll()

    def tail(self, n=TAIL):
        lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        return lines[-n:]


class Screen:
    """Progress lines: live tqdm bars on a terminal; elsewhere (a pipe, a file) one final line
    per phase. With --verbose, the children's output instead, and a line per phase."""

    def __init__(self, verbose):
        from tqdm import tqdm

        self.tqdm = tqdm
        self.verbose = verbose
        self.live = sys.stderr.isatty() and not verbose
        self.bars = {}

    def begin(self, phases):
        for i, phase in enumerate(phases):
            if self.live:
                self.bars[phase.name] = self.tqdm(
                    total=phase.total, desc=phase.name, unit=phase.unit, bar_format=BAR,
                    position=i, leave=True, dynamic_ncols=True, mininterval=0.5)
            elif self.verbose:
                print(f"== {phase.name}: {display_command(phase.cmd, phase.env)}", flush=True)

    def update(self, phase):
        bar = self.bars.get(phase.name)
        if bar is not None:
            bar.n = min(phase.n, phase.total)
            bar.set_postfix_str(phase.postfix, refresh=False)
            bar.refresh()

    def finish(self, phase, ok=True):
        bar = self.bars.pop(phase.name, None)
        if bar is not None:
            bar.n = phase.total if ok else min(phase.n, phase.total)
            bar.set_postfix_str(phase.postfix, refresh=True)
            bar.close()
        elif ok:
            self.line(phase.name, phase.total, phase.total, phase.unit, phase.seconds, phase.postfix)

    def line(self, name, n, total, unit, seconds, postfix="", note=""):
        text = self.tqdm.format_meter(n, total, seconds or 0, prefix=name, unit=unit,
                                      bar_format=BAR, postfix=postfix or None, ncols=100)
        print(text + (f"  {note}" if note else ""), flush=True)

    def reused(self, name, what):
        print(f"{name:<16}reused ({what})", flush=True)


def run_phases(screen, phases, verbose):
    """Run the phases side by side; on the first failure stop the others and raise."""
    screen.begin(phases)
    for phase in phases:
        phase.start(verbose)
    running = list(phases)
    try:
        while running:
            time.sleep(0.3)
            for phase in list(running):
                code = phase.poll()
                screen.update(phase)
                if code is None:
                    continue
                running.remove(phase)
                if code != 0:
                    screen.finish(phase, ok=False)
                    raise PhaseFailed(phase, code)
                screen.finish(phase)
    except BaseException:
        for phase in running:
            phase.stop()
            screen.finish(phase, ok=False)
        raise


class CorpusPhase(Phase):
    unit = "splits"


class PreparePhase(Phase):
    """prepare_translation.py's log: inputs checked, sentencepiece, preprocess, manifest."""

    unit = "steps"
    STEPS = ((r"\| (train|valid|test): \d+ lines", None), (r"training sentencepiece", 2),
             (r"running: .*fairseq_cli\.preprocess", 3), (r"wrote .*manifest\.json", 4))

    def parse(self, line):
        for pattern, step in self.STEPS:
            if re.search(pattern, line):
                self.n = max(self.n, step or 1)


class TrainPhase(Phase):
    """fairseq-train --log-format json: updates done, current train loss, last valid loss."""

    unit = "updates"

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.train_loss = self.valid_loss = None

    def parse(self, line):
        from ssan_plugin.experiments.train_log import parse_record, record_updates  # after quiet_logging

        parsed = parse_record(line)
        if not parsed:
            return
        kind, record = parsed
        if kind == "valid":
            self.valid_loss = float(record["valid_loss"])
        else:
            self.train_loss = float(record["loss"] if kind == "train_inner" else record["train_loss"])
        self.n = max(self.n, record_updates(kind, record))
        parts = []
        if self.train_loss is not None:
            parts.append(f"loss {self.train_loss:.2f}")
        if self.valid_loss is not None:
            parts.append(f"valid {self.valid_loss:.2f}")
        self.postfix = ", ".join(parts)


class DecodePhase(Phase):
    """fairseq-generate: one H- line per translated sentence."""

    unit = "sentences"

    def parse(self, line):
        if line.startswith("H-"):
            self.n += 1


# --- reuse ----------------------------------------------------------------------------------

class State:
    """OUT/state/NAME.json: what a finished phase was run with; equal key = reusable."""

    def __init__(self, out):
        self.dir = out / "state"

    def path(self, name):
        return self.dir / f"{name}.json"

    def get(self, name):
        path = self.path(name)
        return json.loads(path.read_text()) if path.is_file() else None

    def put(self, name, key):
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path(name).write_text(json.dumps(key, indent=1, sort_keys=True) + "\n")

    def drop(self, name):
        self.path(name).unlink(missing_ok=True)


def fingerprint(*paths) -> str:
    """Name, size and mtime of files (cheap; enough to notice a changed input)."""
    h = hashlib.sha256()
    for p in paths:
        p = Path(p)
        st = p.stat()
        h.update(f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


# --- results --------------------------------------------------------------------------------

def plot_curves(logs: dict, path):
    """Train and valid loss of every system, and SSAN's selection rate, against updates."""
    import matplotlib

    from ssan_plugin.experiments.train_log import read_training_log

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_sel) = plt.subplots(1, 2, figsize=(11, 4))
    any_sel = False
    for i, (name, log_path) in enumerate(logs.items()):
        inner, valid, _ = read_training_log(log_path)
        color = f"C{i}"
        if inner:
            ax_loss.plot([int(float(r["num_updates"])) for r in inner],
                         [float(r["loss"]) for r in inner], color=color, label=f"{name} train")
        if valid:
            ax_loss.plot([int(float(r["valid_num_updates"])) for r in valid],
                         [float(r["valid_loss"]) for r in valid], color=color, ls="--",
                         marker="o", label=f"{name} valid")
        sel_inner = [(int(float(r["num_updates"])), float(r["sel"])) for r in inner if "sel" in r]
        sel_valid = [(int(float(r["valid_num_updates"])), float(r["valid_sel"]))
                     for r in valid if "valid_sel" in r]
        if sel_inner:
            ax_sel.plot(*zip(*sel_inner), color=color, label=f"{name} train (sampled)")
            any_sel = True
        if sel_valid:
            ax_sel.plot(*zip(*sel_valid), color=color, ls="--", marker="o",
                        label=f"{name} valid (eval mode)")
            any_sel = True
    ax_loss.set_xlabel("updates")
    ax_loss.set_ylabel("loss (label-smoothed, base 2)")
    ax_loss.set_title("training curves")
    ax_loss.legend(fontsize=8)
    ax_sel.set_xlabel("updates")
    ax_sel.set_ylabel("sel: fraction of (query, key) pairs selected")
    ax_sel.set_title("SSAN selection rate")
    ax_sel.set_ylim(0, 1)
    if any_sel:
        ax_sel.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def detokenised_hypotheses(data_bin, generate_log, n):
    """fairseq-generate's H- lines in corpus order, sentencepiece removed and detokenised as
    the manifest says (what ssan-evaluate-bleu does with a checkpoint)."""
    import sentencepiece as spm

    from ssan_plugin.translation.decode import parse_generate_output
    from ssan_plugin.translation.pipeline import language_config_from_manifest, load_manifest

    manifest = load_manifest(data_bin)
    sp = spm.SentencePieceProcessor(model_file=spm_model_path(data_bin, manifest))
    tgt_lang = language_config_from_manifest(manifest, manifest["tgt"])
    pieces = parse_generate_output(Path(generate_log).read_text(encoding="utf-8"), n)
    return [tgt_lang.detokenise(sp.decode_pieces(p.split())) for p in pieces]


def spm_model_path(data_bin, manifest) -> str:
    model = Path(manifest["sentencepiece"]["model"])
    return str(model if model.is_file() else Path(data_bin) / model.name)


def analyse_selection_main(argv):
    """The selection phase, run as a child (``demo.py --analyse-selection ...``): rates of
    content-word and filler keys (if a labels file is given) and a heat map of one test
    sentence, written to OUT/selection.json and OUT/selection_heatmap.png."""
    import logging

    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        level=logging.INFO, stream=sys.stdout)
    ap = argparse.ArgumentParser(prog="demo.py --analyse-selection")
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--data-bin", required=True)
    ap.add_argument("--labels")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    result = _analyse_selection(a.checkpoint, Path(a.data_bin), a.labels, Path(a.out))
    (Path(a.out) / "selection.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return 0


def content_or_filler(label: str) -> str:
    """The generator's labels: ``filler`` (no translation) or a part of speech (content)."""
    return "filler" if label == "filler" else "content"


def _analyse_selection(checkpoint, data_bin, labels_file, out):
    from ssan_plugin.analysis import selection as sa

    model, task = sa.load_model(checkpoint, data=data_bin, subset="test")
    data = task.dataset("test")
    src_dict = task.source_dictionary
    sentences = [data.src[i] for i in range(len(data))]
    pieces = [[src_dict[t] for t in s.tolist()] for s in sentences]
    result = {"n": len(sentences)}
    labels = sa.read_word_labels(labels_file) if labels_file else None
    if labels is not None:
        check_words(data_bin, pieces, labels)
        rates = sa.word_label_rates(model, sentences, pieces, labels, src_dict.pad(),
                                    classify=content_or_filler)
        result["rates"] = rates.as_dict()
    # heat map: the first test sentence of moderate length (with fillers, when labelled)
    pick = next((i for i, p in enumerate(pieces)
                 if 12 <= len(p) <= 24 and (labels is None or labels[i].count("filler") >= 3)), 0)
    maps = sa.selection_maps(model, sentences[pick])
    key_labels = None
    if labels is not None:
        key_labels = [None if l is None else content_or_filler(l)
                      for l in sa.piece_labels(pieces[pick], labels[pick])]
    heatmap = out / "selection_heatmap.png"
    sa.plot_selection_heatmap(maps, pieces[pick], heatmap, key_labels=key_labels,
                              title=f"SSAN selection, test sentence {pick + 1}"
                                    + (" (grey ticks: fillers)" if key_labels else ""))
    result.update(heatmap=str(heatmap), heatmap_sentence=pick)
    return result


def check_words(data_bin, pieces, labels):
    """The pieces the model reads spell the labelled words: decoded with the manifest's
    sentencepiece model, every test sentence has as many words as labels."""
    import sentencepiece as spm

    from ssan_plugin.translation.pipeline import load_manifest

    if len(pieces) != len(labels):
        raise ValueError(f"{len(labels)} label lines for {len(pieces)} test sentences")
    sp = spm.SentencePieceProcessor(model_file=spm_model_path(data_bin, load_manifest(data_bin)))
    for i, (p, l) in enumerate(zip(pieces, labels)):
        words = sp.decode_pieces([x for x in p if x not in ("</s>", "<s>")]).split()
        if len(words) != len(l):
            raise ValueError(f"test sentence {i + 1}: {len(words)} words, {len(l)} labels")


# --- main -----------------------------------------------------------------------------------

def check_raw(data: Path, src: str, tgt: str):
    missing = [f"{data}/{s}.{l}" for s in ("train", "valid", "test") for l in (src, tgt)
               if not (data / f"{s}.{l}").is_file()]
    if missing:
        sys.exit(f"demo: --data must hold {{train,valid,test}}.{{{src},{tgt}}} (choose the suffixes "
                 f"with --src/--tgt); missing: " + ", ".join(missing))


def parse_args(argv=None):
    ap = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/demo", help="working directory (default runs/demo)")
    ap.add_argument("--data", help="raw corpus DIR/{train,valid,test}.{src,tgt}; default: built-in")
    ap.add_argument("--src", default="src", help="source file suffix in --data (default src)")
    ap.add_argument("--tgt", default="tgt", help="target file suffix in --data (default tgt)")
    ap.add_argument("--data-bin", help="where to write the prepared data (default OUT/data-bin)")
    ap.add_argument("--max-update", type=positive_int, default=900, help="updates per system (same for both)")
    ap.add_argument("--vocab-size", type=int_arg(8), default=1000)
    ap.add_argument("--train-size", type=positive_int, default=20000, help="built-in corpus: training pairs")
    ap.add_argument("--valid-size", type=positive_int, default=500, help="built-in corpus: valid pairs")
    ap.add_argument("--test-size", type=positive_int, default=500, help="built-in corpus: test pairs")
    ap.add_argument("--seed", type=nonnegative_int, default=1)
    ap.add_argument("--jobs", type=positive_int, default=None,
                    help="trainings/decodings side by side (default: 2 with 2+ cores, else 1)")
    ap.add_argument("--fresh", action="store_true", help="delete OUT's results first, start over")
    ap.add_argument("--overwrite", action="store_true",
                    help="let the preparation replace the data-bin files of an existing --data-bin "
                         "the demo did not make")
    ap.add_argument("--verbose", action="store_true", help="stream every child's output")
    ap.add_argument("--record", metavar="FILE.json",
                    help="also write the recipe and what was printed, and copy each system's "
                         "test hypotheses into FILE/ beside it so the figures can be re-scored "
                         "(the README's demo table comes from examples/stability/demo_run.json, "
                         "written this way)")
    args = ap.parse_args(argv)
    if args.max_update < 1:
        ap.error("--max-update must be at least 1")
    return args


def quiet_logging():
    """Only warnings and errors of libraries reach the screen (the phases log to files)."""
    logging.basicConfig(level=logging.WARNING, format="demo: %(levelname)s: %(name)s: %(message)s")
    logging.getLogger().setLevel(logging.WARNING)


def own_data_bin(data_bin: Path, out: Path) -> bool:
    """``data_bin`` is the demo's: inside OUT (checked to be the demo's), marked, or the
    destination of OUT's recorded preparation."""
    if data_bin == out or out in data_bin.parents or (data_bin / DATA_BIN_MARKER).exists():
        return True
    prepared = State(out).get("prepare") if (out / MARKER).exists() else None
    cmd = prepared.get("cmd", []) if isinstance(prepared, dict) else []
    return any(a == "--dest" and b == str(data_bin) for a, b in zip(cmd, cmd[1:]))


def check_data_bin(data_bin: Path, out: Path, overwrite: bool = False):
    """Exit with one line unless the preparation may write ``data_bin``: new or empty, the
    demo's own (:func:`own_data_bin`), or ``overwrite``."""
    if not data_bin.exists() or overwrite:
        return
    if not data_bin.is_dir():
        sys.exit(f"demo: --data-bin {data_bin} is a file; give a new or empty directory")
    if not any(data_bin.iterdir()) or own_data_bin(data_bin, out):
        return
    sys.exit(f"demo: --data-bin {data_bin} is not empty and was not made by the demo; give a new "
             f"or empty directory, or --overwrite to replace its data-bin files (nothing was "
             f"written)")


def main(argv=None):
    args = parse_args(argv)
    quiet_logging()
    started = time.time()
    out = Path(args.out).resolve()
    if out.exists() and not out.is_dir():
        sys.exit(f"demo: --out {out} is a file; give a new or empty directory")
    if out.exists() and not (out / MARKER).exists() and any(out.iterdir()):
        # never write into (or later delete) a folder the demo did not make
        sys.exit(f"demo: --out {out} is not empty and was not made by the demo; give a new or "
                 f"empty directory (nothing was written)")
    data_bin = Path(args.data_bin).resolve() if args.data_bin else out / "data-bin"
    check_data_bin(data_bin, out, args.overwrite)
    if args.data:
        check_raw(Path(args.data).resolve(), args.src, args.tgt)  # before anything is written
    if args.fresh and out.exists():
        shutil.rmtree(out)  # the demo's own folder (marked, or empty)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).touch()
    if data_bin != out and out not in data_bin.parents:  # a later run knows it as the demo's
        data_bin.mkdir(parents=True, exist_ok=True)
        (data_bin / DATA_BIN_MARKER).touch()
    logs = out / "logs"
    state = State(out)
    cpus = os.cpu_count() or 1
    jobs = args.jobs or (2 if cpus >= 2 else 1)
    threads = str(max(1, cpus // jobs))
    screen = Screen(args.verbose)

    if args.data:
        raw = Path(args.data).resolve()
        check_raw(raw, args.src, args.tgt)
        corpus_desc = display_path(raw)
    else:
        raw = out / "raw"
        corpus_desc = "the built-in corpus"
        if args.src != "src" or args.tgt != "tgt":
            sys.exit("demo: --src/--tgt choose file suffixes of --data; the built-in corpus is src/tgt")
    print(f"ssan_plugin demo: Transformer baseline vs SSAN on {corpus_desc}, {args.max_update} "
          f"updates each -> {display_path(out)}", flush=True)

    try:
        # 1. corpus
        if not args.data:
            cmd = [sys.executable, SCRIPTS / "make_synthetic_corpus.py", "--out", raw,
                   "--train", args.train_size, "--valid", args.valid_size, "--test", args.test_size,
                   "--seed", args.seed]
            key = {"cmd": [str(c) for c in cmd]}
            if state.get("corpus") == key and (raw / "test.tgt").is_file():
                screen.reused("corpus", display_path(raw))
            else:
                state.drop("corpus")
                run_phases(screen, [CorpusPhase("corpus", cmd, logs / "corpus.log", total=3)],
                           args.verbose)
                state.put("corpus", key)
        raw_files = [raw / f"{s}.{l}" for s in ("train", "valid", "test") for l in (args.src, args.tgt)]

        # 2. preparation
        cmd = [sys.executable, "-m", "ssan_plugin.commands.prepare_translation", "--src", args.src, "--tgt", args.tgt,
               "--train", raw / "train", "--valid", raw / "valid", "--test", raw / "test",
               "--dest", data_bin, "--vocab-size", args.vocab_size, "--overwrite"]
        key = {"cmd": [str(c) for c in cmd], "inputs": fingerprint(*raw_files)}
        if state.get("prepare") == key and (data_bin / "manifest.json").is_file():
            screen.reused("preparation", display_path(data_bin))
        else:
            state.drop("prepare")
            run_phases(screen, [PreparePhase("preparation", cmd, logs / "prepare.log", total=4)],
                       args.verbose)
            state.put("prepare", key)
        manifest = json.loads((data_bin / "manifest.json").read_text())
        n_test = manifest["counts"]["test"]["kept"]
        data_key = fingerprint(data_bin / "manifest.json")

        # 3. training, side by side
        env = {"OMP_NUM_THREADS": threads}
        train_cmds, todo = {}, []
        for name, flags in SYSTEMS.items():
            save = out / "checkpoints" / name
            cmd = [BIN / "fairseq-train", data_bin, "--user-dir", ROOT / "ssan_plugin", "--cpu",
                   *flags, *MODEL, *OPTIM, "--max-update", args.max_update, "--seed", args.seed,
                   "--save-dir", save, "--no-epoch-checkpoints", "--save-interval-updates",
                   max(1, args.max_update // 6), "--keep-interval-updates", 1,
                   "--num-workers", 0, "--log-format", "json", "--log-interval", 25]
            train_cmds[name] = (cmd, env)
            key = {"cmd": [str(c) for c in cmd], "data": data_key}
            done = state.get(f"train_{name}")
            if done == key and (save / "checkpoint_best.pt").is_file():
                screen.reused(f"train {name}", f"{display_path(save)}")
                continue
            resume = state.get(f"train_{name}.started") == key
            if not resume and save.exists():
                shutil.rmtree(save)  # trained with other options or data: start over
            state.drop(f"train_{name}")
            state.put(f"train_{name}.started", key)
            todo.append((name, key, TrainPhase(f"train {name}", cmd, logs / f"train_{name}.log",
                                               total=args.max_update, env=env, append=resume)))
        for batch in chunks(todo, jobs):
            run_phases(screen, [p for _, _, p in batch], args.verbose)
            for name, key, _ in batch:
                state.put(f"train_{name}", key)

        # 4. decoding, side by side
        from ssan_plugin.translation.decode import GenerateOptions, generate_command

        quiet_logging()  # importing fairseq (through the package) reconfigures the root logger

        hyp_dir = out / "hyps"
        hyp_dir.mkdir(exist_ok=True)
        # the built-in corpus's targets are shorter than their sources (fillers dropped)
        max_len = {} if args.data else BUILTIN_MAX_LEN
        gen_cmds, todo = {}, []
        for name in SYSTEMS:
            ckpt = out / "checkpoints" / name / "checkpoint_best.pt"
            cmd = generate_command(data_bin, ckpt, args.src, args.tgt, "test", GenerateOptions(
                beam=BEAM, cpu=True, user_dir=str(ROOT / "ssan_plugin"), **max_len))
            gen_cmds[name] = (cmd, env)
            key = {"cmd": cmd, "checkpoint": fingerprint(ckpt)}
            hyp_file = hyp_dir / f"{name}.test.{args.tgt}"
            if state.get(f"decode_{name}") == key and hyp_file.is_file():
                screen.reused(f"decode {name}", display_path(hyp_file))
                continue
            state.drop(f"decode_{name}")
            todo.append((name, key, DecodePhase(f"decode {name}", cmd, logs / f"decode_{name}.log",
                                                total=n_test, env=env)))
        for batch in chunks(todo, jobs):
            run_phases(screen, [p for _, _, p in batch], args.verbose)
            for name, key, phase in batch:
                hyps = detokenised_hypotheses(data_bin, phase.log_path, n_test)
                (hyp_dir / f"{name}.test.{args.tgt}").write_text("".join(h + "\n" for h in hyps),
                                                                encoding="utf-8")
                state.put(f"decode_{name}", key)

        # 5. scoring
        bleu_json = out / "bleu.json"
        score_cmd = [sys.executable, "-m", "ssan_plugin.commands.evaluate_bleu", "--data", data_bin,
                     "--ref", raw / f"test.{args.tgt}", "--json", bleu_json, "--overwrite",
                     *[a for name in SYSTEMS
                       for a in ("--hyp", f"{name}={hyp_dir / f'{name}.test.{args.tgt}'}")]]
        run_phases(screen, [Phase("scoring", score_cmd, logs / "score.log")], args.verbose)
        report = json.loads(bleu_json.read_text())

        # 6. what SSAN selects
        labels_file = raw / f"test.{args.src}.labels"
        cmd = [sys.executable, Path(__file__).resolve(), "--analyse-selection",
               "--checkpoint", out / "checkpoints" / "ssan" / "checkpoint_best.pt",
               "--data-bin", data_bin, "--out", out,
               *(["--labels", labels_file] if labels_file.is_file() else [])]
        run_phases(screen, [Phase("selection", cmd, logs / "selection.log", env=env)], args.verbose)
        selection = json.loads((out / "selection.json").read_text())
    except PhaseFailed as err:
        phase = err.phase
        print(f"\n{phase.name} failed (exit status {err.code}); the last {TAIL} lines of "
              f"{display_path(phase.log_path)}:", file=sys.stderr)
        for line in phase.tail():
            print(f"    {line}", file=sys.stderr)
        print(f"\nfull log: {phase.log_path}", file=sys.stderr)
        return err.code if 0 < err.code < 256 else 1
    except KeyboardInterrupt:
        print("\ninterrupted; run the same command again to continue", file=sys.stderr)
        return 130

    # 7. the table, the figures, the report
    from ssan_plugin.experiments.train_log import training_summary

    summaries = {name: training_summary(logs / f"train_{name}.log") for name in SYSTEMS}
    table = results_table(report, summaries)
    curves = out / "training_curves.png"
    plot_curves({name: logs / f"train_{name}.log" for name in SYSTEMS}, curves)
    by_length = out / "bleu_by_length.png"  # drawn by evaluate_bleu.py beside its --json
    has_by_length = (out / "bleu.by_length.png").is_file()
    if has_by_length:
        shutil.copyfile(out / "bleu.by_length.png", by_length)
    rates_line = selection_line(selection)
    same_recipe = not args.data and recipe(
        args.max_update, args.train_size, args.valid_size, args.test_size, args.seed,
        args.vocab_size) == recipe()
    spread = committed_spread() if same_recipe else {}
    spread_text = spread_line(report, spread) if spread else (
        "" if not same_recipe else "No committed seeds of this recipe yet "
                                   "(examples/stability/demo_plan.json).")
    minutes = (time.time() - started) / 60
    write_report(out / "report.md", args, corpus_desc, report, table, rates_line, selection,
                 train_cmds, gen_cmds, score_cmd, curves, by_length if has_by_length else None,
                 minutes, jobs, threads, spread_text)
    (out / "RESULTS.md").write_text(
        f"Test split, {report['systems'][0]['n']} sentences, {args.max_update} updates each, "
        f"seed {args.seed}.\nBLEU signature: {report['signature']}\n\n{table}\n")

    printed = ["", table, ""] + ([spread_text] if spread_text else []) + \
        ([rates_line] if rates_line else [])
    print("\n".join(printed))
    if args.record:
        if not same_recipe:
            print(f"demo: --record: not the default recipe on the built-in corpus; "
                  f"{args.record} not written", file=sys.stderr)
            return 2
        corpus_cmd = ["python", "scripts/make_synthetic_corpus.py", "--out", "CORPUS",
                      "--train", str(args.train_size), "--valid", str(args.valid_size),
                      "--test", str(args.test_size), "--seed", str(args.seed)]
        write_record(Path(args.record), report, printed[1:], minutes,
                     {name: hyp_dir / f"{name}.test.{args.tgt}" for name in SYSTEMS},
                     raw / f"test.{args.tgt}", corpus_cmd)
    print(f"report: {display_path(out / 'report.md')} (figures: "
          + ", ".join(display_path(p) for p in [curves, Path(selection["heatmap"])]
                      + ([by_length] if has_by_length else [])) + ")")
    print(f"done in {minutes:.1f} min; logs in {display_path(logs)}")
    return 0


def write_record(path: Path, report, printed, minutes, hypotheses, reference, corpus_cmd,
                 root: Path = ROOT) -> dict:
    """``--record``: the recipe, what was printed, each system's scores, and what re-scores
    them: each system's test hypotheses copied next to the record (``PATH`` without its
    suffix: ``examples/stability/demo_run/NAME.test.tgt`` for the README's record), named
    relative to ``root``; the reference is not copied, since the corpus command
    (``corpus_cmd``, ``CORPUS`` for its output folder) makes it again, and its SHA-256 says
    whether it did. ``rescore``: the commands that score the copies again, from the root."""
    store = path.with_suffix("")
    store.mkdir(parents=True, exist_ok=True)
    copies = {}
    for name, source in hypotheses.items():
        target = store / Path(source).name
        shutil.copyfile(source, target)
        copies[name] = project_path_of(target, root)
    ref_name = Path(reference).name
    rescore = [shlex.join(corpus_cmd),
               shlex.join([console_name(f"{COMMANDS}.evaluate_bleu"), "--ref",
                           f"CORPUS/{ref_name}",
                           *[w for name, copy in copies.items()
                             for w in ("--hyp", f"{name}={copy}")]])]
    record = {"recipe": recipe(), "minutes": round(minutes, 1), "printed": list(printed),
              "systems": [{k: s.get(k) for k in ("name", "bleu", "chrf", "delta", "p_value")}
                          for s in report["systems"]],
              "hypotheses": copies,
              "reference": {"made_by": shlex.join(corpus_cmd), "file": f"CORPUS/{ref_name}",
                            "sha256": hashlib.sha256(Path(reference).read_bytes()).hexdigest()},
              "rescore": rescore}
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


def project_path_of(path, root: Path) -> str:
    """``path`` relative to ``root`` (what a record names), as ``display_path`` does."""
    from ssan_plugin.experiments.archive import project_path

    return project_path(path, root)


def recipe(max_update=900, train_size=20000, valid_size=500, test_size=500, seed=1,
           vocab_size=1000) -> dict:
    """Everything that decides what the demo trains and decodes on the built-in corpus,
    including the defaults of every plugin option it leaves unset (a changed default changes
    the demo): the README's figures were measured with exactly this (tests pin it)."""
    from ssan_plugin.criterions.selective_label_smoothed_cross_entropy import (
        SelectiveLabelSmoothedCrossEntropyConfig)
    from ssan_plugin.models.ssan_transformer import SSANTransformerModel

    import dataclasses

    def defaults(dataclass_type):
        return {name: str(f.default) for name, f in dataclass_type.__dataclass_fields__.items()
                if not name.startswith("_") and f.default is not dataclasses.MISSING}

    return {"model": MODEL, "optim": OPTIM, "systems": SYSTEMS, "beam": BEAM,
            "max_len": BUILTIN_MAX_LEN, "max_update": max_update,
            "corpus": {"train": train_size, "valid": valid_size, "test": test_size,
                       "seed": seed, "vocab_size": vocab_size},
            "ssan_defaults": {name: value for options in SSANTransformerModel.option_dataclasses()
                              for name, value in defaults(options).items()},
            "criterion_defaults": defaults(SelectiveLabelSmoothedCrossEntropyConfig)}


def committed_spread() -> dict:
    """{demo system: [test BLEU of each committed seed]} of this recipe (SPREAD_PLAN's archive,
    study SPREAD_STUDY), or {} when the archive has fewer than two seeds of a system."""
    from ssan_plugin.experiments.plan import Plan

    plan = Plan.load(SPREAD_PLAN)
    out = {}
    for name, system in SPREAD_SYSTEMS.items():
        scores = []
        for run in plan.runs():
            if (run.study.name, run.pair.name, run.system.name) != (SPREAD_STUDY, "builtin", system):
                continue
            found = plan.archived_outputs(run)
            if found is not None:
                report = json.loads((found[0] / "test.json").read_text(encoding="utf-8"))
                scores.append(report["systems"][0]["bleu"])
        if len(scores) < 2:
            return {}
        out[name] = scores
    return out


def spread_line(report, spread) -> str:
    """Where this run falls among the committed seeds of the same recipe."""
    import statistics

    parts = []
    for s in report["systems"]:
        scores = spread.get(s["name"])
        if scores:
            parts.append(f"{s['name']} {statistics.fmean(scores):.2f} ± "
                         f"{statistics.stdev(scores):.2f} [{min(scores):.2f}, {max(scores):.2f}] "
                         f"(this run {s['bleu']:.2f})")
    n = min(len(v) for v in spread.values())
    return (f"The same recipe over {n} committed seeds (examples/stability/RESULTS.md), test BLEU "
            f"mean ± sd [min, max]: " + "; ".join(parts))


def chunks(items, size):
    return [items[i:i + size] for i in range(0, len(items), size)]


def results_table(report, summaries) -> str:
    base_wps = summaries["baseline"]["train_wps"]
    rows = ["| system | BLEU | Δ BLEU (p, sentences, this seed) | chrF | selection rate | "
            "train words/s (× baseline) | parameters |",
            "|---|---|---|---|---|---|---|"]
    for s in report["systems"]:
        summary = summaries[s["name"]]
        delta = f"{s['delta']:+.2f} ({s['p_value']:.3f})" if "delta" in s else "–"
        sel = f"{summary['sel']:.3f}" if summary["sel"] is not None else "1 (all pairs)"
        params = f"{summary['params']:,}" if summary["params"] else "?"
        rows.append(f"| {s['name']} | {s['bleu']:.2f} | {delta} | {s['chrf']:.2f} | {sel} | "
                    f"{summary['train_wps']:.0f} ({summary['train_wps'] / base_wps:.2f}×) | {params} |")
    return "\n".join(rows)


def selection_line(selection) -> str:
    rates = selection.get("rates")
    if not rates:
        return ""
    per_layer = ", ".join(f"layer {layer} {r['content']:.2f}/{r['filler']:.2f}"
                          for layer, r in rates["layers"].items())
    return (f"SSAN selects {rates['all']['content']:.2f} of content-word keys and "
            f"{rates['all']['filler']:.2f} of filler keys (test split, eval mode, all heads; "
            f"{per_layer})")


def write_report(path, args, corpus_desc, report, table, rates_line, selection, train_cmds,
                 gen_cmds, score_cmd, curves, by_length, minutes, jobs, threads, spread_text=""):
    out = path.parent
    lines = [
        "# ssan_plugin demo: Transformer baseline vs SSAN", "",
        f"Corpus: {corpus_desc}. Both systems: same size (`_small`: 3 + 3 layers, width 128, 4 "
        f"heads), same options, {args.max_update} updates, seed {args.seed}; the checkpoint with "
        f"the best validation loss decodes the test split ({report['systems'][0]['n']} sentences, "
        f"beam {BEAM}). Run time {minutes:.1f} min ({jobs} job(s) side by side, "
        f"{threads} thread(s) each).", "",
        table, "",
        f"BLEU signature: `{report['signature']}`. Δ BLEU: against the baseline, p from the "
        "project's paired bootstrap over test sentences (1000 resamples): it describes this one "
        "seed, not the systems; a verdict needs several seeds (README, \"Significance\"). "
        "Selection rate: fraction of non-pad (query, "
        "key) pairs selected, all heads and layers, on the validation split at the end of training "
        "(eval mode: `1[pi > 0.5]`). Train words/s: median over logged intervals of one process.", "",
    ] + ([spread_text, ""] if spread_text else [])
    if rates_line:
        lines += ["## What SSAN selects", "",
                  rates_line + ". Content words are the generator's nouns, verbs, adjectives, "
                  "adverbs, pre/postpositions and conjunctions; fillers are the words without a "
                  "translation (filler words, distractor markers and the content words they "
                  "mark), from `raw/test.src.labels`; sentencepiece pieces are mapped back to "
                  "words. Queries: every non-pad position.", ""]
    lines += ["## Figures", "", f"![training curves]({curves.name})", "",
              "Training curves: label-smoothed loss (base 2) of each training interval and of "
              "each validation, and SSAN's selection rate `sel` (sampled in training, eval "
              "mode on validation), against updates.", "",
              f"![selection heat map]({Path(selection['heatmap']).name})", "",
              f"SSAN's eval-mode selection on test sentence {selection['heatmap_sentence'] + 1}: "
              "one panel per encoder layer, cell (query, key) = fraction of the 4 heads "
              "that select the key" + (" (grey tick labels: fillers)." if rates_line else "."), ""]
    if by_length:
        lines += [f"![BLEU by source length]({by_length.name})", "",
                  "BLEU by source-length bucket (words), from `ssan-evaluate-bleu`.", ""]
    else:
        lines += ["BLEU by source length: not shown (this version of `ssan-evaluate-bleu` "
                  "does not report it).", ""]
    lines += ["## Reproduce by hand", "",
              "From the repository root, with the virtualenv active (`. .venv/bin/activate`):", "",
              "```"]
    for name in SYSTEMS:
        cmd, env = train_cmds[name]
        lines.append(display_command(cmd, env))
    for name in SYSTEMS:
        cmd, env = gen_cmds[name]
        lines.append(display_command(cmd, env) + f" > {name}.test.generate.out")
    lines += ["```", "",
              "The H- lines of each fairseq-generate output, in sentence-id order, are sentencepiece "
              "pieces; `ssan-evaluate-bleu` removes sentencepiece, detokenises and scores "
              "them (it also decodes checkpoints itself with the same options):", "", "```",
              display_command(score_cmd), "```", "",
              f"Logs of every step: `{display_path(out / 'logs')}/`.", ""]
    path.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--analyse-selection"]:
        sys.exit(analyse_selection_main(sys.argv[2:]))
    sys.exit(main())
