"""Mirrors OpenReg's test_autograd.py: backward on the chip, grad_fn, no_grad, detach, retain_grad, CPU <-> chip.

test_autograd_init reads thread names from /proc, so it runs on Linux only.
"""
import os
from pathlib import Path

import pytest
import torch

DEVICE = "toychip"


def _thread_names() -> set[str]:
    return {(task / "comm").read_text().strip() for task in Path(f"/proc/{os.getpid()}/task").iterdir()}


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="thread names are read from /proc (Linux)")
def test_autograd_init():
    """A backward on one chip starts the engine's worker thread for every chip (pt_autograd_<index>)."""
    torch.ones(2, device=DEVICE, requires_grad=True).sum().backward()
    assert torch.accelerator.device_count() == 2
    assert {"pt_autograd_0", "pt_autograd_1"} <= _thread_names()


@pytest.mark.parametrize("index", [0, 1])
def test_autograd_backward(index):
    x = torch.randn(2, 3, device=f"{DEVICE}:{index}", requires_grad=True)
    y = torch.randn(3, 2, device=f"{DEVICE}:{index}", requires_grad=True)
    torch.mm(x, y).sum().backward()
    # d(sum(x @ y))/dx = 1 @ y.T, d/dy = x.T @ 1
    ones = torch.ones(2, 2)
    torch.testing.assert_close(x.grad.cpu(), ones @ y.detach().cpu().T)
    torch.testing.assert_close(y.grad.cpu(), x.detach().cpu().T @ ones)
    assert x.grad.device == x.device and y.grad.device == y.device


def test_autograd_grad_fn():
    x = torch.randn(2, 3, device=DEVICE, requires_grad=True)
    doubled = x * 2
    assert doubled.grad_fn is not None and x.grad is None
    doubled.sum().backward()
    assert torch.equal(x.grad.cpu(), torch.full((2, 3), 2.0))


def test_autograd_no_grad():
    x = torch.randn(2, 3, device=DEVICE, requires_grad=True)
    with torch.no_grad():
        untracked = x * 2
    assert untracked.grad_fn is None and not untracked.requires_grad
    tracked = x * 2
    assert tracked.grad_fn is not None and tracked.requires_grad


def test_autograd_detach():
    x = torch.randn(2, 3, device=DEVICE, requires_grad=True)
    detached = x.detach()
    assert not detached.requires_grad and detached.grad_fn is None
    assert (detached * 2).grad_fn is None
    assert detached.data_ptr() == x.data_ptr()          # the same memory, cut from the graph


def test_autograd_retain_grad():
    x = torch.randn(2, 3, device=DEVICE, requires_grad=True)
    doubled = x * 2
    doubled.retain_grad()
    doubled.sum().backward()
    assert torch.equal(doubled.grad.cpu(), torch.ones(2, 3))
    assert torch.equal(x.grad.cpu(), torch.full((2, 3), 2.0))


def test_autograd_multiple_backward():
    x = torch.randn(2, 3, device=DEVICE, requires_grad=True)
    total = x.sum()
    total.backward(retain_graph=True)
    first = x.grad.clone()
    total.backward()
    assert torch.equal(x.grad.cpu(), 2 * first.cpu())   # gradients accumulate


def test_autograd_cross_device():
    x = torch.randn(2, 3, requires_grad=True)
    (x.to(DEVICE) * 3).sum().backward()
    assert x.grad.is_cpu
    assert torch.equal(x.grad, torch.full((2, 3), 3.0))
