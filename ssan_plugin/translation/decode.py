"""Translate a binarised split with fairseq-generate and return the outputs in corpus order.

fairseq-generate (fairseq-fixed) drops the last batch when its size is not a multiple of
--required-batch-size-multiple (default 8; see docs/design.md, "traps"), so we always pass 1 and check
that every sentence of the split came back exactly once. Outputs are the H- lines (dictionary
symbols = sentencepiece pieces), re-ordered by their sentence id.

Sentences longer than the model's positions (source, or a reference longer than the target
positions: fairseq-generate refuses both) are found before decoding. By default
(``too_long="error"``) nothing is decoded and they are named; ``"truncate"`` decodes the first
positions-1 source pieces (fairseq's ``--truncate-source``), ``"empty"`` skips them (fairseq's
``--skip-invalid-size-inputs-valid-test``) and gives each an empty hypothesis; both are logged
with their count.
"""

import logging
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from ..cli.steps import run_step
from .textio import PipelineError

TOO_LONG = ("error", "truncate", "empty")
DEFAULT_MAX_POSITIONS = 1024  # fairseq's default --max-source/target-positions

logger = logging.getLogger("ssan_plugin.translation.decode")

PACKAGE_DIR = Path(__file__).resolve().parents[1]
_HYP = re.compile(r"^H-(\d+)\t[^\t]*\t(.*)$")
_SPEED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s "
                    r"\(([\d.]+) sentences/s")


@dataclass
class DecodingOptions:
    """Beam search as ssan-evaluate-bleu runs it; shared by fairseq-generate and the in-process
    translator (translator.TranslateOptions), so both decode alike by default."""

    beam: int = 5
    lenpen: float = 1.0
    max_len_a: float = 0.0
    max_len_b: int = 200
    batch_size: int = 64  # sentences per batch
    cpu: Optional[bool] = None  # None: CPU unless CUDA is available
    too_long: str = "error"  # a sentence longer than the model's positions: error | truncate | empty

    def validate(self):
        for name, value, low in (("beam", self.beam, 1), ("batch size", self.batch_size, 1),
                                 ("max_len_b", self.max_len_b, 0),
                                 ("max_len_a", self.max_len_a, 0)):
            if not value >= low:
                raise PipelineError(f"{name} must be >= {low}, got {value}")
        if self.too_long not in TOO_LONG:
            raise PipelineError(f"too_long must be one of {', '.join(TOO_LONG)}, got "
                                f"{self.too_long!r}")


@dataclass
class GenerateOptions(DecodingOptions):
    user_dir: str = str(PACKAGE_DIR)
    extra: str = ""  # further fairseq-generate options, shell-quoted


@dataclass
class Decoded:
    pieces: List[str]  # one line of sentencepiece pieces per sentence, corpus order
    sent_per_s: Optional[float]  # fairseq's own generation-only speed
    wall_seconds: float  # the whole subprocess, model loading included
    command: str
    log: str


def generate_command(data, checkpoint, src, tgt, subset, opts: GenerateOptions):
    if opts.cpu is None:
        import torch

        cpu = not torch.cuda.is_available()
    else:
        cpu = opts.cpu
    command = [
        sys.executable, "-m", "fairseq_cli.generate", str(data),
        "--path", str(checkpoint),
        "--user-dir", str(opts.user_dir),
        "--task", "translation", "--source-lang", src, "--target-lang", tgt,
        "--gen-subset", subset,
        "--beam", str(opts.beam), "--lenpen", str(opts.lenpen),
        "--max-len-a", str(opts.max_len_a), "--max-len-b", str(opts.max_len_b),
        "--batch-size", str(opts.batch_size),
        "--required-batch-size-multiple", "1",
    ]
    if cpu:
        command.append("--cpu")
    command += shlex.split(opts.extra)
    return command


def parse_generate_output(text: str, expected: int, skipped=frozenset()) -> List[str]:
    """H- lines -> hypotheses in sentence-id order; every id 0..expected-1 exactly once, except
    the ``skipped`` ids, which must be absent and get an empty hypothesis."""
    hyps = {}
    for line in text.splitlines():
        m = _HYP.match(line)
        if m:
            idx = int(m.group(1))
            if idx in hyps:  # nbest > 1: keep the best (first) hypothesis
                continue
            hyps[idx] = m.group(2)
    missing = sorted(set(range(expected)) - set(hyps) - set(skipped))
    extra = sorted(set(hyps) - (set(range(expected)) - set(skipped)))
    if missing or extra:
        raise PipelineError(
            f"fairseq-generate returned {len(hyps)} hypotheses for a split of {expected} "
            f"sentences (missing ids {missing[:10]}{'...' if len(missing) > 10 else ''}, "
            f"unexpected ids {extra[:10]}); check --required-batch-size-multiple and "
            f"--skip-invalid-size-inputs-valid-test")
    return [hyps.get(i, "") for i in range(expected)]


def parse_speed(text: str) -> Optional[float]:
    m = None
    for m in _SPEED.finditer(text):
        pass
    return float(m.group(4)) if m else None


