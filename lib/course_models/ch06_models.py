"""Programs and measurements for chapter 06 (AOTAutograd).

* :func:`run_mlp` interprets a *program*: two matmuls with a chain of steps between
  them (cheap pointwise ones, and a softmax), ending in a scalar loss. Steps are plain
  data, so the grader can draw random programs from a seed and ship them to the sandbox
  (a ``partial`` of a module-level function pickles). :func:`run_glu` is a gated linear
  unit in ``nn.Linear``'s layout, whose backward reads views: half of a matmul's output
  and the transposed weights.
* :func:`chip_step` compiles one program for the toy chip with a chosen AOTAutograd
  partitioner and runs forward + backward under the simulated clock: loss, gradients,
  simulated time, launches, device memory held between forward and backward, and peak;
  on the default chip or on :func:`compute_bound_chip`, where matmuls are dear.
  :func:`eager_chip_step` runs the same step in eager mode, for comparison.
* :func:`capture_graphs` records the joint, forward and backward graphs AOTAutograd
  makes for a function (for the views and the demonstrations).
* Min-cut problems: :func:`random_joint_problem` draws a small joint graph as plain data,
  :func:`recomputable` / :func:`save_cost` judge a choice of values to save, and
  :func:`brute_force_min_cost` finds the optimum by trying every subset.
* :func:`run_activations`, :func:`edge_inputs` and :data:`ALLOWED_OPS`: the decomposition
  exercise's programs, inputs that reach where activations overflow or switch formula,
  and the op set a small chip accepts.
"""
from __future__ import annotations

import functools
import itertools
import random

import torch
import torch.nn.functional as F

# --------------------------------------------------------------------- programs

STEP_KINDS = ("tanh", "sigmoid", "gauss", "relu", "scale", "residual", "gate", "softmax")


