"""Functions and models for chapter 01 (torch.compile), shared by the notebook and the grader.

Each function shows one thing: a pointwise chain (where compile wins), the seed's tiny
MLP (where it loses), code full of graph breaks (what the exercises rewrite), small
programs whose Inductor output the learner reads, and the GPU numbers recorded on real
hardware for learners without a GPU (:func:`gpu_reference`, :func:`gpu_demo`).
"""
from __future__ import annotations

import datetime
import functools
import json
from pathlib import Path

import torch
import torch.nn as nn

from .ch00_models import MyModel

GPU_ASSETS = Path(__file__).resolve().parents[2] / "assets" / "gpu"
GPU_TIMINGS, GPU_TRITON = GPU_ASSETS / "ch01_gpu_timings.json", GPU_ASSETS / "ch01_triton_pointwise.py"

__all__ = ["MyModel", "seed_chain", "pointwise_chain", "BREAK_SUSPECTS", "running_stats", "adaptive_clip",
           "RECORDER_PROGRAMS", "KERNEL_PROGRAMS", "EncoderBlock", "EncoderStack", "ENCODER_SIZES",
           "encoder_workload", "compile_regions", "training_step", "seed_chain_first_call",
           "encoder_first_step", "BisectProgram", "Stage", "pipeline", "fold_constant_muls",
           "gpu_reference", "gpu_demo"]


# --- where compile wins and loses ----------------------------------------------------

def seed_chain(x):
    """Seed 000's eager example ``relu((x + 1) * 2 - 0.5)``: four pointwise ops, one fused kernel."""
    return torch.relu((x + 1) * 2 - 0.5)


def pointwise_chain(x):
    """A pointwise chain: eager writes every intermediate to memory, Inductor none."""
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


RECORDER_PROGRAMS = {f.__name__: f for f in (value_branch, shape_branch, dtype_branch, where_branch, list_append,
                                              item_call, print_call, seed_chain, pointwise_chain, running_stats,
                                              adaptive_clip)}
"""Functions whose graphs the recorder exercise (01.graph_recorder) counts: breaks written in
straight-line code (a break inside a loop makes Dynamo skip the whole frame, with no graph)."""


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


def attention(q, k):
    """Batched matmuls (library calls ``bmm``) around a softmax fused into one kernel."""
    scores = torch.softmax(q @ k.transpose(1, 2), dim=-1)
    return scores @ k


def mlp_bias(x, w, b):
    """Two matmuls with a bias (library calls ``addmm``), each followed by a pointwise kernel."""
    h = torch.relu(torch.addmm(b, x, w))
    return torch.addmm(b, h, w).tanh()


def linear_sigmoid(x, w, b):
    """``nn.functional.linear`` with a bias: one library call ``addmm``, then a pointwise kernel."""
    return torch.nn.functional.linear(x, w, b).sigmoid()


def scores_bias(b, q, k):
    """Two batched products plus a bias (library calls ``baddbmm``) with a ReLU between."""
    h = torch.baddbmm(b, q, k).relu()
    return torch.baddbmm(b, h, h.transpose(1, 2))


KERNEL_PROGRAMS = {
    "scaled_seed_chain": (scaled_seed_chain, ((8, 8), (8, 8))),
    "linear_gelu": (linear_gelu, ((8, 16), (16, 8))),
    "softmax_scaled": (softmax_scaled, ((4, 32), (4, 32))),
    "two_outputs": (two_outputs, ((6, 10), (6, 10))),
    "matmul_chain": (matmul_chain, ((8, 12), (12, 12))),
    "attention": (attention, ((2, 4, 8), (2, 4, 8))),
    "mlp_bias": (mlp_bias, ((8, 8), (8, 8), (8,))),
    "linear_sigmoid": (linear_sigmoid, ((8, 12), (6, 12), (6,))),
    "scores_bias": (scores_bias, ((2, 4, 4), (2, 4, 8), (2, 8, 4))),
}


# --- a real model: inference, a training step, whole-model and regional compilation --------

class EncoderBlock(nn.Module):
    """One ``nn.TransformerEncoderLayer`` in a module of our own. Dynamo does not start
    tracing at a frame inside ``torch.nn`` (it only inlines them), so
    ``nn.TransformerEncoderLayer(...).compile()`` silently compiles nothing; this wrapper's
    ``forward`` is a frame it does trace."""

    def __init__(self, d_model: int, nhead: int, ff: int):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model, nhead, ff, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


class EncoderStack(nn.Module):
    """``layers`` identical encoder blocks and a linear head: the repeated block is what
    regional compilation compiles once and reuses."""

    def __init__(self, d_model: int, nhead: int, layers: int, ff: int):
        super().__init__()
        self.layers = nn.ModuleList(EncoderBlock(d_model, nhead, ff) for _ in range(layers))
        self.head = nn.Linear(d_model, d_model)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


