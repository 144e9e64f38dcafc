"""Chapter 03 (TorchFX) exercises: graph passes graded on the graphs they produce, and an\nInterpreter subclass graded on the per-node times it measures on the toy chip's simulated clock."""
from __future__ import annotations

import copy
import random
from typing import Callable

import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

from course_models import ch03_models as models

from ..authoring import (PASS, Case, Exercise, PerformanceGoal, Verdict, artifact_error, compare_equal,
                        compare_outputs, graph_facts, graph_pass_artifact, seeded_build, short)

EXERCISES: list[Exercise] = []  # in notebook order

RELU_SPELLINGS = ["torch.relu", "torch.relu_", "F.relu", "F.relu(inplace)", "Tensor.relu", "Tensor.relu_",
                  "nn.ReLU", "nn.ReLU(inplace)"]


def _traced(module: torch.nn.Module, *inputs: torch.Tensor, train: bool = False) -> dict:
    module.train(train)
    return {"module": fx.symbolic_trace(module), "inputs": inputs}


_built: dict = {}


def _cached_build(key, make) -> Callable[[], dict]:
    """A ``Case.build`` that makes the case once per ``key`` and hands out deep copies (passes
    mutate what they get). Building -- a model, its trace -- is most of the cost of grading a
    case of this chapter, and every case is built again for each learner and each analysis."""
    def build() -> dict:
        if key not in _built:
            _built[key] = make()
        return copy.deepcopy(_built[key])
    return build


