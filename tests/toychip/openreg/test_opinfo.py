"""Mirrors OpenReg's test_opinfo.py: OpInfo samples of add, mul, empty, zeros, ones on the chip.

Upstream's file does not import on torch 2.13 (its ``skip``/``skipOps`` helpers of
common_methods_invocations came later); what it checks -- results stay on the device, ``out=``
writes into the given tensor, non-contiguous inputs give the contiguous results and
gradients -- is checked here with the same OpInfos, from ``toychip.opinfo.op_db()`` (the
course's OpInfo sweep, which compares every sample with the CPU, is ``tests/toychip/test_opinfo_sweep.py``).
"""
import pytest
import torch
from torch.testing._internal.common_utils import noncontiguous_like
from torch.utils._pytree import tree_flatten

from toychip import opinfo

DEVICE = "toychip"
OPS = ("add", "mul", "empty", "zeros", "ones")   # upstream's list
UNINITIALISED = {"empty"}                        # results hold whatever the memory held: no values to compare


@pytest.fixture(scope="module")
def ops():
    found = {op.name: op for op in opinfo.op_db() if op.name in OPS and not op.variant_test_name}
    assert sorted(found) == sorted(OPS)
    return found


def _tensors(value) -> list[torch.Tensor]:
    return [leaf for leaf in tree_flatten(value)[0] if isinstance(leaf, torch.Tensor)]


def _first_sample(op, dtype, **kwargs):
    return next(iter(op.sample_inputs(DEVICE, dtype, **kwargs)))


def _call(op, sample):
    return op(sample.input, *sample.args, **sample.kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("name", OPS)
def test_op_basic_functionality(ops, name, dtype):
    sample = _first_sample(ops[name], dtype)
    result = _call(ops[name], sample)
    assert {t.device.type for t in _tensors(result)} == {DEVICE}
    if not ops[name].is_factory_function and name not in UNINITIALISED:
        on_cpu = sample.transform(lambda value: value.cpu() if isinstance(value, torch.Tensor) else value)
        torch.testing.assert_close(result.cpu(), _call(ops[name], on_cpu))


@pytest.mark.parametrize("name", OPS)
def test_out_argument(ops, name):
    op = ops[name]
    assert op.supports_out
    sample = _first_sample(op, torch.float32)
    expected = _call(op, sample)
    out = torch.empty_like(expected)
    address = out.data_ptr()
    result = op(sample.input, *sample.args, **sample.kwargs, out=out)
    assert result is out and out.data_ptr() == address and out.device.type == DEVICE
    if name not in UNINITIALISED:
        assert torch.equal(out.cpu(), expected.cpu())


def _grads(outputs, inputs, grad_outputs):
    return torch.autograd.grad(outputs, inputs, grad_outputs, allow_unused=True)


@pytest.mark.parametrize("name", ["add", "mul"])   # zeros, ones: factories, no inputs; empty: uninitialised
def test_noncontiguous_samples(ops, name):
    op = ops[name]
    differentiable = torch.float32 in op.supported_backward_dtypes(DEVICE)
    for sample in op.sample_inputs(DEVICE, torch.float32, requires_grad=differentiable):
        strided = sample.noncontiguous()
        expected, actual = _call(op, sample), _call(op, strided)
        torch.testing.assert_close(actual.cpu(), expected.cpu())
        if not differentiable:
            continue
        inputs = [t for t in _tensors((sample.input, sample.args)) if t.requires_grad]
        strided_inputs = [t for t in _tensors((strided.input, strided.args)) if t.requires_grad]
        grad_output = torch.randn_like(expected)
        for got, want in zip(_grads(actual, strided_inputs, noncontiguous_like(grad_output)),
                             _grads(expected, inputs, grad_output)):
            torch.testing.assert_close(None if got is None else got.cpu(), None if want is None else want.cpu())
