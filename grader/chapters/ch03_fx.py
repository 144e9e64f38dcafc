"""Chapter 03 (TorchFX) exercises: graph passes graded on the graphs they produce, and an\nInterpreter subclass graded on the per-node times it measures on the toy chip's simulated clock."""
from __future__ import annotations

import random

import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

from course_models import fx_models as models

from ..authoring import (PASS, Case, Exercise, PerformanceGoal, Verdict, artifact_error, compare_equal,
                        compare_outputs, graph_facts, graph_pass_artifact, seeded_build, short)

EXERCISES: list[Exercise] = []  # in notebook order

RELU_SPELLINGS = ["torch.relu", "F.relu", "nn.ReLU", "Tensor.relu", "torch.tanh"]
DROPOUT_SPELLINGS = ["nn.Dropout", "F.dropout", "torch.relu", "nn.ReLU"]


def _traced(module: torch.nn.Module, *inputs: torch.Tensor, train: bool = False) -> dict:
    module.train(train)
    return {"module": fx.symbolic_trace(module), "inputs": inputs}


def _random_mlp_case(rng: random.Random, spellings: list[str], train: bool, index: int) -> Case:
    seed, width, depth = rng.randrange(10**6), rng.choice([4, 6, 8]), rng.randint(3, 6)
    return Case(f"hidden-{index}", seeded_build(seed, lambda: _traced(
        models.RandomMLP(seed, width, depth, spellings), torch.randn(3, width), train=train)))


# --- 03.op_census -----------------------------------------------------------------

def _census_artifact(function, built) -> dict:
    counts = function(built["module"])
    if not isinstance(counts, dict):
        return {"error": f"count_ops 应返回 dict，实际返回了 {type(counts).__name__}。"}
    return {"counts": {str(k): v for k, v in counts.items()}}


def _compare_census(expected, got) -> Verdict:
    return artifact_error(got) or compare_equal(
        expected["counts"], got["counts"], "统计结果与参考不一致（模块按类名计数，不计 placeholder/get_attr/output）。")


EXERCISES.append(Exercise(
    id="03.op_census", title="算子普查 (op census)", function="count_ops",
    points=2,
    public_cases=lambda: [
        Case("SeedModel", seeded_build(0, lambda: _traced(models.SeedModel(), torch.randn(2, 10))),
             "种子文档中的 Linear-ReLU-Linear 模型"),
        Case("MixedActivations", seeded_build(1, lambda: _traced(models.MixedActivations(), torch.randn(2, 8))),
             "四种写法的 ReLU 混在一起"),
    ],
    random_cases=lambda rng: [_random_mlp_case(rng, RELU_SPELLINGS + DROPOUT_SPELLINGS, False, i) for i in range(3)]
    + [Case("hidden-conv", seeded_build(rng.randrange(10**6), lambda: _traced(models.ConvBNNet(), torch.randn(1, 3, 8, 8))))],
    produce=_census_artifact, compare=_compare_census,
    hint="call_module 节点的 target 是子模块的名字（如 'linear1'），要用 gm.get_submodule(target) 取到模块再看它的类名。",
))


# --- 03.node_profiler ----------------------------------------------------------------

PROFILE_SPELLINGS = ["torch.relu", "nn.ReLU", "Tensor.relu", "torch.tanh", "torch.cos"]
PROFILE_TOLERANCE_US = 1e-6


def _chip_case(name: str, seed: int, make_model, batch: int, width: int, description: str = "") -> Case:
    return Case(name, seeded_build(seed, lambda: _traced(make_model(), torch.randn(batch, width))), description)


def _random_chip_case(rng: random.Random, index: int) -> Case:
    seed, width, depth = rng.randrange(10**6), rng.choice([8, 16, 32]), rng.randint(3, 5)
    return _chip_case(f"hidden-{index}", seed, lambda: models.RandomMLP(seed, width, depth, PROFILE_SPELLINGS),
                      rng.choice([2, 16]), width)


def _profile_artifact(function, built) -> dict:
    import toychip  # registers the "toychip" device

    gm = built["module"].to("toychip")
    times = function(gm, tuple(t.to("toychip") for t in built["inputs"]))
    if not isinstance(times, dict) or not all(type(v) in (int, float) for v in times.values()):
        return {"error": f"profile_nodes 应返回 {{节点名: 模拟微秒数}} 的 dict，实际返回了 {short(times)}。"}
    return {"times": {str(k): float(v) for k, v in times.items()}}


