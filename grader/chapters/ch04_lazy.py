"""Chapter 04 (Lazy Tensor) exercises: six pieces of a lazy tensor stack, graded on what
they make the toy chip and PyTorch's own LTC do (ops executed, cache hits, launches and
simulated time, barriers, fallback counters, re-traced ops), never on printed text."""
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


def _program_case(name: str, steps: list, seed: int, description: str = "") -> Case:
    """``{"fn": run_program(steps, ·, ·), "inputs": (x, w)}`` with 4×4 inputs."""
    return Case(name, seeded_build(seed, lambda: {
        "fn": functools.partial(models.run_program, steps), "inputs": (torch.randn(4, 4), torch.randn(4, 4))}),
        description)


def _random_program_cases(rng: random.Random, count: int, **kinds) -> list[Case]:
    return [_program_case(f"hidden-{i}", models.random_program(rng, rng.randint(8, 12), **kinds),
                          rng.randrange(10**6)) for i in range(count)]


# --- 04.lazy_recorder --------------------------------------------------------------

# The arithmetic of run_program; copies, views and meta conversions are not counted.
COMPUTE_OPS = {"add", "mul", "mm", "relu", "sigmoid", "tanh", "neg", "abs", "sum"}


class _ComputeLog(TorchDispatchMode):
    """Lists the arithmetic ops that run on real (not meta) tensors, whoever runs them."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if (func.overloadpacket.__name__ in COMPUTE_OPS and isinstance(out, torch.Tensor)
                and out.device.type != "meta"):
            self.ops.append(str(func))
        return out


def _lazy_run_artifact(function, built) -> dict:
    with _ComputeLog() as log:
        result = function(built["fn"], built["inputs"])
    if not isinstance(result, torch.Tensor) or result.device.type != "cpu":
        return {"error": f"lazy_run 应返回真实的 CPU 张量（fn 的输出），实际返回了 {short(result)}。"}
    return {"outputs": result.detach().clone(), "executed": sorted(log.ops)}


def _compare_lazy_run(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_outputs(expected["outputs"], got["outputs"])
    if not verdict.ok:
        return verdict
    return compare_equal(expected["executed"], got["executed"],
                         "真正执行的算子与参考不一致：输出用不到的节点（死节点）不应执行，输出需要的节点一个都不能少。")


EXERCISES.append(Exercise(
    id="04.lazy_recorder", title="迷你延迟记录器 (lazy recorder)", function="lazy_run", points=3,
    public_cases=lambda: [
        _program_case("dead_branch", [("matmul", 0), ("unary", "sigmoid", 1), ("scale", 2.0, 2),
                                      ("unary", "relu", 1), ("add", 1, 4)], 0,
                      "sigmoid 和 scale 两个节点的结果没人用：是死节点"),
        _program_case("dead_matmul", [("add", 0, 0), ("matmul", 1), ("scale", 0.5, 1), ("unary", "tanh", 3),
                                      ("sum", 4)], 1, "第二个节点 matmul 的结果没人用"),
    ],
    random_cases=lambda rng: _random_program_cases(rng, 3),
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
    return {"outputs": out.cpu(), "launches": profile.launches, "time_us": round(profile.time_us, 6)}


def _compare_fusion(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_outputs(expected["outputs"], got["outputs"])
    if not verdict.ok:
        return verdict
    if got["launches"] > expected["launches"] or got["time_us"] > expected["time_us"] + 1e-6:
        return Verdict(False, "性能未达标：内核启动次数或模拟时间多于参考融合策略。",
                       f"launches ≤ {expected['launches']}, time ≤ {expected['time_us']:g} us",
                       f"launches = {got['launches']}, time = {got['time_us']:g} us")
    return PASS


EXERCISES.append(Exercise(
    id="04.fusion_policy", title="延迟模式的融合策略 (fusion policy)", function="fusion_policy", points=3,
    public_cases=lambda: [
        _program_case("mlp_like", [("matmul", 0), ("scale", 0.5, 1), ("unary", "tanh", 2), ("matmul", 3),
                                   ("unary", "relu", 4), ("scale", 2.0, 5)], 0, "matmul 后面跟着逐点链"),
        _program_case("shared_value", [("unary", "tanh", 0), ("scale", 2.0, 1), ("unary", "relu", 2),
                                       ("matmul", 3), ("add", 1, 4)], 1,
                      "tanh 的结果在 matmul 之后还要用：它必须写回内存"),
    ],
    random_cases=lambda rng: _random_program_cases(rng, 3),
    produce=_fusion_artifact, compare=_compare_fusion,
    hint="一个逐点节点可以并入某个生产者的组，条件是：该生产者只有它一个使用者、不是图的输出；"
         "一组里最多一个 matmul；reduction、view 和输入节点不能进组。",
))


# --- 04.cache_key ----------------------------------------------------------------------

def _schedule_case(name: str, schedule: list, description: str = "") -> Case:
    return Case(name, lambda: {"schedule": schedule}, description)


def _cache_artifact(function, built) -> dict:
    return models.lazy_sgd(built["schedule"], cache_key=function)


def _compare_cache(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if got["false_hits"]:
        return Verdict(False, f"有 {got['false_hits']} 次缓存键相同、图却不同（错误命中）："
                              "键里缺少区分图结构的信息（例如形状）。",
                       short(expected["false_hits"]), short(got["false_hits"]))
    counts = (expected["misses"], expected["hits"])
    verdict = compare_equal(counts, (got["misses"], got["hits"]),
                            "(编译次数, 缓存命中次数) 与参考不一致：只有图的结构变化时才应重新编译，"
                            "学习率这样的浮点常量是程序的输入，不应进入缓存键。")
    if not verdict.ok:
        return verdict
    return compare_outputs(torch.tensor(expected["losses"]), torch.tensor(got["losses"]))


def _random_schedule(rng: random.Random) -> list:
    return [(rng.choice([0.3, 0.1, 0.03, 0.01]), rng.choice([4, 8, 16])) for _ in range(5)]


EXERCISES.append(Exercise(
    id="04.cache_key", title="追踪缓存键 (trace-cache key)", function="cache_key", points=2,
    public_cases=lambda: [
        _schedule_case("lr_then_batch", [(0.1, 8), (0.05, 8), (0.1, 16), (0.01, 8)],
                       "学习率变了仍命中缓存；批大小变了（形状变了）才是新图"),
        _schedule_case("batch_then_lr", [(0.2, 4), (0.2, 16), (0.1, 4), (0.1, 16)], "两种批大小交替，学习率减半"),
    ],
    random_cases=lambda rng: [_schedule_case(f"hidden-{i}", _random_schedule(rng)) for i in range(3)],
    produce=_cache_artifact, compare=_compare_cache,
    hint="IRNode 的 constants 里既有整数（形状、维度）也有浮点数（学习率、缩放系数）；"
         "浮点数在运行时作为程序输入传入，键里应把它们换成一个占位标记——包括 ('alpha', -0.1) 这样的关键字常量。",
))


# --- 04.barrier_finder ----------------------------------------------------------------

BARRIER_REASONS = {"item", "host_copy", "data_dependent_shape", "fallback"}
BARRIER_KINDS = dict(kinds=("unary", "scale", "matmul", "add", "item", "mask", "cumsum", "host", "transpose"),
                     weights=(3, 3, 1, 2, 1, 1, 1, 1, 1))


class _AskEveryOp(TorchDispatchMode):
    """Runs a program eagerly on the chip, asking ``reason_of`` about every op on chip tensors."""

    def __init__(self, reason_of, compiled_ops):
        super().__init__()
        self.reason_of, self.compiled_ops = reason_of, compiled_ops
        self.barriers: list[list] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if any(isinstance(a, torch.Tensor) and a.device.type == "toychip" for a in args):
            reason = self.reason_of(func, args, kwargs, self.compiled_ops)
            if reason is not None:
                self.barriers.append([str(func), reason])
        return func(*args, **kwargs)


def _barrier_case(name: str, steps: list, seed: int, description: str = "") -> Case:
    case = _program_case(name, steps, seed, description)
    return Case(name, lambda: {**case.build(), "compiled_ops": _compiled_ops()}, description)


def _compiled_ops() -> frozenset:
    from toychip.op_table import OP_TABLE
    return frozenset(str(op) for op in OP_TABLE)


def _barrier_artifact(function, built) -> dict:
    x, w = (t.to("toychip") for t in built["inputs"])
    with _AskEveryOp(function, built["compiled_ops"]) as ask:
        built["fn"](x, w)
    unknown = [reason for _, reason in ask.barriers if reason not in BARRIER_REASONS]
    if unknown:
        return {"error": f"原因只能是 None 或 {sorted(BARRIER_REASONS)} 之一，实际返回了 {short(unknown[0])}。"}
    return {"barriers": ask.barriers}


EXERCISES.append(Exercise(
    id="04.barrier_finder", title="同步屏障查找器 (barrier finder)", function="barrier_reason", points=2,
    public_cases=lambda: [
        _barrier_case("every_barrier", [("item", 0), ("mask", 1), ("transpose", 2), ("cumsum", 3), ("host", 4),
                                        ("unary", "relu", 5)], 0, ".item()、布尔掩码、转置、cumsum、.cpu()"),
        _barrier_case("views_and_compute", [("matmul", 0), ("transpose", 1), ("cumsum", 2),
                                            ("add", 1, 3), ("item", 4)], 1, "视图只改元数据，不是屏障"),
    ],
    random_cases=lambda rng: [_barrier_case(f"hidden-{i}", models.random_program(rng, 8, **BARRIER_KINDS),
                                            rng.randrange(10**6)) for i in range(3)],
    produce=_barrier_artifact,
    compare=lambda e, g: artifact_error(g) or compare_equal(
        e["barriers"], g["barriers"], "找到的屏障（算子, 原因）与参考不一致。"),
    hint="按顺序判断：_local_scalar_dense → item；拷到 CPU 的 _to_copy / copy_ → host_copy；"
         "带 torch.Tag.dynamic_output_shape 标签 → data_dependent_shape；视图 (func.is_view) 和芯片能编译的算子不是屏障；"
         "其余 → fallback。",
))


# --- 04.fallback_report ----------------------------------------------------------------

def _ops_case(name: str, names: list, seed: int, description: str = "") -> Case:
    return Case(name, seeded_build(seed, lambda: {
        "fn": functools.partial(models.run_named_ops, names), "inputs": (torch.randn(5, 5),)}), description)


def _fallback_artifact(function, built) -> dict:
    models.init_ltc()
    reports = [function(built["fn"], built["inputs"]) for _ in range(2)]
    for report in reports:
        if not isinstance(report, dict) or not all(isinstance(k, str) and isinstance(v, int) for k, v in report.items()):
            return {"error": f"fallback_report 应返回 {{算子名: 次数}} 的 dict，实际返回了 {short(report)}。"}
    return {"reports": reports}


def _random_ops(rng: random.Random) -> list:
    return rng.sample(sorted(models.LTC_FALLBACK_OPS), 3) + rng.sample(sorted(models.LTC_NATIVE_OPS), 2)


EXERCISES.append(Exercise(
    id="04.fallback_report", title="LTC 回退报告 (fallback report)", function="fallback_report", points=2,
    public_cases=lambda: [
        _ops_case("det_and_mask", ["det", "relu", "mask"], 0, "行列式和布尔掩码回退到 CPU，relu 不回退"),
        _ops_case("item_twice", ["item", "softmax", "item", "cumprod"], 1, ".item() 在 LTC 里也是一次回退"),
    ],
    random_cases=lambda rng: [_ops_case(f"hidden-{i}", _random_ops(rng), rng.randrange(10**6)) for i in range(3)],
    produce=_fallback_artifact,
    compare=lambda e, g: artifact_error(g) or compare_equal(
        e["reports"], g["reports"], "回退报告与参考不一致（同一函数连续报告两次，两次应完全相同）。"),
    hint="先 torch._lazy.metrics.reset()，再在 lazy 设备上运行并 mark_step()；"
         "LTC 把回退的算子记在名字以 'aten::' 开头的计数器里，'lazy::' 开头的是它自己编译的算子。",
))


# --- 04.replay_backend ------------------------------------------------------------------

REPLAYS = 4


def _replay_case(name: str, steps: list, seed: int, description: str = "") -> Case:
    return Case(name, seeded_build(seed, lambda: {
        "steps": steps, "example": (torch.randn(4, 4), torch.randn(4, 4)),
        "calls": [(torch.randn(4, 4), torch.randn(4, 4)) for _ in range(REPLAYS)]}), description)


def _lazy_counters() -> dict:
    return {name: torch._lazy.metrics.counter_value(name) for name in torch._lazy.metrics.counter_names()}


def _replay_artifact(function, built) -> dict:
    models.init_ltc()
    compiled = function(fx.symbolic_trace(models.Program(built["steps"])), list(built["example"]))
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
        return Verdict(False, "用新输入调用时结果不对：缓存的应是编译好的程序，而不是第一次调用的结果。",
                       verdict.expected, verdict.got)
    return compare_equal((expected["traced_ops"], expected["compiles"]), (got["traced_ops"], got["compiles"]),
                         f"{REPLAYS} 次调用中（重新追踪的算子数, 新编译次数）应为 (0, 0)：只在后端被调用时追踪、编译一次，"
                         "之后按图哈希运行缓存的程序。")


EXERCISES.append(Exercise(
    id="04.replay_backend", title="Dynamo → LTC 重放后端 (replay backend)", function="replay_backend", points=2,
    public_cases=lambda: [
        _replay_case("mlp_like", [("matmul", 0), ("unary", "tanh", 1), ("matmul", 2), ("scale", 0.5, 3)], 0,
                     "两次 matmul 和逐点运算"),
        _replay_case("with_dead_code", [("matmul", 0), ("unary", "sigmoid", 1), ("scale", 2.0, 2),
                                        ("unary", "relu", 1), ("add", 1, 4), ("sum", 5)], 1, "图里有死节点"),
    ],
    random_cases=lambda rng: [_replay_case(f"hidden-{i}", models.random_program(rng, rng.randint(6, 10)),
                                           rng.randrange(10**6)) for i in range(3)],
    produce=_replay_artifact, compare=_compare_replay,
    hint="照 extract_compiled_graph 的四步来：在 lazy 设备上运行一次 gm；get_tensors_ts_device_data_node "
         "找出图的输入（用 torch._lazy.get_tensor_id 认出哪些是参数）；get_graph_hash + sync_multi 编译；"
         "返回的函数里只调用 run_cached_graph。",
))
