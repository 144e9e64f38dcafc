"""Chapter 08's programs and models (porting PyTorch to the toy chip), shared by the
notebook and its exercises: allocation traces, graphs to partition, steps to plan a port for
and the capstone's conv net. Everything runs on the deterministic simulated clock."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import operator
import os
import random
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

import toychip
from toychip import loops, spec as chip_spec

KIB, MIB = 1024, 1024 * 1024


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + " …"


# --- a device registered from Python only (section 1) --------------------------------------

PYTHON_ONLY_SCRIPT = textwrap.dedent("""
    import json
    import torch
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    _setup_privateuseone_for_python_backend("pyonly")   # PyTorch's placeholder guard and hooks
    t = torch._C._acc.create_empty_tensor([3], torch.float32)
    report = {"device_count": torch.accelerator.device_count(), "tensor": str(t.device),
              "data_ptr": t.data_ptr(), "stream": torch.Stream(device="pyonly").stream_id}
    for name, call in [("torch.accelerator.synchronize()", torch.accelerator.synchronize),
                       ("tensor.pin_memory()", lambda: torch.randn(2).pin_memory()),
                       ("torch.Generator('pyonly')", lambda: torch.Generator("pyonly"))]:
        try:
            call()
            report[name] = "ok"
        except Exception as error:
            report[name] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
    print(json.dumps(report))
""")


def python_only_backend() -> dict:
    """What a device registered from Python alone gets, asked in a fresh interpreter (where
    ``PrivateUse1`` is not yet the chip's, and torch's autoloading is off): its device count,
    a tensor's device and ``data_ptr``, a new stream's id, and what three calls answer."""
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    run = subprocess.run([sys.executable, "-c", PYTHON_ONLY_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    return json.loads(run.stdout)


# --- the backend YAML as torchgen reads it (section 3.1) ------------------------------------

@functools.cache
def _aten_native_functions() -> tuple:
    """ATen's native_functions.yaml as torchgen parses it (the copy in torchgen/packaged)."""
    import torchgen
    from torchgen.gen import get_grouped_native_functions, parse_native_yaml

    root = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native"
    parsed = parse_native_yaml(str(root / "native_functions.yaml"), str(root / "tags.yaml"))
    return get_grouped_native_functions(parsed.native_functions), parsed.backend_indices


def torchgen_reads(path: Path) -> str:
    """What torchgen's own parser of backend YAMLs (``parse_backend_yaml`` in
    ``torchgen/gen_backend_stubs.py``) makes of ``path``: accepted with its backend key,
    namespace and op count, or rejected with torchgen's reason."""
    from torchgen.gen_backend_stubs import parse_backend_yaml

    grouped, indices = _aten_native_functions()
    try:
        parsed = parse_backend_yaml(str(path), grouped, dict(indices))
    except Exception as error:  # an AssertionError with its reason, or a crash on an entry it cannot read
        reason = str(error).strip().splitlines()[-1].strip().replace(str(path), Path(path).name)
        return f"拒绝（{type(error).__name__}）：{reason}"
    ops = parsed.backend_indices[parsed.backend_key].index
    return f"接受：backend={parsed.backend_key}, cpp_namespace={parsed.cpp_namespace}, {len(ops)} 个算子"


# --- Inductor, the default backend, on the chip (section 4.2) -------------------------------

def inductor_code(compiled, *inputs) -> str:
    """What Inductor generated for ``compiled(*inputs)`` (a ``torch.compile``'d function,
    run once here): each kernel's ``def`` and the wrapper's ``call``, without the module's
    imports and benchmark harness."""
    from torch._inductor.utils import run_and_get_code

    _, sources = run_and_get_code(compiled, *inputs)
    parts = []
    for source in sources:
        kernels = re.findall(r"^@loops\.kernel\(.*?(?=\n\n)", source, re.S | re.M)
        call = re.search(r"^    def call\(self, args\):.*?(?=^runner = )", source, re.S | re.M)
        parts += [*kernels, textwrap.dedent(call.group(0)) if call else ""]
    return "\n".join(part.rstrip() + "\n" for part in parts if part)


