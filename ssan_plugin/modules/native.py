"""The native (C) kernels of the training attention: SSAN's, ``--ssan-kernel native``, and the
top-k selector's keep pattern.

- SSAN: one sweep over memory for what ``_SampledSelectiveSoftmax`` does in about fifteen
  passes: the logistic noise, the hard sample, the selective softmax, the straight-through
  weights and (for the statistics) each row's policy entropy in the forward; the centred
  gradients in the backward (``csrc/sampled_selective_softmax.c``; the maths are in
  docs/design.md 1.4).
- top-k (:func:`topk_keep`): each row's k largest logits (``csrc/topk_keep.c``: the k-th
  largest of sixteen rows at once without branches, then one pass a row for the keys at or
  above it), the pattern torch's stable argsort gives, in a fraction of its time.

The sources are compiled on first use by the C compiler (``$CC``, else ``cc``) for this
machine's CPU (``-march=native``) into one library in a cache directory
(``$SSAN_PLUGIN_CACHE``, else ``~/.cache/ssan_plugin``), once per sources, flags and CPU; the
library is loaded with ctypes (no torch headers, a build of about a second). Rows are split
between ``torch.get_num_threads()`` OpenMP threads of torch's own runtime: the library links
``libgomp.so.1``, which the loader resolves to the copy torch has already loaded, so the kernel
reuses torch's threads instead of competing with them for the cores.

Noise: the logistic noise of element i of a call is logit(u), u a hash of (key, i), the key
drawn from torch's default generator, so runs repeat under ``torch.manual_seed`` whatever the
thread count. It is the same distribution as ``logistic_noise_like``'s but not the same draws.
At the default tau = 1/2 the kernel never takes the logit: the sample and the slope need only
exp(-z) = exp(-E_p) (1 - u) / u, and exp(-|E_p|) is shared with the entropy.
"""

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Optional

import torch
from torch import Tensor

from .sampled_backward import save_sampled_for_backward

logger = logging.getLogger(__name__)

SOURCES = tuple(Path(__file__).with_name("csrc") / name
                for name in ("sampled_selective_softmax.c", "topk_keep.c"))
#: what the sources include (part of the library's cache key)
HEADERS = (Path(__file__).with_name("csrc") / "thread_rows.h",)
CFLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math",
          "-std=c11", "-Werror=implicit-function-declaration", "-shared", "-fPIC"]
#: below this many elements a call runs in the calling thread alone
PARALLEL_MIN_ELEMENTS = 1 << 15


class NativeKernelUnavailable(RuntimeError):
    """The C kernel could not be built or loaded (no compiler, or it failed)."""


