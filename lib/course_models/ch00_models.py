"""Chapter 00 (comparison and selection guide): the seeds' models, the workloads the
grader times or profiles, and the two diagrams of the chapter as graph data.

- ``MyModel`` and ``Classifier`` are seed 000's examples; ``PointwiseChain`` is the
  memory-bound workload where ``torch.compile`` pays off on a CPU.
- ``technology_table`` runs one model under every technology the chapter compares and
  reports first-call time, interleaved median latency and graph count.
- ``ColdStartWorkload`` / ``PausingWorkload`` / ``AsyncDevice`` have a *known* cost
  (``time.sleep``), so a learner's benchmark function can be graded against the truth.
- ``chip_workload`` / ``chip_profile`` / ``toychip_profile`` run small workloads on the toy
  chip's simulated clock (the truth the roofline exercises are checked against);
- ``training_steps`` gives a full training step, eager and compiled, for ``compare``;
  ``cuda_kernels`` lists the kernels one call launches on a GPU.
- ``stack_view`` / ``decision_tree_view`` are plain graph data for ``graphviews.show``.
"""
from __future__ import annotations

import functools
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn

from benchmarking import Comparison, compare
from graphviews import GraphView, register_kind

# ----------------------------------------------------------------------------- models


class MyModel(nn.Module):
    """Seed 000's ``MyModel``: Linear(100, 50) → relu → Linear(50, 10), used at batch 32."""

    def __init__(self):
        super().__init__()
        self.layer1 = nn.Linear(100, 50)
        self.layer2 = nn.Linear(50, 10)

    def forward(self, x):
        x = torch.relu(self.layer1(x))
        return self.layer2(x)