ENCODER_SIZES = {
    "cpu": {"d_model": 64, "nhead": 4, "layers": 4, "ff": 128, "batch": 8, "seq": 32},
    "cuda": {"d_model": 512, "nhead": 8, "layers": 6, "ff": 2048, "batch": 32, "seq": 256},
}
"""Small enough for a 2-core CPU notebook; large enough on a GPU to be worth a kernel each."""


def encoder_workload(device: str = "cpu", seed: int = 0) -> tuple[EncoderStack, torch.Tensor, torch.Tensor]:
    """A fresh ``EncoderStack`` on ``device`` with an input batch and a regression target."""
    sizes = ENCODER_SIZES["cuda" if str(device).startswith("cuda") else "cpu"]
    torch.manual_seed(seed)
    model = EncoderStack(sizes["d_model"], sizes["nhead"], sizes["layers"], sizes["ff"]).to(device)
    x = torch.randn(sizes["batch"], sizes["seq"], sizes["d_model"], device=device)
    return model, x, torch.randn_like(x)


def compile_regions(model: EncoderStack) -> EncoderStack:
    """Regional compilation: compile each repeated block in place (``Module.compile``), not the
    whole model; identical blocks share one compiled graph, so the compile time stays that of one."""
    for layer in model.layers:
        layer.compile()
    return model


def training_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, target: torch.Tensor):
    """One full step: forward, MSE loss, backward, optimizer update."""
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
    return loss


def seed_chain_first_call():
    """For :func:`benchmarking.compile_timing.cold_and_warm_first_call`: the seed chain, compiled."""
    compiled, x = torch.compile(seed_chain), torch.randn(2**20)
    return lambda: compiled(x)


def encoder_first_step(device: str = "cpu", regional: bool = False):
    """For :func:`benchmarking.compile_timing.cold_and_warm_first_call`: one training step of the
    encoder, compiled whole (``model.compile()``) or per block; the step synchronises a GPU."""
    model, x, target = encoder_workload(device)
    compile_regions(model) if regional else model.compile()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        training_step(model, optimizer, x, target)
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()
    return step


# --- GPU: live when CUDA is present, recorded otherwise ---------------------------------------

def gpu_reference() -> tuple[dict, str]:
    """The GPU numbers and Triton source recorded by the course authors (see ``assets/gpu``)."""
    return json.loads(GPU_TIMINGS.read_text(encoding="utf-8")), GPU_TRITON.read_text(encoding="utf-8")


def _gpu_median_us(fn, *args) -> float:
    from benchmarking import compare
    return compare({"fn": fn}, *args, warmup=5, repeats=21, number=20, device="cuda")["fn"].median * 1e6


def gpu_demo() -> tuple[dict, str]:
    """Measure on this machine's GPU what :func:`gpu_reference` recorded for the pointwise
    chain (with the copy roofline of the same run) and the tiny MLP (same keys)."""
    from benchmarking import describe_hardware
    from benchmarking.roofline import COPY, compare_with_copy
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    x = torch.randn(64 * 2**20, device="cuda")
    compiled_chain = torch.compile(seed_chain)
    _, code = run_and_get_code(compiled_chain, x)
    roof = compare_with_copy({"eager": seed_chain, "compiled": compiled_chain}, x, warmup=5, repeats=21,
                             number=50, device="cuda")
    model, batch = MyModel().cuda().eval(), torch.randn(32, 100, device="cuda")
    with torch.no_grad():
        tiny = {"eager_us": _gpu_median_us(model, batch),
                "compiled_default_us": _gpu_median_us(torch.compile(model), batch),
                "compiled_reduce_overhead_us": _gpu_median_us(torch.compile(model, mode="reduce-overhead"), batch)}
    chain = {"numel": x.numel(), "eager_us": roof["eager"].median * 1e6, "compiled_us": roof["compiled"].median * 1e6,
             "copy_us": roof[COPY].median * 1e6, "speedup": roof["eager"].median / roof["compiled"].median,
             "compiled_fraction_of_copy": roof.fraction("compiled"), "compiled_gbs": roof.bandwidth_gbs("compiled"),
             "copy_gbs": roof.bandwidth_gbs(COPY)}
    timings = {"hardware": describe_hardware("cuda"), "torch": torch.__version__,
               "measured_on": datetime.date.today().isoformat(), "method": "benchmarking.compare (CUDA events)",
               "pointwise_chain": chain, "tiny_mlp": tiny}
    return timings, "\n".join(code)