def _compare_profile(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    want, have = expected["times"], got["times"]
    if set(have) != set(want):
        missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
        return Verdict(False, f"统计的节点不对：缺少 {missing or '无'}，多出 {extra or '无'}"
                              "（要统计每个 call_function / call_method / call_module 节点，不统计 placeholder、get_attr、output）。",
                       short(sorted(want)), short(sorted(have)))
    for name, value in want.items():
        if abs(have[name] - value) > PROFILE_TOLERANCE_US:
            return Verdict(False, f"节点 {name} 的模拟时间与参考不同：应是这个节点自己在芯片模拟时钟上的用时"
                                  "（不是墙钟时间，也不是到它为止的累计时间）。",
                           f"{value:.4f} us", f"{have[name]:.4f} us")
    return PASS


EXERCISES.append(Exercise(
    id="03.node_profiler", title="逐节点性能分析器 (Interpreter 子类)", function="profile_nodes",
    points=3,
    public_cases=lambda: [
        _chip_case("ChipBlock", 0, models.ChipBlock, 8, 16,
                   "模块、函数、方法、加法，以及在芯片上走 CPU 回退的 torch.cos"),
        _chip_case("MixedActivations", 1, models.MixedActivations, 4, 8, "四种写法的 ReLU"),
    ],
    random_cases=lambda rng: [_random_chip_case(rng, i) for i in range(2)],
    produce=_profile_artifact, compare=_compare_profile,
    hint="继承 fx.Interpreter，重写 run_node(self, n)：在 with toychip.profile() as p: 里调用 "
         "super().run_node(n)，块结束后把 p.time_us 记到 n.name 下（只记 op 以 call_ 开头的节点），"
         "最后返回结果；用 MyProfiler(gm).run(*inputs) 运行。",
))


# --- 03.relu_to_gelu ----------------------------------------------------------------

RELU_LABELS = {"relu", "ReLU", "relu_"}


def _compare_rewrite(expected, got, *, forbidden: set[str], what: str) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    left = sorted(label for label in got["nodes"] if label in forbidden)
    if left:
        return Verdict(False, f"图中仍有 {what} 节点：{', '.join(left)}。")
    return compare_outputs(expected["outputs"], got["outputs"])


EXERCISES.append(Exercise(
    id="03.relu_to_gelu", title="ReLU → GELU 改写", function="relu_to_gelu",
    points=2,
    public_cases=lambda: [
        Case("SeedModel", seeded_build(0, lambda: _traced(models.SeedModel(), torch.randn(4, 10))),
             "种子文档中的模型（torch.relu）"),
        Case("MixedActivations", seeded_build(1, lambda: _traced(models.MixedActivations(), torch.randn(4, 8))),
             "torch.relu、F.relu、nn.ReLU 和 Tensor.relu 四种写法"),
    ],
    random_cases=lambda rng: [_random_mlp_case(rng, RELU_SPELLINGS, False, i) for i in range(3)],
    produce=graph_pass_artifact, analyze=graph_facts,
    compare=lambda e, g: _compare_rewrite(e, g, forbidden=RELU_LABELS, what="ReLU"),
    hint="ReLU 在 FX 图里有三种 op：call_function（torch.relu、F.relu）、call_method（x.relu()）和 call_module（nn.ReLU）。",
))


# --- 03.remove_dropout ----------------------------------------------------------------

DROPOUT_LABELS = {"dropout", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"}

EXERCISES.append(Exercise(
    id="03.remove_dropout", title="推理时删除 Dropout", function="remove_dropout",
    points=2,
    public_cases=lambda: [
        Case("ModelWithDropout(eval)", seeded_build(0, lambda: _traced(models.ModelWithDropout(), torch.randn(4, 10))),
             "eval 模式下追踪：F.dropout(training=False) 也留在图里"),
        Case("ModelWithDropout(train)", seeded_build(1, lambda: _traced(models.ModelWithDropout(), torch.randn(4, 10), train=True)),
             "train 模式下追踪：dropout 会随机置零，必须删掉"),
    ],
    random_cases=lambda rng: [_random_mlp_case(rng, DROPOUT_SPELLINGS, True, i) for i in range(3)],
    produce=graph_pass_artifact, analyze=graph_facts,
    compare=lambda e, g: _compare_rewrite(e, g, forbidden=DROPOUT_LABELS, what="Dropout"),
    hint="Dropout 既可能是 nn.Dropout 模块（call_module），也可能是 F.dropout 函数（call_function）；"
         "删除前先 node.replace_all_uses_with(node.args[0])。",
))


# --- 03.fold_conv_bn ----------------------------------------------------------------

def _conv_bn_case(name: str, seed: int, make_model, shape=(2, 3, 8, 8), description: str = "") -> Case:
    def make():
        model = models.randomize_batchnorm_stats(make_model(), torch.Generator().manual_seed(seed))
        return _traced(model, torch.randn(*shape))
    return Case(name, seeded_build(seed, make), description)


def _compare_folding(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    want, have = expected["nodes"].count("BatchNorm2d"), got["nodes"].count("BatchNorm2d")
    if have != want:
        return Verdict(False, "剩下的 BatchNorm2d 数目不对：能折叠的（前面是只有一个使用者的 Conv2d）都要折叠，其余必须保留。",
                       str(want), str(have))
    return compare_outputs(expected["outputs"], got["outputs"], atol=1e-4, rtol=1e-4)


EXERCISES.append(Exercise(
    id="03.fold_conv_bn", title="Conv2d + BatchNorm2d 折叠", function="fold_conv_bn",
    points=3,
    public_cases=lambda: [
        _conv_bn_case("ConvBNNet", 0, models.ConvBNNet, description="两对可折叠的 Conv+BN（一个 conv 没有 bias）和一个池化后的 BN"),
        _conv_bn_case("SharedConvOutput", 1, models.SharedConvOutput, shape=(2, 3, 6, 6),
                      description="conv 的输出还被残差相加使用：不能折叠"),
    ],
    random_cases=lambda rng: [
        _conv_bn_case(f"hidden-{i}", rng.randrange(10**6), lambda c=rng.choice([2, 5, 8]): models.ConvBNNet(c))
        for i in range(3)
    ],
    produce=graph_pass_artifact, analyze=graph_facts, compare=_compare_folding,
    performance=PerformanceGoal(lambda artifact: len(artifact["nodes"]), 1.0,
                                "折叠后的节点数不应多于参考实现"),
    hint="s = gamma / sqrt(running_var + eps)；新权重 w * s（按输出通道），新偏置 (b - mean) * s + beta；"
         "conv 没有 bias 时 b 取 0；conv 的输出若还有别的使用者就不能折叠。",
))


# --- 03.fusion_groups ----------------------------------------------------------------

UNARY = [torch.sin, torch.cos, torch.relu, torch.sigmoid, torch.tanh, torch.exp, torch.neg]


def random_pointwise_program(rng: random.Random):
    """A function of (x, y) mixing pointwise ops, matmuls, reductions and reused values."""
    steps = []
    for _ in range(rng.randint(6, 11)):
        kind = rng.choices(["unary", "scalar", "matmul", "reuse", "reduce"], [5, 4, 1, 1, 1])[0]
        steps.append((kind, rng.choice(UNARY), rng.choice([0.5, 2.0, 3.0])))

    def program(x, y):
        values = [x]
        for kind, unary, constant in steps:
            last = values[-1]
            if kind == "unary":
                values.append(unary(last))
            elif kind == "scalar":
                values.append(last * constant)
            elif kind == "matmul":
                values.append(last @ y)
            elif kind == "reuse":
                values.append(last + values[max(0, len(values) - 3)])
            else:
                values.append(last - last.sum())
        return values[-1]
    return program


def _aten_case(name: str, program, description: str = "") -> Case:
    return Case(name, lambda: {"module": make_fx(program)(torch.randn(4, 4), torch.randn(4, 4))}, description)


def _groups_artifact(function, built) -> dict:
    groups = function(built["module"])
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, (list, tuple, set)) for g in groups):
        return {"error": f"find_fusion_groups 应返回由节点名列表组成的 list，实际返回了 {short(groups)}。"}
    return {"groups": sorted(sorted(str(getattr(n, "name", n)) for n in group) for group in groups)}


EXERCISES.append(Exercise(
    id="03.fusion_groups", title="逐点算子融合分组 (fusion groups)", function="find_fusion_groups",
    points=3,
    public_cases=lambda: [
        _aten_case("pointwise_chains", models.pointwise_chains, "被 matmul 和多次使用的值切开的逐点链"),
        _aten_case("single_chain", lambda x, y: torch.relu((x + 1) * 2 - 0.5), "一条完整的逐点链"),
    ],
    random_cases=lambda rng: [_aten_case(f"hidden-{i}", random_pointwise_program(rng)) for i in range(4)],
    produce=_groups_artifact,
    compare=lambda e, g: artifact_error(g) or compare_equal(e["groups"], g["groups"], "找到的融合组与参考不一致。"),
    hint="只有当生产者恰好只有一个使用者 (len(node.users) == 1) 时，它才能和消费者融合；"
         "判断逐点算子用 torch.Tag.pointwise in node.target.tags。",
))
