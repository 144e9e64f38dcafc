"""Models for chapter 02 (TorchScript): the seed's examples and the pitfalls the grader builds.

Each class shows one thing TorchScript does or does not handle: a Python-bool flag (trace
refuses it), a tensor flag and a data-dependent loop (trace bakes one path in), NumPy
inside ``forward`` (trace bakes a constant, script refuses it), a branch on ``x.dim()`` and
a cast to ``x.dtype`` (trace bakes the example's shape rank and dtype), branches on tensor
values (the migration to ``torch.cond``).
"""
from __future__ import annotations

import random

import numpy as np
import torch
import torch.nn as nn


class SeedSimpleModel(nn.Module):
    """Seed 000's ``SimpleModel``: Conv2d(3, 8, 3) → ReLU (8 channels instead of 64, to stay small)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.conv(x))


class BoolFlagModel(nn.Module):
    """Seed 000's ``BadForTrace``: a Python ``bool`` argument chooses whether to apply ReLU."""

    def __init__(self, dim: int = 4):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x, use_relu: bool):
        x = self.fc(x)
        if use_relu:
            x = torch.relu(x)
        return x


class TensorFlagModel(nn.Module):
    """The same choice made by a 0-dim *tensor* flag: tracing accepts it and bakes one branch in."""

    def __init__(self, dim: int = 4):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x, use_relu):
        x = self.fc(x)
        if use_relu:
            x = torch.relu(x)
        return x


class HalveUntilSmall(nn.Module):
    """A data-dependent loop: halve ``x`` until its norm is at most ``limit``."""

    def __init__(self, limit: float = 1.0):
        super().__init__()
        self.limit = limit

    def forward(self, x):
        while x.norm() > self.limit:
            x = x / 2
        return x


class NumpyActivation(nn.Module):
    """``tanh`` computed in NumPy: tracing records the result as a constant tensor."""

    def __init__(self, dim: int = 4):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        h = self.fc(x)
        return h + torch.from_numpy(np.tanh(x.detach().numpy()))


class BatchFirst(nn.Module):
    """Adds a batch dimension to a single sample: a branch on ``x.dim()`` that tracing bakes
    in silently (no TracerWarning), changing the output's shape but not its values."""

    def __init__(self, dim: int = 4):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        if x.dim() == 1:
            x = x.unsqueeze(0)
        return self.fc(x)


class KeepsInputDtype(nn.Module):
    """Computes in float32 and returns the input's dtype: tracing bakes ``x.dtype`` in, so the
    traced program returns the example's dtype, with the same values."""

    def __init__(self, dim: int = 4):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(x.float()).to(x.dtype)


class ConvBNReLU(nn.Module):
    """Conv2d → BatchNorm2d → ReLU; ``torch.jit.freeze`` folds the BN, changing the last bits."""

    def __init__(self, channels: int = 4):
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def with_trained_batchnorm(model: nn.Module) -> nn.Module:
    """Give every BatchNorm2d non-trivial statistics (uses the global RNG), in eval mode."""
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            with torch.no_grad():
                module.running_mean.normal_(0, 0.5)
                module.running_var.uniform_(0.5, 1.5)
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0, 0.1)
    return model.eval()


def with_cancelling_batchnorm(model: ConvBNReLU, bias: float = 4.0) -> ConvBNReLU:
    """Make the BatchNorm undo the conv's bias (uses the global RNG), in eval mode: the
    output is about ``W·x``, near zero for small inputs. Eager rounds ``W·x + b`` to the
    precision of ``b`` before taking ``b`` away again (an error near 1e-7), the frozen
    program folds both away: a difference far below ``atol``, far above ``rtol`` times
    such small values."""
    with torch.no_grad():
        model.conv.bias.uniform_(-bias, bias)
        model.bn.running_mean.copy_(model.conv.bias)
        model.bn.running_var.uniform_(0.5, 1.5)
        model.bn.weight.uniform_(0.5, 1.5)
        model.bn.bias.zero_()
    return model.eval()


class NumpyGate(nn.Module):
    """A module written without TorchScript in mind; ``torch.jit.script`` rejects it.

    NumPy in ``forward`` (``np.tanh``, a NumPy scale), an untyped optional argument
    (``temperature`` is ``None`` or a float), and a branch on a tensor's value.
    """

    def __init__(self, dim: int = 8):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim)
        self.fc2 = nn.Linear(dim, dim)
        self.scale = np.sqrt(dim)

    def forward(self, x, temperature=None):
        h = self.fc1(x) / self.scale
        if temperature is not None:
            h = h / temperature
        gate = torch.from_numpy(np.tanh(h.detach().numpy()))
        if h.mean() > 0:
            return self.fc2(h * gate)
        return self.fc2(h) - gate


