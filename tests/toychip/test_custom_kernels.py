"""Does register_kernel put a NumPy function in the chip's dispatch slot, and take it out again?"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import toychip


def gelu_tanh(a, approximate="none"):
    return 0.5 * a * (1 + np.tanh(0.7978845608028654 * (a + 0.044715 * a ** 3)))


def test_scoped_kernel_runs_natively_then_is_unregistered(chip_pair):
    cpu, chip = chip_pair
    toychip.reset_coverage()
    with toychip.kernel_scope():
        toychip.register_kernel("aten::gelu", gelu_tanh)
        out = F.gelu(chip, approximate="tanh")
    torch.testing.assert_close(out.cpu(), F.gelu(cpu, approximate="tanh"))
    assert toychip.coverage().native["gelu.default"] == 1
    assert "gelu.out" not in toychip.coverage().fallback
    F.gelu(chip)
    assert toychip.coverage().fallback["gelu.out"] == 1   # back to the CPU fallback


def test_native_kernel_is_cheaper_than_the_fallback(chip_pair):
    _, chip = chip_pair
    with toychip.profile() as fallback:
        F.gelu(chip, approximate="tanh")
    with toychip.kernel_scope():
        toychip.register_kernel("gelu.default", gelu_tanh)
        with toychip.profile() as native:
            F.gelu(chip, approximate="tanh")
    assert native.launches == 1 and native.copies == 0
    assert native.time_us < fallback.time_us


def test_scope_restores_an_overridden_kernel(chip_pair):
    cpu, chip = chip_pair
    with toychip.kernel_scope():   # PyTorch warns (once per process) about the override
        toychip.register_kernel(torch.ops.aten.relu.default, lambda a: np.full_like(a, 7.0))
        assert torch.equal(torch.relu(chip).cpu(), torch.full_like(cpu, 7.0))
    torch.testing.assert_close(torch.relu(chip).cpu(), torch.relu(cpu))


def test_inplace_overload_writes_its_first_argument(chip_pair):
    cpu, chip = chip_pair
    with toychip.kernel_scope():
        toychip.register_kernel("aten::hardtanh_", lambda a, lo=-1.0, hi=1.0: np.clip(a, lo, hi))
        result = chip.clone()
        returned = torch.ops.aten.hardtanh_(result, -0.5, 0.5)
    assert returned is result
    torch.testing.assert_close(result.cpu(), cpu.clamp(-0.5, 0.5))


def test_scope_unregisters_on_error(chip_pair):
    _, chip = chip_pair
    with pytest.raises(ZeroDivisionError):
        with toychip.kernel_scope():
            toychip.register_kernel("aten::gelu", gelu_tanh)
            1 / 0
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::gelu", "PrivateUse1")

