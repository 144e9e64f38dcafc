"""Chapter 06 (AOTAutograd) exercises: five working pieces of an ahead-of-time autograd
stack, graded on what they measure or make -- bytes of saved activations (AOTAutograd
and eager), a partitioner's gradients, device memory and simulated time on the toy chip,
the cost of a min-cut against the exact optimum, and the ops of a decomposed graph."""
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


def _program_case(name: str, steps: list, seed: int, description: str = "", **extra) -> Case:
    """``{"fn": run_mlp(steps, ...), "inputs": (x, w1, w2), **extra}`` with small shapes."""
    return Case(name, seeded_build(seed, lambda: {
        "fn": models.mlp_program(steps), "inputs": models.mlp_inputs(**SMALL), **extra}), description)


def _random_case(rng: random.Random, index: int, **extra) -> Case:
    return _program_case(f"hidden-{index}", models.random_steps(rng, rng.randint(3, 6)), rng.randrange(10**6),
                         **extra)


def _bytes_artifact(value, what: str) -> dict:
    if type(value) is not int:
        return {"error": f"{what} 应返回 int（字节数），实际返回了 {short(value)}。"}
    return {"bytes": value}


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
    function="aot_saved_bytes", points=2,
    public_cases=lambda: [
        _program_case("seed_default", models.SEED_STEPS, 0, "本章的示例程序，default_partition", partitioner="default"),
        _program_case("seed_min_cut", models.SEED_STEPS, 0, "同一个程序，min_cut_rematerialization_partition",
                      partitioner="min_cut"),
    ],
    random_cases=lambda rng: [_random_case(rng, 0, partitioner=rng.choice(["default", "min_cut"]))],
    produce=_aot_saved_artifact,
    compare=lambda e, g: _compare_bytes(e, g, "保存的激活字节数与参考不一致（同一块存储只算一次，输入的存储不算）。"),
    hint="前向图的输出是 (loss, *saved)：在前向编译器返回的函数里记下 outs[1:]；"
         "用 t.untyped_storage().data_ptr() 去重，跳过与输入共享存储的张量，再把 untyped_storage().nbytes() 加起来。",
))


# --- 06.eager_saved --------------------------------------------------------------------

def _eager_saved_artifact(function, built) -> dict:
    return _bytes_artifact(function(built["fn"], built["inputs"]), "eager_saved_bytes")


EXERCISES.append(Exercise(
    id="06.eager_saved", title="即时 autograd 保存了多少激活 (saved tensors hooks)",
    function="eager_saved_bytes", points=2,
    public_cases=lambda: [
        _program_case("seed_program", models.SEED_STEPS, 0, "本章的示例程序"),
        _program_case("relu_scale", [("relu",), ("scale", 2.0), ("tanh",)], 1, "relu、乘常数、tanh"),
    ],
    random_cases=lambda rng: [_random_case(rng, i) for i in range(3)],
    produce=_eager_saved_artifact,
    compare=lambda e, g: _compare_bytes(e, g, "即时 autograd 保存的激活字节数与参考不一致"
                                              "（同一块存储只算一次，输入的存储不算）。"),
    hint="在 torch.autograd.graph.saved_tensors_hooks(pack, unpack) 里运行 fn：pack 会收到每个被保存的张量。"
         "按 untyped_storage().data_ptr() 去重，最后去掉输入自己的存储。",
))


# --- 06.recompute_partition ----------------------------------------------------------

TIME_SLACK = 1.05  # simulated time may exceed the reference's by 5% (other placements fuse differently)


def _chip_artifact(function, built) -> dict:
    return models.chip_step(built["fn"], built["inputs"], function)