# --- split reductions on a chip with many compute units (section 4.3, 08.welford_combine) ----

# The toy chip's data sheet with eight compute units: Inductor splits long reductions with few results.
MANY_UNITS = dataclasses.replace(toychip.DEFAULT_SPEC, name="toychip-8cu", compute_units=8)


def _var_mean(x):
    return torch.var_mean(x, dim=1)


def _layer_norm(x, weight, bias):
    return F.layer_norm(x, x.shape[-1:], weight, bias)


def _batch_norm(x, weight, bias, running_mean, running_var):
    return F.batch_norm(x, running_mean, running_var, weight, bias, training=True, momentum=0.1)


# name -> (function, whether a training step runs it backward too)
SPLIT_PROGRAMS = {"var_mean": (_var_mean, False), "layer_norm": (_layer_norm, True), "batch_norm": (_batch_norm, True)}


def _split_inputs(program: str, shape: tuple, seed: int) -> list:
    """The program's seeded inputs: the data, whose mean drifts along the reduced dimension
    (so that chunks of it differ and a wrong combination of them shows), and for the norms
    their affine parameters and running statistics."""
    generator = torch.Generator().manual_seed(seed)
    reduced = 0 if program == "batch_norm" else 1  # the dimension the statistics reduce
    ramp = torch.linspace(0, 8, shape[reduced]).reshape([-1 if d == reduced else 1 for d in range(len(shape))])
    x = torch.randn(shape, generator=generator) * 3 + 5 + ramp
    if program == "var_mean":
        return [x]
    features = shape[-1] if program == "layer_norm" else shape[1]
    inputs = [x, torch.rand(features, generator=generator) + 0.5, torch.randn(features, generator=generator)]
    if program == "batch_norm":
        inputs += [torch.zeros(features), torch.ones(features)]
    return inputs


