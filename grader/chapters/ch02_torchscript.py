"""Chapter 02 (TorchScript) exercises: trace checking, scripting, IR analysis, migration to torch.cond.

Programs cross from learner code as serialised bytes (``torch.jit.save`` /
``torch.export.save``) carried in a uint8 tensor; the trusted side loads and runs them.
"""
from __future__ import annotations

import io
import operator
import random
import re
import warnings

import torch

from course_models import ch02_models as models

from ..authoring import PASS, Case, Exercise, Verdict, artifact_error, compare_equal, seeded_build, short

EXERCISES: list[Exercise] = []  # in notebook order

TRUSTED_NAMESPACES = ("aten::", "prim::")


def _quiet(call, *args, **kwargs):
    """Run ``call`` without TorchScript's deprecation and tracer warnings (shown in the notebook)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(*args, **kwargs)


def _program_bytes(save, program) -> dict:
    buffer = io.BytesIO()
    _quiet(save, program, buffer)
    return {"program": torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)}


def _load_program(load, artifact, what: str):
    """Trusted side: ``(program, None)`` from the artifact's bytes, or ``(None, error dict)``."""
    if isinstance(artifact, dict) and "error" in artifact:
        return None, artifact
    data = artifact.get("program") if isinstance(artifact, dict) else None
    if type(data) is not torch.Tensor or data.dtype != torch.uint8 or data.dim() != 1:
        return None, {"error": f"评分数据不完整：没有找到序列化的{what}。"}
    try:
        return _quiet(load, io.BytesIO(data.numpy().tobytes())), None
    except Exception as error:
        return None, {"error": f"无法加载返回的{what}：{type(error).__name__}: {str(error).splitlines()[0]}"}


def _compare_program_outputs(expected, got, what: str, labels: list[str] | None = None) -> Verdict:
    """The loaded program's outputs against the reference's, per call, within tolerance;
    ``labels[i]`` says what call ``i`` exercises."""
    if (error := artifact_error(got)) is not None:
        return error
    for index, (want, have) in enumerate(zip(expected["outputs"], got["outputs"])):
        where = f"{what}第 {index + 1} 次调用{labels[index] if labels else ''}"
        if have.shape != want.shape or have.dtype != want.dtype:
            return Verdict(False, f"{where}的输出形状或 dtype 与参考不同。",
                           f"{tuple(want.shape)} {want.dtype}", f"{tuple(have.shape)} {have.dtype}")
        if not torch.allclose(have, want, atol=1e-5, rtol=1e-4):
            worst = (have - want).abs().max().item()
            return Verdict(False, f"{where}的输出与参考不同（最大误差 {worst:.3g}）。",
                           short(want.flatten()[:6]), short(have.flatten()[:6]))
    return PASS


# --- 02.trace_divergence --------------------------------------------------------------
# Each case tests one thing a shadow comparison must get right: a baked value-dependent
# branch or loop, a program that raises, the tolerance of a frozen program (values near
# zero, around one and large), a baked shape rank, a baked dtype. The inputs mix both answers.

def _trace_case(name, seed, make_model, make_args, *, freeze=False, description="") -> Case:
    """``make_args()`` returns ``(example, inputs)``, made under the case's seed after the model."""
    def make():
        model = make_model()
        example, inputs = make_args()
        return {"model": model, "example": example, "inputs": inputs, "freeze": freeze}
    return Case(name, seeded_build(seed, make), description)


def _trace_divergence_artifact(function, built) -> dict:
    model = built["model"]
    traced = _quiet(torch.jit.trace, model, built["example"], check_trace=False)
    if built["freeze"]:
        traced = _quiet(torch.jit.freeze, traced)
    try:
        indices = _quiet(function, traced, model, built["inputs"])
    except RuntimeError as error:  # what a traced program raises; its TorchScript traceback names files
        if isinstance(error, NotImplementedError):
            raise
        return {"error": f"find_divergent_inputs 抛出了 RuntimeError：{str(error).splitlines()[0]}"
                         "（追踪出来的程序报错时，这组输入算作不一致；形状或 dtype 不同的输出也要先判断出来，"
                         "再比较数值：异常不能传出 find_divergent_inputs）。"}
    if not isinstance(indices, (list, tuple)) or not all(type(i) is int for i in indices):
        return {"error": f"find_divergent_inputs 应返回由 int 下标组成的 list，实际返回了 {short(indices)}。"}
    return {"indices": sorted(set(indices))}