def _frozen(value):
    """``value`` with its dicts and lists made into tuples, to be part of a cache key."""
    if isinstance(value, dict):
        return tuple((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def _model_case(name: str, seed: int, model: tuple, shape: tuple, *, train: bool = False,
                randomize_bn: bool = False, description: str = "") -> Case:
    """``model`` is ``(factory, *args)``: ``factory(*args)`` traced, its weights and one input of
    ``shape`` drawn from ``seed`` (with ``randomize_bn``, its BatchNorm statistics too)."""
    factory, *args = model

    def make() -> dict:
        module = factory(*args)
        if randomize_bn:
            models.randomize_batchnorm_stats(module, torch.Generator().manual_seed(seed))
        return _traced(module, torch.randn(*shape), train=train)
    key = (factory, _frozen(args), seed, shape, train, randomize_bn)
    return Case(name, _cached_build(key, seeded_build(seed, make)), description)


def _spelled_mlp_case(name: str, seed: int, spellings: list[str], *, width: int = 6, batch: int = 3,
                      train: bool = False, description: str = "") -> Case:
    return _model_case(name, seed, (models.SpelledMLP, spellings, width), (batch, width), train=train,
                       description=description)


def _draw_spellings(rng: random.Random, pool: list[str], depth: int, needed: list[str] = ()) -> list[str]:
    """``depth`` spellings drawn from ``pool``; with ``needed``, at least one of those among them."""
    spellings = [rng.choice(pool) for _ in range(depth)]
    if needed and not set(spellings) & set(needed):
        spellings[rng.randrange(depth)] = rng.choice(needed)
    return spellings


def _random_mlp_cases(rng: random.Random, pool: list[str], count: int, *, needed: list[str] = (),
                      train: bool = False) -> list[Case]:
    cases = []
    for index in range(count):
        seed, width = rng.randrange(10**6), rng.choice([4, 6, 8])
        spellings = _draw_spellings(rng, pool, rng.randint(3, 6), needed)
        cases.append(_spelled_mlp_case(f"random_mlp_{index}", seed, spellings, width=width, train=train))
    return cases


def _random_conv_bn_case(name: str, seed: int) -> Case:
    """A ``RandomConvBNNet`` drawn from ``seed``, its norms' statistics as after training."""
    return _model_case(name, seed, (models.RandomConvBNNet, seed), (2, 4, 16, 16), randomize_bn=True)


# --- 03.op_census -----------------------------------------------------------------

def _census_artifact(function, built) -> dict:
    counts = function(built["module"])
    if not isinstance(counts, dict):
        return {"error": f"count_ops 应返回 dict，实际返回了 {type(counts).__name__}。"}
    return {"counts": {str(k): v for k, v in counts.items()}}


def _compare_census(expected, got) -> Verdict:
    return artifact_error(got) or compare_equal(
        expected["counts"], got["counts"],
        "统计结果与参考不一致（按图中的调用节点计数：函数和方法按名字，模块按类名；"
        "同一个模块调用两次算两次；不计 placeholder/get_attr/output）。")


EXERCISES.append(Exercise(
    id="03.op_census", title="算子普查 (op census)",
    stub=(
        'def count_ops(gm: fx.GraphModule) -> dict:\n'
        '    """统计图中各操作的调用次数：函数/方法按名字，模块按类名；不计 placeholder/get_attr/output。"""'),
    points=2,
    public_cases=lambda: [
        _model_case("SeedModel", 0, (models.SeedModel,), (2, 10), description="种子文档中的 Linear-ReLU-Linear 模型"),
        _model_case("MixedActivations", 1, (models.MixedActivations,), (2, 8), description="四种写法的 ReLU 混在一起"),
        _model_case("CensusModel", 2, (models.CensusModel,), (2, 8),
                    description="Sequential 里的层、调用两次的层、读参数（get_attr）、Tensor 方法、声明了却没调用的层"),
    ],
    designed_cases=lambda: [
        _model_case("gated_residual", 3, (models.GatedResidual,), (2, 6)),
        _spelled_mlp_case("shared_relu_module", 4, ["nn.ReLU", "Tensor.relu", "nn.ReLU", "F.relu"]),
        _model_case("conv_bn_net", 5, (models.ConvBNNet,), (1, 3, 8, 8)),
    ],
    random_cases=lambda rng: _random_mlp_cases(rng, list(models.SPELLINGS), 2)
    + [_random_conv_bn_case("random_conv_bn", rng.randrange(10**6))],
    produce=_census_artifact, compare=_compare_census,
    hint="call_module 节点的 target 是子模块的路径（如 'linear1'、'block.0'），要用 gm.get_submodule(target) "
         "取到模块再看它的类名；计数要遍历图的节点，而不是模型声明的子模块。",
))


# --- 03.node_profiler ----------------------------------------------------------------

PROFILE_SPELLINGS = ["torch.relu", "nn.ReLU", "Tensor.relu", "torch.tanh", "torch.cos"]
PROFILE_TOLERANCE_US = 1e-6


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
        return Verdict(False, f"统计的节点不对：缺少 {len(missing)} 个，多出 {len(extra)} 个"
                              "（键是 node.name；要统计每个 call_function / call_method / call_module 节点，"
                              "不统计 placeholder、get_attr、output）。",
                       short(sorted(want)), short(sorted(have)))
    for name, value in want.items():
        if abs(have[name] - value) > PROFILE_TOLERANCE_US:
            return Verdict(False, "有节点的模拟时间与参考不同：应是这个节点自己在芯片模拟时钟上的用时"
                                  "（包括 CPU 回退的拷贝；不是墙钟时间，也不是到它为止的累计时间）。",
                           f"{name}: {value:.4f} us", f"{name}: {have[name]:.4f} us")
    return PASS


EXERCISES.append(Exercise(
    id="03.node_profiler", title="逐节点性能分析器 (Interpreter 子类)",
    stub=(
        'def profile_nodes(gm: fx.GraphModule, inputs: tuple) -> dict:\n'
        '    """用 fx.Interpreter 的子类运行 gm(*inputs)，返回 {节点名: 该节点在玩具芯片模拟时钟上的用时（微秒）}。"""'),
    points=3,
    public_cases=lambda: [
        _model_case("ChipBlock", 0, (models.ChipBlock,), (8, 16),
                    description="模块、函数、方法、加法，以及在芯片上走 CPU 回退的 torch.cos"),
        _model_case("MixedActivations", 1, (models.MixedActivations,), (4, 8), description="四种写法的 ReLU"),
    ],
    designed_cases=lambda: [
        _model_case("wide_chip_block", 2, (models.ChipBlock, 32), (4, 32)),
        _spelled_mlp_case("methods_and_fallback", 3, ["Tensor.relu", "torch.cos", "nn.ReLU", "torch.tanh"],
                          width=16, batch=8),
    ],
    random_cases=lambda rng: _random_mlp_cases(rng, PROFILE_SPELLINGS, 2),
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
    id="03.relu_to_gelu", title="ReLU → GELU 改写",
    stub=(
        'def relu_to_gelu(gm: fx.GraphModule) -> fx.GraphModule:\n'
        '    """把所有写法的 ReLU（函数、方法、模块）改写成 F.gelu，返回 recompile 后的 GraphModule。"""'),
    points=2,
    public_cases=lambda: [
        _model_case("SeedModel", 0, (models.SeedModel,), (4, 10), description="种子文档中的模型（torch.relu）"),
        _model_case("MixedActivations", 1, (models.MixedActivations,), (4, 8),
                    description="torch.relu、F.relu、nn.ReLU 和 Tensor.relu 四种写法"),
        _model_case("InplaceActivations", 2, (models.InplaceActivations,), (4, 8),
                    description="原地写法：F.relu(x, inplace=True)、nn.ReLU(inplace=True)、x.relu_()、torch.relu_"),
        _model_case("ReLULookalikes", 3, (models.ReLULookalikes,), (4, 8),
                    description="名字里带 relu 却不是 ReLU 的 ReLU6、LeakyReLU、relu6、leaky_relu（要保留），和一个 F.relu"),
    ],
    # one case per spelling, so that each spelling handled earns its share
    designed_cases=lambda: [
        _spelled_mlp_case(f"only_{spelling}", 10 + index, [spelling, "torch.tanh", spelling])
        for index, spelling in enumerate(RELU_SPELLINGS)
    ] + [
        _model_case("relu_in_sequential", 4, (models.GatedResidual,), (3, 6)),
        _model_case("relu_lookalikes", 5, (models.ReLULookalikes,), (3, 8)),
    ],
    random_cases=lambda rng: _random_mlp_cases(rng, RELU_SPELLINGS + ["torch.tanh", "torch.cos"], 3,
                                               needed=RELU_SPELLINGS),
    produce=graph_pass_artifact, analyze=graph_facts,
    compare=lambda e, g: _compare_rewrite(e, g, forbidden=RELU_LABELS, what="ReLU"),
    hint="ReLU 在 FX 图里有三种 op：call_function（torch.relu、F.relu、torch.relu_）、call_method（x.relu()、x.relu_()）"
         "和 call_module（nn.ReLU，要看 gm.get_submodule(target) 的类型）；换上的是精确的 F.gelu，不带 inplace 参数。",
))


# --- 03.remove_dropout ----------------------------------------------------------------

DROPOUT_LABELS = {"dropout", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"}
# Every remove_dropout case holds a dropout other than nn.Dropout: seed 000's pass (nn.Dropout
# modules only, the section's starting point) earns nothing, as tests/grading/test_cli.py expects.
NOT_SEED_DROPOUTS = ["F.dropout", "nn.Dropout1d", "nn.AlphaDropout"]

EXERCISES.append(Exercise(
    id="03.remove_dropout", title="推理时删除 Dropout",
    stub=(
        'def remove_dropout(gm: fx.GraphModule) -> fx.GraphModule:\n'
        '    """删除所有 nn.Dropout* 模块调用和 F.dropout 调用，返回 recompile 后的 GraphModule。"""'),
    points=2,
    public_cases=lambda: [
        _model_case("ModelWithDropout(eval)", 0, (models.ModelWithDropout,), (4, 10),
                    description="eval 模式下追踪：F.dropout(training=False) 也留在图里"),
        _model_case("ModelWithDropout(train)", 1, (models.ModelWithDropout,), (4, 10), train=True,
                    description="train 模式下追踪：dropout 会随机置零，必须删掉"),
        _model_case("DropoutVariants(train)", 2, (models.DropoutVariants,), (4, 3, 6), train=True,
                    description="nn.Dropout1d、nn.AlphaDropout、nn.FeatureAlphaDropout，名字里不带 dropout"),
    ],
    designed_cases=lambda: [
        _spelled_mlp_case("functional_train", 3, ["F.dropout", "torch.relu", "F.dropout"], train=True),
        _spelled_mlp_case("functional_eval", 4, ["F.dropout", "torch.relu", "F.dropout"]),
        _spelled_mlp_case("dropout_subclasses", 5, ["nn.Dropout1d", "nn.AlphaDropout", "nn.Dropout"], train=True),
        _model_case("variants_traced_in_eval", 6, (models.DropoutVariants,), (2, 3, 6)),
    ],
    random_cases=lambda rng: _random_mlp_cases(rng, ["nn.Dropout", "torch.relu", "nn.ReLU"] + NOT_SEED_DROPOUTS, 3,
                                               needed=NOT_SEED_DROPOUTS, train=True),
    produce=graph_pass_artifact, analyze=graph_facts,
    compare=lambda e, g: _compare_rewrite(e, g, forbidden=DROPOUT_LABELS, what="Dropout"),
    hint="Dropout 既可能是 nn.Dropout* 模块（call_module，按类型判断：isinstance(m, nn.modules.dropout._DropoutNd)），"
         "也可能是 F.dropout 函数（call_function）；删除前先 node.replace_all_uses_with(node.args[0])。",
))


# --- 03.fold_conv_bn ----------------------------------------------------------------

def _conv_bn_case(name: str, seed: int, model: tuple, shape=(2, 3, 8, 8), description: str = "") -> Case:
    """A model with Conv2d and BatchNorm2d layers, its norms' statistics as after training, in eval mode."""
    return _model_case(name, seed, model, shape, randomize_bn=True, description=description)


def _pair_case(name: str, seed: int, conv: dict, bn: dict | None = None, reuse: str = "",
               description: str = "") -> Case:
    """One Conv2d→BatchNorm2d pair (``models.ConvBN``) on a (2, in_channels, 8, 8) input."""
    return _conv_bn_case(name, seed, (models.ConvBN, conv, bn, reuse), (2, conv["in_channels"], 8, 8), description)


def _conv(in_channels: int = 3, out_channels: int = 4, kernel_size: int = 3, **options) -> dict:
    return {"in_channels": in_channels, "out_channels": out_channels, "kernel_size": kernel_size,
            "padding": kernel_size // 2, **options}


def _compare_folding(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    want, have = expected["nodes"].count("BatchNorm2d"), got["nodes"].count("BatchNorm2d")
    if have != want:
        return Verdict(False, "剩下的 BatchNorm2d 数目不对：输入来自一个 Conv2d、且这个卷积的输出只有这一个使用者的 BN "
                              "都要折叠（BN 自己的输出被使用几次无关紧要），其余必须保留。", str(want), str(have))
    return compare_outputs(expected["outputs"], got["outputs"], atol=1e-4, rtol=1e-4)


EXERCISES.append(Exercise(
    id="03.fold_conv_bn", title="Conv2d + BatchNorm2d 折叠",
    stub=(
        'def fold_conv_bn(gm: fx.GraphModule) -> fx.GraphModule:\n'
        '    """把 eval 模式下、前面是单一使用者 Conv2d 的 BatchNorm2d 折叠进卷积，返回 recompile 后的 GraphModule。"""'),
    points=3,
    public_cases=lambda: [
        _conv_bn_case("ConvBNNet", 0, (models.ConvBNNet,), description="两对可折叠的 Conv+BN（一个 conv 没有 bias）和一个池化后的 BN"),
        _conv_bn_case("SharedConvOutput", 1, (models.SharedConvOutput,), shape=(2, 3, 6, 6),
                      description="conv 的输出还被残差相加使用：不能折叠"),
        _conv_bn_case("ConvBNVariants", 2, (models.ConvBNVariants,), shape=(2, 4, 9, 9),
                      description="分组、空洞、reflect 填充的卷积接 eps=0.1 的 BN；步长 2 的卷积接 affine=False 的 BN"),
        _pair_case("BNOutputReused", 12, _conv(), reuse="bn",
                   description="BN 的输出被使用两次（z * sigmoid(z)）：卷积的输出只有 BN 一个使用者，仍要折叠"),
    ],
    # one conv or norm parameter per case, so that each one handled earns its share
    designed_cases=lambda: [
        _pair_case("conv_without_bias", 3, _conv(bias=False)),
        _pair_case("grouped_conv", 4, _conv(4, 6, groups=2)),
        _pair_case("dilated_strided_conv", 5, _conv(padding=2, dilation=2, stride=2)),
        _pair_case("circular_padding", 6, _conv(padding_mode="circular")),
        _pair_case("bn_eps", 7, _conv(), {"eps": 0.1}),
        _pair_case("bn_without_affine", 8, _conv(kernel_size=1), {"affine": False}),
        _pair_case("conv_output_reused", 9, _conv(), reuse="conv"),
        _pair_case("bn_output_reused", 10, _conv(), reuse="bn"),
        _conv_bn_case("norm_not_after_conv", 11, (models.NormNotAfterConv,)),
    ],
    random_cases=lambda rng: [_random_conv_bn_case(f"random_conv_bn_{i}", rng.randrange(10**6)) for i in range(2)],
    produce=graph_pass_artifact, analyze=graph_facts, compare=_compare_folding,
    performance=PerformanceGoal(lambda artifact: len(artifact["nodes"]), 1.0,
                                "折叠后的节点数不应多于参考实现（BN 要并进卷积的权重和偏置，而不是换成别的节点）"),
    hint="s = gamma / sqrt(running_var + eps)（affine=False 时 gamma=1、beta=0）；新权重 w * s（按输出通道），"
         "新偏置 (b - mean) * s + beta，conv 没有 bias 时 b 取 0；卷积的其他超参数（stride、padding、dilation、"
         "groups、padding_mode）保持不变；conv 的输出若还有别的使用者就不能折叠。",
))


# --- 03.fusion_groups ----------------------------------------------------------------

UNARY = [torch.sin, torch.cos, torch.relu, torch.sigmoid, torch.tanh, torch.exp, torch.neg]
PROGRAM_STEPS = {"unary": 5, "scalar": 4, "matmul": 1, "reuse": 1, "reduce": 1, "view": 1, "cast": 1, "merge": 2,
                 "output": 1}


def random_program_steps(rng: random.Random) -> tuple:
    """Steps of a random ``(x, y)`` program: pointwise ops, matmuls, reductions, reused
    values, views, dtype casts, fresh pointwise chains of ``y`` merging in, and values
    returned midway (the output node is one more user)."""
    kinds, weights = list(PROGRAM_STEPS), list(PROGRAM_STEPS.values())
    return tuple((rng.choices(kinds, weights)[0], rng.choice(UNARY), rng.choice([0.5, 2.0, 3.0]))
                 for _ in range(rng.randint(6, 11)))


def program_of(steps: tuple):
    """The function of ``(x, y)`` that ``steps`` describe (see :func:`random_program_steps`)."""
    def program(x, y):
        values, returned = [x], []
        for kind, unary, constant in steps:
            last = values[-1]
            if kind == "output":
                returned.append(last)
            elif kind == "unary":
                values.append(unary(last))
            elif kind == "scalar":
                values.append(last * constant)
            elif kind == "matmul":
                values.append(last @ y)
            elif kind == "reuse":
                values.append(last + values[max(0, len(values) - 3)])
            elif kind == "reduce":
                values.append(last - last.sum())
            elif kind == "view":
                values.append(last.t())
            elif kind == "cast":
                values.append(last.to(torch.float64).to(torch.float32))
            else:
                values.append(unary(y * constant) + last)
        return (values[-1], *returned) if returned else values[-1]
    return program


def _aten_case(name: str, program, description: str = "", *, key=None) -> Case:
    """An ATen graph of ``program(x, y)`` (``make_fx`` is slow: traced once per ``key``,
    by default the case name, for the fixed programs)."""
    def make() -> dict:
        return {"module": make_fx(program)(torch.randn(4, 4), torch.randn(4, 4))}
    return Case(name, _cached_build(("aten", key or name), make), description)


def _groups_artifact(function, built) -> dict:
    groups = function(built["module"])
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, (list, tuple, set)) for g in groups):
        return {"error": f"find_fusion_groups 应返回由节点名列表组成的 list，实际返回了 {short(groups)}。"}
    return {"groups": sorted(sorted(str(getattr(n, "name", n)) for n in group) for group in groups)}


def _compare_groups(expected, got) -> Verdict:
    return artifact_error(got) or compare_equal(
        expected["groups"], got["groups"],
        "找到的融合组与参考不一致（组里只有带 pointwise 标签的节点；生产者只有一个使用者时才与消费者同组，"
        "图的 output 节点也算使用者；分组可传递；只返回至少 2 个节点的组）。")


# Programs of the designed cases, one rule each.

def _value_with_two_users(x, y):
    a = torch.sin(x)
    return a.cos() + a.exp()


def _value_returned_and_consumed(x, y):
    a = torch.sin(x)
    return a, a * 2


def _chain_end_with_two_users(x, y):
    a = torch.tanh(x) * 2 + 1
    return torch.sin(a), torch.cos(a)


def _lone_pointwise_nodes(x, y):
    return torch.sin(x) @ y, torch.cos(y).sum(), torch.exp(x) * 2


def _second_operand(x, y):
    return x.sum() - torch.sigmoid(y * 3)


def _chains_merge(x, y):
    return torch.sin(x) * 2 + torch.cos(y) * 3


def _views_and_casts(x, y):
    return (x + 1).t().sin() * 2, (y.exp().double() * 2).float().neg()


def _after_matmul(x, y):
    return torch.sigmoid(x @ y) * 2


def _square(x, y):
    a = torch.relu(x - 1)
    return a * a


EXERCISES.append(Exercise(
    id="03.fusion_groups", title="逐点算子融合分组 (fusion groups)",
    stub=(
        'def find_fusion_groups(gm: fx.GraphModule) -> list[list[str]]:\n'
        '    """在 ATen 图上找出逐点算子的融合组：生产者只有一个使用者时与消费者同组；返回每组（≥2 个节点）的节点名列表。"""'),
    points=3,
    public_cases=lambda: [
        _aten_case("pointwise_chains", models.pointwise_chains, "被 matmul 和多次使用的值切开的逐点链"),
        _aten_case("single_chain", lambda x, y: torch.relu((x + 1) * 2 - 0.5), "一条完整的逐点链"),
        _aten_case("merging_chains", models.merging_chains, "两条链在加法处汇合；转置（view）隔开的 cos；sum 作为减法的第一个操作数"),
        _aten_case("returned_midway", models.returned_midway,
                   "链中间的一个值既被返回、又被下一个逐点算子使用：output 节点也是它的使用者"),
    ],
    # one rule per case, so that each rule handled earns its share
    designed_cases=lambda: [
        _aten_case("value_with_two_users", _value_with_two_users),
        _aten_case("value_returned_and_consumed", _value_returned_and_consumed),
        _aten_case("chain_end_with_two_users", _chain_end_with_two_users),
        _aten_case("lone_pointwise_nodes", _lone_pointwise_nodes),
        _aten_case("second_operand", _second_operand),
        _aten_case("chains_merge", _chains_merge),
        _aten_case("views_and_casts", _views_and_casts),
        _aten_case("after_matmul", _after_matmul),
        _aten_case("value_used_twice_by_one_op", _square),
    ],
    random_cases=lambda rng: [
        _aten_case(f"random_program_{i}", program_of(steps), key=steps)
        for i, steps in enumerate(random_program_steps(rng) for _ in range(4))
    ],
    produce=_groups_artifact, compare=_compare_groups,
    hint="只有当生产者恰好只有一个使用者 (len(node.users) == 1；被返回的值还有 output 这个使用者) 时，"
         "它才能和消费者融合；要看消费者的每一个输入 (node.all_input_nodes)，两个组通过同一个消费者连上时要合并；"
         "判断逐点算子用 torch.Tag.pointwise in node.target.tags。",
))

