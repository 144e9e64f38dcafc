"""Chapter 06 (AOTAutograd) exercises: five working pieces of an ahead-of-time autograd
stack, graded on what they measure or make -- bytes of saved activations (AOTAutograd
and eager), a partitioner's gradients, peak device memory, launches and simulated time on
the toy chip, the cost of a min-cut against the exact optimum, and the ops of a decomposed
graph."""
from __future__ import annotations

import copy
import random

import torch

from course_models import ch06_models as models

from ..authoring import (PASS, Case, Exercise, Verdict, artifact_error, compare_equal, compare_outputs,
                         graph_facts, seeded_build, short)
from ..sandbox.graph_codec import GraphCodecError, encode

EXERCISES: list[Exercise] = []  # in notebook order

SMALL = dict(batch=8, width=16, out=4)  # grading shapes: small, so every trace is quick

# Fixed programs of run_mlp steps (the chapter's SEED_STEPS aside), each showing something.
LONG_CHAIN = [("sigmoid",), ("scale", 0.5), ("tanh",), ("gauss",), ("relu",)]
SOFTMAX_CHAIN = [("gauss",), ("softmax",), ("residual", 0), ("sigmoid",), ("softmax",), ("scale", -1.5)]
SCALED_RESIDUAL = [("sigmoid",), ("residual", 0), ("scale", 2.0), ("scale", 2.0), ("scale", -1.5)]
GATED_SOFTMAX = [("tanh",), ("gate", 0), ("softmax",), ("gauss",), ("residual", 2)]


def _program_case(name: str, steps: list, seed: int, description: str = "", shapes: dict = SMALL,
                  **extra) -> Case:
    """``{"fn": run_mlp(steps, ...), "inputs": (x, w1, w2), **extra}``, small shapes by default."""
    return Case(name, seeded_build(seed, lambda: {
        "fn": models.mlp_program(steps), "inputs": models.mlp_inputs(**shapes), **extra}), description)


def _glu_case(name: str, seed: int, description: str = "", **extra) -> Case:
    """``{"fn": run_glu, "inputs": (x, w_in, w_out), **extra}``: its backward reads views."""
    return Case(name, seeded_build(seed, lambda: {
        "fn": models.run_glu, "inputs": models.glu_inputs(**SMALL), **extra}), description)


def _random_case(rng: random.Random, index: int, **extra) -> Case:
    return _program_case(f"hidden-{index}", models.random_steps(rng, rng.randint(3, 6)), rng.randrange(10**6),
                         **extra)


def _bytes_artifact(value, what: str) -> dict:
    if type(value) is not int:
        return {"error": f"{what} 应返回 int（字节数），实际返回了 {short(value)}。"}
    return {"bytes": value}


SAVED_BYTES_RULE = "同一块存储只算一次，按整块存储的字节数算（视图也一样），与输入共享存储的张量不算"


# --- 06.saved_activations ------------------------------------------------------------

def _partitioner(name: str):
    from functorch.compile import default_partition, min_cut_rematerialization_partition
    return {"default": default_partition, "min_cut": min_cut_rematerialization_partition}[name]


def _aot_saved_artifact(function, built) -> dict:
    return _bytes_artifact(function(built["fn"], built["inputs"], _partitioner(built["partitioner"])),
                           "aot_saved_bytes")


def _compare_bytes(expected, got, message: str) -> Verdict:
    return artifact_error(got) or compare_equal(expected["bytes"], got["bytes"], message)