def _run_program(program: str, shape: tuple, seed: int, device: str, function) -> dict:
    """``function`` (the program, compiled or not) on the program's inputs on ``device``: the
    outputs, for the training programs the gradients of the inputs that require them (from
    a seeded output gradient), and the running statistics the batch norm updated."""
    trains = SPLIT_PROGRAMS[program][1]
    inputs = [t.to(device) for t in _split_inputs(program, shape, seed)]
    leaves = inputs[:3] if trains else []
    for t in leaves:
        t.requires_grad_()
    outputs = function(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    if trains:
        grad = torch.randn(outputs[0].shape, generator=torch.Generator().manual_seed(seed + 1))
        outputs[0].backward(grad.to(device))
    return {"outputs": [o.detach().cpu() for o in outputs], "grads": [t.grad.cpu() for t in leaves],
            "stats": [t.cpu() for t in inputs[3:]]}


def split_reduction_step(program: str, shape: tuple, seed: int = 0, combine=None) -> dict:
    """``SPLIT_PROGRAMS[program]`` compiled by the default ``torch.compile`` (Inductor) for the
    chip with :data:`MANY_UNITS`, its split reductions combined by ``combine(mean, m2, weight)``
    (``toychip.loops.use_welford_combine``; None: the chip's own, which has none). A first
    call compiles; the second is counted: its outputs, gradients, statistics and launches."""
    with many_units(), loops.use_welford_combine(combine or loops.welford_combine):
        compiled = _compiled_for_many_units(program)
        _run_program(program, shape, seed, "toychip", compiled)
        with toychip.profile() as p:
            result = _run_program(program, shape, seed, "toychip", compiled)
    return {**result, "launches": p.launches}


def split_reduction_on_cpu(program: str, shape: tuple, seed: int = 0) -> dict:
    """What :func:`split_reduction_step` computes, eager on the CPU."""
    return _run_program(program, shape, seed, "cpu", SPLIT_PROGRAMS[program][0])


@contextlib.contextmanager
def many_units():
    """The chip with :data:`MANY_UNITS` plugged in, for compiling and running; Dynamo keeps a
    graph per input shape (static shapes). Inductor's graph cache tells the specs apart: the
    chip keys it on its compute units (``toychip.inductor.CodegenVersion``)."""
    previous = chip_spec.set_spec(MANY_UNITS)
    try:
        with torch._dynamo.config.patch(recompile_limit=64, automatic_dynamic_shapes=False):
            yield
    finally:
        chip_spec.set_spec(previous)


@functools.cache
def _compiled_for_many_units(program: str):
    """``torch.compile`` of the program, run only under :func:`many_units`: each input shape
    compiles once per process, and since kernels look the combine function up when they run,
    one compilation serves every learner's."""
    return torch.compile(SPLIT_PROGRAMS[program][0], dynamic=False)


# --- allocation traces (08.allocator_policy) ------------------------------------------------

def layers_trace(rng: random.Random, layers: int, batch: int) -> list:
    """A training step's pattern: activations grow layer by layer, workspaces come and go,
    then the backward frees activations in reverse while gradients of other sizes appear."""
    trace = []
    for i in range(layers):
        width = rng.choice([64, 96, 128, 256, 384])
        trace.append(("alloc", f"act{i}", batch * width * 4))
        trace.append(("alloc", f"ws{i}", rng.choice([3, 5, 9, 17]) * KIB * rng.choice([1, 4])))
        trace.append(("free", f"ws{i}"))
    for i in reversed(range(layers)):
        trace.append(("alloc", f"grad{i}", rng.choice([1, 2, 3]) * KIB))
        trace.append(("free", f"act{i}"))
    for i in range(layers):
        trace.append(("free", f"grad{i}"))
    return trace


def churn_trace(rng: random.Random, steps: int) -> list:
    """Many short-lived buffers of mixed sizes, a few long-lived ones."""
    trace, live = [], []
    for i in range(steps):
        size = rng.choice([KIB, 2 * KIB, 6 * KIB, 20 * KIB, 100 * KIB, 2 * MIB + 5])
        trace.append(("alloc", f"t{i}", size))
        live.append(f"t{i}")
        if len(live) > 3 and rng.random() < 0.7:
            trace.append(("free", live.pop(rng.randrange(len(live)))))
    trace += [("free", key) for key in live]
    return trace


def cached_then_requested(cached: list[int], requested: list[int]) -> list:
    """Blocks of the ``cached`` sizes reserved in this order and freed, then the ``requested``
    sizes asked for one after the other while all stay alive: which cached block serves
    which request decides whether the device is asked again."""
    trace = [("alloc", f"c{i}", size) for i, size in enumerate(cached)]
    trace += [("free", f"c{i}") for i in range(len(cached))]
    trace += [("alloc", f"r{i}", size) for i, size in enumerate(requested)]
    return trace + [("free", f"r{i}") for i in range(len(requested))]


# A big block cached first, then a small one; a small request, then a big one: first-fit splits the big block.
SPLIT_TRAP = cached_then_requested([16 * KIB, 2 * KIB], [2 * KIB, 16 * KIB])



# --- a copy/compute pipeline (section 2.4, 08.overlap_without_races) -------------------------

def pipeline_mlp(weights: list):
    """A model on the chip: matmuls by ``weights`` with a ReLU between them, queued on the current stream."""
    def model(x):
        for i, w in enumerate(weights):
            x = x @ w
            if i < len(weights) - 1:
                x = torch.relu(x)
        return x
    return model


def run_sequentially(model, batches: list) -> list:
    """The plain pipeline: each host batch copied (blocking, from pageable memory) and computed on
    the current stream, one after the other."""
    return [model(batch.to("toychip")) for batch in batches]


# --- graphs to partition (08.compile_partitioning) ------------------------------------------

def _program_cumsum_middle(x, w):
    h = torch.relu(x @ w + 1)
    c = torch.cumsum(h, 1)                 # no chip kernel: stays on the CPU
    return torch.tanh(c * 0.5) + h


def _program_two_branches(x, w):
    a = torch.sigmoid(x @ w) * 2
    b = torch.flip(a, [0])                 # no chip kernel
    return torch.tanh(a - 1) + torch.exp(-(b * b))


def _program_all_chip(x, w):
    h = torch.tanh(x @ w) * 0.5 + 0.1
    return torch.relu(h @ w.t()) - x


def _program_sandwich(x, w):
    h = (x @ w).abs() + 1
    s = torch.cumsum(h, 0)                 # no chip kernel
    t = torch.flip(s, [1])                 # no chip kernel
    return torch.sigmoid(t) * h - s


def _program_side_input(x, w):
    a = torch.relu(x @ w)
    c = torch.cumsum(x, 1)                 # no chip kernel, but no chip node feeds it
    return torch.tanh(a) * 2 + c


def _program_residual_after_cpu(x, w):
    h = torch.relu(x @ w + 1)
    c = torch.cumsum(h, 1)                 # no chip kernel
    return h + torch.tanh(c * 0.5)


def _program_norm_branches(x, w):
    h = F.layer_norm(x @ w, (w.shape[1],))  # one node with three outputs, read through getitem
    return torch.flip(h, [0]) * 2 + torch.sigmoid(h)


PROGRAMS = {"cumsum_middle": _program_cumsum_middle, "two_branches": _program_two_branches,
            "all_chip": _program_all_chip, "sandwich": _program_sandwich, "side_input": _program_side_input,
            "residual_after_cpu": _program_residual_after_cpu, "norm_branches": _program_norm_branches}


def chip_graph(program: str, x: torch.Tensor, w: torch.Tensor) -> fx.GraphModule:
    """The ATen graph of one of :data:`PROGRAMS` for chip inputs (nodes carry ``meta["val"]``)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(PROGRAMS[program], tracing_mode="fake")(x.to("toychip"), w.to("toychip"))


def _getitem_left_out(node: fx.Node, island) -> fx.Node | None:
    """A getitem of ``node``'s outputs left outside ``island`` (the fuser would accept it:
    the rule that a multi-output node and its getitems stay together is checked here)."""
    return next((user for user in node.users if user.target is operator.getitem and user.name not in island), None)


def run_partitioned(gm: fx.GraphModule, islands, inputs) -> dict:
    """Fuse each island (a list of node names) into one chip program, run the graph on the
    chip; nodes outside every island run eagerly (chip kernels, or the CPU fallback)."""
    from torch.fx.passes.utils.fuser_utils import fuse_by_partitions, validate_partition

    from toychip import codegen, compiler

    if not isinstance(islands, (list, tuple)) or not all(isinstance(i, (list, tuple, set)) for i in islands):
        return {"error": f"应返回由节点名列表组成的 list（例如 [['mm', 'add', 'relu']]），实际返回了 {_short(islands)}。"}
    nodes = {n.name: n for n in gm.graph.nodes}
    support, seen, partitions = compiler.ChipSupport(), set(), []
    for island in islands:
        if not island:
            continue
        members = []
        for name in island:
            node = nodes.get(name) if isinstance(name, str) else None
            if node is None:
                return {"error": f"图里没有名为 {name!r} 的节点（节点名见 gm.graph.nodes 的 node.name）。"}
            if not support.is_node_supported(None, node):
                return {"error": f"节点 {name}（{node.target}）芯片不支持（没有芯片内核或 dtype 不支持），不能放进芯片岛。"}
            if name in seen:
                return {"error": f"节点 {name} 出现在两个岛里。"}
            if node.target is operator.getitem and node.args[0].name not in island:
                return {"error": f"节点 {name} 取多输出节点 {node.args[0].name} 的一个结果（getitem），"
                                 f"它要和 {node.args[0].name} 在同一个岛里（或者两个都不进岛）。"}
            if (getitem := _getitem_left_out(node, island)) is not None:
                return {"error": f"多输出节点 {name}（{node.target}）在岛里，但取它结果的 getitem 节点 {getitem.name} "
                                 "不在这个岛里：getitem 要和它的多输出节点在同一个岛里（或者两个都不进岛），"
                                 "没有使用者的 getitem 也一样。"}
            seen.add(name)
            members.append(node)
        if not validate_partition(members):
            return {"error": f"岛 {sorted(island)} 形成了依赖环：岛的某个输出要经过岛外的节点（例如 CPU 上的算子）"
                             "再回到岛内，无法作为一个整体执行。把它拆成两个岛。"}
        partitions.append(dict.fromkeys(members))
    fused = fuse_by_partitions(gm, partitions, prefix="island_") if partitions else gm
    for node in list(fused.graph.nodes):
        if node.op == "call_module" and node.target.startswith("island_"):
            program = codegen.generate(getattr(fused, node.target), f"ch08_{node.target}")
            setattr(fused, node.target, compiler.ChipIsland(program))
    fused.recompile()
    chip_inputs = [t.to("toychip") for t in inputs]
    with toychip.profile() as p:
        out = fused(*chip_inputs)
    return {"outputs": out.cpu(), "islands": len(partitions), "launches": p.launches, "copies": p.copies,
            "time_us": round(p.time_us, 6)}



# --- a porting plan: which kernels to write first (08.porting_plan) -------------------------

def _flip(a, dims):
    return np.ascontiguousarray(np.flip(a, tuple(dims)))


def _cumsum(a, dim, *, dtype=None):
    return np.cumsum(a, axis=dim).astype(a.dtype)


def _roll(a, shifts, dims=()):
    return np.roll(a, tuple(shifts), tuple(dims) if len(dims) else None)


def _tril(a, diagonal=0):
    return np.tril(a, diagonal)


# The vendor team's kernels for ops the chip still runs through the CPU fallback, by op name.
PORTING_LIBRARY = {"flip": _flip, "roll": _roll, "cumsum": _cumsum, "tril": _tril, "atan2": np.arctan2,
                   "sign": np.sign, "expm1": np.expm1}

# What one call of each op of a step does to its input (a chip tensor).
STEP_OPS = {
    "tanh": torch.tanh,                                                           # a chip kernel
    "flip": lambda t: torch.flip(t, [0]), "roll": lambda t: torch.roll(t, 1, 1),   # CPU fallback
    "cumsum": lambda t: torch.cumsum(t, 1), "tril": lambda t: t.tril(), "atan2": lambda t: torch.atan2(t, t + 1),
    "sign": torch.sign, "expm1": torch.expm1,
}


def plan_op(name: str) -> str:
    """The op a plan's entry names: ``"aten::cumsum.out"``, ``"cumsum.out"`` and ``"cumsum"`` are one op."""
    return name.removeprefix("aten::").split(".")[0]


