"""The native kernel (ssan_plugin/modules/native.py, --ssan-kernel native) against the torch
Function it replaces: the same values, selection and gradients with the same noise (pads, empty
rows, -inf logits, the cap, odd row lengths); its own noise has the right distribution, repeats
under torch.manual_seed whatever the thread count; the option reaches the layer; a missing
compiler is a clear error."""

import shutil

import numpy as np
import pytest
import torch
from helpers.ssan_layer import config, inputs, ssan_layer

from ssan_plugin.modules import native
from ssan_plugin.modules.selective_weights import _SampledSelectiveSoftmax, sampled_selective_softmax

pytestmark = pytest.mark.skipif(shutil.which(native._compiler()) is None,
                                reason="no C compiler (the native kernel is optional)")


def case(seed, shape, n_pad=2):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(shape, generator=g) * 3
    policy = torch.randn(shape, generator=g) * 2
    noise = torch.logit(torch.rand(shape, generator=g))
    bsz, src = shape[0], shape[-1]
    pad = torch.zeros(bsz, src, dtype=torch.bool)
    if bsz > 1 and src > n_pad:
        pad[1, -n_pad:] = True
    policy[0, 0, 0] = -60.0  # an empty row
    if src > 2:
        logits[0, -1, 1, 1] = float("-inf")  # an attention-masked key
        logits[0, -1, 2, 1:3] = 12.0  # big logits: the cap matters for the discarded one
    return logits, policy, noise, pad, g


def run(kernel_fn, logits, policy, noise, pad, tau, select_grad, cap, upstream, rate_w):
    logits = logits.clone().requires_grad_()
    policy = policy.clone().requires_grad_()
    out, select = kernel_fn(logits, policy, noise, pad, tau, select_grad, cap)[:2]
    loss = (out * upstream).sum()
    if select_grad:
        loss = loss + (select * rate_w).sum()
    loss.backward()
    return out.detach(), select.detach(), logits.grad, policy.grad


def torch_kernel(logits, policy, noise, pad, tau, select_grad, cap):
    pad4 = None if pad is None else pad.view(pad.size(0), 1, 1, -1)
    return _SampledSelectiveSoftmax.apply(logits, policy, noise.clone(), pad4, tau, select_grad, cap)


# rows of 16k keys are read and written in place, others through padded scratch rows
@pytest.mark.parametrize("shape", [(3, 2, 6, 6), (2, 4, 5, 31), (2, 2, 3, 67), (1, 1, 2, 1),
                                   (2, 3, 4, 32)])
@pytest.mark.parametrize("select_grad", [True, False])
@pytest.mark.parametrize("tau,cap", [(0.5, 10.0), (2.0, 0.0)])
def test_native_equals_the_torch_function(shape, select_grad, tau, cap):
    logits, policy, noise, pad, g = case(7, shape)
    upstream, rate_w = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    args = (logits, policy, noise, pad, tau, select_grad, cap, upstream, rate_w)
    expected = run(torch_kernel, *args)
    got = run(native.NativeSampledSelectiveSoftmax.apply, *args)
    assert torch.equal(got[1], expected[1])  # the sample, exactly
    assert got[1].dtype == (torch.float32 if select_grad else torch.bool)
    for a, b in zip(got[:1] + got[2:], expected[:1] + expected[2:]):
        torch.testing.assert_close(a, b, rtol=2e-5, atol=1e-6)
    assert torch.isfinite(got[0]).all() and torch.isfinite(got[3]).all()
    assert got[0][0, 0, 0].abs().sum() == 0  # the empty row is zero
    if pad.any():
        assert got[0][1][..., pad[1]].abs().sum() == 0  # pads get nothing


def test_native_through_the_public_function_and_without_pads():
    logits, policy, noise, _, g = case(3, (2, 2, 9, 9))
    for pad in (None, torch.zeros(2, 9, dtype=torch.bool)):
        a = sampled_selective_softmax(logits, policy, 0.5, pad, noise=noise, kernel="native")
        b = sampled_selective_softmax(logits, policy, 0.5, pad, noise=noise, kernel="torch")
        torch.testing.assert_close(a[0], b[0], rtol=2e-5, atol=1e-6)
        assert torch.equal(a[1], b[1])


