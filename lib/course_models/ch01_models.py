"""Functions and models for chapter 01 (torch.compile), shared by the notebook and the grader.

Each function shows one thing: a pointwise chain (where compile wins), the seed's tiny
MLP (where it loses), code full of graph breaks (what the exercises rewrite), small
programs whose Inductor output the learner reads, and the GPU numbers recorded on real
hardware for learners without a GPU (:func:`gpu_reference`, :func:`gpu_demo`).
"""
from __future__ import annotations

import datetime
import json
import random
from pathlib import Path

import torch

from .ch00_models import MyModel

GPU_ASSETS = Path(__file__).resolve().parents[2] / "assets" / "gpu"
GPU_TIMINGS, GPU_TRITON = GPU_ASSETS / "ch01_gpu_timings.json", GPU_ASSETS / "ch01_triton_pointwise.py"

__all__ = ["MyModel", "seed_chain", "pointwise_chain", "BREAK_SUSPECTS", "running_stats", "adaptive_clip",
           "RandomProgram", "random_program", "KERNEL_PROGRAMS", "gpu_reference", "gpu_demo"]


# --- where compile wins and loses ----------------------------------------------------

def seed_chain(x):
    """Seed 000's eager example ``relu((x + 1) * 2 - 0.5)``: four pointwise ops, one fused kernel."""
    return torch.relu((x + 1) * 2 - 0.5)


def pointwise_chain(x):
    """A memory-bound chain: eager writes every intermediate to memory, Inductor none."""
    return ((x.sin() + x.cos()) * 2).relu() - 0.5


# --- graph breaks ----------------------------------------------------------------------

def value_branch(x):
    if x.sum() > 0:                           # Python `if` on a tensor's value
        return x * 2
    return x - 1


def shape_branch(x):
    if x.shape[0] > 4:                        # shapes are known while tracing: a guard, no break
        return x * 2
    return x - 1


def dtype_branch(x):
    if x.dtype == torch.float32:
        return x * 2
    return x - 1


def where_branch(x):
    return torch.where(x.sum() > 0, x * 2, x - 1)


def cond_branch(x):
    return torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t - 1, (x,))


def list_append(x):
    parts = []
    for i in range(3):
        parts.append(x * i)
    return torch.stack(parts).sum(0)


def item_call(x):
    return x * x.sum().item()


def print_call(x):
    y = x * 2
    print("y =", y[:2])
    return y + 1


BREAK_SUSPECTS = {f.__name__: f for f in (value_branch, shape_branch, dtype_branch, where_branch, cond_branch,
                                         list_append, item_call, print_call)}
"""Seed 003's graph-break suspects (and their fixes), each small enough to explain in one line."""


def running_stats(x):
    """Seed 003's list of graph-break suspects in one function (exercise 01.remove_graph_breaks)."""
    history = []
    for _ in range(3):
        x = torch.tanh(x * 1.5 + 0.1)
        history.append(x.mean())              # a Python list: no graph break
    print("last mean:", history[-1])          # print: graph break
    total = torch.stack(history).sum()
    if total > 0:                             # branch on a tensor's value: graph break
        return x * total
    return x - total


def adaptive_clip(x):
    """Clip to a data-dependent limit (exercise 01.compile_friendly): correct, but ``.item()``
    breaks the graph and the Python ``if`` on its value picks the branch outside any graph."""
    limit = x.abs().mean().item() * 3         # tensor → Python float: graph break
    y = x / limit
    if limit > 1.0:
        y = y.clamp(-1, 1) * limit
    else:
        y = y * 0.5 + 0.5
    return torch.relu(y) + 0.01 * y


UNARY = (torch.sin, torch.cos, torch.tanh, torch.sigmoid, torch.relu, torch.exp, torch.neg)