def _stage_inputs(stages) -> list:
    """Each stage's chip tensor, the same on every call (it is the step's data)."""
    return [torch.randn(shape, generator=torch.Generator().manual_seed(i)).to("toychip")
            for i, (_, _, shape) in enumerate(stages)]


def _run_stages(stages, inputs) -> None:
    """One step: each stage ``(op, calls, shape)`` calls its op of :data:`STEP_OPS` ``calls``
    times on its own chip tensor."""
    for (op, calls, _), t in zip(stages, inputs):
        for _ in range(calls):
            STEP_OPS[op](t)


def porting_profile(stages, spec: toychip.ChipSpec = toychip.DEFAULT_SPEC) -> dict:
    """The step's profile as a porting engineer reads it: the chip's data sheet, the step's
    simulated time, and a row per op -- where it ran, its calls, its simulated time, the
    copies it caused and the bytes it moved (a kernel's memory traffic, a fallback's copies).

    A fallback's copies are told apart from the rest by a profile opened around each one."""
    inputs = _stage_inputs(stages)
    fallbacks: dict[str, dict] = {}

    def measured_fallback(op, *args, **kwargs):
        with toychip.profile() as own:
            result = toychip.cpu_fallback(op, *args, **kwargs)
        row = fallbacks.setdefault(str(op).removeprefix("aten."), {"calls": 0, "time_us": 0.0, "copies": 0, "bytes": 0})
        row["calls"] += 1
        row["time_us"] += own.time_us
        row["copies"] += own.copies
        row["bytes"] += own.copy_bytes
        return result

    with toychip.use_fallback(measured_fallback), toychip.profile(spec) as step:
        _run_stages(stages, inputs)
    rows = [{"op": name, "where": "chip", "calls": stat.calls, "time_us": round(stat.time_us, 6), "copies": 0,
             "bytes": stat.bytes} for name, stat in step.kernels.items() if not name.startswith("copy:")]
    rows += [{"op": name, "where": "cpu", **row, "time_us": round(row["time_us"], 6)} for name, row in fallbacks.items()]
    return {"spec": dataclasses.asdict(spec), "time_us": round(step.time_us, 6),
            "ops": sorted(rows, key=lambda r: (-r["time_us"], r["op"]))}


