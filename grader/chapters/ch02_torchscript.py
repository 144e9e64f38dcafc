"""Chapter 02 (TorchScript) exercises: trace checking, scripting, IR analysis, migration to torch.cond.

Programs cross from learner code as serialised bytes (``torch.jit.save`` /
``torch.export.save``) carried in a uint8 tensor; the trusted side loads and runs them.
"""
from __future__ import annotations

import io
import operator
import random
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

def _trace_case(name, seed, make_model, example, inputs, *, freeze=False, description="") -> Case:
    """``example`` and ``inputs`` are functions making argument tuples under the case's seed."""
    def make():
        model = make_model()
        return {"model": model, "example": example(), "inputs": inputs(), "freeze": freeze}
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
                         "（追踪出来的程序在某组输入上报错时，这组输入算作不一致，异常不能传出来）。"}
    if not isinstance(indices, (list, tuple)) or not all(type(i) is int for i in indices):
        return {"error": f"find_divergent_inputs 应返回由 int 下标组成的 list，实际返回了 {short(indices)}。"}
    return {"indices": sorted(set(indices))}


def _flag_inputs(flags):
    return lambda: [(torch.randn(3, 4), torch.tensor(flag)) for flag in flags]


def _random_trace_case(rng: random.Random, index: int) -> Case:
    """One of the four pitfalls, with a random model, example and inputs."""
    seed, kind, name = rng.randrange(10**6), rng.choice(["flag", "loop", "numpy", "convbn"]), f"hidden-{index}"
    if kind == "flag":
        traced_flag, flags = rng.random() < 0.5, [rng.random() < 0.5 for _ in range(6)]
        return _trace_case(name, seed, models.TensorFlagModel,
                           lambda: (torch.randn(3, 4), torch.tensor(traced_flag)), _flag_inputs(flags))
    if kind == "loop":
        scales = [rng.choice([0.1, 1.0, 4.0, 16.0, 64.0]) for _ in range(6)]
        return _trace_case(name, seed, models.HalveUntilSmall, lambda: (torch.full((5,), 2.0),),
                           lambda: [(torch.randn(5) * s,) for s in scales])
    if kind == "numpy":
        batches = [rng.choice([2, 2, 3]) for _ in range(5)]
        return _trace_case(name, seed, models.NumpyActivation, lambda: (torch.randn(2, 4),),
                           lambda: [(torch.randn(b, 4),) for b in batches])
    channels = rng.choice([2, 4, 8])
    return _trace_case(name, seed, lambda: models.with_trained_batchnorm(models.ConvBNReLU(channels)),
                       lambda: (torch.randn(1, 3, 6, 6),), lambda: [(torch.randn(2, 3, 6, 6),) for _ in range(4)],
                       freeze=True)


EXERCISES.append(Exercise(
    id="02.trace_divergence", title="找出追踪结果与即时执行不一致的输入", function="find_divergent_inputs",
    points=2,
    public_cases=lambda: [
        _trace_case("TensorFlagModel", 0, models.TensorFlagModel, lambda: (torch.randn(3, 4), torch.tensor(True)),
                    _flag_inputs([True, False, True, False]), description="张量形式的开关：追踪时的分支被固化"),
        _trace_case("NumpyActivation", 1, models.NumpyActivation, lambda: (torch.randn(2, 4),),
                    lambda: [(torch.randn(2, 4),), (torch.randn(3, 4),)],
                    description="NumPy 计算被记录成常量；batch 不同时追踪结果直接报错"),
        _trace_case("ConvBNReLU(frozen)", 2, lambda: models.with_trained_batchnorm(models.ConvBNReLU()),
                    lambda: (torch.randn(1, 3, 8, 8),), lambda: [(torch.randn(2, 3, 8, 8),) for _ in range(3)],
                    freeze=True, description="freeze 折叠了 BN：只有最后几位不同，不算不一致"),
    ],
    random_cases=lambda rng: [_random_trace_case(rng, i) for i in range(4)],
    produce=_trace_divergence_artifact,
    compare=lambda e, g: artifact_error(g) or compare_equal(e["indices"], g["indices"], "找到的不一致输入下标与参考不同。"),
    hint="对每组输入分别调用 eager(*args) 和 traced(*args)；traced 抛出异常也算不一致；"
         "比较数值要用 torch.allclose(atol=1e-5, rtol=1e-4)，并先比较形状和 dtype。",
))


# --- 02.make_scriptable -----------------------------------------------------------------

TEMPERATURES = [None, 0.5, 2.0]