@pytest.mark.parametrize("shape", [(3, 2, 6, 6), (2, 3, 17, 17), (2, 2, 5, 40)])
@pytest.mark.parametrize("select_grad", [True, False])
def test_native_takes_the_decoder_sites_mask_of_pads_and_future(shape, select_grad):
    """A (B, 1, T, S) mask (each query's own hidden keys: pads and its future) reaches every row
    of every head as the torch Function reads it: values, sample, gradients and row entropies;
    a (1, 1, T, S) future alone is broadcast over sentences; rows of odd length included."""
    logits, policy, noise, pad, g = case(9, shape)
    bsz, heads, tgt, src = shape
    future = (torch.arange(src).view(1, -1) > torch.arange(tgt).view(-1, 1) + src - tgt)
    hidden = pad.view(bsz, 1, 1, src) | future.view(1, 1, tgt, src)
    logits = logits.masked_fill(future.view(1, 1, tgt, src), float("-inf"))
    upstream, rate_w = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    for mask in (hidden, future.view(1, 1, tgt, src)):
        args = (logits, policy, noise, mask, 0.5, select_grad, 0.0, upstream, rate_w)
        expected = run(lambda *a: _SampledSelectiveSoftmax.apply(
            a[0], a[1], a[2].clone(), a[3], *a[4:]), *args)
        got = run(native.NativeSampledSelectiveSoftmax.apply, *args)
        assert torch.equal(got[1], expected[1])
        for a, b in zip(got[:1] + got[2:], expected[:1] + expected[2:]):
            torch.testing.assert_close(a, b, rtol=2e-5, atol=1e-6)
        assert got[0].masked_select(mask.expand(shape)).abs().sum() == 0  # hidden keys get nothing
        assert got[1].masked_select(mask.expand(shape)).float().abs().sum() == 0
        _, _, rows = native.NativeSampledSelectiveSoftmax.apply(
            logits, policy, None, mask, 0.5, False, 0.0, True)
        q = torch.sigmoid(-policy.double().abs())
        h = -(torch.xlogy(q, q) + (1 - q) * torch.log1p(-q))
        torch.testing.assert_close(rows.double(), (h * ~mask).sum(-1), rtol=1e-5, atol=1e-30)
    # the public function runs the kernel asked for with the decoder site's mask too (its own
    # noise draws, which torch's operations would not repeat)
    torch.manual_seed(4)
    a = sampled_selective_softmax(logits, policy, 0.5, hidden, kernel="native")
    torch.manual_seed(4)
    b = native.NativeSampledSelectiveSoftmax.apply(logits, policy, None, hidden, 0.5, True, 10.0)
    assert torch.equal(a[1], b[1]) and torch.equal(a[0], b[0])


def test_native_refuses_a_mask_it_cannot_read():
    logits, policy, noise, _, _ = case(3, (2, 2, 4, 5))
    for bad in (torch.zeros(2, 4, dtype=torch.bool), torch.zeros(2, 2, 4, 5, dtype=torch.bool),
                torch.zeros(3, 1, 4, 5, dtype=torch.bool), torch.zeros(2, 1, 3, 5, dtype=torch.bool),
                torch.zeros(2, 5, 1, dtype=torch.bool)):
        with pytest.raises(ValueError, match=r"is \(B, S\) or broadcastable to \(B, 1, T, S\)"):
            native.NativeSampledSelectiveSoftmax.apply(logits, policy, noise, bad, 0.5, True, 0.0)


