"""Models for chapter 03 (TorchFX): the seed's examples plus variants the grader builds.

Each class exercises one thing a pass must handle (every spelling of ReLU, in-place ones
included, and look-alikes that are not ReLU; dropout as a module of every class and as a
function; Conv2d+BatchNorm2d across the convolution's and the norm's parameters, shared
outputs; an op the toy chip runs through its CPU fallback; ATen programs whose pointwise
chains are cut by views, casts and values with several users).
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


class CensusModel(nn.Module):
    """What a census counts by call, not by declaration: a layer called twice, layers nested
    in a Sequential (targets "block.0", "block.1"), a parameter read (a get_attr node, not
    an operation), a Tensor method, and a declared layer that forward never calls."""

    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
        self.shared = nn.Linear(8, 8)
        self.scale = nn.Parameter(torch.ones(8))
        self.unused = nn.Dropout(0.1)

    def forward(self, x):
        h = self.shared(self.block(x))
        h = self.shared(h) * self.scale
        return h.softmax(dim=-1) + torch.sigmoid(x)


class GatedResidual(nn.Module):
    """A gate read from a parameter (get_attr), layers nested in a Sequential, a Tensor method."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Parameter(torch.zeros(6))
        self.body = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 6))

    def forward(self, x):
        return x + torch.sigmoid(self.gate) * self.body(x).tanh()


class InplaceActivations(nn.Module):
    """ReLU written in place: ``F.relu(x, inplace=True)``, ``nn.ReLU(inplace=True)``,
    ``x.relu_()`` and ``torch.relu_``. Each acts on a layer's output, which has no other
    user, so writing in place changes nothing else."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3, self.fc4 = (nn.Linear(8, 8) for _ in range(4))
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        x = F.relu(self.fc1(x), inplace=True)
        x = self.act(self.fc2(x))
        x = self.fc3(x).relu_()
        return torch.relu_(self.fc4(x))


class ReLULookalikes(nn.Module):
    """Activations whose names contain "relu" but which are not ReLU (``nn.ReLU6``,
    ``nn.LeakyReLU``, ``F.relu6``, ``F.leaky_relu``), beside one real ``F.relu``."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)
        self.clip = nn.ReLU6()
        self.leaky = nn.LeakyReLU(0.1)

    def forward(self, x):
        x = self.clip(self.fc1(x) * 8) + F.leaky_relu(x, 0.2)
        x = self.leaky(self.fc2(x)) + F.relu6(x * 8)
        return F.relu(x)