def _compare_chip(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_outputs(expected["grads"], got["grads"], atol=1e-5, rtol=1e-4)
    if not verdict.ok:
        return Verdict(False, "梯度与参考不一致：重计算的值必须和前向算出的一样。", verdict.expected, verdict.got)
    if got["held_bytes"] > expected["held_bytes"]:
        return Verdict(False, "前向结束时芯片上留给反向的字节数（保存的激活）多于参考：便宜的逐点算子和视图应在反向里重算。",
                       f"{expected['held_bytes']} bytes", f"{got['held_bytes']} bytes")
    if got["held_bytes"] < expected["held_bytes"]:
        return Verdict(False, "前向结束时留给反向的字节数少于参考：matmul、归约这些不便宜的值应该保存，而不是在反向里重算。",
                       f"{expected['held_bytes']} bytes", f"{got['held_bytes']} bytes")
    if got["time_us"] > TIME_SLACK * expected["time_us"]:
        return Verdict(False, "模拟时间超出参考 5% 以上：只重算便宜的算子（逐点、视图），matmul 和归约要保存。",
                       f"≤ {TIME_SLACK * expected['time_us']:.2f} us", f"{got['time_us']:.2f} us")
    return PASS


EXERCISES.append(Exercise(
    id="06.recompute_partition", title="重计算的分区器 (rematerializing partitioner)",
    function="recompute_partition", points=3,
    public_cases=lambda: [
        _program_case("seed_program", models.SEED_STEPS, 0, "本章的示例程序：tanh、门控、缩放、高斯、残差"),
        _program_case("long_chain", [("sigmoid",), ("scale", 0.5), ("tanh",), ("gauss",), ("relu",)], 1,
                      "两个 matmul 之间的一长串逐点运算"),
    ],
    random_cases=lambda rng: [_random_case(rng, 0)],
    produce=_chip_artifact, compare=_compare_chip,
    hint="依赖 tangents_* 输入的节点是反向节点，其余是前向节点。对反向节点的每个参数：若它是前向里的"
         "逐点算子（torch.Tag.pointwise in target.tags）或视图（target.is_view），就在这个反向节点之前插入它的副本"
         "（参数递归地同样处理），最后交给 default_partition(..., num_fwd_outputs=num_fwd_outputs, **kwargs)。",
))


# --- 06.min_cut ----------------------------------------------------------------------

def _problem_case(name: str, problem_of, description: str = "") -> Case:
    return Case(name, lambda: {"problem": problem_of()}, description)


def _min_cut_artifact(function, built) -> dict:
    saved = function(built["problem"])
    if not isinstance(saved, (list, tuple, set)) or not all(isinstance(n, str) for n in saved):
        return {"error": f"min_save_set 应返回值名（str）的 list，实际返回了 {short(saved)}。"}
    return {"saved": sorted(set(saved))}


def _min_cut_facts(artifact, built) -> dict:
    if "error" in artifact:
        return artifact
    problem = built["problem"]
    unknown = [n for n in artifact["saved"] if n not in problem["nodes"]]
    if unknown:
        return {"error": f"返回了图里没有的值：{short(unknown)}。"}
    return {"saved": artifact["saved"], "valid": models.recomputable(problem, artifact["saved"]),
            "cost": models.save_cost(problem, artifact["saved"])}


def _compare_min_cut(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if not got["valid"]:
        return Verdict(False, "只靠保存的值和输入，反向无法得到所有需要的值（昂贵的值不能重算，要么保存它，要么保存它之后的值）。",
                       short(expected["saved"]), short(got["saved"]))
    if got["cost"] > expected["cost"]:
        return Verdict(False, "合法，但不是最省的：保存的总字节数大于最优解。",
                       f"{expected['cost']} bytes", f"{got['cost']} bytes")
    return PASS


EXERCISES.append(Exercise(
    id="06.min_cut", title="手写最小割 (min-cut by hand)", function="min_save_set", points=3,
    public_cases=lambda: [
        _problem_case("example", lambda: copy.deepcopy(models.EXAMPLE_PROBLEM), "本节图里的小例子"),
        _problem_case("random-0", lambda: models.random_joint_problem(random.Random(0), 10), "随机的 10 个值"),
    ],
    random_cases=lambda rng: [_problem_case(f"hidden-{i}", lambda seed=rng.randrange(10**6), size=rng.randint(9, 12):
                                            models.random_joint_problem(random.Random(seed), size)) for i in range(3)],
    produce=_min_cut_artifact, analyze=_min_cut_facts, compare=_compare_min_cut,
    hint="把每个值 v 拆成 v_in → v_out（容量 = 它的字节数，割断它 = 保存它；输入容量 0）；生产者 u_out → v_in 容量无穷；"
         "source → 昂贵的值和输入的 _in（无穷）；需要的值的 _out → sink（无穷）。"
         "nx.minimum_cut(g, 'source', 'sink') 返回 (割值, (source 一侧, sink 一侧))：_in 在 source 侧、_out 不在的值就是要保存的。",
))


# --- 06.decompositions ---------------------------------------------------------------

def _activation_case(name: str, names: list, seed: int, description: str = "") -> Case:
    return Case(name, seeded_build(seed, lambda: {
        "fn": models.activation_program(names), "inputs": (torch.randn(4, 8), torch.randn(8, 8))}), description)


def _decomposition_artifact(function, built) -> dict:
    from torch.fx.experimental.proxy_tensor import make_fx

    table = function()
    if not isinstance(table, dict) or not all(isinstance(k, torch._ops.OpOverload) and callable(v)
                                              for k, v in table.items()):
        return {"error": f"decomposition_table 应返回 {{OpOverload: 函数}} 的 dict，实际返回了 {short(table)}。"}
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
    allowed = {name.split(".")[1] + "." + name.split(".")[2] for name in models.ALLOWED_OPS}
    outside = [op for op in got["ops"] if op not in allowed]
    if outside:
        return Verdict(False, f"分解后的图里还有芯片不支持的算子：{', '.join(outside)}。",
                       short(sorted(allowed)), short(got["ops"]))
    return compare_outputs(expected["outputs"], got["outputs"], atol=1e-5, rtol=1e-4)


EXERCISES.append(Exercise(
    id="06.decompositions", title="分解表 (decomposition table)", function="decomposition_table", points=2,
    public_cases=lambda: [
        _activation_case("silu_gelu", ["silu", "gelu_tanh"], 0, "F.silu 和 F.gelu(approximate='tanh')"),
        _activation_case("softplus_mish", ["softplus", "mish"], 1, "F.softplus 和 F.mish"),
    ],
    random_cases=lambda rng: [_activation_case(f"hidden-{i}", rng.sample(models.ACTIVATIONS, 3), rng.randrange(10**6))
                              for i in range(3)],
    produce=_decomposition_artifact, analyze=_decomposition_facts, compare=_compare_decomposition,
    hint="分解表里的函数本身也会被追踪，其中的算子若也在表里会继续被分解：silu、mish 可以直接用 "
         "get_decompositions([...]) 取 PyTorch 的分解，再为 sigmoid、tanh、softplus、gelu 写只用 exp、log、"
         "reciprocal 和四则运算的版本（tanh(x) = 2·sigmoid(2x) − 1）。",
))