def _gate_case(name: str, seed: int, dim: int, description: str = "") -> Case:
    """A ``NumpyGate`` and inputs that take both of its branches."""
    def make():
        model = models.NumpyGate(dim).eval()
        candidates = [torch.randn(3, dim) + shift for shift in (-2.0, 2.0, -1.0, 1.0, -3.0, 3.0, 0.0, 0.0)]
        with torch.no_grad():
            positive = [x for x in candidates if model.fc1(x).mean() > 0]
            negative = [x for x in candidates if model.fc1(x).mean() <= 0]
        return {"model": model, "inputs": positive[:2] + negative[:2]}
    return Case(name, seeded_build(seed, make), description)


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


def _run_scripted(artifact, built) -> dict:
    program, error = _load_program(torch.jit.load, artifact, " TorchScript 模块")
    if error is not None:
        return error
    if odd := _untrusted_ops(program.inlined_graph):
        return {"error": f"模块里有 aten/prim 以外的算子：{short(sorted(set(odd)))}。"}
    outputs = []
    with torch.no_grad():
        for x in built["inputs"]:
            for temperature in TEMPERATURES:
                try:
                    outputs.append(program(x) if temperature is None else program(x, temperature))
                except Exception as error:
                    return {"error": f"脚本模块在 temperature={temperature} 时运行失败："
                                     f"{type(error).__name__}: {str(error).splitlines()[0]}"}
    return {"outputs": outputs}


EXERCISES.append(Exercise(
    id="02.make_scriptable", title="改写模块使其可以 torch.jit.script", function="make_scriptable",
    points=3,
    public_cases=lambda: [_gate_case("NumpyGate(8)", 0, 8, "两个分支 × temperature ∈ {None, 0.5, 2.0}")],
    random_cases=lambda rng: [_gate_case(f"hidden-{i}", rng.randrange(10**6), rng.choice([4, 6, 12, 16]))
                              for i in range(3)],
    produce=_scripted_artifact, analyze=_run_scripted,
    compare=lambda e, g: _compare_program_outputs(e, g, "脚本模块"),
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


def _compare_census(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    for key, message in [("ops", "各种节点的计数与参考不同（别忘了 prim::If / prim::Loop 的块里的节点）。"),
                         ("blocks", "块（block）的总数不对：每个 prim::If 有两个块，prim::Loop 有一个。"),
                         ("max_depth", "最大嵌套深度不对：没有控制流的图是 0，If/Loop 的块里是 1，依此类推。")]:
        if (verdict := compare_equal(expected[key], got[key], message)) is not PASS:
            return verdict
    return PASS


EXERCISES.append(Exercise(
    id="02.ir_census", title="TorchScript IR 普查：算子与嵌套块", function="ir_census",
    points=2,
    public_cases=lambda: [
        _source_case("halve_or_shift", models.LOOP_WITH_BRANCH, "prim::Loop 里套一个 prim::If"),
        _module_case("BoolFlagModel", models.BoolFlagModel, "脚本化模块：prim::GetAttr、prim::CallMethod 和一个 prim::If"),
    ],
    random_cases=lambda rng: [_source_case(f"hidden-{i}", models.random_script_source(rng)) for i in range(4)]
    + [_module_case("hidden-module", models.HalveUntilSmall)],
    produce=_census_artifact, compare=_compare_census,
    hint="graph.nodes() 只给出顶层节点；对每个节点再看 node.blocks()，每个块也有 .nodes()，要递归（或用栈）走到底。",
))


# --- 02.cond_migration ------------------------------------------------------------------

EXPORT_CALLS_ALLOWED = (torch.ops.higher_order.cond, operator.getitem)


def _router_case(name: str, seed: int, dim: int, threshold: float, limit: float, description: str = "") -> Case:
    """A ``RoutedExperts`` and inputs on which each of its two ``if``s goes both ways."""
    def make():
        model = models.RoutedExperts(dim, threshold, limit).eval()
        checks = models.inputs_taking_every_route(model)
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
    function="migrate_to_cond", points=3,
    public_cases=lambda: [
        _router_case("RoutedExperts(8)", 0, 8, 0.0, 2.0, "两个 prim::If；输入覆盖每个 if 的两个分支"),
    ],
    random_cases=lambda rng: [_router_case(f"hidden-{i}", rng.randrange(10**6), rng.choice([4, 6, 12]),
                                           rng.choice([-0.1, 0.0, 0.1]), rng.choice([1.0, 1.5, 2.0]))
                              for i in range(1)],
    produce=_exported_artifact, analyze=_run_exported, compare=_compare_cond_migration,
    hint="写一个新的 nn.Module，复用 model.proj / expert_a / expert_b 和 model.threshold / model.limit；"
         "每个 if 写成 torch.cond(谓词张量, true_fn, false_fn, (用到的张量,))，两个分支函数接收同样的参数、"
         "返回形状相同的张量（不缩放的分支返回 h.clone()）；最后 torch.export.export(新模块.eval(), example)。",
))