def step_time_with(stages, plan, spec: toychip.ChipSpec = toychip.DEFAULT_SPEC) -> dict:
    """The step's simulated time once the ops ``plan`` names have chip kernels from
    :data:`PORTING_LIBRARY` (an op without a kernel there stays as it was)."""
    inputs = _stage_inputs(stages)
    with toychip.kernel_scope():
        for op in dict.fromkeys(map(plan_op, plan)):
            if op in PORTING_LIBRARY:
                toychip.register_kernel(f"aten::{op}", PORTING_LIBRARY[op])
        with toychip.profile(spec) as p:
            _run_stages(stages, inputs)
    return {"time_us": round(p.time_us, 6), "launches": p.launches, "copies": p.copies}



# --- the capstone's conv net (08.port_model) -----------------------------------------------

ACTIVATIONS = {"hardswish": lambda: nn.Hardswish(), "leaky_relu": lambda: nn.LeakyReLU(0.1),
               "leaky_relu_0.3": lambda: nn.LeakyReLU(0.3), "relu6": lambda: nn.ReLU6(),
               "hardtanh": lambda: nn.Hardtanh(-0.5, 2.0)}


def make_port_net(channels: int, acts: tuple[str, str], size: int = 8, classes: int = 5) -> nn.Module:
    """The capstone's conv net: conv-BN-act-maxpool, conv-BN-act, linear (no conv bias: BN cancels it)."""
    return nn.Sequential(
        nn.Conv2d(3, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), ACTIVATIONS[acts[0]](),
        nn.MaxPool2d(2),
        nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), ACTIVATIONS[acts[1]](),
        nn.Flatten(), nn.Linear(channels * (size // 2) ** 2, classes))


def train_steps(model: nn.Module, x, y, device: str, steps: int = 2) -> dict:
    """``steps`` SGD-with-momentum steps of cross-entropy on ``device``; every number worth comparing."""
    model, x, y = model.to(device), x.to(device), y.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        grads = [p.grad.detach().cpu() for p in model.parameters()]
        opt.step()
    return {"loss": loss.detach().cpu(), "grads": grads, "params": [p.detach().cpu() for p in model.parameters()],
            "buffers": [b.detach().cpu() for b in model.buffers() if b.is_floating_point()]}


# --- eager / lazy / compiled on a transformer block (section 5) ----------------------------

def block_step_profile(mode: str, *, d_model: int = 32, nhead: int = 4, ff: int = 64, batch: int = 4,
                       seq: int = 16, seed: int = 0):
    """One training step (forward, MSE loss, backward) of an ``nn.TransformerEncoderLayer``
    block on the chip in ``mode`` ("eager", "lazy" or "compiled"), measured after one
    warm-up step (lazy traces and torch.compile compiles there). Returns the step's
    ``toychip.Profile`` and the op coverage of the measured step."""
    from .ch01_models import EncoderBlock

    torch.manual_seed(seed)
    block = EncoderBlock(d_model, nhead, ff).to("toychip")
    x, y = torch.randn(batch, seq, d_model).to("toychip"), torch.randn(batch, seq, d_model).to("toychip")

    def loss_step(inputs, target):
        loss = F.mse_loss(block(inputs), target)
        loss.backward()
        return loss

    if mode == "compiled":
        torch._dynamo.reset()
        loss_step = torch.compile(loss_step, backend="toychip")

    def run():
        if mode == "lazy":
            with toychip.lazy():
                loss_step(x, y)
                toychip.mark_step()
        else:
            loss_step(x, y)

    run()
    toychip.reset_coverage()
    with toychip.profile() as p:
        run()
    return p, toychip.coverage()


# --- packaging: the torch.backends entry point (08.autoload_package) -------------------------

AUTOLOAD_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    loaded = "toychip" in sys.modules
    try:
        x = torch.randn(2, device="toychip")
        result = f"{x.device} {torch.toychip.device_count()}"
    except RuntimeError as e:
        result = "error: " + str(e).splitlines()[0]
    print("RESULT", loaded, result)
""")


def install_package(site: Path, name: str, files: dict) -> str | None:
    """Put the learner's package on ``site`` as pip would: the module and a dist-info
    whose entry_points.txt comes from pyproject.toml. Returns an error text, or None."""
    try:
        project = tomllib.loads(files["pyproject"])["project"]
    except (tomllib.TOMLDecodeError, KeyError) as error:
        return f"pyproject 不是合法的 TOML，或缺少 [project] 表：{error}"
    groups = project.get("entry-points", {})
    if not isinstance(groups, dict):
        return "[project.entry-points] 应是表 (table)。"
    package = site / name
    package.mkdir()
    (package / "__init__.py").write_text(files["module"])
    dist = f"{project.get('name', name).replace('-', '_')}-{project.get('version', '0')}.dist-info"
    info = site / dist
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project.get('name', name)}\n"
                                   f"Version: {project.get('version', '0')}\n")
    lines = []
    for group, entries in groups.items():
        if not isinstance(entries, dict):
            return f"[project.entry-points.\"{group}\"] 应是 名字 = \"模块:函数\" 的表。"
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return None


def import_torch_in_subprocess(site: Path, autoload: bool = True) -> dict:
    """``import torch`` in a fresh interpreter with ``site`` on the path: is the chip loaded?

    ``{"loaded": bool, "result": "toychip:0 2" or "error: ..."}``, or ``{"error": ...}`` when
    the interpreter fails (an entry point that raises makes ``import torch`` raise).
    ``autoload=False`` sets ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``, torch's switch to skip entry points."""
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "1" if autoload else "0",
           "PYTHONPATH": os.pathsep.join([str(site), *[p for p in sys.path if p]])}
    run = subprocess.run([sys.executable, "-c", AUTOLOAD_SCRIPT], env=env, capture_output=True, text=True,
                         timeout=90, cwd=site)
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    if run.returncode != 0 or not lines:
        tail = (run.stderr.strip().splitlines() or ["（没有输出）"])[-1][:300]
        return {"error": f"在子进程里 import torch 失败（退出码 {run.returncode}）：{tail}"}
    loaded, result = lines[-1].removeprefix("RESULT ").split(" ", 1)
    return {"loaded": loaded == "True", "result": result}


# --- the capstone's transformer block (08.capstone; benchmarks/toychip_transformer.py) -----

class TransformerBlockLM(nn.Module):
    """A pre-LN transformer block with a vocabulary head: the loss of one batch.

    ``x + attention(ln1(x))``, then ``x + mlp(ln2(x))``, then ``head(ln_f(x))`` and
    cross-entropy against next-token targets. Attention is spelled out (no
    ``scaled_dot_product_attention``) so its matmuls and softmax are ops of their own; the
    MLP's activation is GELU unless another module is given.
    """

    def __init__(self, d_model: int, heads: int, ff: int, vocab: int, activation: nn.Module | None = None):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.fc1, self.fc2 = nn.Linear(d_model, ff), nn.Linear(ff, d_model)
        self.activation = nn.GELU() if activation is None else activation
        self.head = nn.Linear(d_model, vocab)

    def attention(self, x):
        batch, seq, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=-1)
        q, k, v = (t.view(batch, seq, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(batch, seq, width))

    def forward(self, x, targets):
        x = x + self.attention(self.ln1(x))
        x = x + self.fc2(self.activation(self.fc1(self.ln2(x))))
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


# The capstone's sizes: the benchmark's protocol, small enough to compile and train in a second.
BLOCK_SIZES = {"batch": 2, "seq": 8, "d_model": 16, "heads": 2, "ff": 32, "vocab": 32}
# The MLP's activation: GELU needs the decomposition table, the others chapter 08's kernels.
BLOCK_ACTIVATIONS = {"gelu": nn.GELU, "leaky_relu": lambda: nn.LeakyReLU(0.1), "relu6": nn.ReLU6,
                     "hardtanh": lambda: nn.Hardtanh(-0.5, 2.0)}
# Ops a chip stack must not leave to the CPU fallback in the block's training step.
NATIVE_REQUIRED = ("gelu.default", "gelu_backward.default", "leaky_relu.default", "leaky_relu_backward.default",
                   "hardtanh.default", "hardtanh_backward.default")


def block_workload(device: str, sizes: dict = BLOCK_SIZES, activation: str = "gelu", seed: int = 0):
    """The seeded block, its AdamW optimiser (lr 1e-3, weight decay 0.01) and one batch, on ``device``."""
    torch.manual_seed(seed)
    model = TransformerBlockLM(sizes["d_model"], sizes["heads"], sizes["ff"], sizes["vocab"],
                               BLOCK_ACTIVATIONS[activation]()).to(device)
    x = torch.randn(sizes["batch"], sizes["seq"], sizes["d_model"])
    targets = torch.randint(0, sizes["vocab"], (sizes["batch"], sizes["seq"]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    return model, optimizer, x.to(device), targets.to(device)


def train_block(backend=None, *, device: str = "toychip", activation: str = "gelu", steps: int = 2,
                sizes: dict = BLOCK_SIZES, seed: int = 0) -> dict:
    """``steps`` AdamW training steps of the block; the last one profiled.

    ``backend``: a ``torch.compile`` backend for the model with its loss and for
    ``optimizer.step`` (the benchmark's two compiled regions), or ``None`` for eager.
    Returns every step's loss, the last step's gradients, the parameters after it, and the
    last step's simulated time, launches, copies, peak device memory (``peak_bytes``: tensor
    bytes; ``peak_reserved``: bytes the chip's allocator reserved, which its block-selection
    policy decides) and CPU fallbacks. Both peaks count from the step's start, and each step
    starts from an emptied allocator cache: what ran before in the process leaves no cached
    block for the step to reuse.
    """
    model, optimizer, x, targets = block_workload(device, sizes, activation, seed)
    loss_fn, optimizer_step = model, optimizer.step
    if backend is not None:
        torch._dynamo.reset()
        loss_fn, optimizer_step = torch.compile(model, backend=backend), torch.compile(optimizer.step, backend=backend)
    losses = []
    for _ in range(steps):
        fallbacks_before = toychip.coverage().fallback
        torch.toychip.empty_cache()
        torch.toychip.reset_peak_memory_stats()
        reserved_before = torch.toychip.memory_reserved()
        with toychip.profile() as p:
            optimizer.zero_grad()
            loss = loss_fn(x, targets)
            loss.backward()
            optimizer_step()
        peak_reserved = torch.toychip.max_memory_reserved() - reserved_before
        losses.append(loss.detach().cpu())
    fallbacks = {op: n - fallbacks_before.get(op, 0) for op, n in toychip.coverage().fallback.items()
                 if n > fallbacks_before.get(op, 0)}
    grads = [q.grad.detach().cpu() for q in model.parameters()]
    return {"losses": losses, "grads": grads, "params": [q.detach().cpu() for q in model.parameters()],
            "time_us": round(p.time_us, 6), "launches": p.launches, "copies": p.copies,
            "peak_bytes": p.peak_bytes, "peak_reserved": peak_reserved, "fallbacks": fallbacks}