# --- bisecting the pipeline (exercise 01.bisect_backends) -------------------------------------

class BisectProgram:
    """A picklable chain of named steps, e.g. ``["scale", "gelu", "relu"]``."""

    STEPS = {
        "scale": lambda x: x * 1.7 * 0.3,            # two constant multiplies: a folding pass's target
        "gelu": torch.nn.functional.gelu,
        "relu": torch.relu,
        "tanh": torch.tanh,
        "shift": lambda x: x - 0.25,
        "square": lambda x: x * x,
    }

    def __init__(self, steps: list[str]):
        self.steps = list(steps)

    def __call__(self, x):
        for step in self.steps:
            x = self.STEPS[step](x)
        return x


def _boxed(gm, example_inputs):
    from functorch.compile import make_boxed_func
    return make_boxed_func(gm.forward)


def _gelu_tanh(x, approximate="none"):
    """A wrong decomposition of exact GELU: the tanh approximation (off by up to ~1e-3)."""
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def fold_constant_muls(gm, *, bug: bool = False):
    """Graph pass: ``mul(mul(x, a), b)`` with Python numbers ``a``, ``b`` → ``mul(x, a * b)``
    (equal up to rounding, not bit for bit); the injected bug folds to ``a + b``."""
    aten = torch.ops.aten
    for node in list(gm.graph.nodes):
        inner = node.args[0] if node.target == aten.mul.Tensor and node.args else None
        if (isinstance(inner, torch.fx.Node) and inner.target == aten.mul.Tensor and len(inner.users) == 1
                and isinstance(node.args[1], (int, float)) and isinstance(inner.args[1], (int, float))):
            a, b = inner.args[1], node.args[1]
            node.args = (inner.args[0], a + b if bug else a * b)
            gm.graph.erase_node(inner)
    gm.graph.lint()
    gm.recompile()
    return gm


class ChipKernels(torch.fx.Interpreter):
    """The last stage, a tiny "code generator": runs each ATen op through a kernel table;
    the injected bug implements ReLU as ``abs`` (right for x ≥ 0 only)."""

    def __init__(self, gm, bug: bool):
        super().__init__(gm)
        self.bug = bug

    def call_function(self, target, args, kwargs):
        if self.bug and target == torch.ops.aten.relu.default:
            return torch.abs(args[0])
        return super().call_function(target, args, kwargs)


@functools.cache
def _core_decompositions() -> dict:
    """PyTorch's core ATen decomposition table; building it takes about 0.15 s, so once."""
    from torch._decomp import core_aten_decompositions
    return dict(core_aten_decompositions())


class Stage:
    """One stage of a compile pipeline, usable as ``torch.compile(fn, backend=Stage(...))``.
    Stages are cumulative: each runs everything before it, then its own step.

    - ``dynamo``: Dynamo's FX graph, run as is (``backend="eager"``);
    - ``aot``: + AOTAutograd to an ATen graph (``backend="aot_eager"``);
    - ``decompose``: + decompositions of composite ops;
    - ``graph_pass``: + a pass folding constant multiplies;
    - ``codegen``: + running each op through our own kernel table.

    ``bug`` names the stage whose step is broken (or ``None``)."""

    ORDER = ("dynamo", "aot", "decompose", "graph_pass", "codegen")

    def __init__(self, name: str, bug: str | None = None):
        self.name, self.bug = name, bug

    def _includes(self, step: str) -> bool:
        return self.ORDER.index(step) <= self.ORDER.index(self.name)

    def _compile_aten(self, gm, example_inputs):
        if self._includes("graph_pass"):
            gm = fold_constant_muls(gm, bug=self.bug == "graph_pass")
        if not self._includes("codegen"):
            return _boxed(gm, example_inputs)
        from functorch.compile import make_boxed_func
        interpreter_bug = self.bug == "codegen"
        return make_boxed_func(lambda *args: ChipKernels(gm, interpreter_bug).run(*args))

    def __call__(self, gm, example_inputs):
        if self.name == "dynamo":
            return gm.forward
        from torch._dynamo.backends.common import aot_autograd

        decompositions = {}
        if self._includes("decompose"):
            decompositions = dict(_core_decompositions())
            if self.bug == "decompose":
                decompositions[torch.ops.aten.gelu.default] = _gelu_tanh
        return aot_autograd(fw_compiler=self._compile_aten, decompositions=decompositions)(gm, example_inputs)

    def __repr__(self) -> str:
        return f"Stage({self.name!r})"


def pipeline(bug: str | None = None) -> list[tuple[str, Stage]]:
    """The stages in order, as ``(name, backend)`` pairs, with the bug injected where named."""
    return [(name, Stage(name, bug)) for name in Stage.ORDER]