class Classifier(nn.Module):
    """Seed 000's ``Classifier``: 784 → 256 → 128 → 10 with ReLUs."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(784, 256), nn.ReLU(),
            nn.Linear(256, 128), nn.ReLU(),
            nn.Linear(128, 10),
        )

    def forward(self, x):
        return self.net(x)


class PointwiseChain(nn.Module):
    """``((x.sin() + x.cos()) * 2).relu() - 0.5``: six elementwise ATen ops in eager mode
    (sin, cos, add, mul, relu, sub), each a pass over memory; one fused loop when compiled."""

    def forward(self, x):
        return ((x.sin() + x.cos()) * 2).relu() - 0.5


class ImageClassifier(nn.Module):
    """Flattens ``(B, 1, 28, 28)`` images before an MLP: a view whose size depends on the batch."""

    def __init__(self, hidden: int = 32):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


class GatedPair(nn.Module):
    """Two batched inputs that meet in one product: their batch sizes must be the same symbol."""

    def __init__(self, features: int = 16, out: int = 8):
        super().__init__()
        self.fc = nn.Linear(features, out)
        self.gate = nn.Linear(features, out)

    def forward(self, x, g):
        return self.fc(x) * torch.sigmoid(self.gate(g))


class RandomMLP(nn.Module):
    """An MLP of random widths (the grader's hidden cases)."""

    def __init__(self, widths: list[int]):
        super().__init__()
        layers: list[nn.Module] = []
        for a, b in zip(widths, widths[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers[:-1])

    def forward(self, x):
        return self.net(x)


def seed_workloads() -> dict[str, tuple[nn.Module, torch.Tensor]]:
    """The three workloads of the chapter's comparison table, in eval mode with their inputs."""
    return {
        "MyModel (batch 32)": (MyModel().eval(), torch.randn(32, 100)),
        "Classifier (batch 32)": (Classifier().eval(), torch.randn(32, 784)),
        "PointwiseChain (4M floats)": (PointwiseChain(), torch.randn(4_000_000)),
    }


# ------------------------------------------------------------- the technology table

def _without_jit_warnings(make: Callable, *args):
    """``torch.jit`` is deprecated in 2.13; the table shows it on purpose, quietly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make(*args)


def _builders(model: nn.Module, example: torch.Tensor) -> dict[str, Callable[[], Callable]]:
    """How each technology turns the model into something callable."""
    return {
        "eager": lambda: model,
        "torch.compile": lambda: torch.compile(model),
        "torch.export": lambda: torch.export.export(model, (example,)).module(),
        "jit.script": lambda: _without_jit_warnings(torch.jit.script, model),
        "jit.trace": lambda: _without_jit_warnings(torch.jit.trace, model, (example,)),
    }


def _graph_count(name: str, model: nn.Module, example: torch.Tensor) -> int:
    """Graphs the technology runs: Dynamo may split a function, export and TorchScript never do
    (they produce one graph or fail), eager builds none."""
    if name == "eager":
        return 0
    if name == "torch.compile":
        return torch._dynamo.explain(model)(example).graph_count
    return 1


@dataclass
class TechnologyRow:
    workload: str
    technology: str
    first_call_s: float
    median_us: float
    vs_eager: float
    graphs: int


def technology_table(name: str, model: nn.Module, example: torch.Tensor, *, repeats: int = 11,
                     number: int = 1) -> tuple[list[TechnologyRow], Comparison]:
    """Build + first call of every technology (timed once, as a user waits for it), then
    interleaved steady-state medians with :func:`benchmarking.compare`."""
    torch._dynamo.reset()
    ready, first = {}, {}
    with torch.no_grad():
        for technology, build in _builders(model, example).items():
            start = time.perf_counter()
            ready[technology] = build()
            ready[technology](example)
            first[technology] = time.perf_counter() - start
        result = compare(ready, example, warmup=2, repeats=repeats, number=number)
        rows = [TechnologyRow(name, t, first[t], result[t].median * 1e6, result.ratio(t, "eager"),
                              _graph_count(t, model, example)) for t in ready]
    return rows, result


def format_rows(rows: list[TechnologyRow]) -> str:
    """The comparison table as aligned text."""
    lines = [f"{'workload':28} {'technology':14} {'first call s':>12} {'median µs':>11} {'vs eager':>9} {'graphs':>6}"]
    for r in rows:
        lines.append(f"{r.workload:28} {r.technology:14} {r.first_call_s:12.3f} {r.median_us:11.1f} "
                     f"{r.vs_eager:8.2f}× {r.graphs:6d}")
    return "\n".join(lines)


def cuda_kernels(fn: Callable, *args) -> list[str]:
    """Names of the CUDA kernels one call of ``fn(*args)`` launches, read from the profiler
    after an untimed call (so that a compile is not counted)."""
    fn(*args)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA], acc_events=True) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return [event.name for event in prof.events() if event.device_type == torch.autograd.DeviceType.CUDA]


def training_steps(make_model: Callable[[], nn.Module], x: torch.Tensor, labels: torch.Tensor) -> dict[str, Callable]:
    """One full training step (forward, cross-entropy, backward, SGD update) of two identical
    models, one eager and one compiled, as zero-argument callables for :func:`compare`."""
    eager = make_model()
    compiled = make_model()
    compiled.load_state_dict(eager.state_dict())
    compiled.compile()

    def step_of(model: nn.Module) -> Callable[[], None]:
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

        def step():
            optimizer.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x), labels).backward()
            optimizer.step()
        return step
    return {"eager": step_of(eager), "torch.compile": step_of(compiled)}


# ------------------------------------------------- workloads with a known true cost

def _sleep(seconds: float) -> None:
    if seconds > 0:
        time.sleep(seconds)


class ColdStartWorkload:
    """The first ``cold_calls`` calls take ``cold_s`` (a compile, a cache fill), every later
    call ``steady_s``: what a benchmark must not average in."""

    def __init__(self, steady_s: float, cold_calls: int, cold_s: float):
        self.steady_s, self.cold_calls, self.cold_s = steady_s, cold_calls, cold_s
        self.calls = 0

    def __call__(self, *args):
        self.calls += 1
        _sleep(self.call_s(self.calls))

    def call_s(self, n: int) -> float:
        """The true cost of the ``n``-th call (1-based)."""
        return self.cold_s if n <= self.cold_calls else self.steady_s

    @property
    def disturbance_s(self) -> float:
        """The extra cost a dishonest benchmark folds into its median (0: none to fold)."""
        return self.cold_s if self.cold_calls else 0.0

    def synchronize(self) -> None:
        """Nothing runs asynchronously here (a CPU)."""


class PausingWorkload(ColdStartWorkload):
    """Steady calls, except every ``period``-th call also pauses ``pause_s`` (a garbage
    collection, another process): outliers a mean is dragged by and a median is not."""

    def __init__(self, steady_s: float, period: int, pause_s: float):
        super().__init__(steady_s, 0, 0.0)
        self.period, self.pause_s = period, pause_s

    def call_s(self, n: int) -> float:
        return self.steady_s + (self.pause_s if n % self.period == 0 else 0.0)

    @property
    def disturbance_s(self) -> float:
        return self.pause_s


class AsyncDevice(ColdStartWorkload):
    """Like a GPU: a call only *queues* ``steady_s`` of work and returns at once;
    ``synchronize()`` waits until the queue is empty (``torch.cuda.synchronize``)."""

    def __init__(self, steady_s: float, cold_calls: int = 0, cold_s: float = 0.0):
        super().__init__(steady_s, cold_calls, cold_s)
        self.busy_until = 0.0

    def __call__(self, *args):
        self.calls += 1
        self.busy_until = max(self.busy_until, time.perf_counter()) + self.call_s(self.calls)

    def synchronize(self) -> None:
        _sleep(self.busy_until - time.perf_counter())


# ------------------------------------------------------------ toy chip workloads

class PointwiseSteps(nn.Module):
    """``steps`` rounds of ``(x * 2 + 1).relu() - 0.5``: four small kernels per round."""

    def __init__(self, steps: int):
        super().__init__()
        self.steps = steps

    def forward(self, x):
        for _ in range(self.steps):
            x = (x * 2 + 1).relu() - 0.5
        return x


class MatmulRelu(nn.Module):
    """``relu(a @ b)``: one matmul, one pointwise kernel."""

    def forward(self, a, b):
        return torch.relu(a @ b)


class BatchedAttentionScores(nn.Module):
    """``softmax(q @ k^T * scale) @ v`` over a batch: views, batched matmuls and a reduction."""

    def forward(self, q, k, v):
        scores = torch.bmm(q, k.transpose(1, 2)) * (q.shape[-1] ** -0.5)
        return torch.bmm(torch.softmax(scores, dim=-1), v)


class RowNormalize(nn.Module):
    """Centre each row and scale it by its largest magnitude: two reductions with
    ``keepdim`` whose results are broadcast back over the rows."""

    def forward(self, x):
        centered = x - x.mean(dim=-1, keepdim=True)
        return centered / (centered.abs().amax(dim=-1, keepdim=True) + 1.0)


class BiasReluSum(nn.Module):
    """``relu(2x + bias)`` written in place (``add_``, ``relu_``), summed over the batch:
    in-place kernels, a broadcast bias and a reduction."""

    def forward(self, x, bias):
        h = x * 2.0
        h.add_(bias)
        return h.relu_().sum(dim=0)


def _mlp(batch: int, widths: tuple[int, ...]):
    return RandomMLP(list(widths)).eval(), (torch.randn(batch, widths[0]),)


def _pointwise(n: int, steps: int, dtype: torch.dtype = torch.float32):
    return PointwiseSteps(steps), (torch.randn(n, dtype=dtype),)


def _matmul(m: int, k: int, n: int):
    return MatmulRelu(), (torch.randn(m, k), torch.randn(k, n))


def _attention(batch: int, seq: int, dim: int):
    return BatchedAttentionScores(), tuple(torch.randn(batch, seq, dim) for _ in range(3))


def _normalize(rows: int, cols: int):
    return RowNormalize(), (torch.randn(rows, cols),)


def _inplace(batch: int, features: int):
    return BiasReluSum(), (torch.randn(batch, features), torch.randn(features))


CHIP_WORKLOADS: dict[str, Callable] = {"mlp": _mlp, "pointwise": _pointwise, "matmul": _matmul,
                                       "attention": _attention, "normalize": _normalize, "inplace": _inplace}


def chip_workload(kind: str, params: tuple) -> tuple[nn.Module, tuple]:
    """A fresh workload of :data:`CHIP_WORKLOADS` on the CPU: the module and its inputs."""
    return CHIP_WORKLOADS[kind](*params)


def chip_profile(fn: nn.Module, inputs: tuple, **spec_fields) -> dict:
    """Run ``fn`` on the toy chip (a copy of it; the inputs are copied there before the clock
    starts) and return the profile summary with the per-kernel totals under ``"kernels"``."""
    import copy

    import toychip  # registers the device; only the chip workloads need it

    spec = toychip.ChipSpec(**spec_fields)
    on_chip = copy.deepcopy(fn).to("toychip")
    chip_inputs = tuple(t.to("toychip") for t in inputs)
    with torch.no_grad(), toychip.profile(spec) as p:
        on_chip(*chip_inputs)
    summary = p.summary()
    assert summary["copies"] == 0, "chip workloads must run entirely on the chip"
    kernels = {name: {"calls": s.calls, "bytes": s.bytes, "flops": s.flops} for name, s in p.kernels.items()}
    return {**summary, "kernels": kernels, "launch_us": spec.launch_us,
            "mem_bytes_per_us": spec.mem_bytes_per_us, "flops_per_us": spec.flops_per_us}


@functools.lru_cache(maxsize=64)
def _profile_cached(kind: str, params: tuple, spec_fields: tuple) -> dict:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return chip_profile(*chip_workload(kind, params), **dict(spec_fields))


def toychip_profile(kind: str, params: tuple, **spec_fields) -> dict:
    """Run workload ``kind`` (see :data:`CHIP_WORKLOADS`) on the toy chip with the given
    ChipSpec fields; the profile summary and the chip's data sheet as one plain dict."""
    data = _profile_cached(kind, tuple(params), tuple(sorted(spec_fields.items())))
    return {key: data[key] for key in ("time_us", "launches", "bytes", "flops",
                                       "launch_us", "mem_bytes_per_us", "flops_per_us")}


# --------------------------------------------------------------------- diagrams

for _kind, _color, _meaning in [
        ("api", "#f9cb9c", "用户 API (API)"), ("capture", "#cfe2f3", "图捕获 (capture)"),
        ("ir", "#d9ead3", "中间表示 (IR)"), ("backend", "#d9d2e9", "后端 (backend)"),
        ("deploy", "#fff2cc", "部署 (deployment)"), ("runtime", "#eeeeee", "运行时 (runtime)"),
        ("answer", "#d9ead3", "选择 (answer)")]:
    register_kind(_kind, meaning=_meaning, fillcolor=_color)
register_kind("question", meaning="问题 (question)", shape="diamond", fillcolor="#fce5cd")
register_kind("legacy", meaning="旧技术 (legacy)", fillcolor="#f4cccc", style="filled,dashed")

STACK_NODES = [
    # id, label, kind, details
    ("user", "你的 PyTorch 代码", "api", ["nn.Module / 函数"]),
    ("eager", "Eager 即时执行", "runtime", ["一个算子接一个算子（第 01 章）"]),
    ("compile", "torch.compile", "api", ["一行加速（第 01 章）"]),
    ("export", "torch.export", "api", ["整图导出 → ExportedProgram", "默认 strict=False：Python 追踪 + 假张量"]),
    ("fx", "torch.fx", "ir", ["图 IR + 图变换工具（第 03 章）"]),
    ("dynamo", "TorchDynamo", "capture", ["PEP 523 字节码捕获 + guards（第 05 章）"]),
    ("aot", "AOTAutograd", "capture", ["ATen 级前向/反向图（第 06 章）"]),
    ("inductor", "TorchInductor", "backend", ["默认后端：CPU 生成 C++/OpenMP，GPU 生成 Triton"]),
    ("custom", "自定义后端", "backend", ["如 toychip（第 08 章）"]),
    ("aoti", "AOTInductor", "deploy", [".pt2 包，C++ 无需 Python"]),
    ("executorch", "ExecuTorch", "deploy", [".pte，手机/边缘设备"]),
    ("onnx", "ONNX", "deploy", ["torch.onnx.export(dynamo=True)"]),
    ("lazy", "Lazy Tensor / torch_xla", "capture", ["延迟执行，TPU（第 04 章）"]),
    ("dispatcher", "Dispatcher 调度器", "runtime", ["按 DispatchKey 选实现（第 07 章）"]),
    ("kernels", "设备内核", "runtime", ["CPU / CUDA / PrivateUse1（新芯片）"]),
    ("torchscript", "TorchScript", "legacy", ["已弃用，运行时警告（第 02 章）"]),
]
STACK_EDGES = [
    ("user", "eager", ""), ("user", "compile", ""), ("user", "export", ""), ("user", "lazy", ""),
    ("user", "torchscript", "旧路径"), ("user", "fx", "symbolic_trace"),
    ("compile", "dynamo", ""), ("export", "dynamo", "strict=True"), ("export", "aot", "strict=False（默认）"),
    ("dynamo", "aot", "FX 图（torch 级）"), ("aot", "inductor", "FX 图（ATen 级）"), ("aot", "custom", ""),
    ("export", "aoti", "ExportedProgram"), ("export", "executorch", ""), ("export", "onnx", ""),
    ("inductor", "kernels", "生成的内核"), ("custom", "kernels", ""),
    ("eager", "dispatcher", ""), ("lazy", "dispatcher", ""), ("torchscript", "dispatcher", ""),
    ("dispatcher", "kernels", ""),
]
STACK_CLUSTERS = [
    ("capture", "图捕获 (graph capture)", ["dynamo", "aot", "fx"]),
    ("backends", "编译后端 (backends)", ["inductor", "custom"]),
    ("deploy", "部署 (deployment, 不需要 Python)", ["aoti", "executorch", "onnx"]),
    ("runtime", "运行时 (runtime)", ["dispatcher", "kernels"]),
]


def stack_view() -> GraphView:
    """The PyTorch 2.13 stack at a glance (seed 001's diagram, corrected and drawn)."""
    view = GraphView(title="PyTorch 2.13 技术栈")
    for node_id, label, kind, details in STACK_NODES:
        view.add_node(node_id, label, kind, details)
    for src, dst, label in STACK_EDGES:
        view.add_edge(src, dst, label)
    for name, label, members in STACK_CLUSTERS:
        view.add_cluster(name, label, members)
    return view


DECISION_NODES = [
    ("hw", "硬件是什么？", "question"),
    ("goal", "目的是什么？", "question"),
    ("where", "模型在哪里运行？", "question"),
    ("tiny", "eager 单次调用 ≲ 编译后每次多付的开销？", "question"),
    ("long", "总运行时间 ≫ 首次编译时间？", "question"),
    ("xla", "torch_xla", "answer"),
    ("p1", "PrivateUse1+custom backend", "answer"),
    ("dbg", "eager", "answer"),
    ("fxa", "torch.fx", "answer"),
    ("aotia", "torch.export+AOTInductor", "answer"),
    ("et", "ExecuTorch", "answer"),
    ("onnxa", "ONNX", "answer"),
    ("eager_small", "eager", "answer"),
    ("eager_short", "eager", "answer"),
    ("tc", "torch.compile", "answer"),
]
DECISION_EDGES = [
    ("hw", "xla", "TPU"), ("hw", "p1", "新芯片"), ("hw", "goal", "CPU / CUDA"),
    ("goal", "dbg", "调试"), ("goal", "fxa", "改写图"), ("goal", "where", "部署"), ("goal", "tiny", "加速（Python 内）"),
    ("where", "aotia", "C++ 服务器"), ("where", "et", "手机 / 边缘"), ("where", "onnxa", "其他推理引擎"),
    ("tiny", "eager_small", "是"), ("tiny", "long", "否"),
    ("long", "eager_short", "否"), ("long", "tc", "是"),
]


def decision_tree_view() -> GraphView:
    """Which technology to use, as a decision tree (seed 000's guide, updated for 2.13)."""
    view = GraphView(title="选型决策树 (PyTorch 2.13)", direction="LR")
    for node_id, label, kind in DECISION_NODES:
        view.add_node(node_id, label, kind)
    for src, dst, label in DECISION_EDGES:
        view.add_edge(src, dst, label)
    return view
