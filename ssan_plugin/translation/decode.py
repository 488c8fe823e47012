"""Translate a binarised split with fairseq-generate and return the outputs in corpus order.

fairseq-generate (fairseq-fixed) drops the last batch when its size is not a multiple of
--required-batch-size-multiple (default 8; see docs/design.md, "traps"), so we always pass 1 and check
that every sentence of the split came back exactly once. Outputs are the H- lines (dictionary
symbols = sentencepiece pieces), re-ordered by their sentence id.
"""

import logging
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from .textio import PipelineError

logger = logging.getLogger("ssan_plugin.translation.decode")

PACKAGE_DIR = Path(__file__).resolve().parents[1]
_HYP = re.compile(r"^H-(\d+)\t[^\t]*\t(.*)$")
_SPEED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s "
                    r"\(([\d.]+) sentences/s")


@dataclass
class DecodingOptions:
    """Beam search as evaluate_bleu.py runs it; shared by fairseq-generate and the in-process
    translator (translator.TranslateOptions), so both decode alike by default."""

    beam: int = 5
    lenpen: float = 1.0
    max_len_a: float = 0.0
    max_len_b: int = 200
    batch_size: int = 64  # sentences per batch
    cpu: Optional[bool] = None  # None: CPU unless CUDA is available


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


def parse_generate_output(text: str, expected: int) -> List[str]:
    """H- lines -> hypotheses in sentence-id order; every id 0..expected-1 exactly once."""
    hyps = {}
    for line in text.splitlines():
        m = _HYP.match(line)
        if m:
            idx = int(m.group(1))
            if idx in hyps:  # nbest > 1: keep the best (first) hypothesis
                continue
            hyps[idx] = m.group(2)
    missing = sorted(set(range(expected)) - set(hyps))
    extra = sorted(set(hyps) - set(range(expected)))
    if missing or extra:
        raise PipelineError(
            f"fairseq-generate returned {len(hyps)} hypotheses for a split of {expected} "
            f"sentences (missing ids {missing[:10]}{'...' if len(missing) > 10 else ''}, "
            f"unexpected ids {extra[:10]}); check --required-batch-size-multiple and "
            f"--skip-invalid-size-inputs-valid-test")
    return [hyps[i] for i in range(expected)]


def parse_speed(text: str) -> Optional[float]:
    m = None
    for m in _SPEED.finditer(text):
        pass
    return float(m.group(4)) if m else None


def run_with_progress(command, expected: int, desc: str):
    """Run fairseq-generate, reading its output as it comes: a progress bar over the H- lines
    (sentences decoded so far) on stderr. Returns (exit code, stdout, stderr)."""
    import tempfile

    from .pipeline import progress

    with tempfile.TemporaryFile("w+", encoding="utf-8") as err:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True,
                                bufsize=1)
        out = []
        bar = progress(range(expected), desc, unit=" sentences", min_total=200)
        for line in proc.stdout:
            out.append(line)
            if line.startswith("H-"):
                bar.update(1)
        bar.close()
        returncode = proc.wait()
        err.seek(0)
        return returncode, "".join(out), err.read()


def decode(data, checkpoint, src, tgt, subset, expected: int, opts: GenerateOptions,
           log_path=None) -> Decoded:
    command = generate_command(data, checkpoint, src, tgt, subset, opts)
    logger.info("running: %s", shlex.join(command))
    started = time.time()
    returncode, stdout, stderr = run_with_progress(command, expected,
                                                   f"decode {Path(checkpoint).name}")
    wall = time.time() - started
    log = stdout + ("\n" + stderr if stderr else "")
    if log_path is not None:
        Path(log_path).write_text(log, encoding="utf-8")
    if returncode != 0:
        tail = "\n".join(log.strip().splitlines()[-25:])
        raise PipelineError(f"fairseq-generate failed for {checkpoint} (exit "
                            f"{returncode}):\n{tail}")
    pieces = parse_generate_output(stdout, expected)
    return Decoded(pieces=pieces, sent_per_s=parse_speed(log), wall_seconds=wall,
                   command=shlex.join(command), log=log)