def run_mlp(steps, x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """``h = x @ w1``, then the pointwise ``steps``, then ``tanh(h @ w2).mean()``.

    Each step appends one value computed from the last one: ``("tanh",)``, ``("sigmoid",)``,
    ``("relu",)``, ``("gauss",)`` (``exp(-v*v)``), ``("scale", c)``, ``("residual", i)``
    (``v + values[i]``), ``("gate", i)`` (``v * sigmoid(values[i])``) and ``("softmax",)``
    (over the last dimension), where ``values[0]`` is ``h``. Every step but softmax is
    pointwise; softmax reduces each row, so a partitioner should not count it as cheap.
    """
    values = [x @ w1]
    for step in steps:
        kind, v = step[0], values[-1]
        if kind == "tanh":
            values.append(torch.tanh(v))
        elif kind == "sigmoid":
            values.append(torch.sigmoid(v))
        elif kind == "relu":
            values.append(torch.relu(v))
        elif kind == "gauss":
            values.append(torch.exp(-v * v))
        elif kind == "scale":
            values.append(v * step[1])
        elif kind == "residual":
            values.append(v + values[step[1]])
        elif kind == "gate":
            values.append(v * torch.sigmoid(values[step[1]]))
        elif kind == "softmax":
            values.append(torch.softmax(v, dim=-1))
        else:
            raise ValueError(f"unknown step {step!r}")
    return torch.tanh(values[-1] @ w2).mean()


def random_steps(rng: random.Random, count: int) -> list[tuple]:
    """``count`` random steps for :func:`run_mlp` (residuals and gates read earlier values)."""
    steps = []
    for i in range(count):
        kind = rng.choice(STEP_KINDS)
        if kind == "scale":
            steps.append((kind, rng.choice([0.5, 2.0, -1.5])))
        elif kind in ("residual", "gate"):
            steps.append((kind, rng.randrange(i + 1)))
        else:
            steps.append((kind,))
    return steps


def mlp_program(steps) -> functools.partial:
    """``run_mlp`` with its steps bound: a picklable ``fn(x, w1, w2)``."""
    return functools.partial(run_mlp, [tuple(s) for s in steps])


def mlp_inputs(batch: int = 32, width: int = 64, out: int = 16) -> tuple[torch.Tensor, ...]:
    """``(x, w1, w2)`` from the current RNG, scaled so activations stay in a useful range."""
    return (torch.randn(batch, width), torch.randn(width, width) / width ** 0.5,
            torch.randn(width, out) / width ** 0.5)


def run_glu(x: torch.Tensor, w_in: torch.Tensor, w_out: torch.Tensor) -> torch.Tensor:
    """A gated linear unit with weights laid out as in ``nn.Linear``: ``a, b`` are the two
    halves of ``F.linear(x, w_in)``, then ``tanh(F.linear(a * sigmoid(b), w_out)).mean()``.

    Autograd saves ``a`` (a view of half of a storage that stays alive whole) and the
    transposed weights (views of the inputs, no new memory).
    """
    a, b = F.linear(x, w_in).chunk(2, dim=-1)
    return torch.tanh(F.linear(a * torch.sigmoid(b), w_out)).mean()


def glu_inputs(batch: int = 8, width: int = 16, out: int = 4) -> tuple[torch.Tensor, ...]:
    """``(x, w_in, w_out)`` for :func:`run_glu` from the current RNG."""
    return (torch.randn(batch, width), torch.randn(2 * width, width) / width ** 0.5,
            torch.randn(out, width) / width ** 0.5)


# Chapter 06's running example: two matmuls with a GELU-like chain between them.
SEED_STEPS = [("tanh",), ("gate", 0), ("scale", 2.0), ("gauss",), ("residual", 1)]


# --------------------------------------------------------------------- AOTAutograd graphs

def capture_graphs(fn, inputs, partition_fn=None) -> dict:
    """The joint, forward and backward graphs AOTAutograd makes for ``fn(*inputs)``.

    Runs ``fn`` once through ``aot_function`` with recording compilers (forward and
    backward); returns ``{"joint", "forward", "backward", "loss", "grads"}``.
    """
    from functorch.compile import aot_function, default_partition, make_boxed_func

    partition_fn = partition_fn or default_partition
    graphs: dict = {}

    def recording_partition(joint_module, joint_inputs, **kwargs):
        graphs["joint"] = torch.fx.GraphModule(joint_module, _copy_graph(joint_module.graph))
        return partition_fn(joint_module, joint_inputs, **kwargs)

    def compiler(kind):
        def compile_fn(gm, example_inputs):
            graphs[kind] = gm
            return make_boxed_func(gm.forward)
        return compile_fn

    args = [t.detach().clone().requires_grad_() for t in inputs]
    compiled = aot_function(fn, compiler("forward"), compiler("backward"), partition_fn=recording_partition)
    loss = compiled(*args)
    loss.backward()
    return {**graphs, "loss": loss.detach(), "grads": [a.grad for a in args]}


def _copy_graph(graph: torch.fx.Graph) -> torch.fx.Graph:
    """A copy of ``graph`` with every node's metadata (partitioners change the original)."""
    copy = torch.fx.Graph()
    copy.output(copy.graph_copy(graph, {}))
    for copied, node in zip(copy.nodes, graph.nodes):
        copied.meta = dict(node.meta)
    return copy


def saved_names(backward: torch.fx.GraphModule) -> list[str]:
    """What the forward hands to the backward: the backward's non-tangent inputs."""
    return [n.name for n in backward.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]


# --------------------------------------------------------------------- the toy chip

def chip_step(fn, inputs, partition_fn=None, spec=None) -> dict:
    """Compile ``fn`` for the toy chip with ``partition_fn`` and run forward + backward once.

    Returns plain data: ``loss`` and ``grads`` (CPU tensors), ``time_us``, ``launches``
    and ``kernel_calls`` (simulated clock; launches per kernel, fused ones named
    ``"fused: mul -> exp"``), ``held_bytes`` (device memory allocated by the
    forward and still held when it returns: the saved activations plus the loss) and
    ``peak_bytes`` (most device memory held at once during the step). Parameters and
    inputs are on the chip before the profile opens, so they are not counted. With
    ``spec`` (a ``toychip.ChipSpec``, say :func:`compute_bound_chip`), the step is
    charged as on that chip.
    """
    from toychip.compiler import make_backend
    from torch.fx.experimental.proxy_tensor import make_fx

    chip_inputs = [t.to("toychip") for t in inputs]
    graph = make_fx(lambda *args: (fn(*args),))(*chip_inputs)
    args = _leaves(chip_inputs)
    compiled = make_backend(partition_fn)(graph, args)
    return _profiled_step(lambda: compiled(*args)[0], args, spec)


def eager_chip_step(fn, inputs) -> dict:
    """:func:`chip_step` without compiling: eager autograd keeps what each op's backward
    formula saves, and ``held_bytes`` counts it the same way (plus the loss)."""
    args = _leaves([t.to("toychip") for t in inputs])
    return _profiled_step(lambda: fn(*args), args)


def _leaves(tensors) -> list[torch.Tensor]:
    """Copies that are leaves requiring grad, like parameters: their ``.grad`` is the answer."""
    return [t.detach().clone().requires_grad_() for t in tensors]


def _profiled_step(forward, args, spec=None) -> dict:
    """Run ``forward().backward()`` under a profile; ``args`` are the leaves it reads."""
    import toychip

    with toychip.profile(spec) as profile:
        loss = forward()
        held = profile.live_bytes
        loss.backward()
    return {"loss": loss.detach().cpu(), "grads": [a.grad.cpu() for a in args],
            "time_us": round(profile.time_us, 6), "launches": profile.launches,
            "kernel_calls": {name: stat.calls for name, stat in profile.kernels.items()},
            "held_bytes": held, "peak_bytes": profile.peak_bytes}


def compute_bound_chip():
    """The toy chip with a thousandth of its arithmetic (10 GFLOP/s), launches and bandwidth
    unchanged: a pointwise kernel still costs about one launch, a 16x128 @ 128x128 matmul
    about ten. What is cheap to recompute depends on the chip."""
    import toychip

    return toychip.ChipSpec(name="toychip-slow-compute", flops_per_us=10e3)


# --------------------------------------------------------------------- min-cut problems

INPUT_BYTES = 1024  # x and w of a random problem: real sizes, though keeping them costs nothing


def random_joint_problem(rng: random.Random, size: int = 10) -> dict:
    """A small joint graph's forward half as plain data (see :func:`recomputable`).

    ``nodes`` maps each forward value to its bytes (inputs first: they stay in memory
    anyway, so saving them costs nothing); ``edges`` are producer -> consumer pairs;
    ``expensive`` values (matmuls) must not be recomputed; ``needed`` values are read
    by the backward.
    """
    inputs = ["x", "w"]
    nodes = {name: INPUT_BYTES for name in inputs}
    edges, expensive = [], []
    for i in range(size):
        name = f"v{i}"
        kind = rng.choices(["pointwise", "matmul", "reduce"], [6, 2, 1])[0]
        earlier = [n for n in nodes if n != "w"]
        first = earlier[-1] if rng.random() < 0.6 else rng.choice(earlier)
        sources = [first] + (["w"] if kind == "matmul" else [])
        if kind == "pointwise" and rng.random() < 0.3 and len(earlier) > 1:
            sources.append(rng.choice([n for n in earlier if n != first]))
        nodes[name] = {"pointwise": rng.choice([256, 512, 1024]), "matmul": rng.choice([256, 512]),
                       "reduce": 4}[kind]
        edges += [[s, name] for s in sources]
        if kind == "matmul":
            expensive.append(name)
    computed = [n for n in nodes if n not in inputs]
    needed = sorted(rng.sample(computed, rng.randint(2, 4)), key=computed.index)
    return {"nodes": nodes, "edges": edges, "inputs": inputs, "expensive": expensive, "needed": needed}


def recomputable(problem: dict, saved) -> bool:
    """Can the backward get every ``needed`` value from ``saved`` values and the inputs?

    A value is available if it is an input or saved, or if it is not expensive and all
    of its producers are available (then the backward recomputes it).
    """
    saved, producers = set(saved), {}
    for source, target in problem["edges"]:
        producers.setdefault(target, []).append(source)

    @functools.cache
    def available(name: str) -> bool:
        if name in problem["inputs"] or name in saved:
            return True
        if name in problem["expensive"]:
            return False
        return all(available(p) for p in producers.get(name, []))

    return all(available(n) for n in problem["needed"])


def save_cost(problem: dict, saved) -> int:
    """Bytes of the saved values (each counted once; inputs cost nothing: they are in memory anyway)."""
    return sum(problem["nodes"][n] for n in set(saved) if n not in problem["inputs"])


def brute_force_min_cost(problem: dict) -> int:
    """The least :func:`save_cost` of any recomputable choice, by trying every subset."""
    candidates = [n for n in problem["nodes"] if n not in problem["inputs"]]
    best = save_cost(problem, problem["needed"])
    for size in range(len(candidates) + 1):
        for choice in itertools.combinations(candidates, size):
            cost = save_cost(problem, choice)
            if cost < best and recomputable(problem, choice):
                best = cost
    return best


# A small joint graph for chapter 06's min-cut figure: mm -> tanh -> mul -> exp -> sum.
EXAMPLE_PROBLEM = {
    "nodes": {"x": 512, "w": 1024, "mm": 512, "tanh": 512, "mul": 512, "exp": 512, "sum": 4},
    "edges": [["x", "mm"], ["w", "mm"], ["mm", "tanh"], ["tanh", "mul"], ["mm", "mul"],
              ["mul", "exp"], ["exp", "sum"]],
    "inputs": ["x", "w"], "expensive": ["mm"], "needed": ["tanh", "mul", "exp"],
}


# --------------------------------------------------------------------- decompositions

# An activation step is a name, or a name with positional arguments: ("softplus", beta, threshold).
ACTIVATION_FUNCTIONS = {
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu, "mish": F.mish, "softplus": F.softplus,
    "gelu": F.gelu, "gelu_tanh": functools.partial(F.gelu, approximate="tanh"),
}
ACTIVATIONS = tuple(ACTIVATION_FUNCTIONS)

# The ops a small chip accepts: one matmul, a handful of pointwise kernels, erf, comparisons
# with a scalar and a select.
ALLOWED_OPS = frozenset({
    "aten.mm.default", "aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.div.Tensor",
    "aten.neg.default", "aten.exp.default", "aten.log.default", "aten.reciprocal.default", "aten.erf.default",
    "aten.gt.Scalar", "aten.ge.Scalar", "aten.lt.Scalar", "aten.le.Scalar", "aten.where.self",
})

# Inputs where activations overflow (exp(100) is inf in float32), switch formula (softplus's
# threshold; 2.5 is the threshold 5 at beta 2 exactly) or pass through zero.
EDGE_VALUES = (-100.0, -30.0, -20.5, -5.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5, 3.0, 5.0, 20.5, 30.0, 100.0)


def run_activations(steps, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w`` followed by the activation steps, each applied to the previous value."""
    v = x @ w
    for step in steps:
        name, *args = (step,) if isinstance(step, str) else step
        v = ACTIVATION_FUNCTIONS[name](v, *args)
    return v


def edge_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, w)`` with ``x @ w`` exactly :data:`EDGE_VALUES` (twice): ``w`` is the identity."""
    return torch.tensor(EDGE_VALUES * 2).reshape(4, 8), torch.eye(8)


def activation_program(steps) -> functools.partial:
    """``run_activations`` with its steps bound: a picklable ``fn(x, w)``."""
    return functools.partial(run_activations, list(steps))


def graph_ops(gm: torch.fx.GraphModule) -> list[str]:
    """The distinct ATen ops a graph calls, sorted (``aten.mm.default``, ...)."""
    return sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"})