def test_native_noise_has_the_logistic_distribution():
    """Drawn in C: P(A = 1) = P(E_p + L > 0) = sigmoid(E_p) at several E_p, within 5 sigma."""
    torch.manual_seed(0)
    levels = torch.tensor([-4.0, -1.5, -0.3, 0.0, 0.7, 2.0, 5.0])
    n = 60000
    policy = levels.view(1, 1, 1, -1).expand(n // 60, 1, 60, -1).contiguous()
    logits = torch.zeros_like(policy)
    _, select, no_entropy = native.NativeSampledSelectiveSoftmax.apply(
        logits, policy, None, None, 0.5, False, 10.0)
    assert no_entropy.numel() == 0  # not asked for
    freq = select.double().mean((0, 1, 2))
    p = torch.sigmoid(levels.double())
    sigma = (p * (1 - p) / select[..., 0].numel()).sqrt()
    assert torch.all((freq - p).abs() < 5 * sigma + 1e-5), (freq, p)


def uniform_draws(key: int, n: int) -> torch.Tensor:
    """The kernel's uniform draw of elements 0..n-1 under ``key``, written out independently:
    two rounds of lowbias32 over the element index, the top 23 bits, u = (k + 1/2) / 2^23."""
    mask = np.uint64(0xFFFFFFFF)

    def mix(x):
        x ^= x >> np.uint64(16)
        x = (x * np.uint64(0x7FEB352D)) & mask
        x ^= x >> np.uint64(15)
        x = (x * np.uint64(0x846CA68B)) & mask
        return x ^ (x >> np.uint64(16))

    i = np.arange(n, dtype=np.uint64)  # below 2^32: its high word is 0
    x = mix((i & mask) ^ np.uint64(key & 0xFFFFFFFF))
    x = mix((x + np.uint64(key >> 32)) & mask)
    return torch.from_numpy(((x >> np.uint64(9)).astype(np.float64) + 0.5) / 2.0**23)


@pytest.mark.parametrize("tau", [0.5, 2.0])  # 0.5: the kernel's no-logit path; 2.0: logit(u)
@pytest.mark.parametrize("shape", [(3, 2, 7, 37), (2, 2, 5, 48)])  # scratch rows; in place
def test_native_drawn_noise_gives_the_float64_function_of_its_draws(tau, shape):
    """With its own noise the kernel computes exactly the torch Function's maths at that noise:
    the draws are reproduced here (uniform_draws, the key from the same seed) and handed, as
    L = logit(u), to the torch Function in float64. The sample agrees everywhere but where
    |E_p + L| is within float32 rounding of 0; values and gradients to 1e-5 relative (the slope
    where the sigmoid saturates too, which float32's s - s^2 would lose)."""
    logits, policy, _, pad, g = case(5, shape)
    policy = policy * 4  # saturated slopes too
    upstream, rate_w = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    torch.manual_seed(21)
    key = int(torch.randint(0, 2**62, ()).item())  # what the Function draws first
    noise = torch.logit(uniform_draws(key, logits.numel()).view(shape))
    expected = run(torch_kernel, logits.double(), policy.double(), noise, pad, tau, True, 10.0,
                   upstream.double(), rate_w.double())
    torch.manual_seed(21)
    got = run(native.NativeSampledSelectiveSoftmax.apply, logits, policy, None, pad, tau, True,
              10.0, upstream, rate_w)
    z = policy.double() + noise
    clear = z.abs() > 1e-5
    assert torch.equal(got[1].bool()[clear], expected[1].bool()[clear])
    assert clear.float().mean() > 0.999 and 0.2 < expected[1].mean() < 0.8
    out, _, grad_logits, grad_policy = got
    torch.testing.assert_close(out.double(), expected[0], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(grad_policy.double(), expected[3], rtol=1e-5, atol=1e-7)
    # dL/dE = out (g - <out, g>): g and <out, g> are of order 1 and cancel, so its absolute error
    # is float32's rounding of order-1 terms, summed in an order that depends on the vector width
    # (AVX2 or AVX-512): up to 1.8e-7 was seen
    torch.testing.assert_close(grad_logits.double(), expected[2], rtol=1e-5, atol=1e-6)


def test_native_noise_repeats_under_the_seed_whatever_the_threads(monkeypatch):
    policy = torch.zeros(8, 4, 40, 40)
    logits = torch.randn(8, 4, 40, 40)
    draws = []
    threads = torch.get_num_threads()
    monkeypatch.setattr(native, "PARALLEL_MIN_ELEMENTS", 1)
    try:
        for n_threads, seed in ((1, 5), (2, 5), (2, 6)):
            torch.set_num_threads(n_threads)
            torch.manual_seed(seed)
            draws.append(native.NativeSampledSelectiveSoftmax.apply(
                logits, policy, None, None, 0.5, False, 10.0)[1])
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(draws[0], draws[1])
    assert not torch.equal(draws[1], draws[2])
    assert 0.45 < draws[2].float().mean() < 0.55


def test_the_model_option_reaches_the_layer_and_trains():
    torch.manual_seed(0)
    layer = ssan_layer(config(), kernel="native").train()
    assert layer.self_attn.selector.kernel == "native"
    x, pad = inputs(3)
    x.requires_grad_()
    out = layer(x, pad)[0]
    out.square().sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    assert layer.self_attn.selector.policy_proj.weight.grad.abs().sum() > 0


def test_auto_is_the_default_and_trains_with_the_native_kernel():
    """--ssan-kernel auto, the model's default: a layer built with it trains exactly as one
    built with the native kernel (same seed, same draws, same values and gradients)."""
    from ssan_plugin.modules.selectors.gumbel import SSANSelectorOptions as SSANOptions

    assert SSANOptions().ssan_kernel == "auto"
    results = []
    for kernel in ("auto", "native"):
        torch.manual_seed(0)
        layer = ssan_layer(config(), kernel=kernel).train()
        x, pad = inputs(3)
        x.requires_grad_()
        out = layer(x, pad)[0]
        out.square().sum().backward()
        results.append((out.detach(), x.grad, layer.self_attn.selector.policy_proj.weight.grad))
    for auto, nat in zip(*results):
        assert torch.equal(auto, nat)


def test_auto_falls_back_to_torch_where_the_kernel_does_not_build(monkeypatch, caplog):
    """auto: torch's kernel off the CPU, and where the native one cannot be built, with one
    warning a process naming the reason (the build is not retried at every forward)."""
    import logging

    from ssan_plugin.modules.selective_weights import resolve_kernel

    attempts = []

    def no_kernel():
        attempts.append(1)
        raise native.NativeKernelUnavailable("'no-such-compiler-ssan' was not found")

    native.available.cache_clear()
    try:
        assert resolve_kernel("auto", torch.device("cpu")) == "native"
        assert resolve_kernel("auto", torch.device("meta")) == "torch"
        assert resolve_kernel("torch", torch.device("cpu")) == "torch"
        native.available.cache_clear()
        monkeypatch.setattr(native, "load", no_kernel)
        with caplog.at_level(logging.WARNING, logger=native.__name__):
            assert [resolve_kernel("auto", torch.device("cpu")) for _ in range(3)] == ["torch"] * 3
        assert len(attempts) == 1
        warned = [r for r in caplog.records if "no-such-compiler-ssan" in r.getMessage()]
        assert len(warned) == 1 and "the torch kernel" in warned[0].getMessage()
        logits, policy, noise, pad, _ = case(3, (2, 2, 4, 4))
        out, select = sampled_selective_softmax(logits, policy, 0.5, pad, noise=noise, kernel="auto")
        ref, ref_select = sampled_selective_softmax(logits, policy, 0.5, pad, noise=noise,
                                                    kernel="torch")
        assert torch.equal(out, ref) and torch.equal(select, ref_select)
    finally:
        native.available.cache_clear()
    with pytest.raises(ValueError, match="--ssan-kernel must be one of auto, reference, torch, native"):
        resolve_kernel("cuda", torch.device("cpu"))


def test_a_missing_compiler_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", "no-such-compiler-ssan")
    with pytest.raises(native.NativeKernelUnavailable, match="no-such-compiler-ssan"):
        native.build(tmp_path / "k.so")
    assert not any(tmp_path.iterdir())  # nothing half-written left behind


def test_the_kernel_shares_torchs_openmp_runtime():
    """The library's libgomp.so.1 resolves to the copy torch loaded: one OpenMP runtime, so the
    kernel's threads are torch's (a second runtime's threads would compete with torch's)."""
    from pathlib import Path

    torch_lib = Path(torch.__file__).parent / "lib"
    if not (torch_lib / "libgomp.so.1").is_file():
        pytest.skip("this torch build does not bring its own libgomp")
    native.load()
    mapped = {Path(line.split()[-1]) for line in Path("/proc/self/maps").read_text().splitlines()
              if line.split()[-1].endswith("/libgomp.so.1")}
    assert mapped == {torch_lib / "libgomp.so.1"}


def test_the_kernel_runs_on_torchs_thread_count():
    """The forward reports how many OpenMP threads ran it: torch's count when the call is large
    enough (so a build without OpenMP, or a runtime that ignores the request, would fail)."""
    lib = native.load()
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            logits = torch.randn(4, 4, 64, 64)
            out, weight = torch.empty_like(logits), torch.empty_like(logits)
            chosen = torch.empty(logits.shape, dtype=torch.bool)
            n_threads = native._threads_for(logits.numel())
            assert n_threads == n
            ran = lib.ssan_sampled_forward(
                logits.data_ptr(), logits.data_ptr(), None, None, 4 * 64, 1, 64, 4 * 4 * 64,
                n_threads, 1, 0.5, 10.0, out.data_ptr(), weight.data_ptr(), chosen.data_ptr(),
                None, None)
            assert ran == n
    finally:
        torch.set_num_threads(threads)


def test_native_row_entropy_is_the_policy_entropy_over_non_pad_keys():
    """The kernel's third output: sum over non-pad keys of H(sigmoid(E_p)) per row, against the
    float64 definition (on the small-probability side, where float64 is exact enough), with
    policies from unsure to sure (|E_p| up to 30), pads and odd row lengths."""
    g = torch.Generator().manual_seed(11)
    for shape in ((3, 2, 5, 7), (2, 3, 4, 33)):
        policy = torch.randn(shape, generator=g) * torch.tensor([0.5, 4.0, 30.0])[
            torch.randint(0, 3, shape, generator=g)]
        logits = torch.randn(shape, generator=g)
        pad = torch.zeros(shape[0], shape[-1], dtype=torch.bool)
        pad[1, -2:] = True
        _, _, rows = native.NativeSampledSelectiveSoftmax.apply(
            logits, policy, None, pad, 0.5, False, 10.0, True)
        q = torch.sigmoid(-policy.double().abs())
        h = -(torch.xlogy(q, q) + (1 - q) * torch.log1p(-q))
        expected = (h * (~pad).view(shape[0], 1, 1, -1)).sum(-1)
        assert rows.shape == shape[:3] and rows.dtype == torch.float32
        torch.testing.assert_close(rows.double(), expected, rtol=1e-5, atol=1e-30)


def test_native_module_logs_the_same_entropy_as_the_torch_module():
    """The policy entropy does not depend on the noise: a training forward logs the same
    entropy through the kernel's row sums as through the torch path's own pass."""
    torch.manual_seed(0)
    layers = {k: ssan_layer(config(), kernel=k).train() for k in ("torch", "native")}
    layers["native"].load_state_dict(layers["torch"].state_dict())
    x, pad = inputs(5)
    stats = {}
    for k, layer in layers.items():
        layer.self_attn.rate_gradient = layer.self_attn.entropy_gradient = False
        layer(x, pad)
        stats[k] = layer.self_attn.pop_selection()
    torch.testing.assert_close(stats["native"].entropy_sum, stats["torch"].entropy_sum, rtol=1e-5, atol=0)
    assert stats["native"].decisions == stats["torch"].decisions


def test_an_unwritable_cache_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(native.NativeKernelUnavailable, match="SSAN_PLUGIN_CACHE"):
        native.build(blocker / "sub" / "k.so")
