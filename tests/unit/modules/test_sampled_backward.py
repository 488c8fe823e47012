"""ssan_plugin/modules/sampled_backward.py: what a sampled-softmax kernel saves for backward and
returns, with and without a slope (a gradient through the sample)."""

import torch

from ssan_plugin.modules.sampled_backward import save_sampled_for_backward


class Kernel(torch.autograd.Function):
    """A stand-in kernel: forward ends as the real ones do (plus a copy of ``out``, so that
    backward runs without a slope too); backward records what was saved."""

    @staticmethod
    def forward(ctx, out, weight, chosen, slope):
        return save_sampled_for_backward(ctx, out, weight, chosen, slope), out.clone()

    @staticmethod
    def backward(ctx, grad_sample, grad_out):
        Kernel.saved = ctx.saved_tensors
        slope_grad = grad_sample * ctx.saved_tensors[2] if len(ctx.saved_tensors) == 3 else None
        return grad_out, None, None, slope_grad


def inputs():
    out, weight = torch.rand(2, 3, requires_grad=True), torch.rand(2, 3)
    chosen = torch.tensor([[True, False, True], [False, False, True]])
    return out, weight, chosen


def test_with_a_slope_the_sample_is_float_and_carries_the_gradient():
    out, weight, chosen = inputs()
    slope = torch.full((2, 3), 0.5, requires_grad=True)
    sample, _ = Kernel.apply(out, weight, chosen, slope)
    assert sample.dtype == torch.float32 and torch.equal(sample, chosen.float())
    assert sample.requires_grad
    sample.sum().backward()
    saved = Kernel.saved
    assert len(saved) == 3 and torch.equal(saved[0], out) and torch.equal(saved[1], weight)
    assert torch.equal(saved[2], slope)
    assert torch.equal(slope.grad, torch.full((2, 3), 0.5))


def test_without_a_slope_the_sample_is_the_constant_chosen_mask():
    out, weight, chosen = inputs()
    sample, copy = Kernel.apply(out, weight, chosen, None)
    assert sample.dtype == torch.bool and torch.equal(sample, chosen)
    assert not sample.requires_grad
    copy.sum().backward()
    saved = Kernel.saved
    assert len(saved) == 2 and torch.equal(saved[0], out) and torch.equal(saved[1], weight)
    assert torch.equal(out.grad, torch.ones(2, 3))
