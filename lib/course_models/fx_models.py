"""Models for chapter 03 (TorchFX): the seed's examples plus variants the grader builds.

Each class exercises one thing a pass must handle (every spelling of ReLU, dropout as a
module and as a function, Conv2d+BatchNorm2d with and without bias, shared outputs, an
op the toy chip runs through its CPU fallback).
"""
from __future__ import annotations

import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class SeedModel(nn.Module):
    """Seed 000's ``Model``: Linear(10, 20) → relu → Linear(20, 5)."""

    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(10, 20)
        self.linear2 = nn.Linear(20, 5)

    def forward(self, x):
        x = self.linear1(x)
        x = torch.relu(x)
        return self.linear2(x)


class ModelWithDropout(nn.Module):
    """Seed 000's dropout model, plus a functional dropout that follows ``self.training``."""

    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(10, 20)
        self.dropout = nn.Dropout(0.5)
        self.linear2 = nn.Linear(20, 5)

    def forward(self, x):
        x = self.dropout(self.linear1(x))
        x = F.dropout(x, p=0.2, training=self.training)
        return self.linear2(x)


class MixedActivations(nn.Module):
    """ReLU written four ways: ``torch.relu``, ``F.relu``, ``nn.ReLU`` and ``Tensor.relu``."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = self.act(self.fc2(x)) + F.relu(x)
        return self.fc3(x).relu()


class ConvBNNet(nn.Module):
    """Two foldable Conv2d→BatchNorm2d pairs (with and without conv bias) and one BN that
    follows a pooling layer, which no conv can absorb."""

    def __init__(self, channels: int = 4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.pool = nn.MaxPool2d(2)
        self.bn3 = nn.BatchNorm2d(channels)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.bn2(self.conv2(x))
        return self.bn3(self.pool(x))


class SharedConvOutput(nn.Module):
    """A conv whose output feeds a BatchNorm *and* a residual add: folding would be wrong."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


def randomize_batchnorm_stats(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Give every BatchNorm non-trivial running stats and affine parameters, as after training."""
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            channels = module.num_features
            with torch.no_grad():
                module.running_mean.copy_(torch.randn(channels, generator=generator) * 0.5)
                module.running_var.copy_(torch.rand(channels, generator=generator) + 0.5)
                module.weight.copy_(torch.rand(channels, generator=generator) + 0.5)
                module.bias.copy_(torch.randn(channels, generator=generator) * 0.1)
    return model


class RandomMLP(nn.Module):
    """An MLP whose activations and dropouts are drawn from ``spellings`` (seeded by ``layout_seed``).

    ``spellings`` names how each activation is written: "torch.relu", "F.relu",
    "nn.ReLU", "Tensor.relu", "torch.tanh", "torch.cos", "nn.Dropout", "F.dropout".
    """

    def __init__(self, layout_seed: int, width: int, depth: int, spellings: list[str]):
        super().__init__()
        rng = random.Random(layout_seed)
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.choices = [rng.choice(spellings) for _ in range(depth)]
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(0.3)

    def forward(self, x):
        for layer, choice in zip(self.layers, self.choices):
            x = layer(x)
            if choice == "torch.relu":
                x = torch.relu(x)
            elif choice == "F.relu":
                x = F.relu(x)
            elif choice == "Tensor.relu":
                x = x.relu()
            elif choice == "torch.tanh":
                x = torch.tanh(x)
            elif choice == "torch.cos":
                x = torch.cos(x)
            elif choice == "F.dropout":
                x = F.dropout(x, p=0.3, training=self.training)
            elif choice == "nn.ReLU":
                x = self.relu(x)
            else:
                x = self.dropout(x)
        return x


class ChipBlock(nn.Module):
    """A block for the per-node profiler on the toy chip: modules, a function, a method, an
    add, and ``torch.cos``, which the chip runs through its CPU fallback (two copies)."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = self.fc2(h).sigmoid()
        return torch.cos(h) + x


def pointwise_chains(x, y):
    """Pointwise chains split by a matmul and by a value used twice (``b``)."""
    a = torch.sin(x) + 1
    b = torch.relu(a * 2)
    c = b @ y
    d = torch.sigmoid(c) * 3 - 1
    return d + b.sum(), torch.exp(b)