def _cpu_signature() -> str:
    """What -march=native depends on: the CPU model and flags where Linux tells them."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    lines = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags", "Features"))]
    return "\n".join(sorted(set(lines)))


def _cache_dir() -> Path:
    return Path(os.environ.get("SSAN_PLUGIN_CACHE") or Path.home() / ".cache" / "ssan_plugin")


def _compiler() -> str:
    return os.environ.get("CC") or "cc"


def library_path() -> Path:
    """Where the library for this source, compiler, flags and CPU is (or will be) cached."""
    digest = hashlib.sha256()
    for part in (*(source.read_bytes() for source in SOURCES + HEADERS), _compiler().encode(),
                 " ".join(CFLAGS).encode(), platform.machine().encode(), _cpu_signature().encode()):
        digest.update(part)
        digest.update(b"\0")
    return _cache_dir() / f"ssan_native-{digest.hexdigest()[:16]}.so"


def build(path: Path) -> Path:
    """Compile the source to ``path`` (atomically: concurrent ranks may build at once)."""
    compiler = _compiler()
    if shutil.which(compiler) is None:
        raise NativeKernelUnavailable(
            f"--ssan-kernel native needs a C compiler: {compiler!r} was not found (set CC, or "
            f"use --ssan-kernel torch)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
    except OSError as e:
        raise NativeKernelUnavailable(
            f"cannot write the native SSAN kernel to {path.parent} ({e}); set SSAN_PLUGIN_CACHE "
            f"to a writable directory") from e
    os.close(fd)
    try:
        done = subprocess.run([compiler, *CFLAGS, *map(str, SOURCES), "-o", tmp, "-lm"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise NativeKernelUnavailable(
                f"building the native SSAN kernel failed ({compiler} exited with "
                f"{done.returncode}):\n{done.stderr.strip()}\n(use --ssan-kernel torch)")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    logger.info("built the native SSAN kernel: %s", path)
    return path


_i32, _i64, _f32, _u64, _ptr = (ctypes.c_int32, ctypes.c_int64, ctypes.c_float, ctypes.c_uint64,
                                ctypes.c_void_p)


@lru_cache(maxsize=None)
def load() -> ctypes.CDLL:
    """The compiled library (built on first use); raises NativeKernelUnavailable."""
    path = library_path()
    if not path.is_file():
        build(path)
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise NativeKernelUnavailable(f"cannot load the native SSAN kernel {path}: {e}") from e
    lib.ssan_sampled_forward.restype = ctypes.c_int
    lib.ssan_sampled_forward.argtypes = [_ptr, _ptr, _ptr, _ptr, _i64, _i64, _i64, _i64, _i32,
                                         _u64, _f32, _f32, _ptr, _ptr, _ptr, _ptr, _ptr]
    lib.ssan_sampled_backward.restype = None
    lib.ssan_sampled_backward.argtypes = [_ptr, _ptr, _ptr, _ptr, _ptr, _i64, _i64, _i32, _ptr,
                                          _ptr]
    lib.ssan_topk_keep.restype = ctypes.c_int
    lib.ssan_topk_keep.argtypes = [_ptr, _ptr, _i64, _i64, _i32, _ptr]
    return lib


@lru_cache(maxsize=None)
def available() -> bool:
    """Whether the native kernels build and load here (``--ssan-kernel auto``, top-k); asked
    once a process: when they do not, a warning gives the reason and torch's operations run."""
    try:
        load()
    except NativeKernelUnavailable as e:
        logger.warning("the native kernels are unavailable here, so torch's operations run "
                       "instead (--ssan-kernel auto trains with the torch kernel; top-k ranks "
                       "with torch's argsort): %s", e)
        return False
    return True


def _threads_for(elements: int) -> int:
    return 1 if elements < PARALLEL_MIN_ELEMENTS else max(1, torch.get_num_threads())


def _ptr_of(t: Optional[Tensor]):
    return None if t is None else t.data_ptr()


def _pad_rows(pad: Optional[Tensor], bsz: int, tgt_len: int, src_len: int):
    """(the kernel's pad rows, pad_inner) of a key mask: (B, S) bool rows and 1 for a mask
    without a query dimension ((B, S), (B or 1, 1, 1, S)); (B T, S) rows and T for one with it
    ((B or 1, 1, T, S)); (None, 1) for None. ValueError for a mask of any other shape."""
    if pad is None:
        return None, 1
    shape = tuple(pad.shape)
    if pad.dim() == 2:
        pad = pad.view(pad.size(0), 1, 1, -1)
    if (pad.dim() != 4 or pad.size(1) != 1 or pad.size(0) not in (1, bsz)
            or pad.size(2) not in (1, tgt_len) or pad.size(3) != src_len):
        raise ValueError(f"a key mask for attention of shape (B, h, T, S) = ({bsz}, h, {tgt_len}, "
                         f"{src_len}) is (B, S) or broadcastable to (B, 1, T, S), got {shape}")
    inner = pad.size(2)
    rows = pad.to(torch.bool).expand(bsz, 1, inner, src_len).reshape(bsz * inner, src_len)
    return rows.contiguous(), inner