class DropoutVariants(nn.Module):
    """Dropout modules other than ``nn.Dropout`` (every one a ``_DropoutNd``), under names
    that do not say "dropout". Input: (N, C, 6)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 6)
        self.channel_drop = nn.Dropout1d(0.5)
        self.alpha = nn.AlphaDropout(0.5)
        self.feature_alpha = nn.FeatureAlphaDropout(0.5)
        self.fc2 = nn.Linear(6, 4)

    def forward(self, x):
        x = self.channel_drop(self.fc1(x))
        x = self.feature_alpha(self.alpha(x))
        return self.fc2(x)


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


class ConvBN(nn.Module):
    """One Conv2d→BatchNorm2d pair built from keyword arguments. ``reuse`` gives a value a
    second user: "conv" (the conv's output also feeds an add: folding would be wrong) or
    "bn" (the norm's output is used twice: folding is still right)."""

    def __init__(self, conv: dict, bn: dict | None = None, reuse: str = ""):
        super().__init__()
        self.conv = nn.Conv2d(**conv)
        self.bn = nn.BatchNorm2d(conv["out_channels"], **(bn or {}))
        self.reuse = reuse

    def forward(self, x):
        y = self.conv(x)
        z = self.bn(y)
        if self.reuse == "conv":
            return z + y
        if self.reuse == "bn":
            return z * torch.sigmoid(z)
        return z


class ConvBNVariants(nn.Module):
    """Foldable pairs beyond the plain case: a grouped, dilated conv with reflect padding
    before a norm with a large eps, and a strided conv before a norm without affine
    parameters (gamma = 1, beta = 0)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 6, 3, padding=2, dilation=2, groups=2, padding_mode="reflect")
        self.bn1 = nn.BatchNorm2d(6, eps=0.1)
        self.conv2 = nn.Conv2d(6, 6, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(6, affine=False)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        return self.bn2(self.conv2(x))


class NormNotAfterConv(nn.Module):
    """BatchNorms that no conv can absorb: one reads the input, one follows a ReLU."""

    def __init__(self):
        super().__init__()
        self.bn_in = nn.BatchNorm2d(3)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn_act = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn_act(torch.relu(self.conv(self.bn_in(x))))


class RandomConvBNNet(nn.Module):
    """Conv2d→BatchNorm2d blocks whose parameters are drawn from ``layout_seed``: kernel,
    stride, dilation, groups, padding mode, bias; eps and affine. A block either feeds the
    norm straight from the conv, or gives the conv's or the norm's output a second user, or
    puts a tanh between them (then that norm stays); the first block always folds.
    Input: (N, 4, 16, 16)."""

    KINDS = ("plain", "plain", "conv", "bn", "tanh")
    FOLDABLE = ("plain", "bn")

    def __init__(self, layout_seed: int, blocks: int = 3):
        super().__init__()
        rng = random.Random(layout_seed)
        self.convs, self.norms, self.kinds = nn.ModuleList(), nn.ModuleList(), []
        channels = 4
        for index in range(blocks):
            out = rng.choice([4, 6, 8])
            kernel, dilation = rng.choice([1, 3]), rng.choice([1, 2])
            self.convs.append(nn.Conv2d(
                channels, out, kernel, stride=rng.choice([1, 2]) if index == 0 else 1,
                padding=dilation * (kernel // 2), dilation=dilation, groups=rng.choice([1, 2]),
                bias=rng.random() < 0.5, padding_mode=rng.choice(["zeros", "reflect", "circular", "replicate"])))
            self.norms.append(nn.BatchNorm2d(out, eps=rng.choice([1e-5, 1e-3, 0.1]), affine=rng.random() < 0.7))
            self.kinds.append(rng.choice(self.KINDS if index else self.FOLDABLE))
            channels = out

    def forward(self, x):
        for conv, norm, kind in zip(self.convs, self.norms, self.kinds):
            y = conv(x)
            z = norm(torch.tanh(y) if kind == "tanh" else y)
            x = z + y if kind == "conv" else z * torch.sigmoid(z) if kind == "bn" else torch.relu(z)
        return x


def randomize_batchnorm_stats(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Give every BatchNorm non-trivial running stats (and affine parameters, where it has
    them), as after training."""
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            channels = module.num_features
            with torch.no_grad():
                module.running_mean.copy_(torch.randn(channels, generator=generator) * 0.5)
                module.running_var.copy_(torch.rand(channels, generator=generator) + 0.5)
                if module.affine:
                    module.weight.copy_(torch.rand(channels, generator=generator) + 0.5)
                    module.bias.copy_(torch.randn(channels, generator=generator) * 0.1)
    return model


def _apply(m: "SpelledMLP", x, spelling: str):
    """``x`` through the activation or dropout that ``spelling`` names."""
    functions = {
        "torch.relu": lambda: torch.relu(x),
        "torch.relu_": lambda: torch.relu_(x),
        "F.relu": lambda: F.relu(x),
        "F.relu(inplace)": lambda: F.relu(x, inplace=True),
        "Tensor.relu": lambda: x.relu(),
        "Tensor.relu_": lambda: x.relu_(),
        "nn.ReLU": lambda: m.relu(x),
        "nn.ReLU(inplace)": lambda: m.relu_inplace(x),
        "torch.tanh": lambda: torch.tanh(x),
        "torch.cos": lambda: torch.cos(x),
        "nn.Dropout": lambda: m.dropout(x),
        "nn.Dropout1d": lambda: m.channel_drop(x),
        "nn.AlphaDropout": lambda: m.alpha_drop(x),
        "F.dropout": lambda: F.dropout(x, p=0.3, training=m.training),
    }
    return functions[spelling]()


SPELLINGS = ("torch.relu", "torch.relu_", "F.relu", "F.relu(inplace)", "Tensor.relu", "Tensor.relu_", "nn.ReLU",
             "nn.ReLU(inplace)", "torch.tanh", "torch.cos", "nn.Dropout", "nn.Dropout1d", "nn.AlphaDropout",
             "F.dropout")


class SpelledMLP(nn.Module):
    """Linear layers (``layers.0``, ``layers.1``, ...), each followed by the activation or
    dropout that ``spellings`` names in turn (one of ``SPELLINGS``). The ReLU and dropout
    modules are shared by every layer that uses them; those no layer uses stay declared.
    In-place spellings act on a layer's output, which has no other user. Input: (N, width)."""

    def __init__(self, spellings: list[str], width: int):
        super().__init__()
        unknown = set(spellings) - set(SPELLINGS)
        if unknown:
            raise ValueError(f"unknown spellings {sorted(unknown)}")
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in spellings)
        self.spellings = list(spellings)
        self.relu = nn.ReLU()
        self.relu_inplace = nn.ReLU(inplace=True)
        self.dropout = nn.Dropout(0.3)
        self.channel_drop = nn.Dropout1d(0.3)
        self.alpha_drop = nn.AlphaDropout(0.3)

    def forward(self, x):
        for layer, spelling in zip(self.layers, self.spellings):
            x = _apply(self, layer(x), spelling)
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


def merging_chains(x, y):
    """Two chains that meet in one add (their groups merge); a transpose (a view, not
    pointwise) between ``cos`` and the add; a sum as the first operand of a subtraction."""
    a = torch.sin(x) * 2
    b = torch.cos(y).t() + 1
    c = torch.exp(a + b)
    return x.sum() - c


def returned_midway(x, y):
    """A chain whose middle value ``a`` is returned and also feeds the rest of the chain:
    the output node is one of its two users, so the chain splits there."""
    a = torch.sin(x) + 1
    return a, torch.exp(a * 2)
