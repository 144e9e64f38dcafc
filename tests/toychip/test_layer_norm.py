"""Does LayerNorm (forward and backward) run on chip kernels in every mode and match the CPU?

A transformer has one per block: as a CPU fallback its backward cost two host copies per
tensor each step, and in lazy mode it cut the recorded graph in two.
"""
import contextlib

import pytest
import torch
import torch.nn as nn

import toychip
from toychip import compiler

NORMS = {"affine": lambda: nn.LayerNorm(6), "no_affine": lambda: nn.LayerNorm(6, elementwise_affine=False),
         "two_dims": lambda: nn.LayerNorm([5, 6]), "no_bias": lambda: nn.LayerNorm(6, bias=False)}
MODES = {"eager": contextlib.nullcontext, "lazy": toychip.lazy}


def _assert_close(got, want):
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5 * want.abs().max().item())


def _reference(make, x, grad):
    torch.manual_seed(0)
    norm = make()
    for p in norm.parameters():  # not the all-ones / all-zeros defaults, which hide mistakes
        p.data.normal_()
    cpu = x.clone().requires_grad_()
    norm(cpu).backward(grad)
    return norm, cpu


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("make", NORMS.values(), ids=NORMS.keys())
def test_layer_norm_forward_and_backward_run_natively_and_match_cpu(make, mode):
    x, grad = torch.randn(3, 4, 5, 6), torch.randn(3, 4, 5, 6)
    ref, cpu = _reference(make, x, grad)
    norm = make().to("toychip")
    norm.load_state_dict(ref.state_dict())
    chip = x.to("toychip").requires_grad_()
    with toychip.strict(), MODES[mode]():
        out = norm(chip)
        out.backward(grad.to("toychip"))
    _assert_close(out, ref(x))
    _assert_close(chip.grad, cpu.grad)
    for got, want in zip(norm.parameters(), ref.parameters()):
        _assert_close(got.grad, want.grad)


def test_compiled_layer_norm_is_one_chip_kernel_each_way():
    x, grad = torch.randn(4, 8), torch.randn(4, 8)
    ref, cpu = _reference(lambda: nn.LayerNorm(8), x, grad)
    norm = nn.LayerNorm(8).to("toychip")
    norm.load_state_dict(ref.state_dict())
    chip = x.to("toychip").requires_grad_()
    torch._dynamo.reset()
    before = len(compiler.COMPILED)
    with toychip.strict():
        torch.compile(norm, backend="toychip")(chip).backward(grad.to("toychip"))
    _assert_close(chip.grad, cpu.grad)
    forward, backward = compiler.COMPILED[before:]
    assert "chip.layer_norm(" in forward.code() and "chip.layer_norm_backward(" in backward.code()
    assert (forward.launches, backward.launches) == (1, 1)