class NativeSampledSelectiveSoftmax(torch.autograd.Function):
    """``_SampledSelectiveSoftmax`` (selective_weights.py) through the C kernel: same
    arguments, values, returned selection and gradients (float32 (B, h, T, S)); ``pad``: the
    keys each query may not use, True there: the (B, S) key padding mask, a mask broadcastable
    to (B, 1, T, S) (pads and, in decoder self-attention, each query's future), or None;
    ``noise`` (tests) is used as given, else drawn in C.

    A third output, without gradient: with ``want_entropy``, each row's policy entropy summed
    over its non-pad keys, sum_j H(sigmoid(E_p)), (B, h, T) float32 (the statistics then need
    no pass of their own over E_p); else an empty tensor."""

    @staticmethod
    def forward(ctx, logits: Tensor, policy_logits: Tensor, noise: Optional[Tensor],
                pad: Optional[Tensor], tau: float, select_grad: bool, cap: float,
                want_entropy: bool = False):
        ctx.set_materialize_grads(False)
        lib = load()
        bsz, heads, tgt_len, src_len = logits.shape
        if logits.dtype != torch.float32 or policy_logits.dtype != torch.float32:
            raise TypeError("the native SSAN kernel takes float32 logits and policy logits")
        if logits.device.type != "cpu":
            raise ValueError("the native SSAN kernel runs on the CPU only (use --ssan-kernel torch)")
        logits, policy_logits = logits.contiguous(), policy_logits.contiguous()
        if noise is not None:
            noise = noise.to(torch.float32).contiguous()
        pad, pad_inner = _pad_rows(pad, bsz, tgt_len, src_len)
        key = 0 if noise is not None else int(torch.randint(0, 2**62, ()).item())
        out, weight = torch.empty_like(logits), torch.empty_like(logits)
        chosen = torch.empty(logits.shape, dtype=torch.bool)
        slope = torch.empty_like(logits) if select_grad else None
        entropy = logits.new_empty((bsz, heads, tgt_len) if want_entropy else (0,))
        rows = bsz * heads * tgt_len
        ran = lib.ssan_sampled_forward(
            logits.data_ptr(), policy_logits.data_ptr(), _ptr_of(noise), _ptr_of(pad),
            heads * tgt_len, pad_inner, src_len, rows, _threads_for(rows * src_len), key,
            float(tau), float(cap), out.data_ptr(), weight.data_ptr(), chosen.data_ptr(),
            _ptr_of(slope), entropy.data_ptr() if want_entropy else None)
        if ran < 0:
            raise MemoryError("the native SSAN kernel could not allocate its scratch rows")
        select = save_sampled_for_backward(ctx, out, weight, chosen, slope)
        ctx.mark_non_differentiable(entropy)
        return out, select, entropy

    @staticmethod
    def backward(ctx, grad_out: Optional[Tensor], grad_select: Optional[Tensor], _grad_entropy):
        out, weight, *slope = ctx.saved_tensors
        want_logits, want_policy = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        use_select = grad_select is not None and bool(slope) and want_policy
        if grad_out is None and not use_select:
            return None, None, None, None, None, None, None, None
        grad_logits = torch.empty_like(out) if want_logits and grad_out is not None else None
        grad_policy = torch.empty_like(out) if want_policy else None
        if grad_out is not None:
            grad_out = grad_out.to(torch.float32).contiguous()
        if use_select:
            grad_select = grad_select.to(torch.float32).contiguous()
        rows, src_len = out.numel() // out.size(-1), out.size(-1)
        load().ssan_sampled_backward(
            out.data_ptr(), weight.data_ptr(), _ptr_of(slope[0] if use_select else None),
            _ptr_of(grad_out), _ptr_of(grad_select if use_select else None), src_len, rows,
            _threads_for(rows * src_len), _ptr_of(grad_logits), _ptr_of(grad_policy))
        return grad_logits, grad_policy, None, None, None, None, None, None


def topk_keep(ranked: Tensor, keys: Tensor) -> Tensor:
    """bool, ``ranked``'s shape: per row (last dim), its ``keys`` largest values, the lower
    index first among equal ones (a stable descending sort's first ``keys``). ``ranked``:
    float32 on the CPU, without NaN; ``keys``: integers broadcastable to ``ranked``'s shape
    with a last dim of 1 (at most the row length; 0 keeps nothing)."""
    if ranked.dtype != torch.float32 or ranked.device.type != "cpu":
        raise TypeError("the native top-k kernel takes float32 CPU logits")
    src_len = ranked.size(-1)
    ranked = ranked.contiguous()
    keys = keys.to(torch.int64).expand(*ranked.shape[:-1], 1).contiguous()
    keep = torch.empty(ranked.shape, dtype=torch.bool)
    rows = ranked.numel() // src_len if src_len else 0
    if rows == 0:
        return keep
    ran = load().ssan_topk_keep(ranked.data_ptr(), keys.data_ptr(), src_len, rows,
                                _threads_for(rows * src_len), keep.data_ptr())
    if ran < 0:
        raise MemoryError("the native top-k kernel could not allocate its scratch row")
    return keep
