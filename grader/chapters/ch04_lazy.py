"""Chapter 04 (Lazy Tensor) exercises: six pieces of a lazy tensor stack, graded on what
they make the toy chip and PyTorch's own LTC do (ops executed, cache hits, launches and
simulated time, graph sizes and compiles, sync reasons, re-traced ops), never on printed text."""
from __future__ import annotations

import functools
import random

import torch
import torch._lazy.metrics
import torch.fx as fx
from torch.utils._python_dispatch import TorchDispatchMode

from course_models import ch04_models as models

from ..authoring import (PASS, Case, Exercise, Verdict, artifact_error, compare_equal, compare_outputs,
                         seeded_build, short)

EXERCISES: list[Exercise] = []  # in notebook order


def _program_case(name: str, steps: list, seed: int, description: str = "", outputs=-1) -> Case:
    """``{"fn": run_program(steps, ·, ·, outputs), "inputs": (x, w)}`` with 4×4 inputs."""
    return Case(name, seeded_build(seed, lambda: {
        "fn": functools.partial(models.run_program, steps, outputs=outputs),
        "inputs": (torch.randn(4, 4), torch.randn(4, 4))}), description)


def _random_program_cases(rng: random.Random, draw_outputs, **kinds) -> list[Case]:
    """Three random programs of 8-12 steps; ``draw_outputs(rng, steps)`` picks what fn returns."""
    cases = []
    for i in range(3):
        steps = models.random_program(rng, rng.randint(8, 12), **kinds)
        cases.append(_program_case(f"hidden-{i}", steps, rng.randrange(10**6), outputs=draw_outputs(rng, steps)))
    return cases


# --- 04.lazy_recorder --------------------------------------------------------------

# The arithmetic of run_program; copies, views and meta conversions are not counted.
COMPUTE_OPS = {"add", "mul", "mm", "relu", "sigmoid", "tanh", "neg", "abs", "sum", "stack", "max"}
# Programs whose ops read keyword constants and lists of tensors, return pairs, and free
# temporaries (a fan's products).
RECORDER_KINDS = dict(kinds=("unary", "scale", "matmul", "add", "sum", "axpy", "stack", "max", "fan"),
                      weights=(5, 4, 1, 2, 1, 2, 2, 1, 1))
# A fan's coefficients (they sum to 1, so chained fans keep values small).
FAN = (0.5, -1.5, 2.0, 0.25, 1.5, -0.5, -2.0, 0.75)


def _fans(first: int, count: int) -> list:
    """``count`` fan steps in a row, the first reading ``values[first]``: each frees its eight
    products as soon as it is done, so a later tensor is likely to take a freed one's ``id``
    (a recorder that keeps only ids, not the meta tensors, confuses the two)."""
    return [("fan", FAN, first + k) for k in range(count)]