EXERCISES.append(Exercise(
    id="06.saved_activations", title="AOTAutograd 保存了多少激活 (saved activations)",
    stub=(
        'def aot_saved_bytes(fn, inputs, partition_fn):\n'
        '    """用 aot_function 和给定的分区器编译 fn，运行一次前向，返回前向交给反向的激活的字节数（按存储去重，不计输入）。"""'),
    points=2,
    public_cases=lambda: [
        _program_case("seed_default", models.SEED_STEPS, 0, "本章的示例程序，default_partition", partitioner="default"),
        _program_case("seed_min_cut", models.SEED_STEPS, 0, "同一个程序，min_cut_rematerialization_partition",
                      partitioner="min_cut"),
        _glu_case("glu_default", 0, "run_glu（反向读取半个 matmul 输出的视图和转置的权重），default_partition",
                  partitioner="default"),
    ],
    designed_cases=lambda: [
        _glu_case("glu_min_cut", 1, partitioner="min_cut"),
        _program_case("gated_default", GATED_SOFTMAX, 2, partitioner="default"),
        _program_case("softmax_min_cut", SOFTMAX_CHAIN, 3, partitioner="min_cut"),
    ],
    random_cases=lambda rng: [_random_case(rng, 0, partitioner=rng.choice(["default", "min_cut"]))],
    produce=_aot_saved_artifact,
    compare=lambda e, g: _compare_bytes(e, g, f"保存的激活字节数与参考不一致（{SAVED_BYTES_RULE}）。"),
    hint="前向图的输出是 (loss, *saved)：在前向编译器返回的函数里记下 outs[1:]；"
         "用 t.untyped_storage().data_ptr() 去重，跳过与输入共享存储的张量，再把 untyped_storage().nbytes() 加起来。",
))


# --- 06.eager_saved --------------------------------------------------------------------

def _eager_saved_artifact(function, built) -> dict:
    return _bytes_artifact(function(built["fn"], built["inputs"]), "eager_saved_bytes")


EXERCISES.append(Exercise(
    id="06.eager_saved", title="即时 autograd 保存了多少激活 (saved tensors hooks)",
    stub=(
        'def eager_saved_bytes(fn, inputs):\n'
        '    """在 saved_tensors_hooks 里即时运行 fn(*inputs)，返回 autograd 为反向保存的激活的字节数（按存储去重，不计输入）。"""'),
    points=2,
    public_cases=lambda: [
        _program_case("seed_program", models.SEED_STEPS, 0, "本章的示例程序"),
        _program_case("relu_scale", [("relu",), ("scale", 2.0), ("tanh",)], 1, "relu、乘常数、tanh"),
        _glu_case("glu", 0, "run_glu：保存的有半个 matmul 输出的视图、转置的权重（输入的视图）"),
    ],
    designed_cases=lambda: [
        _glu_case("glu_other_weights", 1),
        _program_case("softmax_chain", SOFTMAX_CHAIN, 2),
    ],
    random_cases=lambda rng: [_random_case(rng, i) for i in range(2)],
    produce=_eager_saved_artifact,
    compare=lambda e, g: _compare_bytes(e, g, f"即时 autograd 保存的激活字节数与参考不一致（{SAVED_BYTES_RULE}）。"),
    hint="在 torch.autograd.graph.saved_tensors_hooks(pack, unpack) 里运行 fn：pack 会收到每个被保存的张量。"
         "按 untyped_storage().data_ptr() 去重，最后去掉输入自己的存储。",
))


# --- 06.recompute_partition ----------------------------------------------------------

# The partitioner is judged on one training step on the chip, against the reference's step:
# gradients first, then peak device memory, launches and simulated time. Margins, measured
# on these cases and on 40 random programs (20 of them also on the compute-bound chip):
# correct partitioners written otherwise (a copy per use, min-cut with its bans lifted) take
# from 3 launches fewer to 1 more than the reference and at most 1.07x its time; copies the
# chip cannot fuse (no meta) take 2 or 3 launches more, softmax recomputed by hand 2 more,
# and recomputed matmuls at least 1.16x the time on the compute-bound chip.
LAUNCH_SLACK = 1
TIME_SLACK = 1.10
COMPUTE_BOUND_SHAPES = dict(batch=16, width=128, out=16)  # one matmul: about ten launches there


def _chip_artifact(function, built) -> dict:
    spec = models.compute_bound_chip() if built.get("compute_bound") else None
    return models.chip_step(built["fn"], built["inputs"], function, spec)