def run_with_progress(command, expected: int, desc: str, step: str = "fairseq-generate",
                      log_path=None):
    """Run fairseq-generate (``cli.steps.run_step``), reading its output as it comes: a
    progress bar over the H- lines (sentences decoded so far) on stderr. Returns (stdout, log):
    the log is stdout, then stderr after a line break, written to ``log_path`` (default: a temp
    file, kept only on failure). A non-zero exit is StepError ``STEP failed (exit N): LAST
    LINE; full log: PATH``."""
    from .pipeline import progress

    out = []
    bar = progress(range(expected), desc, unit=" sentences", min_total=200)

    def on_line(line):
        out.append(line)
        if line.startswith("H-"):
            bar.update(1)

    try:
        # stderr apart: the H- lines are parsed from stdout, which a warning must not cut
        log = run_step(step, command, log_path, on_line, stderr_apart=True)
    finally:
        bar.close()
    return "".join(out), log


def model_positions(state) -> tuple:
    """(source, target) positions of a checkpoint state: the smaller of the task's and the
    model's ``max_source/target_positions`` (fairseq's default 1024 when absent)."""
    cfg = state.get("cfg") or {}
    out = []
    for side in ("source", "target"):
        found = []
        for part in (cfg.get("task"), cfg.get("model"), state.get("args")):
            value = (part.get(f"max_{side}_positions") if hasattr(part, "get")
                     else getattr(part, f"max_{side}_positions", None))
            if value is not None:
                found.append(int(value))
        out.append(min(found) if found else DEFAULT_MAX_POSITIONS)
    return tuple(out)


def too_long_sentences(data, checkpoint, src, tgt, subset):
    """((source, target) positions, [(sentence id, side, tokens)]) of the binarised split's
    sentences longer than the checkpoint's positions (tokens include end of sentence)."""
    from fairseq.data import indexed_dataset

    from .checkpoints import load_checkpoint_state

    positions = model_positions(load_checkpoint_state(checkpoint))
    found = []
    for side, lang, limit in (("source", src, positions[0]), ("target", tgt, positions[1])):
        prefix = Path(data) / f"{subset}.{src}-{tgt}.{lang}"
        if not indexed_dataset.MMapIndexedDataset.exists(str(prefix)):
            continue
        dataset = indexed_dataset.MMapIndexedDataset(str(prefix))
        sizes = dataset.sizes.copy()  # a view into the mmap, which closes with the dataset
        del dataset
        found += [(int(i), side, int(sizes[i])) for i in (sizes > limit).nonzero()[0]]
    return positions, sorted(found)


def _too_long_message(found, positions, subset) -> str:
    shown = ", ".join(f"line {i + 1} ({side}, {n} tokens)" for i, side, n in found[:10])
    more = f" and {len(found) - 10} more" if len(found) > 10 else ""
    return (f"{len(found)} sentence(s) of {subset!r} longer than the model's positions "
            f"(source {positions[0]}, target {positions[1]}, end of sentence included): "
            f"{shown}{more}")


def decode(data, checkpoint, src, tgt, subset, expected: int, opts: GenerateOptions,
           log_path=None) -> Decoded:
    """fairseq-generate of ``subset`` with ``checkpoint``: the ``expected`` sentences' pieces in
    corpus order, with the speed and the log (a missing hypothesis is an error, never a
    shorter output). Sentences longer than the model's positions follow ``opts.too_long``:
    an error naming them (default), truncated, or an empty hypothesis."""
    opts.validate()
    command = generate_command(data, checkpoint, src, tgt, subset, opts)
    positions, too_long = too_long_sentences(data, checkpoint, src, tgt, subset)
    skipped = set()
    if too_long:
        message = _too_long_message(too_long, positions, subset)
        targets = [x for x in too_long if x[1] == "target"]
        if opts.too_long == "error" or (opts.too_long == "truncate" and targets):
            hint = ("--too-long empty skips them (a reference longer than the target "
                    "positions cannot be truncated)" if targets else
                    "--too-long truncate decodes their first pieces, --too-long empty skips "
                    "them (empty hypothesis)")
            raise PipelineError(f"{message}. Nothing was decoded; {hint}")
        if opts.too_long == "truncate":
            # the task truncates to ITS max positions: make them the model's
            command += ["--truncate-source", "--max-source-positions", str(positions[0])]
            logger.warning("%s: source truncated to its first %d pieces", message,
                           positions[0] - 1)
        else:
            command.append("--skip-invalid-size-inputs-valid-test")
            skipped = {i for i, _, _ in too_long}
            logger.warning("%s: skipped, empty hypothesis", message)
    logger.info("running: %s", shlex.join(command))
    started = time.time()
    stdout, log = run_with_progress(command, expected, f"decode {Path(checkpoint).name}",
                                    f"fairseq-generate with {checkpoint}", log_path)
    wall = time.time() - started
    pieces = parse_generate_output(stdout, expected, skipped)
    return Decoded(pieces=pieces, sent_per_s=parse_speed(log), wall_seconds=wall,
                   command=shlex.join(command), log=log)