class _ComputeLog(TorchDispatchMode):
    """Lists the arithmetic ops that run on real (not meta) tensors, whoever runs them."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        first = out[0] if isinstance(out, tuple) else out
        if (func.overloadpacket.__name__ in COMPUTE_OPS and isinstance(first, torch.Tensor)
                and first.device.type != "meta"):
            self.ops.append(str(func))
        return out


# Calls of lazy_run per program: each must be right. Where a freed temporary's id goes next
# depends on the allocator's state, so a recorder that keeps only ids fails on almost every
# call of a fan program, not on all (3 of 2,600 single calls in fresh processes passed); three
# calls in a row make a miss improbable.
RECORDER_CALLS = 3


def _lazy_run_artifact(function, built) -> dict:
    outputs, executed = [], []
    for _ in range(RECORDER_CALLS):
        with _ComputeLog() as log:
            result = function(built["fn"], built["inputs"])
        if not isinstance(result, torch.Tensor) or result.device.type != "cpu":
            return {"error": f"lazy_run 应返回真实的 CPU 张量（fn 的输出），实际返回了 {short(result)}。"}
        outputs.append(result.detach().clone())
        executed.append(sorted(log.ops))
    return {"outputs": outputs, "executed": executed}


def _compare_lazy_run(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_outputs(expected["outputs"], got["outputs"], label=f"lazy_run 连续 {RECORDER_CALLS} 次返回的张量")
    if not verdict.ok:
        return verdict
    return compare_equal(expected["executed"], got["executed"],
                         f"连续 {RECORDER_CALLS} 次调用中真正执行的算子与参考不一致：输出用不到的节点（死节点）不应执行，"
                         "输出需要的节点一个都不能少。")


def _recorder_designed_cases() -> list[Case]:
    return [
        _program_case("dead_chain_of_three", [("unary", "tanh", 0), ("unary", "abs", 1), ("scale", 2.0, 2),
                                              ("matmul", 1), ("unary", "neg", 4)], 10),
        _program_case("stack_of_live_values", [("unary", "relu", 0), ("matmul", 0), ("stack", 1, 2),
                                               ("unary", "sigmoid", 0)], 11, outputs=3),
        _program_case("alpha_of_live_values", [("matmul", 0), ("unary", "abs", 0), ("axpy", -1.5, 1, 2),
                                               ("unary", "tanh", 1)], 12, outputs=3),
        _program_case("max_then_add", [("unary", "neg", 0), ("max", 1), ("add", 0, 2), ("unary", "relu", 3)], 13),
        _program_case("result_before_last", [("matmul", 0), ("scale", 0.5, 1), ("unary", "tanh", 2),
                                             ("unary", "sigmoid", 2), ("add", 3, 4)], 14, outputs=3),
        _program_case("live_fans_then_dead_fans", [("unary", "relu", 0), *_fans(1, 3), ("unary", "sigmoid", 1),
                                                   *_fans(5, 3), ("add", 4, 5)], 15),
    ]


def _recorder_random_cases(rng: random.Random) -> list[Case]:
    """fn returns the last value, or one of the two before it (then later steps are dead)."""
    return _random_program_cases(rng, lambda rng, steps: rng.choice([-1, -1, -2, -3]), **RECORDER_KINDS)


EXERCISES.append(Exercise(
    id="04.lazy_recorder", title="迷你延迟记录器 (lazy recorder)",
    stub=(
        'def lazy_run(fn, inputs):\n'
        '    """在 meta 张量上记录 fn 的 ATen 调用（只推导形状），再只在真实输入上执行输出需要的节点，返回 fn 的输出。"""'),
    points=3,
    public_cases=lambda: [
        _program_case("dead_branch", [("matmul", 0), ("unary", "sigmoid", 1), ("scale", 2.0, 2),
                                      ("unary", "relu", 1), ("add", 1, 4)], 0,
                      "sigmoid 和 scale 两个节点的结果没人用：是死节点"),
        _program_case("dead_matmul", [("add", 0, 0), ("matmul", 1), ("scale", 0.5, 1), ("unary", "tanh", 3),
                                      ("sum", 4)], 1, "第二个节点 matmul 的结果没人用"),
        _program_case("stack_operands", [("unary", "tanh", 0), ("matmul", 0), ("stack", 1, 2)], 2,
                      "torch.stack 的参数是一个张量列表：列表里的张量也是生产者"),
        _program_case("keyword_alpha", [("unary", "relu", 0), ("axpy", 0.5, 0, 1)], 3,
                      "torch.add(x, relu(x), alpha=0.5)：alpha 是关键字参数"),
        _program_case("max_values", [("max", 0), ("add", 0, 1)], 4,
                      "torch.max(x, dim=0) 一次返回 (values, indices) 两个张量"),
        _program_case("output_not_last", [("unary", "sigmoid", 0), ("scale", 2.0, 1), ("unary", "relu", 1)], 5,
                      "fn 返回 values[2]（scale 的结果），最后记录的 relu 是死节点", outputs=2),
        _program_case("freed_temporaries", [("matmul", 0), *_fans(1, 2), ("unary", "tanh", 3), *_fans(4, 2)], 6,
                      "每个 fan 步骤先算出 8 个临时乘积 values[i] * c，torch.stack 之后求和：这些临时张量用完就被释放"),
    ],
    designed_cases=_recorder_designed_cases, random_cases=_recorder_random_cases,
    produce=_lazy_run_artifact, compare=_compare_lazy_run,
    hint="在 meta 张量上运行 fn 只会得到形状；记录下每个 (func, args, kwargs, 输出)，"
         "再从 fn 的输出出发沿 args 往回走，只有走得到的节点才需要在真实张量上执行。",
))


# --- 04.fusion_policy --------------------------------------------------------------------

def _fusion_artifact(function, built) -> dict:
    import toychip
    from toychip import lazy_tensor
    from toychip.fusion import FusionError

    x, w = (t.to("toychip") for t in built["inputs"])
    lazy_tensor.clear_cache()
    try:
        with toychip.profile() as profile:
            with toychip.lazy(fusion=function):
                out = built["fn"](x, w)
    except FusionError as error:
        return {"error": f"融合分组不合法：{error}"}
    outputs = [t.cpu() for t in out] if isinstance(out, tuple) else out.cpu()
    return {"outputs": outputs, "launches": profile.launches, "time_us": round(profile.time_us, 6)}


def _compare_fusion(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_outputs(expected["outputs"], got["outputs"], label="融合后程序的输出")
    if not verdict.ok:
        return verdict
    if got["launches"] > expected["launches"]:
        return Verdict(False, f"内核启动了 {got['launches']} 次，多于参考融合策略：还有能合进同一个内核的节点没有合进去。",
                       f"launches ≤ {expected['launches']}", f"launches = {got['launches']}")
    if got["time_us"] > expected["time_us"] + 1e-6:
        return Verdict(False, "启动次数不多，模拟时间却多于参考融合策略：有的中间值本可以留在内核里，却写回了内存"
                              "（或者合进一组的节点换一种合法的分法更省）。",
                       f"time ≤ {expected['time_us']:g} us", f"time = {got['time_us']:g} us")
    return PASS


def _fusion_designed_cases() -> list[Case]:
    return [
        _program_case("epilogue_chain", [("matmul", 0), ("unary", "sigmoid", 1), ("scale", -1.5, 2),
                                         ("unary", "abs", 3)], 20),
        _program_case("value_read_twice", [("unary", "abs", 0), ("unary", "neg", 1), ("add", 1, 2),
                                           ("unary", "tanh", 3)], 21),
        _program_case("three_leaf_tree", [("unary", "relu", 0), ("unary", "tanh", 0), ("scale", 0.5, 0),
                                          ("add", 1, 2), ("add", 4, 3)], 22),
        _program_case("matmul_pair_added", [("unary", "tanh", 0), ("matmul", 1), ("unary", "neg", 0),
                                            ("matmul", 3), ("add", 2, 4), ("unary", "relu", 5)], 23),
        _program_case("sum_between_chains", [("scale", 2.0, 0), ("sum", 1), ("unary", "sigmoid", 2),
                                             ("scale", -1.5, 3)], 24),
        _program_case("kept_intermediate", [("matmul", 0), ("unary", "tanh", 1), ("scale", 0.5, 2),
                                            ("unary", "relu", 3)], 25, outputs=(2, -1)),
        _program_case("two_wrapped_matmuls", [("unary", "neg", 0), ("matmul", 1), ("scale", 0.5, 2), ("matmul", 0),
                                              ("unary", "tanh", 4), ("add", 3, 5)], 26),
    ]


def _fusion_random_cases(rng: random.Random) -> list[Case]:
    """fn returns the last value, or the last value and an intermediate one (a graph output)."""
    return _random_program_cases(rng, lambda rng, steps: rng.choice([-1, (rng.randrange(2, len(steps)), -1)]))


EXERCISES.append(Exercise(
    id="04.fusion_policy", title="延迟模式的融合策略 (fusion policy)",
    stub=(
        'def fusion_policy(nodes):\n'
        '    """返回要融合的节点组（每组是 IRNode.index 的列表）：每组都要能跑成一个内核（check_group 接受），'
        '在此前提下让内核启动次数和模拟时间尽量少。"""'),
    points=3,
    public_cases=lambda: [
        _program_case("mlp_like", [("matmul", 0), ("scale", 0.5, 1), ("unary", "tanh", 2), ("matmul", 3),
                                   ("unary", "relu", 4), ("scale", 2.0, 5)], 0, "matmul 后面跟着逐点链"),
        _program_case("shared_value", [("unary", "tanh", 0), ("scale", 2.0, 1), ("unary", "relu", 2),
                                       ("matmul", 3), ("add", 1, 4)], 1,
                      "tanh 的结果在 matmul 之后还要用：它必须写回内存"),
        _program_case("pointwise_tree", [("unary", "tanh", 0), ("scale", 2.0, 0), ("add", 1, 2)], 2,
                      "add 的两个操作数都只被它使用：三个节点是一棵树，一个内核"),
        _program_case("two_matmuls_meet", [("matmul", 0), ("unary", "relu", 0), ("matmul", 2), ("add", 1, 3)], 3,
                      "add 的两个操作数各来自一个 matmul：一个内核里最多一个 matmul"),
        _program_case("reduction_in_chain", [("unary", "relu", 0), ("sum", 1), ("unary", "tanh", 2),
                                             ("scale", 0.5, 3)], 4, "sum 是 reduction，不能进融合组"),
        _program_case("kept_value", [("unary", "neg", 0), ("scale", 2.0, 1), ("unary", "sigmoid", 2)], 5,
                      "fn 返回 (values[2], values[3])：scale 的结果执行完还要用，是图的输出", outputs=(2, 3)),
        _program_case("matmul_under_relu", [("matmul", 0), ("unary", "relu", 1), ("matmul", 0), ("add", 2, 3)], 6,
                      "relu(x @ w) + x @ w：relu 的组里已经有一个 matmul，add 的另一个操作数也是 matmul"),
    ],
    designed_cases=_fusion_designed_cases, random_cases=_fusion_random_cases,
    produce=_fusion_artifact, compare=_compare_fusion,
    hint="从每个节点问起：它的值在内核执行完之后还有谁要读？要读的都在同一组里，这个值才能不写回内存。"
         "用 check_group 和模拟时钟试试你拿不准的分组。",
))