class RandomProgram:
    """A picklable random function of ``x``: pointwise steps, reductions and explicit graph
    breaks (``torch._dynamo.graph_break()``), used as hidden cases for the graph recorder."""

    def __init__(self, steps: list[tuple]):
        self.steps = steps

    def __call__(self, x):
        for kind, argument in self.steps:
            if kind == "unary":
                x = argument(x)
            elif kind == "scale":
                x = x * argument
            elif kind == "shift":
                x = x + argument
            elif kind == "center":
                x = x - x.mean()
            else:
                torch._dynamo.graph_break()
        return x


def random_program(rng: random.Random) -> RandomProgram:
    steps = []
    for _ in range(rng.randint(4, 9)):
        kind = rng.choices(["unary", "scale", "shift", "center", "break"], [5, 3, 2, 1, 2])[0]
        argument = {"unary": rng.choice(UNARY), "scale": rng.choice([0.5, 2.0, 3.0]),
                    "shift": rng.choice([1.0, -0.5])}.get(kind)
        steps.append((kind, argument))
    return RandomProgram(steps)


# --- programs whose generated code the learner reads (exercise 01.fused_kernels) --------------

def scaled_seed_chain(x, w):
    """The seed chain times a second input: still one fused pointwise kernel."""
    return seed_chain(x) * w


def linear_gelu(x, w):
    """A matmul (a library call on CPU) between two pointwise chains."""
    return torch.nn.functional.gelu((x * 0.5) @ w) + 1


def softmax_scaled(x, w):
    """Softmax = reductions (max, sum) and pointwise ops: Inductor fuses them per row."""
    return torch.softmax(x * 2, dim=-1) * w


def two_outputs(x, w):
    """Two results read the same intermediate: one kernel can write both."""
    y = torch.sin(x) * w
    return y.relu(), y.sum(dim=0)


def matmul_chain(x, w):
    """Two matmuls with pointwise work between and after them."""
    h = torch.tanh(x @ w)
    return (h @ w.t()).sigmoid() * 3


KERNEL_PROGRAMS = {
    "scaled_seed_chain": (scaled_seed_chain, ((8, 8), (8, 8))),
    "linear_gelu": (linear_gelu, ((8, 16), (16, 8))),
    "softmax_scaled": (softmax_scaled, ((4, 32), (4, 32))),
    "two_outputs": (two_outputs, ((6, 10), (6, 10))),
    "matmul_chain": (matmul_chain, ((8, 12), (12, 12))),
}


# --- GPU: live when CUDA is present, recorded otherwise ---------------------------------------

def gpu_reference() -> tuple[dict, str]:
    """The GPU numbers and Triton source recorded by the course authors (see ``assets/gpu``)."""
    return json.loads(GPU_TIMINGS.read_text(encoding="utf-8")), GPU_TRITON.read_text(encoding="utf-8")


def _gpu_median_us(fn, *args) -> float:
    from benchmarking import compare
    return compare({"fn": fn}, *args, warmup=5, repeats=21, number=10, device="cuda")["fn"].median * 1e6


def gpu_demo() -> tuple[dict, str]:
    """Measure on this machine's GPU what :func:`gpu_reference` recorded (same keys)."""
    from benchmarking import describe_hardware
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    x = torch.randn(64 * 2**20, device="cuda")
    compiled_chain = torch.compile(seed_chain)
    _, code = run_and_get_code(compiled_chain, x)
    eager_us, compiled_us = _gpu_median_us(seed_chain, x), _gpu_median_us(compiled_chain, x)
    model, batch = MyModel().cuda().eval(), torch.randn(32, 100, device="cuda")
    with torch.no_grad():
        tiny = {"eager_us": _gpu_median_us(model, batch),
                "compiled_default_us": _gpu_median_us(torch.compile(model), batch),
                "compiled_reduce_overhead_us": _gpu_median_us(torch.compile(model, mode="reduce-overhead"), batch)}
    timings = {"hardware": describe_hardware("cuda"), "torch": torch.__version__,
               "measured_on": datetime.date.today().isoformat(),
               "pointwise_chain": {"numel": x.numel(), "eager_us": eager_us, "compiled_us": compiled_us,
                                   "speedup": eager_us / compiled_us},
               "tiny_mlp": tiny}
    return timings, "\n".join(code)