def _compare_chip(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_outputs([expected["loss"], *expected["grads"]], [got["loss"], *got["grads"]])
    if not verdict.ok:
        return Verdict(False, "损失或梯度与参考不一致：在反向里重算出的值必须和前向算出的一模一样"
                              "（副本读的是哪些值？插在哪里？）。", verdict.expected, verdict.got)
    if got["peak_bytes"] > expected["peak_bytes"]:
        return Verdict(False, "芯片上的峰值内存高于参考（要求不超过参考）：前向留给反向的激活还能更少。"
                              "反向读到的值里，哪些在这块芯片上重算几乎不花代价？",
                       f"≤ {expected['peak_bytes']} bytes", f"{got['peak_bytes']} bytes")
    if got["launches"] > expected["launches"] + LAUNCH_SLACK:
        return Verdict(False, f"内核启动次数比参考多 {got['launches'] - expected['launches']} 次（最多允许多 {LAUNCH_SLACK} 次）："
                              "重算的值没能融合进反向已有的内核。是重算了芯片要单独启动一次的算子，"
                              "还是芯片的编译器认不出你插入的副本？chip_step 返回的 kernel_calls 列出了每个内核。",
                       f"≤ {expected['launches'] + LAUNCH_SLACK}", str(got["launches"]))
    if got["time_us"] > TIME_SLACK * expected["time_us"]:
        return Verdict(False, f"模拟时间超出参考 {TIME_SLACK - 1:.0%} 以上：在这块芯片上，反向里重算了计算量大的值？"
                              "用 chip_step 在同一块芯片上量一量，看 kernel_calls 里每种内核调用了几次。",
                       f"≤ {TIME_SLACK * expected['time_us']:.2f} us", f"{got['time_us']:.2f} us")
    return PASS


def _compute_bound_case(name: str, steps: list, seed: int, description: str = "") -> Case:
    """A program with a wider matmul, stepped on :func:`models.compute_bound_chip`."""
    return _program_case(name, steps, seed, description, shapes=COMPUTE_BOUND_SHAPES, compute_bound=True)


EXERCISES.append(Exercise(
    id="06.recompute_partition", title="重计算的分区器 (rematerializing partitioner)",
    stub=(
        'def recompute_partition(joint_module, joint_inputs, *, num_fwd_outputs, **kwargs):\n'
        '    """分区器（接口同 default_partition，返回 (前向图, 反向图)）：在 toychip 上用反向里的重计算换掉保存的激活。"""'),
    points=3,
    public_cases=lambda: [
        _program_case("seed_program", models.SEED_STEPS, 0, "本章的示例程序：tanh、门控、缩放、高斯、残差"),
        _program_case("softmax_chain", SOFTMAX_CHAIN, 2, "夹着两个 softmax（按行归约，不是逐点算子）的程序"),
        _compute_bound_case("compute_bound_long_chain", LONG_CHAIN, 1,
                            "两个 matmul 之间的一长串逐点运算，x 是 16×128，在 compute_bound_chip() 上（算力只有千分之一）"),
    ],
    designed_cases=lambda: [
        _program_case("scaled_residual", SCALED_RESIDUAL, 3),
        _program_case("gated_softmax", GATED_SOFTMAX, 4),
        _compute_bound_case("compute_bound_scaled_residual", SCALED_RESIDUAL, 5),
    ],
    random_cases=lambda rng: [_random_case(rng, 0)],
    produce=_chip_artifact, compare=_compare_chip,
    hint="先量再写：用 chip_step 比较 default_partition 和 min_cut_rematerialization_partition 的 peak_bytes、"
         "launches 和 kernel_calls，再想反向读到的每个前向值在芯片上重算要花什么（什么都不花？一次启动？一个 matmul？）。"
         "自己改联合图时：把便宜的值在反向里再算一遍，default_partition 就不必保存它——但副本读到的前向值若不是"
         "重算出来的，它就改存那些值；副本要让芯片的编译器认得（meta['val']），又不能让 default_partition 当成前向"
         "（meta['partitioner_tag']）。也可以不改图：min_cut_rematerialization_partition 的几条“禁止重算”规则"
         "都是 torch._functorch.config 里的开关。",
))


# --- 06.min_cut ----------------------------------------------------------------------

def _problem(nodes: dict, edges: list, expensive: list, needed: list) -> dict:
    """A hand-made min-cut problem; its inputs are always ``x`` and ``w``."""
    return {"nodes": nodes, "edges": edges, "inputs": ["x", "w"], "expensive": expensive, "needed": needed}


def _mm(name: str = "mm", source: str = "x") -> list:
    return [[source, name], ["w", name]]


# Hand-made problems, each with a trap: the optimum differs from what a misconception picks.
PUBLIC_PROBLEMS = {
    # One value read three times: saved once (512), it beats the matmul (1024).
    "shared_value": _problem({"x": 512, "w": 1024, "mm": 1024, "a": 512, "b": 512, "c": 512, "d": 512},
                             _mm() + [["mm", "a"], ["a", "b"], ["a", "c"], ["a", "d"]], ["mm"], ["b", "c", "d"]),
    # A 4-byte reduction after a matmul: save it, not the matmul.
    "small_reduction": _problem({"x": 512, "w": 1024, "mm": 512, "sum": 4, "scale": 512, "exp": 512},
                                _mm() + [["mm", "sum"], ["sum", "scale"], ["scale", "exp"]], ["mm"],
                                ["sum", "scale", "exp"]),
    # Values computed from the input alone: recomputing them is free.
    "from_input": _problem({"x": 1024, "w": 1024, "relu": 256, "neg": 256, "mm": 512, "tanh": 512},
                           [["x", "relu"], ["relu", "neg"]] + _mm() + [["mm", "tanh"]], ["mm"],
                           ["relu", "neg", "tanh"]),
    # Two small values (256 + 256) beat one big one (1024): count bytes, not values.
    "two_small": _problem({"x": 512, "w": 1024, "mm": 1024, "a": 256, "b": 256, "c": 1024},
                          _mm() + [["mm", "a"], ["mm", "b"], ["a", "c"], ["b", "c"]], ["mm"], ["c"]),
    # The backward reads a matmul's output itself.
    "needed_matmul": _problem({"x": 512, "w": 1024, "mm": 512, "tanh": 512, "mm2": 256, "sig": 256},
                              _mm() + [["mm", "tanh"]] + _mm("mm2", "tanh") + [["mm2", "sig"]], ["mm", "mm2"],
                              ["mm", "tanh", "sig"]),
}

DESIGNED_PROBLEMS = {
    "shared_value_4": _problem({"x": 512, "w": 1024, "mm": 512, "a": 256, "b": 1024, "c": 1024, "d": 1024, "e": 512},
                               _mm() + [["mm", "a"], ["a", "b"], ["a", "c"], ["a", "d"], ["d", "e"]], ["mm"],
                               ["b", "c", "e"]),
    "reduction_read": _problem({"x": 512, "w": 1024, "mm": 1024, "mean": 4, "gate": 1024},
                               _mm() + [["mm", "mean"], ["mean", "gate"]], ["mm"], ["mean", "gate"]),
    "input_branch": _problem({"x": 1024, "w": 1024, "sig": 512, "mm": 256, "mul": 512},
                             [["x", "sig"]] + _mm() + [["sig", "mul"], ["mm", "mul"]], ["mm"], ["sig", "mul"]),
    "two_small_sums": _problem({"x": 512, "w": 1024, "mm": 512, "s1": 128, "s2": 128, "add": 512, "exp": 512},
                               _mm() + [["mm", "s1"], ["mm", "s2"], ["s1", "add"], ["s2", "add"], ["add", "exp"]],
                               ["mm"], ["exp"]),
    "read_matmuls": _problem({"x": 512, "w": 1024, "mm": 256, "mm2": 512, "relu": 512},
                             _mm() + _mm("mm2", "mm") + [["mm2", "relu"]], ["mm", "mm2"], ["mm", "mm2", "relu"]),
}


def _problem_case(name: str, problem_of, description: str = "") -> Case:
    return Case(name, lambda: {"problem": problem_of()}, description)


def _fixed_problem_case(name: str, problem: dict, description: str = "") -> Case:
    return _problem_case(name, lambda: copy.deepcopy(problem), description)


def _random_problem_case(name: str, seed: int, size: int, description: str = "") -> Case:
    return _problem_case(name, lambda: models.random_joint_problem(random.Random(seed), size), description)


def _min_cut_artifact(function, built) -> dict:
    saved = function(built["problem"])
    if not isinstance(saved, (list, tuple, set)) or not all(isinstance(n, str) for n in saved):
        return {"error": f"min_save_set 应返回值名（str）的 list，实际返回了 {short(saved)}。"}
    return {"saved": sorted(set(saved))}


def _min_cut_facts(artifact, built) -> dict:
    """Validity and cost of the values saved; inputs listed or not make no difference."""
    if "error" in artifact:
        return artifact
    problem = built["problem"]
    unknown = [n for n in artifact["saved"] if n not in problem["nodes"]]
    if unknown:
        return {"error": f"返回了图里没有的值：{short(unknown)}。"}
    saved = [n for n in artifact["saved"] if n not in problem["inputs"]]
    return {"saved": saved, "valid": models.recomputable(problem, saved), "cost": models.save_cost(problem, saved)}


def _compare_min_cut(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if not got["valid"]:
        return Verdict(False, "只靠保存的值和输入，反向无法得到所有需要的值（昂贵的值不能重算，要么保存它，要么保存它之后的值）。",
                       short(expected["saved"]), short(got["saved"]))
    if got["cost"] > expected["cost"]:
        return Verdict(False, "合法，但不是最省的：保存的总字节数大于最优解（每个值只算一次字节，输入不花字节）。",
                       f"{expected['cost']} bytes", f"{got['cost']} bytes")
    return PASS


EXERCISES.append(Exercise(
    id="06.min_cut", title="手写最小割 (min-cut by hand)",
    stub=(
        'def min_save_set(problem):\n'
        '    """用 networkx 最小割求要保存的值：合法（反向能得到所有 needed 的值）且总字节数最少。"""'),
    points=3,
    public_cases=lambda: [
        _fixed_problem_case("example", models.EXAMPLE_PROBLEM, "本节图里的小例子"),
        _fixed_problem_case("shared_value", PUBLIC_PROBLEMS["shared_value"], "一个值被三个值读取"),
        _fixed_problem_case("small_reduction", PUBLIC_PROBLEMS["small_reduction"], "matmul 之后有一个 4 字节的归约"),
        _fixed_problem_case("from_input", PUBLIC_PROBLEMS["from_input"], "有的值直接由输入算出"),
        _fixed_problem_case("two_small", PUBLIC_PROBLEMS["two_small"], "两个小值对一个大值"),
        _fixed_problem_case("needed_matmul", PUBLIC_PROBLEMS["needed_matmul"], "反向直接读取 matmul 的输出"),
        _random_problem_case("random-0", 0, 10, "随机的 10 个值"),
    ],
    designed_cases=lambda: [_fixed_problem_case(name, problem) for name, problem in DESIGNED_PROBLEMS.items()],
    random_cases=lambda rng: [_random_problem_case(f"hidden-{i}", rng.randrange(10**6), rng.randint(9, 12))
                              for i in range(3)],
    produce=_min_cut_artifact, analyze=_min_cut_facts, compare=_compare_min_cut,
    hint="把每个值 v 拆成 v_in → v_out（容量 = 它的字节数，割断它 = 保存它；输入容量 0）；生产者 u_out → v_in 容量无穷；"
         "source → 昂贵的值和输入的 _in（无穷）；需要的值的 _out → sink（无穷）。"
         "nx.minimum_cut(g, 'source', 'sink') 返回 (割值, (source 一侧, sink 一侧))：_in 在 source 侧、_out 不在的值就是要保存的。",
))


# --- 06.decompositions ---------------------------------------------------------------

def _activation_case(name: str, steps: list, seed: int, description: str = "", *, edge: bool = False,
                     scale: float = 1.0) -> Case:
    """``x @ w`` then ``steps``: random ``x`` times ``scale``, or (``edge``) ``x @ w`` exactly
    the chapter's edge values (±100, ±30, 0, softplus thresholds ...)."""
    def inputs():
        return models.edge_inputs() if edge else (torch.randn(4, 8) * scale, torch.randn(8, 8))
    return Case(name, seeded_build(seed, lambda: {"fn": models.activation_program(steps), "inputs": inputs()}),
                description)


def _random_activation_case(rng: random.Random, index: int) -> Case:
    steps = []
    for name in rng.sample(models.ACTIVATIONS, 3):
        steps.append((name, rng.choice([0.5, 1.0, 2.0]), rng.choice([1.0, 5.0, 20.0])) if name == "softplus" else name)
    edge, seed, scale = rng.random() < 0.3, rng.randrange(10**6), rng.choice([1.0, 10.0, 40.0])
    return _activation_case(f"hidden-{index}", steps, seed, edge=edge, scale=scale)


def _decomposition_artifact(function, built) -> dict:
    from torch.fx.experimental.proxy_tensor import make_fx

    table = function()
    if not isinstance(table, dict) or not all(isinstance(k, torch._ops.OpOverload) and callable(v)
                                              for k, v in table.items()):
        return {"error": f"decomposition_table 应返回 {{OpOverload: 函数}} 的 dict（键是 torch.ops.aten.sigmoid.default "
                         f"这样的重载，不是 torch.ops.aten.sigmoid），实际返回了 {short(table)}。"}
    gm = make_fx(built["fn"], decomposition_table=table)(*built["inputs"])
    try:
        return {"graph": encode(gm)}
    except GraphCodecError as error:
        return {"error": f"分解后的图无法评分：{error}"}


def _decomposition_facts(artifact, built) -> dict:
    facts = graph_facts(artifact, built)
    if "error" not in facts:
        facts["ops"] = sorted({label for label in facts["nodes"]} - {"placeholder", "output"})
    return facts


def _compare_decomposition(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    allowed = {name.split(".", 1)[1] for name in models.ALLOWED_OPS}
    outside = [op for op in got["ops"] if op not in allowed]
    if outside:
        return Verdict(False, f"分解后的图里还有芯片不支持的算子：{', '.join(outside)}。",
                       short(sorted(allowed)), short(got["ops"]))
    return compare_outputs(expected["outputs"], got["outputs"], atol=1e-5, rtol=1e-4)


EXERCISES.append(Exercise(
    id="06.decompositions", title="分解表 (decomposition table)",
    stub=(
        'def decomposition_table():\n'
        '    """返回 {OpOverload: 函数} 分解表：把 sigmoid/silu/softplus/tanh/mish/gelu 降到 ALLOWED_OPS 里的算子。"""'),
    points=2,
    public_cases=lambda: [
        _activation_case("silu_gelu_tanh", ["silu", "gelu_tanh"], 0, "F.silu 和 F.gelu(approximate='tanh')"),
        _activation_case("softplus_mish", ["softplus", "mish"], 1, "F.softplus 和 F.mish"),
        _activation_case("gelu_exact", ["gelu"], 2, "F.gelu（approximate='none'，精确的 GELU）"),
        _activation_case("softplus_beta2_threshold5", [("softplus", 2.0, 5.0)], 3,
                         "F.softplus(v, beta=2, threshold=5)，v 取 ±100、±30、0、正好 2.5（beta·v = threshold）等",
                         edge=True),
        _activation_case("tanh_wide", ["tanh"], 4, "torch.tanh，v 取 ±100、±30、0 等", edge=True),
        _activation_case("sigmoid_wide", ["sigmoid"], 5, "torch.sigmoid，v 取 ±100、±30、0 等", edge=True),
    ],
    designed_cases=lambda: [
        _activation_case("softplus_default_wide", ["softplus"], 10, edge=True),
        _activation_case("softplus_half_threshold1", [("softplus", 0.5, 1.0)], 11, scale=3.0),
        _activation_case("softplus_threshold3_edges", [("softplus", 1.0, 3.0)], 12, edge=True),
        _activation_case("gelu_exact_then_silu", ["gelu", "silu"], 13, scale=2.0),
        _activation_case("gelu_tanh_wide", ["gelu_tanh", "tanh"], 14, edge=True),
        _activation_case("silu_wide", ["silu"], 15, edge=True),
        _activation_case("mish_silu_scaled", ["mish", "silu", "sigmoid"], 16, scale=10.0),
    ],
    random_cases=lambda rng: [_random_activation_case(rng, i) for i in range(2)],
    produce=_decomposition_artifact, analyze=_decomposition_facts, compare=_compare_decomposition,
    hint="分解表里的函数本身也会被追踪，其中的算子若也在表里会继续被分解：silu、mish 可以直接用 "
         "get_decompositions([...]) 取 PyTorch 的分解，再为 sigmoid、tanh、softplus、gelu 写只用允许算子的版本"
         "（tanh(x) = 2·sigmoid(2x) − 1；float32 里 exp(89) 已是 inf，公式要避开 inf/inf）。"
         "softplus 在 beta·x > threshold 时直接返回 x（用比较和 torch.where）；gelu 按 approximate 选公式，精确的那个用 torch.erf。",
))