class RoutedExperts(nn.Module):
    """A model once shipped as TorchScript: two branches on tensor *values* (two ``prim::If``).

    The first picks an expert by the mean activation; the second rescales when the peak
    magnitude exceeds ``limit``. ``torch.export`` cannot capture either ``if`` as written.
    """

    def __init__(self, dim: int = 8, threshold: float = 0.0, limit: float = 2.0):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.expert_a = nn.Linear(dim, dim)
        self.expert_b = nn.Linear(dim, dim)
        self.threshold = threshold
        self.limit = limit

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        if bool(h.mean() > self.threshold):
            h = self.expert_a(h) + x
        else:
            h = self.expert_b(h) * 0.5
        if bool(h.abs().max() > self.limit):
            h = h / h.abs().max()
        return h

    @torch.no_grad()
    def routes(self, x) -> tuple[bool, bool]:
        """Which branch each ``if`` takes for ``x`` (True: the ``if`` side)."""
        h = torch.tanh(self.proj(x))
        first = bool(h.mean() > self.threshold)
        h = self.expert_a(h) + x if first else self.expert_b(h) * 0.5
        return first, bool(h.abs().max() > self.limit)


def router_checks(model: RoutedExperts, rows: int = 3, candidates: int = 2000,
                  margin: tuple[float, float] = (0.005, 0.05)) -> list[torch.Tensor]:
    """Inputs (global RNG) that take every route ``model`` takes on random data, and for
    each ``if`` one just above and one just below its threshold (by ``margin``: far
    enough that rounding cannot flip the branch, near enough to tell the model's threshold
    from another one).

    Raises ValueError when no input takes both branches of each ``if``.
    """
    dim = model.proj.in_features
    spread = torch.logspace(-1, 1, candidates).view(-1, 1, 1)
    xs = torch.randn(candidates, rows, dim) * spread + torch.randn(candidates, 1, 1) * 0.5
    with torch.no_grad():
        h = torch.tanh(model.proj(xs))
        mean = h.mean(dim=(1, 2))
        first = mean > model.threshold
        h = torch.where(first.view(-1, 1, 1), model.expert_a(h) + xs, model.expert_b(h) * 0.5)
        peak = h.abs().amax(dim=(1, 2))
    second = peak > model.limit
    if len(set(first.tolist())) < 2 or len(set(second.tolist())) < 2:
        raise ValueError("no inputs take both branches of each if")
    route = first.long() * 2 + second.long()
    picked = [int(torch.nonzero(route == r)[0]) for r in range(4) if bool((route == r).any())]
    low, high = margin
    for value, threshold in ((mean, model.threshold), (peak, model.limit)):
        for band in (value - threshold, threshold - value):
            near = torch.nonzero((band > low) & (band < high))
            picked += [int(near[0])] if len(near) else []
    return [xs[i] for i in dict.fromkeys(picked)]


# Source of a TorchScript function with a loop around a branch (chapter 02's IR example).
LOOP_WITH_BRANCH = '''
def halve_or_shift(x, n: int):
    for i in range(n):
        if bool(x.sum() > 0):
            x = x * 0.5
        else:
            x = torch.relu(x) + 1
    return x
'''

# Two sibling ifs (the first without else): nesting depth 1, two control-flow nodes.
SIBLING_BRANCHES = '''
def clip_both_sides(x, n: int):
    if bool(x.max() > 1.0):
        x = x / x.max()
    if bool(x.min() < -1.0):
        x = x / -x.min()
    else:
        x = x + n
    return x
'''

# A loop inside a branch inside a loop: blocks three deep.
THREE_DEEP = '''
def smooth(x, n: int):
    for i in range(n):
        if bool(x.sum() > 0):
            for j in range(n):
                x = torch.sin(x)
        x = x * 0.5
    return x
'''

_POINTWISE = ["torch.relu({v})", "torch.sin({v})", "{v} * {c}", "{v} + {c}", "torch.tanh({v}) - {c}"]


def random_script_source(rng: random.Random, name: str = "program") -> str:
    """Source of a random TorchScript function of ``(x, n: int)`` with ``if``/``for`` nested up to 3 deep."""
    lines, nesting = [f"def {name}(x, n: int):"], rng.randint(1, 3)

    def statements(depth: int, count: int) -> None:
        pad = "    " * (depth + 1)
        for _ in range(count):
            nested = depth < nesting
            kind = rng.choices(["op", "if", "for"], [4, 2 * nested, nested])[0]
            if kind == "op":
                op = rng.choice(_POINTWISE).format(v="x", c=rng.choice([0.5, 2.0, 3.0]))
                lines.append(f"{pad}x = {op}")
            elif kind == "if":
                lines.append(f"{pad}if bool(x.sum() > {rng.choice([0.0, 1.0])}):")
                statements(depth + 1, rng.randint(1, 2))
                if rng.random() < 0.7:
                    lines.append(f"{pad}else:")
                    statements(depth + 1, rng.randint(1, 2))
            else:
                lines.append(f"{pad}for i{depth} in range(n):")
                statements(depth + 1, rng.randint(1, 2))

    statements(0, rng.randint(3, 6))
    lines.append("    return x")
    return "\n".join(lines) + "\n"


# A minimal C++ program that loads a TorchScript file and runs it without Python.
LOADER_CPP = r'''
#include <torch/script.h>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: loader model.pt" << std::endl;
    return 1;
  }
  torch::jit::Module module = torch::jit::load(argv[1]);
  std::vector<torch::jit::IValue> inputs{torch::ones({2, 4})};
  at::Tensor output = module.forward(inputs).toTensor();
  std::cout << "output sizes: " << output.sizes() << "\n" << output << std::endl;
  return 0;
}
'''