# --- 04.cache_key ----------------------------------------------------------------------

def _sgd_case(name: str, schedule: list, description: str = "") -> Case:
    """SGD steps in toychip lazy mode, one ``(learning rate, batch size)`` each."""
    return Case(name, lambda: {"run": functools.partial(models.lazy_sgd, schedule)}, description)


def _graphs_case(name: str, runs: list, description: str = "") -> Case:
    """One lazy graph per ``(steps, rows, dtype, outputs)`` of ``runs`` (see ``lazy_programs``)."""
    return Case(name, lambda: {"run": functools.partial(models.lazy_programs, runs)}, description)


def _cache_artifact(function, built) -> dict:
    counters = built["run"](cache_key=function)
    return {name: counters[name] for name in ("misses", "hits", "false_hits")}


def _compare_cache(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if got["false_hits"]:
        return Verdict(False, f"有 {got['false_hits']} 次缓存键相同、图却不同（错误命中）：键里缺少区分图结构的信息"
                              "（算子、连接关系和操作数顺序、整数和字符串等非浮点常量、形状、dtype 或输出标记）。",
                       short(expected["false_hits"]), short(got["false_hits"]))
    return compare_equal((expected["misses"], expected["hits"]), (got["misses"], got["hits"]),
                         "(编译次数, 缓存命中次数) 与参考不一致：只在浮点常量上不同的图应命中缓存——"
                         "浮点常量（包括关键字常量）是程序的输入，不应进入缓存键。")


def _replace_scale(steps: list, scale: float) -> list:
    """``steps`` with every float constant (scale and axpy alpha) set to ``scale``."""
    return [tuple(scale if isinstance(v, float) else v for v in step) for step in steps]


def _relu_scale_sum(scale: float, dim: int) -> list:
    return [("unary", "relu", 0), ("scale", scale, 1), ("reduce", dim, 2)]


def _axpy_pair(scale: float, first: int, second: int) -> list:
    """``t + c * relu(t)`` or ``relu(t) + c * t`` with ``t = tanh(x)``: the same nodes in the
    same order, operands swapped."""
    return [("unary", "tanh", 0), ("unary", "relu", 1), ("axpy", scale, first, second)]


def _wired(scale: float, operand: int) -> list:
    """``add(add(relu(x), tanh(x)*c), values[operand])``: the last add reads relu or tanh."""
    return [("unary", "relu", 0), ("unary", "tanh", 0), ("scale", scale, 2), ("add", 1, 3), ("add", operand, 4)]


def _cache_designed_cases() -> list[Case]:
    chain = [("matmul", 0), ("axpy", 0.5, 0, 1), ("unary", "tanh", 2)]
    tree = [("unary", "abs", 0), ("scale", 2.0, 0), ("add", 1, 2), ("scale", -1.5, 3)]
    return [
        _sgd_case("sgd_lr_and_batch", [(0.3, 4), (0.03, 4), (0.3, 16), (0.01, 16), (0.1, 4)]),
        _graphs_case("sum_dims_after_matmul",
                     [([("matmul", 0), ("scale", c, 1), ("reduce", d, 2)], 4, "float32", -1)
                      for c, d in [(0.5, 1), (2.0, 1), (0.5, 0), (-1.5, 1), (2.0, 0)]]),
        _graphs_case("shift_by_int", [([("shift", k, 0), ("scale", c, 1)], 4, "float32", -1)
                                      for k, c in [(1, 0.5), (2, 0.5), (1, 2.0), (-1, 2.0)]]),
        _graphs_case("dtype_of_chain", [(_replace_scale(chain, c), 8, dtype, -1)
                                        for c, dtype in [(0.5, "float64"), (2.0, "float64"), (0.5, "float32")]]),
        _graphs_case("last_add_operand", [(_wired(c, operand), 4, "float32", -1)
                                       for c, operand in [(0.5, 2), (2.0, 2), (0.5, 1), (-1.5, 1)]]),
        _graphs_case("kept_values", [(tree, 4, "float32", outputs)
                                     for outputs in [-1, (3, -1), -1, (2, -1), (3, -1)]]),
        _graphs_case("rounding_after_matmul", [([("matmul", 0), ("scale", c, 1), ("div", mode, 2)], 8, "float32", -1)
                                               for c, mode in [(0.5, "trunc"), (2.0, "trunc"), (0.5, "floor")]]),
        _graphs_case("axpy_operands_swapped", [([("unary", "sigmoid", 0), ("unary", "neg", 1), ("add", 1, 2),
                                                 ("axpy", c, *operands)], 4, "float32", -1)
                                               for c, operands in [(2.0, (2, 3)), (0.5, (2, 3)), (2.0, (3, 2))]]),
    ]


CACHE_KINDS = dict(kinds=("unary", "scale", "matmul", "add", "sum", "axpy"), weights=(5, 4, 1, 2, 1, 2))


def _cache_random_cases(rng: random.Random) -> list[Case]:
    """Variations of one random program: new floats (a hit), rows, dtype, a trailing sum
    over dim 0 or 1 (the same shape on 4 rows), or a kept intermediate value."""
    cases = []
    for i in range(3):
        base = models.random_program(rng, 6, **CACHE_KINDS)
        runs = []
        for _ in range(5):
            tail = rng.choice([[], [("reduce", 0, 6)], [("reduce", 1, 6)]])
            outputs = rng.choice([-1, (rng.randrange(1, 6), -1)])
            runs.append((_replace_scale(base, rng.choice(models.SCALES)) + tail, rng.choice([4, 4, 8]),
                         rng.choice(["float32", "float32", "float64"]), outputs))
        cases.append(_graphs_case(f"hidden-{i}", runs))
    return cases


EXERCISES.append(Exercise(
    id="04.cache_key", title="追踪缓存键 (trace-cache key)",
    stub=(
        'def cache_key(nodes):\n'
        '    """返回可哈希的缓存键：包含算子、连接关系、形状、dtype 和输出标记；所有浮点常量（包括关键字常量）换成占位标记，其余常量原样保留。"""'),
    points=2,
    public_cases=lambda: [
        _sgd_case("lr_then_batch", [(0.1, 8), (0.05, 8), (0.1, 16), (0.01, 8)],
                  "SGD：学习率变了仍命中缓存；批大小变了（形状变了）才是新图"),
        _sgd_case("batch_then_lr", [(0.2, 4), (0.2, 16), (0.1, 4), (0.1, 16)], "SGD：两种批大小交替，学习率减半"),
        _graphs_case("sum_over_dim", [(_relu_scale_sum(c, d), 4, "float32", -1)
                                      for c, d in [(0.5, 0), (2.0, 0), (0.5, 1), (-1.5, 0)]],
                     "relu(x * c).sum(d)，4×4 输入：d = 0 和 d = 1 结果形状相同，却是两张图"),
        _graphs_case("plus_int", [([("shift", k, 0), ("unary", "relu", 1)], 4, "float32", -1) for k in (1, 1, 2)],
                     "relu(x + 1) 与 relu(x + 2)：整数常量留在图里"),
        _graphs_case("float64_inputs", [([("unary", "tanh", 0), ("scale", c, 1)], 4, dtype, -1)
                                        for c, dtype in [(0.5, "float32"), (2.0, "float32"), (0.5, "float64")]],
                     "tanh(x) * c：同样的算子和形状，dtype 从 float32 变成 float64"),
        _graphs_case("which_operand", [(_wired(c, operand), 4, "float32", -1)
                                       for c, operand in [(0.5, 1), (2.0, 1), (0.5, 2)]],
                     "最后一个 add 读的是 relu(x) 还是 tanh(x) * c：算子和形状都一样，连接关系不同"),
        _graphs_case("rounding_mode", [([("unary", "tanh", 0), ("div", mode, 1)], 4, "float32", -1)
                                       for mode in ("floor", "floor", "trunc")],
                     "torch.div(tanh(x), 0.25, rounding_mode=...)：\"floor\" 与 \"trunc\" 是两张图"),
        _graphs_case("operands_swapped", [(_axpy_pair(c, first, second), 4, "float32", -1)
                                          for c, first, second in [(0.5, 1, 2), (2.0, 1, 2), (0.5, 2, 1)]],
                     "t = tanh(x)；torch.add(t, relu(t), alpha=c) 与 torch.add(relu(t), t, alpha=c)：操作数的顺序是结构"),
        _graphs_case("kept_intermediate", [(_relu_scale_sum(0.5, 0), 4, "float32", outputs) for outputs in (-1, (2, -1))],
                     "第二次运行还留着 relu(x) * c：它成了图的输出"),
    ],
    designed_cases=_cache_designed_cases, random_cases=_cache_random_cases,
    produce=_cache_artifact, compare=_compare_cache,
    hint="IRNode 的 constants 里既有整数（形状、维度）也有浮点数（学习率、缩放系数）；"
         "浮点数在运行时作为程序输入传入，键里应把它们换成一个占位标记——包括 ('alpha', -0.1) 这样的关键字常量。",
))


# --- 04.graph_cuts -------------------------------------------------------------------------

def _cuts_case(name: str, program: list, steps: int, max_nodes: int, seed: int, description: str = "") -> Case:
    """``steps`` repetitions of ``state = run_program(program, state, w)`` on 4×4 inputs, at most
    ``max_nodes`` nodes per graph."""
    return Case(name, seeded_build(seed, lambda: {
        "program": program, "steps": steps, "max_nodes": max_nodes,
        "inputs": (torch.randn(4, 4), torch.randn(4, 4) * 0.5)}), description)


def _cuts_artifact(function, built) -> dict:
    import toychip
    from toychip import lazy_tensor

    x, w = (t.to("toychip") for t in built["inputs"])
    step = functools.partial(models.run_program, built["program"], w=w)
    lazy_tensor.clear_cache()
    toychip.reset_lazy_metrics()
    with toychip.lazy():
        state = function(step, x, built["steps"], built["max_nodes"])
    if not isinstance(state, torch.Tensor) or state.device.type != "toychip":
        return {"error": f"run_with_cuts 应返回最后的 state（一个 toychip 张量），实际返回了 {short(state)}。"}
    metrics = toychip.lazy_metrics()
    return {"output": state.cpu(), "graphs": [event.nodes for event in metrics.sync_log],
            "compiles": metrics.cache_misses, "max_nodes": built["max_nodes"]}


def _compare_cuts(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_outputs(expected["output"], got["output"], label="最后的 state ")
    if not verdict.ok:
        return verdict
    if sum(got["graphs"]) != sum(expected["graphs"]):
        return Verdict(False, "各张图执行的节点总数与参考不同：每一步都要在延迟模式里执行且只执行一次——"
                              "试探用的值如果还有变量引用着，就会跟着图一起执行。",
                       str(sum(expected["graphs"])), str(sum(got["graphs"])))
    limit = expected["max_nodes"]
    if max(got["graphs"], default=0) > limit:
        return Verdict(False, f"有一张图超过了节点上限 {limit}（下面是每张图的节点数）。",
                       f"每张图 ≤ {limit}", short(got["graphs"]))
    if got["compiles"] > expected["compiles"]:
        return Verdict(False, f"编译了 {got['compiles']} 次：切出的图结构不全相同，缓存没能命中。"
                              "想想每张图要包含多少步，所有的图才是同一张图。",
                       str(expected["compiles"]), str(got["compiles"]))
    if len(got["graphs"]) > len(expected["graphs"]):
        return Verdict(False, f"执行了 {len(got['graphs'])} 张图，多于需要的：不超过上限、只编译一次的前提下，"
                              "每张图还可以更大。", str(len(expected["graphs"])), str(len(got["graphs"])))
    return PASS



# Programs that keep a 4×4 state 4×4; the last value is the new state, the rest is dead.
CHAIN = [("matmul", 0), ("unary", "tanh", 1), ("axpy", 0.5, 0, 2)]
WITH_DEAD_BRANCH = [("unary", "sigmoid", 0), ("matmul", 0), ("unary", "tanh", 2), ("scale", 0.5, 3)]
CUT_KINDS = dict(kinds=("unary", "scale", "matmul", "add", "axpy"), weights=(5, 4, 2, 2, 2))


def _cuts_designed_cases() -> list[Case]:
    return [
        _cuts_case("prime_number_of_steps", CHAIN, 7, 12, 40),
        _cuts_case("one_graph_fits", WITH_DEAD_BRANCH, 6, 18, 41),
        _cuts_case("two_dead_values", [("matmul", 0), ("unary", "abs", 0), ("unary", "neg", 2), ("unary", "relu", 1),
                                       ("scale", 2.0, 4)], 8, 13, 42),
        _cuts_case("remainder_of_nine", [("unary", "tanh", 0), ("scale", -1.5, 1), ("add", 0, 2)], 9, 12, 43),
    ]


def _cuts_random_cases(rng: random.Random) -> list[Case]:
    cases = []
    for i in range(2):
        program = models.random_program(rng, rng.randint(4, 6), **CUT_KINDS)
        max_nodes = len(program) * rng.randint(1, 4) + rng.randrange(3)
        cases.append(_cuts_case(f"hidden-{i}", program, rng.randint(6, 12), max_nodes, rng.randrange(10**6)))
    return cases


EXERCISES.append(Exercise(
    id="04.graph_cuts", title="切图策略 (graph cuts)",
    stub=(
        'def run_with_cuts(step, state, steps, max_nodes):\n'
        '    """在延迟模式里做 steps 次 state = step(state) 并返回最后的 state：每张执行的图至多 max_nodes 个节点、'
        '整个过程只编译一次，在此前提下执行的图越少越好。"""'),
    points=2,
    public_cases=lambda: [
        _cuts_case("twelve_steps", CHAIN, 12, 15, 0, "每步 matmul、tanh、add 三个节点，12 步，每张图至多 15 个节点"),
        _cuts_case("dead_branch", WITH_DEAD_BRANCH, 10, 16, 1, "每步先算一个没人用的 sigmoid，10 步，每张图至多 16 个节点"),
    ],
    designed_cases=_cuts_designed_cases, random_cases=_cuts_random_cases,
    produce=_cuts_artifact, compare=_compare_cuts,
    hint="记录是免费的，没有引用的值也不会执行：可以先量一步有多少个节点。"
         "缓存只在两张图结构相同时命中——想想每张图各包含多少步，所有的图才一模一样。",
))


# --- 04.barrier_probe ------------------------------------------------------------------------

PLANNED_SYNCS = ("mark_step", "exit", "explicit")
UNLISTED_PROBE_OPS = sorted(set(models.PROBE_OPS) - set(models.SECTION_PROBE_OPS))


def _probe_case(name: str, ops: list, seed: int, description: str = "") -> Case:
    """Probe each op of ``ops`` (names in ``PROBE_OPS``), in turn, on a 4×4 example."""
    return Case(name, seeded_build(seed, lambda: {"ops": list(ops), "example": torch.randn(4, 4)}), description)


def _probe_artifact(function, built) -> dict:
    found = {}
    for name in built["ops"]:
        reasons = function(models.PROBE_OPS[name], built["example"].clone())
        if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
            return {"error": f"barrier_probe 应返回同步原因（字符串）的列表，探测 {name} 时返回了 {short(reasons)}。"}
        found[name] = list(reasons)
    return {"reasons": found}


def _compare_probe(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    differ = [name for name, reasons in expected["reasons"].items() if got["reasons"].get(name) != reasons]
    if not differ:
        return PASS
    name = differ[0]
    planned = [r for r in got["reasons"][name] if r in PLANNED_SYNCS]
    advice = ("mark_step、exit 是计划内的同步，不是 op 造成的屏障。" if planned else
              "想想：探测时 op 的输入有没有待定（还没执行）的值？同步记录里是不是混进了别的调用、或者你自己的读取？")
    return Verdict(False, f"{len(differ)} 个算子的探测结果与芯片实际记录的不一致，第一个是 {name}。{advice}",
                   short(expected["reasons"][name]), short(got["reasons"][name]))


EXERCISES.append(Exercise(
    id="04.barrier_probe", title="同步屏障探针 (barrier probe)",
    stub=(
        'def barrier_probe(op, example):\n'
        '    """op(t) 作用在芯片上一个还没执行（待定）的张量 t 上时，toychip 延迟模式因 op 而做的同步：'
        '返回原因字符串的列表，按发生顺序（example 是 CPU 张量，给出 t 的形状和数值）。"""'),
    points=2,
    public_cases=lambda: [
        _probe_case("listed_in_section_3", ["item", "cpu", "mask", "cumsum", "relu"], 0,
                    "第 3 节列出的屏障：.item()、.cpu()、布尔掩码、没有芯片内核的 cumsum；relu 不是屏障"),
        _probe_case("not_in_the_kernel_table", ["gelu", "softmax", "scale_in_place"], 1,
                    "F.gelu、softmax 和整块原地的 t.mul_(2.0)"),
        _probe_case("two_barriers_and_print", ["cumsum_then_item", "printed"], 2,
                    "torch.cumsum(t, 0).sum().item()；str(t * 2.0)"),
    ],
    designed_cases=lambda: [
        _probe_case("copies_and_shapes", ["tolist", "unique", "where", "truth_value"], 50),
        _probe_case("writes_and_casts", ["row_add", "column_fill", "to_float64"], 51),
        _probe_case("no_chip_kernel", ["flip", "sort", "topk", "std", "concat"], 52),
        _probe_case("recorded", ["silu", "layer_norm", "transpose_matmul"], 53),
        _probe_case("item_then_fallback", ["item_then_flip"], 54),
    ],
    random_cases=lambda rng: [_probe_case(f"hidden-{i}", rng.sample(UNLISTED_PROBE_OPS, 4), rng.randrange(10**6))
                              for i in range(2)],
    produce=_probe_artifact, compare=_compare_probe,
    hint="同步只在要读的值还是待定的节点时才发生；sync_log 里也有不是 op 引起的同步，只留下 op 自己引起的。",
))


# --- 04.replay_backend ------------------------------------------------------------------

REPLAYS = 4


def _replay_case(name: str, steps: list, seed: int, description: str = "", other_pending: bool = False) -> Case:
    """``other_pending``: a lazy tensor unrelated to ``gm`` is still pending while the backend
    runs; only ``gm``'s outputs may be compiled and executed (``mark_step`` would run it too)."""
    return Case(name, seeded_build(seed, lambda: {
        "steps": steps, "example": (torch.randn(4, 4), torch.randn(4, 4)), "other_pending": other_pending,
        "calls": [(torch.randn(4, 4), torch.randn(4, 4)) for _ in range(REPLAYS)]}), description)


def _is_pending(tensor: torch.Tensor) -> bool:
    """Whether a lazy tensor's value is still a recorded computation (not device data)."""
    import torch._lazy.debug
    return "aten::" in torch._lazy.debug.dump_ir([tensor], "text")


def _lazy_counters() -> dict:
    return {name: torch._lazy.metrics.counter_value(name) for name in torch._lazy.metrics.counter_names()}


def _replay_artifact(function, built) -> dict:
    models.init_ltc()
    other = torch.ones(3).to("lazy") * 2 if built["other_pending"] else None
    compiled = function(fx.symbolic_trace(models.Program(built["steps"])), list(built["example"]))
    if other is not None and not _is_pending(other):
        return {"error": "后端执行了与 gm 无关的待定 lazy 张量：它只应编译、执行 gm 的输出"
                         "（torch._lazy.mark_step() 会把所有活着的待定张量一起编译执行，编译出的图也不是按 gm 输出的哈希缓存的）。"}
    torch._lazy.metrics.reset()
    outputs = []
    for args in built["calls"]:
        result = compiled(*args)
        if (not isinstance(result, (list, tuple)) or len(result) != 1
                or not isinstance(result[0], torch.Tensor) or result[0].device.type != "cpu"):
            return {"error": f"返回的函数应返回只含一个 CPU 张量的 list/tuple（和 gm 的输出一样），实际返回了 {short(result)}。"}
        outputs.append(result[0])
    counters = _lazy_counters()
    traced = sum(v for k, v in counters.items() if k.startswith("lazy::") and k != "lazy::_to_copy")
    return {"outputs": outputs, "traced_ops": traced, "compiles": counters.get("UncachedCompile") or 0}


def _compare_replay(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_outputs(expected["outputs"], got["outputs"])
    if not verdict.ok:
        return Verdict(False, "用新输入调用时结果不对：缓存的应是编译好的程序，而不是第一次调用的结果；"
                              "每次调用都要把当次的参数换进图的对应输入。",
                       verdict.expected, verdict.got)
    return compare_equal((expected["traced_ops"], expected["compiles"]), (got["traced_ops"], got["compiles"]),
                         f"{REPLAYS} 次调用中（重新追踪的算子数, 新编译次数）应为 (0, 0)：只在后端被调用时追踪、编译一次，"
                         "之后按图哈希运行缓存的程序。")


EXERCISES.append(Exercise(
    id="04.replay_backend", title="Dynamo → LTC 重放后端 (replay backend)",
    stub=(
        'def replay_backend(gm, example_inputs):\n'
        '    """Dynamo 后端：在 lazy 设备上追踪 gm 一次并编译，返回的函数每次调用只按图哈希运行缓存的程序。"""'),
    points=2,
    public_cases=lambda: [
        _replay_case("mlp_like", [("matmul", 0), ("unary", "tanh", 1), ("matmul", 2), ("scale", 0.5, 3)], 0,
                     "两次 matmul 和逐点运算"),
        _replay_case("with_dead_code", [("matmul", 0), ("unary", "sigmoid", 1), ("scale", 2.0, 2),
                                        ("unary", "relu", 1), ("add", 1, 4), ("sum", 5)], 1, "图里有死节点"),
        _replay_case("other_lazy_pending", [("unary", "relu", 0), ("matmul", 1), ("scale", 2.0, 2)], 2,
                     "调用后端时，另一个与 gm 无关的 lazy 张量 torch.ones(3).to(\"lazy\") * 2 还在待定", other_pending=True),
    ],
    designed_cases=lambda: [
        _replay_case("weight_first", [("unary", "abs", 0), ("matmul", 1), ("scale", -1.5, 2), ("add", 1, 3)], 30),
        _replay_case("two_constants", [("scale", 2.0, 0), ("matmul", 1), ("unary", "sigmoid", 2), ("scale", 0.5, 3),
                                       ("sum", 4)], 31),
        _replay_case("other_pending_with_constants", [("matmul", 0), ("scale", -1.5, 1), ("unary", "tanh", 2),
                                                      ("add", 1, 3)], 32, other_pending=True),
    ],
    random_cases=lambda rng: [_replay_case(f"hidden-{i}", models.random_program(rng, rng.randint(6, 10)),
                                           rng.randrange(10**6)) for i in range(3)],
    produce=_replay_artifact, compare=_compare_replay,
    hint="照 extract_compiled_graph 的四步来：在 lazy 设备上运行一次 gm；get_tensors_ts_device_data_node "
         "找出图的输入（用 torch._lazy.get_tensor_id 认出哪些是参数）；get_graph_hash + sync_multi 编译；"
         "返回的函数里只调用 run_cached_graph。",
))