def _compare_divergent(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    want, have = expected["indices"], got["indices"]
    if have == want:
        return PASS
    missed, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
    parts = ([f"漏掉了不一致的下标 {missed}"] if missed else []) + \
        ([f"把一致的下标 {extra} 算成了不一致"] if extra else [])
    return Verdict(False, "；".join(parts) + "。", short(want), short(have))


def _flag_case(name, seed, traced_flag: bool, flags: list[bool], description="") -> Case:
    """A tensor flag: tracing bakes the branch of ``traced_flag`` in (values differ)."""
    return _trace_case(name, seed, models.TensorFlagModel, lambda: (
        (torch.randn(3, 4), torch.tensor(traced_flag)), [(torch.randn(3, 4), torch.tensor(f)) for f in flags]),
        description=description)


def _loop_case(name, seed, scales: list[float], description="") -> Case:
    """A data-dependent loop: tracing bakes the example's number of halvings in."""
    return _trace_case(name, seed, models.HalveUntilSmall, lambda: (
        (torch.full((5,), 2.0),), [(torch.randn(5) * s,) for s in scales]), description=description)


def _numpy_case(name, seed, batches: list[int], description="") -> Case:
    """NumPy's result is baked as a constant of the example's shape: another batch size
    raises in the traced program, the same batch size gives other values; the example
    itself agrees."""
    def make_args():
        example = torch.randn(2, 4)
        return (example,), [(example.clone(),) if b == 0 else (torch.randn(b, 4),) for b in batches]
    return _trace_case(name, seed, models.NumpyActivation, make_args, description=description)


def _frozen_case(name, seed, channels: int, scale: float, description="", *,
                 prepare=models.with_trained_batchnorm) -> Case:
    """Frozen Conv-BN: folding changes the last bits only, relatively to the values' size
    (or, with ``with_cancelling_batchnorm`` and small inputs, on values near zero)."""
    return _trace_case(name, seed, lambda: prepare(models.ConvBNReLU(channels)), lambda: (
        (torch.randn(1, 3, 6, 6),), [(torch.randn(2, 3, 6, 6) * scale,) for _ in range(3)]),
        freeze=True, description=description)


def _near_zero_case(name, seed, channels: int, description="") -> Case:
    """Frozen Conv-BN whose outputs are near zero, differing by far less than ``atol``."""
    return _frozen_case(name, seed, channels, 1e-3, description, prepare=models.with_cancelling_batchnorm)


def _rank_case(name, seed, example_rank: int, ranks: list[int], description="") -> Case:
    """A branch on ``x.dim()``: the traced program keeps the example's rank handling, so a
    single sample comes out as ``(4,)`` where eager gives ``(1, 4)`` (or ``(1, 3, 4)``
    against ``(3, 4)``), with the same values."""
    shape = {1: (4,), 2: (3, 4)}
    return _trace_case(name, seed, models.BatchFirst, lambda: (
        (torch.randn(shape[example_rank]),), [(torch.randn(shape[r]),) for r in ranks]), description=description)


def _dtype_case(name, seed, example_dtype: torch.dtype, dtypes: list[torch.dtype], description="") -> Case:
    """A cast to ``x.dtype``: the traced program returns the example's dtype, same values."""
    return _trace_case(name, seed, models.KeepsInputDtype, lambda: (
        (torch.randn(3, 4, dtype=example_dtype),), [(torch.randn(3, 4, dtype=d),) for d in dtypes]),
        description=description)


def _trace_public_cases() -> list[Case]:
    return [
        _flag_case("TensorFlagModel", 0, True, [True, False, True, False], "张量形式的开关：追踪时的分支被固化"),
        _numpy_case("NumpyActivation(batch)", 1, [0, 3, 0, 5],
                    "NumPy 结果被记成常量：batch 与示例不同时追踪结果报错，示例本身一致"),
        _frozen_case("ConvBNReLU(frozen)", 2, 4, 1.0, "freeze 折叠了 BN：只有最后几位不同，不算不一致"),
        _frozen_case("ConvBNReLU(frozen,x100)", 3, 4, 100.0, "同上，输入放大 100 倍：误差随数值一起变大"),
        _near_zero_case("ConvBNReLU(frozen,near 0)", 6, 4,
                        "同上，但输出都接近 0：最后几位的差别远小于 atol，相对误差却不小"),
        _rank_case("BatchFirst", 4, 2, [2, 1, 2, 1], "按 x.dim() 的分支被固化：单个样本的输出形状不同，数值相同"),
        _dtype_case("KeepsInputDtype", 5, torch.float32, [torch.float32, torch.float64, torch.float32],
                    "x.dtype 被固化：float64 输入得到 float32 输出，数值相同"),
    ]


def _trace_designed_cases() -> list[Case]:
    f32, f64 = torch.float32, torch.float64
    return [
        _flag_case("flag-traced-false", 10, False, [False, True, True, False, True]),
        _loop_case("loop-halvings", 11, [0.2, 1.0, 2.0, 8.0, 40.0]),
        _numpy_case("numpy-constant", 12, [2, 0, 2]),
        _numpy_case("numpy-batch", 13, [4, 0, 3, 0]),
        _frozen_case("frozen-8-channels", 14, 8, 1.0),
        _frozen_case("frozen-large-values", 15, 2, 100.0),
        _near_zero_case("frozen-near-zero", 18, 8),
        _rank_case("rank-single-sample-example", 16, 1, [1, 2, 2, 1]),
        _dtype_case("dtype-float64-example", 17, f64, [f32, f64, f32]),
    ]


def _random_trace_case(rng: random.Random, index: int) -> Case:
    """One pitfall of the designed cases, with a random model, example and inputs."""
    seed, name = rng.randrange(10**6), f"random-{index}"
    bools, dtypes = [False, True], [torch.float32, torch.float64]
    match rng.choice(["flag", "loop", "numpy", "frozen", "near-zero", "rank", "dtype"]):
        case "flag":
            return _flag_case(name, seed, rng.choice(bools), [rng.choice(bools) for _ in range(6)])
        case "loop":
            return _loop_case(name, seed, [rng.choice([0.1, 1.0, 4.0, 16.0, 64.0]) for _ in range(6)])
        case "numpy":
            return _numpy_case(name, seed, [rng.choice([0, 0, 2, 3, 5]) for _ in range(5)])
        case "frozen":
            return _frozen_case(name, seed, rng.choice([2, 4, 8]), rng.choice([1.0, 10.0]))
        case "near-zero":
            return _near_zero_case(name, seed, rng.choice([2, 4, 8]))
        case "rank":
            return _rank_case(name, seed, rng.choice([1, 2]), [rng.choice([1, 2]) for _ in range(5)])
        case "dtype":
            return _dtype_case(name, seed, rng.choice(dtypes), [rng.choice(dtypes) for _ in range(4)])


EXERCISES.append(Exercise(
    id="02.trace_divergence", title="找出追踪结果与即时执行不一致的输入",
    stub=(
        'def find_divergent_inputs(traced, eager, inputs) -> list:\n'
        '    """返回 traced 与 eager 不一致（抛异常、形状/dtype 不同或超出容差）的输入下标列表。"""'),
    points=2,
    public_cases=_trace_public_cases,
    designed_cases=_trace_designed_cases,
    random_cases=lambda rng: [_random_trace_case(rng, i) for i in range(4)],
    produce=_trace_divergence_artifact,
    compare=_compare_divergent,
    hint="对每组输入分别调用 eager(*args) 和 traced(*args)；traced 抛出异常也算不一致；"
         "先比较形状和 dtype（torch.allclose 会广播形状，dtype 不同时会报错），"
         "再用 torch.allclose(atol=1e-5, rtol=1e-4) 比较数值。",
))


# --- 02.make_scriptable -----------------------------------------------------------------
# A case is one model and the calls of one kind of ``temperature``: left out or passed as
# None (one case), or floats, a negative one included (another), so that a mistake about
# the argument's type loses only the case it concerns.

OMITTED = "omitted"        # call ``program(x)`` without a temperature
NO_TEMPERATURE = [OMITTED, None]
FLOAT_TEMPERATURES = [0.5, 2.0, -1.0]


def _gate_case(name: str, seed: int, dim: int, temperatures: list, description: str = "") -> Case:
    """A ``NumpyGate`` and inputs that take both of its branches, with ``temperatures``."""
    def make():
        model = models.NumpyGate(dim).eval()
        candidates = [torch.randn(3, dim) + shift for shift in (-2.0, 2.0, -1.0, 1.0, -3.0, 3.0, 0.0, 0.0)]
        with torch.no_grad():
            positive = [x for x in candidates if model.fc1(x).mean() > 0]
            negative = [x for x in candidates if model.fc1(x).mean() <= 0]
        return {"model": model, "inputs": positive[:2] + negative[:2], "temperatures": temperatures}
    return Case(name, seeded_build(seed, make), description)


def _gate_cases(name: str, seed: int, dim: int) -> list[Case]:
    """The two cases of one model: no temperature, float temperatures."""
    return [_gate_case(f"{name} temperature=None", seed, dim, NO_TEMPERATURE, "省略 temperature，或传 None；两个分支"),
            _gate_case(f"{name} temperature=float", seed, dim, FLOAT_TEMPERATURES,
                       f"temperature ∈ {FLOAT_TEMPERATURES}；两个分支")]


def _scripted_artifact(function, built) -> dict:
    scripted = _quiet(function, built["model"])
    if not isinstance(scripted, torch.jit.ScriptModule):
        return {"error": f"make_scriptable 应返回 torch.jit.ScriptModule，实际返回了 {type(scripted).__name__}。"}
    return _program_bytes(torch.jit.save, scripted)


def _untrusted_ops(graph) -> list[str]:
    """Node kinds outside ``aten::``/``prim::`` anywhere in ``graph`` (custom or odd ops)."""
    pending, odd = [graph], []
    while pending:
        for node in pending.pop().nodes():
            if not node.kind().startswith(TRUSTED_NAMESPACES):
                odd.append(node.kind())
            pending.extend(node.blocks())
    return odd


def _call_text(temperature) -> str:
    return "program(x)" if temperature == OMITTED else f"program(x, {temperature})"


def _gate_calls(built) -> list[tuple]:
    """``(x, temperature)`` for every call a case makes, in order."""
    return [(x, t) for x in built["inputs"] for t in built["temperatures"]]


def _run_scripted(artifact, built) -> dict:
    program, error = _load_program(torch.jit.load, artifact, " TorchScript 模块")
    if error is not None:
        return error
    if odd := _untrusted_ops(program.inlined_graph):
        return {"error": f"模块里有 aten/prim 以外的算子：{short(sorted(set(odd)))}。"}
    outputs = []
    with torch.no_grad():
        for x, temperature in _gate_calls(built):
            try:
                outputs.append(program(x) if temperature == OMITTED else program(x, temperature))
            except Exception as error:
                # A class scripted before in this process gets a mangled name: say the learner's.
                first_line = re.sub(r"___torch_mangle_\d+\.", "", str(error).splitlines()[0])
                return {"error": f"脚本模块的调用 {_call_text(temperature)} 运行失败：{type(error).__name__}: {first_line}"}
    return {"outputs": outputs, "labels": [f"（{_call_text(t)}）" for _, t in _gate_calls(built)]}


EXERCISES.append(Exercise(
    id="02.make_scriptable", title="改写模块使其可以 torch.jit.script",
    stub=(
        'def make_scriptable(model: nn.Module) -> torch.jit.ScriptModule:\n'
        '    """返回与 NumpyGate 实例 model 等价（相同权重、两个分支、可选 temperature）的脚本化模块。"""'),
    points=3,
    public_cases=lambda: _gate_cases("NumpyGate(8)", 0, 8),
    designed_cases=lambda: _gate_cases("gate-6", 10, 6) + _gate_cases("gate-16", 11, 16),
    random_cases=lambda rng: _gate_cases("random", rng.randrange(10**6), rng.choice([4, 5, 12])),
    produce=_scripted_artifact, analyze=_run_scripted,
    compare=lambda e, g: _compare_program_outputs(e, g, "脚本模块", e.get("labels")),
    hint="在函数里定义一个新的 nn.Module 子类，复用 model.fc1 / model.fc2；把 np.tanh 换成 torch.tanh，"
         "把 NumPy 标量换成 float，给 temperature 加类型注解 Optional[float] = None，最后 torch.jit.script(实例)。",
))


# --- 02.ir_census -----------------------------------------------------------------------

def _source_case(name: str, source: str, description: str = "") -> Case:
    return Case(name, lambda: {"source": source}, description)


def _module_case(name: str, make_model, description: str = "") -> Case:
    return Case(name, lambda: {"model": make_model()}, description)


def _graph_of(built):
    if "source" in built:
        unit = torch.jit.CompilationUnit(built["source"])
        return next(iter(unit.get_functions())).graph
    return _quiet(torch.jit.script, built["model"]).graph


def _census_artifact(function, built) -> dict:
    census = _quiet(function, _graph_of(built))
    if not isinstance(census, dict) or set(census) != {"ops", "blocks", "max_depth"}:
        return {"error": f"ir_census 应返回含 'ops'、'blocks'、'max_depth' 三个键的 dict，实际返回了 {short(census)}。"}
    ops = census["ops"]
    if not isinstance(ops, dict) or not all(type(v) is int for v in ops.values()):
        return {"error": f"'ops' 应是 {{节点种类: 次数}} 的 dict，实际是 {short(ops)}。"}
    return {"ops": {str(k): v for k, v in ops.items()}, "blocks": census["blocks"], "max_depth": census["max_depth"]}


def _ops_message(expected: dict, got: dict) -> str:
    """What is wrong with the learner's op counts, without the hidden graph's numbers."""
    if set(expected) - set(got):
        return "漏掉了一些节点种类：所有层级的每个节点都要统计，包括 prim::Constant 和块里（以及块里的块里）的节点。"
    if set(got) - set(expected):
        return "统计了图里没有的节点种类：键应是 node.kind()。"
    return "有的节点种类计数不对：每个节点只数一次，块里（以及块里的块里）的节点也要数。"


def _compare_census(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    for key, message in [("ops", _ops_message(expected["ops"], got["ops"])),
                         ("blocks", "块（block）的总数不对：每个 prim::If 有两个块，prim::Loop 有一个，所有层级都要数。"),
                         ("max_depth", "最大嵌套深度不对：没有控制流的图是 0，If/Loop 的块里是 1，块里的块是 2，依此类推。")]:
        if (verdict := compare_equal(expected[key], got[key], message)) is not PASS:
            return verdict
    return PASS


STRAIGHT_LINE = """
def straight_line(x, n: int):
    x = torch.relu(x) * 2.0
    return x + n
"""

TWO_IFS_IN_LOOP = """
def two_ifs_in_loop(x, n: int):
    for i in range(n):
        if bool(x.mean() > 0.0):
            x = x - 1.0
        if bool(x.max() > 2.0):
            x = torch.tanh(x)
        else:
            x = x * 2.0
    return x
"""

IF_IN_LOOP_IN_IF = """
def nested(x, n: int):
    if bool(x.sum() > 0):
        for i in range(n):
            x = torch.sin(x)
            if bool(x.mean() > 0.5):
                x = x - 1.0
    else:
        x = torch.tanh(x)
    return x
"""


def _census_designed_cases() -> list[Case]:
    return [_source_case("straight-line", STRAIGHT_LINE), _source_case("if-in-loop-in-if", IF_IN_LOOP_IN_IF),
            _source_case("two-ifs-in-loop", TWO_IFS_IN_LOOP),
            _module_case("module-while-loop", models.HalveUntilSmall),
            _module_case("module-tensor-flag", models.TensorFlagModel)]


EXERCISES.append(Exercise(
    id="02.ir_census", title="TorchScript IR 普查：算子与嵌套块",
    stub=(
        'def ir_census(graph) -> dict:\n'
        '    """统计所有层级的节点种类、块的总数和最大嵌套深度，返回 {"ops": ..., "blocks": ..., "max_depth": ...}。"""'),
    points=2,
    public_cases=lambda: [
        _source_case("halve_or_shift", models.LOOP_WITH_BRANCH, "prim::Loop 里套一个 prim::If"),
        _module_case("BoolFlagModel", models.BoolFlagModel, "脚本化模块：prim::GetAttr、prim::CallMethod 和一个 prim::If"),
        _source_case("clip_both_sides", models.SIBLING_BRANCHES, "并列的两个 prim::If（第一个没有 else），都不在块里"),
        _source_case("smooth", models.THREE_DEEP, "prim::Loop 里的 prim::If 里还有一个 prim::Loop"),
    ],
    designed_cases=_census_designed_cases,
    random_cases=lambda rng: [_source_case(f"random-{i}", models.random_script_source(rng)) for i in range(4)],
    produce=_census_artifact, compare=_compare_census,
    hint="graph.nodes() 只给出顶层节点；对每个节点再看 node.blocks()，每个块也有 .nodes()，要递归（或用栈）走到底。",
))


# --- 02.cond_migration ------------------------------------------------------------------

EXPORT_CALLS_ALLOWED = (torch.ops.higher_order.cond, operator.getitem)


def _router_case(name: str, seed: int, dim: int, threshold: float, limit: float, description: str = "") -> Case:
    """A ``RoutedExperts`` and inputs on which each of its two ``if``s goes both ways, close
    to its threshold on each side."""
    def make():
        model = models.RoutedExperts(dim, threshold, limit).eval()
        checks = models.router_checks(model, candidates=500)
        return {"model": model, "example": (torch.randn(3, dim),), "checks": checks,
                "routes": [model.routes(x) for x in checks]}
    return Case(name, seeded_build(seed, make), description)


def _exported_artifact(function, built) -> dict:
    program = _quiet(function, built["model"], built["example"])
    if not isinstance(program, torch.export.ExportedProgram):
        return {"error": f"migrate_to_cond 应返回 torch.export.ExportedProgram，实际返回了 {type(program).__name__}。"}
    return _program_bytes(torch.export.save, program)


def _exported_calls(program) -> list:
    """Targets of every call_function node, in the top graph and in the branch subgraphs."""
    return [node.target for module in program.graph_module.modules() if isinstance(module, torch.fx.GraphModule)
            for node in module.graph.nodes if node.op == "call_function"]


def _allowed_export_call(target) -> bool:
    return (isinstance(target, torch._ops.OpOverload) and target.namespace == "aten") or \
        any(target is allowed for allowed in EXPORT_CALLS_ALLOWED)


def _run_exported(artifact, built) -> dict:
    program, error = _load_program(torch.export.load, artifact, " ExportedProgram")
    if error is not None:
        return error
    calls = _exported_calls(program)
    if odd := [str(t) for t in calls if not _allowed_export_call(t)]:
        return {"error": f"导出的程序里有 aten 算子和 torch.cond 以外的调用：{short(sorted(set(odd)))}。"}
    outputs, module = [], program.module()
    with torch.no_grad():
        for index, x in enumerate(built["checks"]):
            try:
                outputs.append(module(x))
            except Exception as error:
                return {"error": f"导出的程序在第 {index + 1} 个输入上运行失败：{type(error).__name__}: "
                                 f"{str(error).splitlines()[0]}"}
    return {"conds": sum(t is torch.ops.higher_order.cond for t in calls), "outputs": outputs,
            "routes": built["routes"]}


def _route_text(route: tuple[bool, bool]) -> str:
    first, second = route
    return (f"第一个 if 走 {'expert_a' if first else 'expert_b'} 分支，"
            f"第二个 if {'缩放' if second else '不缩放'}")


def _compare_cond_migration(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if got["conds"] < expected["conds"]:
        return Verdict(False, "导出的程序里 torch.cond（torch.ops.higher_order.cond）节点太少：模型的每个 prim::If "
                              "都应变成一个 torch.cond（直接去掉 if，导出只记下示例输入走的那条路；"
                              "torch.where 则把两个分支都算一遍，程序里没有分支）。",
                       f"≥ {expected['conds']}", str(got["conds"]))
    labels = [f"（{_route_text(route)}）" for route in expected["routes"]]
    return _compare_program_outputs(expected, got, "导出的程序", labels)


EXERCISES.append(Exercise(
    id="02.cond_migration", title="把数据相关的分支迁移到 torch.cond，再用 torch.export 导出",
    stub=(
        'def migrate_to_cond(model: nn.Module, example: tuple) -> torch.export.ExportedProgram:\n'
        '    """把 RoutedExperts 的两个数据相关的 if 改写成 torch.cond，再用 torch.export 导出。"""'),
    points=3,
    public_cases=lambda: [
        _router_case("RoutedExperts(8,threshold=0.1,limit=1.5)", 0, 8, 0.1, 1.5,
                     "两个 prim::If；输入走过每个 if 的两个分支，并落在两个阈值的两侧附近"),
    ],
    # No random cases: each case costs an export (about a second of CPU), and the designed
    # ones already vary everything the learner's function reads (weights, dim, threshold, limit).
    designed_cases=lambda: [_router_case("router-6-negative-threshold", 10, 6, -0.1, 1.0),
                            _router_case("router-12-limit-2", 11, 12, 0.1, 2.0),
                            _router_case("router-4-defaults", 12, 4, 0.0, 2.0)],
    produce=_exported_artifact, analyze=_run_exported, compare=_compare_cond_migration,
    hint="写一个新的 nn.Module，复用 model.proj / expert_a / expert_b 和 model.threshold / model.limit；"
         "每个 if 写成 torch.cond(谓词张量, true_fn, false_fn, (用到的张量,))，两个分支函数接收同样的参数、"
         "返回形状相同的张量（不缩放的分支返回 h.clone()）；最后 torch.export.export(新模块.eval(), example)。",
))
