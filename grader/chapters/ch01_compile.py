"""Chapter 01 (torch.compile) exercises: a recording backend, predicting recompilations,
removing graph breaks, a rewrite that must be fast once compiled, and reading Inductor's code.

Graphs cross from learner code as :mod:`grader.graph_codec` data: the sandbox captures what
Dynamo hands a backend, the trusted side rebuilds it, runs it on hidden inputs and, for the
speed exercise, compiles and times *its own* rebuilt graph against the eager original.
"""
from __future__ import annotations

import contextlib
import functools
import io
import logging
import random

import torch

from course_models import ch01_models as models

from ..authoring import (PASS, Case, Exercise, SpeedGoal, Verdict, artifact_error, compare_equal,
                        compare_outputs, seeded_build, short)
from ..sandbox.graph_codec import GraphCodecError, decode, encode

EXERCISES: list[Exercise] = []  # in notebook order


def _is_count_dict(value) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and type(v) is int for k, v in value.items())


# --- 01.graph_recorder ------------------------------------------------------------------

def _recorder_case(name: str, seed: int, fn, inputs, description: str = "") -> Case:
    """``fn`` called on ``randn(*shape) * scale + shift`` for each ``(shape, scale, shift)``."""
    def make():
        return {"fn": fn, "inputs": [torch.randn(*shape) * scale + shift for shape, scale, shift in inputs]}
    return Case(name, seeded_build(seed, make), description)


def recorder_artifact(function, built) -> dict:
    """Sandbox side: the op counts of every graph the learner's backend received."""
    torch._dynamo.reset()
    with contextlib.redirect_stdout(io.StringIO()):  # the programs print on purpose (a graph break)
        records = function(built["fn"], [x.clone() for x in built["inputs"]])
    if not isinstance(records, (list, tuple)) or not all(_is_count_dict(r) for r in records):
        return {"error": f"record_graphs 应返回由 {{算子名: 次数}} dict 组成的 list，实际返回了 {short(records)}。"}
    return {"graphs": [dict(r) for r in records]}


def _compare_records(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    want, have = expected["graphs"], got["graphs"]
    if len(want) != len(have):
        return Verdict(False, "后端收到的图的个数不对：每次图中断之后的代码、每次重新编译 (recompile) 都会产生一张新图。",
                       str(len(want)), str(len(have)))
    for index, (w, h) in enumerate(zip(want, have)):
        if w != h:
            return Verdict(False, f"第 {index} 张图的算子计数与参考不同（只数 call_function 和 call_method 节点）。",
                           short(w), short(h))
    return PASS


EXERCISES.append(Exercise(
    id="01.graph_recorder", title="自定义后端：记录每张图和它的算子", function="record_graphs",
    points=3,
    public_cases=lambda: [
        _recorder_case("running_stats", 0, models.running_stats, [((8,), 1, shift) for shift in (1, -1, 1, -1)],
                       "两处图中断；两个分支各走两次"),
        _recorder_case("seed_chain", 1, models.seed_chain, [((n,), 1, 0) for n in (4, 8, 16, 8)],
                       "没有图中断，但形状在变：自动动态形状 (automatic dynamic shapes)"),
        _recorder_case("adaptive_clip", 2, models.adaptive_clip, [((16,), scale, 0) for scale in (0.1, 2.0, 0.1)],
                       ".item() 之后的代码依赖一个 Python 数"),
    ],
    random_cases=lambda rng: [
        _recorder_case(f"hidden-{i}", rng.randrange(10**6), models.random_program(rng),
                       [((rng.choice([3, 5, 8]),), 1, 0) for _ in range(rng.randint(1, 3))])
        for i in range(4)
    ],
    produce=recorder_artifact, compare=_compare_records,
    hint="后端是一个函数 backend(gm, example_inputs)：把 gm 的算子计数存进一个外部的 list，然后 return gm.forward。"
         "计数：node.op == 'call_function' 用 node.target.__name__，'call_method' 用 node.target（字符串）。",
))


# --- 01.fused_kernels ----------------------------------------------------------------------------

@functools.cache
def generated_code(program: str) -> str:
    """Trusted side: the Python wrapper Inductor generates for one of ``KERNEL_PROGRAMS``."""
    from torch._inductor.utils import run_and_get_code  # Inductor loads slowly: only when needed

    fn, shapes = models.KERNEL_PROGRAMS[program]
    torch._dynamo.reset()
    inputs = [torch.randn(*shape, generator=torch.Generator().manual_seed(0)) for shape in shapes]
    _, sources = run_and_get_code(torch.compile(fn), *inputs)
    torch._dynamo.reset()
    return sources[0]


def _kernels_case(name: str, program: str, description: str = "") -> Case:
    return Case(name, lambda: {"code": generated_code(program)}, description)


def kernels_artifact(function, built) -> dict:
    launches = function(built["code"])
    if not isinstance(launches, (list, tuple)) or not all(isinstance(k, str) for k in launches):
        return {"error": f"kernel_launches 应返回由字符串组成的 list，实际返回了 {short(launches)}。"}
    return {"launches": list(launches)}


EXERCISES.append(Exercise(
    id="01.fused_kernels", title="读生成的代码：找出融合内核与库调用", function="kernel_launches",
    points=2,
    public_cases=lambda: [
        _kernels_case("scaled_seed_chain", "scaled_seed_chain", "一条逐点链（乘以第二个输入）"),
        _kernels_case("linear_gelu", "linear_gelu", "逐点 → 矩阵乘 → 逐点"),
        _kernels_case("matmul_chain", "matmul_chain", "两次矩阵乘"),
    ],
    random_cases=lambda rng: [_kernels_case(f"hidden-{i}", program)
                              for i, program in enumerate(rng.sample(sorted(models.KERNEL_PROGRAMS), 2))],
    produce=kernels_artifact,
    compare=lambda e, g: artifact_error(g) or compare_equal(
        e["launches"], g["launches"], "call() 依次启动的内核与参考不同（融合内核用它的名字，库调用写成 extern_kernels.xxx）。"),
    hint="只看 def call(self, args): 的函数体：其中形如 cpp_fused_…(…) 和 extern_kernels.…(…) 的行就是一次次内核启动，"
         "按出现的顺序收集；文件前面 cpp_fused_… = async_compile… 是内核的定义，不是启动。",
))


# --- 01.count_compilations ------------------------------------------------------------------

FEATURES = 5  # the feature dimension never changes, and differs from every batch size (no duck sizing)
BATCHES = [1, 2, 3, 7, 8, 16, 32, 64, 128]


def _double(x):
    return x * 2 + 1


@functools.cache
def measured_compilations(batch_sizes: tuple[int, ...], dynamic) -> int:
    """Trusted side: how often Dynamo really compiles ``x * 2 + 1`` for these batch sizes
    (the same for the reference and the learner: measured once per case)."""
    compiled_graphs = []

    def counting_backend(gm, example_inputs):
        compiled_graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    dynamo_log = logging.getLogger("torch._dynamo")
    level = dynamo_log.level
    dynamo_log.setLevel(logging.ERROR)  # the recompile-limit warning is part of the lesson, not of the feedback
    try:
        compiled = torch.compile(_double, backend=counting_backend, dynamic=dynamic)
        for batch in batch_sizes:
            compiled(torch.ones(batch, FEATURES))
    finally:
        dynamo_log.setLevel(level)
        torch._dynamo.reset()
    return len(compiled_graphs)


def _compilations_case(name: str, batch_sizes: list[int], dynamic, description: str = "") -> Case:
    return Case(name, lambda: {"batch_sizes": list(batch_sizes), "dynamic": dynamic}, description)


def compilations_artifact(function, built) -> dict:
    count = function(list(built["batch_sizes"]), built["dynamic"])
    if type(count) is not int:
        return {"error": f"count_compilations 应返回 int，实际返回了 {short(count)}。"}
    return {"count": count}


def _with_measurement(artifact: dict, built: dict) -> dict:
    if "error" in artifact:
        return artifact
    return {**artifact, "measured": measured_compilations(tuple(built["batch_sizes"]), built["dynamic"]),
            "dynamic": built["dynamic"]}


def _compare_compilations(expected, got) -> Verdict:
    return artifact_error(got) or compare_equal(
        got["measured"], got["count"], f"预测的编译次数与 Dynamo 实测的不同（dynamic={got['dynamic']}）。")


def _random_compilations_case(rng: random.Random, index: int) -> Case:
    dynamic = rng.choice([None, None, False, True])
    batches = [rng.choice(BATCHES) for _ in range(rng.randint(2, 12))]
    return _compilations_case(f"hidden-{index}", batches, dynamic)


EXERCISES.append(Exercise(
    id="01.count_compilations", title="预测编译次数：dynamic=None / False / True", function="count_compilations",
    points=2,
    public_cases=lambda: [
        _compilations_case(f"seed-dynamic={d}", [16, 32, 64, 128], d, "种子文档的 batch 序列")
        for d in (None, False, True)
    ] + [
        _compilations_case("batch-1", [8, 1, 8, 3, 1], None, "batch 为 1 的输入总是被特化 (0/1 specialization)"),
        _compilations_case("many-shapes", [2, 3, 7, 8, 16, 32, 64, 128, 1, 2], False, "10 种形状，dynamic=False"),
    ],
    random_cases=lambda rng: [_random_compilations_case(rng, i) for i in range(8)],
    produce=compilations_artifact, analyze=_with_measurement, confine_analysis=False,
    compare=_compare_compilations,
    hint="dynamic=False：每种新形状编译一次，但最多 torch._dynamo.config.recompile_limit（8）次；"
         "dynamic=True：batch ≥ 2 共用一张动态图，batch 为 1 另有一张；"
         "dynamic=None：第一张图是静态的，第一次看到不同的 batch（≥ 2）时编译一张动态图。",
))


# --- capturing a rewrite as one graph (01.remove_graph_breaks, 01.compile_friendly) -----------

def capture_artifact(function, built) -> dict:
    """Sandbox side: every graph Dynamo captures from the learner's function, serialised."""
    torch._dynamo.reset()
    with contextlib.redirect_stdout(io.StringIO()):
        explained = torch._dynamo.explain(function)(built["example"].clone())
    try:
        graphs = [encode(gm) for gm in explained.graphs]
    except GraphCodecError as error:
        return {"error": f"捕获的图无法评分：{error}（请只用 torch 的张量运算，例如 torch.where，而不是 torch.cond）。"}
    return {"graph_breaks": explained.graph_break_count, "graphs": graphs}


MAX_NODES = 200  # the rewrites need a dozen nodes; a bound keeps the trusted side's compile small


def _single_graph(artifact: dict):
    """``(graph module, None)`` when the capture is exactly one graph, else ``(None, error dict)``."""
    if "error" in artifact:
        return None, artifact
    breaks, graphs = artifact.get("graph_breaks"), artifact.get("graphs")
    if type(breaks) is not int or not isinstance(graphs, list):
        return None, {"error": "评分数据不完整：没有找到捕获的图。"}
    if breaks != 0 or len(graphs) != 1:
        return None, {"error": f"Dynamo 捕获到 {len(graphs)} 张图、{breaks} 次图中断；要求恰好 1 张图、0 次图中断。"}
    nodes = graphs[0].get("nodes") if isinstance(graphs[0], dict) else None
    if not isinstance(nodes, list) or len(nodes) > MAX_NODES:
        return None, {"error": f"捕获的图格式不对或超过 {MAX_NODES} 个节点（这里的改写只需要十几个运算）。"}
    try:
        return decode(graphs[0]), None
    except GraphCodecError as error:
        return None, {"error": f"捕获的图不合法，无法重建：{error}"}


def _run_graph(gm, x: torch.Tensor):
    outputs = gm(x)
    return outputs[0] if isinstance(outputs, (tuple, list)) and len(outputs) == 1 else outputs


def single_graph_facts(artifact: dict, built: dict) -> dict:
    """Trusted side: rebuild the one captured graph and run it on the case's hidden inputs."""
    gm, error = _single_graph(artifact)
    if error is not None:
        return error
    try:
        with torch.no_grad():
            return {"outputs": [_run_graph(gm, x) for x in built["inputs"]]}
    except Exception as error:
        return {"error": f"在用例输入上运行捕获的图时出错：{type(error).__name__}: {str(error)[:200]}"}


def _compare_capture(expected, got) -> Verdict:
    return artifact_error(got) or compare_outputs(expected["outputs"], got["outputs"])


def _branch_case(name: str, seed: int, size: int, pairs, description: str = "", timed: bool = False) -> Case:
    """Inputs ``randn(size) * scale + shift`` for each ``(scale, shift)`` in ``pairs``, chosen to
    take every branch; Dynamo captures from the first."""
    def make():
        inputs = [torch.randn(size) * scale + shift for scale, shift in pairs]
        return {"example": inputs[0].clone(), "inputs": inputs, "timed": timed}
    return Case(name, seeded_build(seed, make), description)


EXERCISES.append(Exercise(
    id="01.remove_graph_breaks", title="消除图中断 (graph breaks)", function="running_stats_fixed",
    points=2,
    public_cases=lambda: [
        _branch_case("both-branches", 0, 8, [(1, 1), (1, -1), (1, 2), (1, -2)], "total > 0 和 total ≤ 0 两个分支"),
        _branch_case("other-first", 1, 32, [(1, -1), (1, 1)], "捕获时走的是另一个分支"),
    ],
    random_cases=lambda rng: [
        _branch_case(f"hidden-{i}", rng.randrange(10**6), rng.choice([5, 16, 64]),
                     [(rng.choice([0.5, 1.0, 3.0]), rng.choice([-2, -1, 1, 2])) for _ in range(4)])
        for i in range(3)
    ],
    produce=capture_artifact, analyze=single_graph_facts, compare=_compare_capture,
    hint="print 会中断图：删掉它；if total > 0 按张量的值分支：两边都算出来，用 torch.where(total > 0, 甲, 乙) 选；"
         "list.append 不会中断图，可以保留。",
))


# --- 01.compile_friendly ------------------------------------------------------------------------

SPEED_NUMEL = 2**21          # ~2M floats: memory-bound, where fusion pays on any CPU
# Ratio of the fastest of 25 one-call samples: short samples are the likeliest to run without
# being preempted. Under two CPU burners on 2 cores (benchmarks/timing_false_failures.py, 200
# runs) the reference's worst ratio was 0.39, under half the threshold; with 9 samples of 3
# calls it was 0.57. The needless sort's best ratio was 21.5.
SPEED = SpeedGoal(1.0, "编译后的图不比 eager 的 adaptive_clip 快。检查是否有多余的计算或无法融合的写法",
                  repeats=25, number=1)


def speed_facts(artifact: dict, built: dict) -> dict:
    """Outputs of the rebuilt graph; on timed cases also how fast Inductor's compilation of
    it runs against the eager original. Measured where analysis runs (the grader's confined
    analysis process; the learner's kernel in self-study), on a graph rebuilt from the
    artifact, never on learner code."""
    facts = single_graph_facts(artifact, built)
    if "error" not in facts and built["timed"]:
        graph, _ = _single_graph(artifact)
        x = torch.randn(SPEED_NUMEL, generator=torch.Generator().manual_seed(0)) * 2
        with torch.no_grad():
            compiled = torch.compile(graph)
            compiled(x)
            facts["speed_ratio"] = SPEED.measure(compiled, models.adaptive_clip, (x,))
    return facts


def _compare_speed(expected, got) -> Verdict:
    """Equal outputs first; then, on timed cases, the compiled graph must beat eager."""
    verdict = _compare_capture(expected, got)
    if not verdict.ok or "speed_ratio" not in got:
        return verdict
    return SPEED.judge_ratio(got["speed_ratio"])


EXERCISES.append(Exercise(
    id="01.compile_friendly", title="改写成编译友好的代码，并真正变快", function="adaptive_clip_fast",
    points=3,
    public_cases=lambda: [
        _branch_case("both-branches(timed)", 0, 64, [(0.2, 0), (2.0, 0), (0.1, 0), (5.0, 0)],
                     "limit ≤ 1 与 limit > 1 两个分支；在 200 万个数上计时", timed=True),
        _branch_case("large-first", 1, 16, [(3.0, 0), (0.2, 0)], "捕获时走的是 limit > 1 的分支"),
    ],
    random_cases=lambda rng: [
        _branch_case(f"hidden-{i}", rng.randrange(10**6), rng.choice([9, 32, 100]),
                     rng.sample([(0.1, 0), (0.2, 0), (2.0, 0), (4.0, 0)], 4), timed=i == 0)
        for i in range(2)
    ],
    produce=capture_artifact, analyze=speed_facts, compare=_compare_speed,
    hint="把 .item() 去掉，让 limit 保持为 0 维张量；两个分支都算出来再用 torch.where(limit > 1, 甲, 乙) 选。",
))


# --- 01.bisect_backends ---------------------------------------------------------------------------

def _bisect_case(name: str, seed: int, steps: list[str], bug, inputs: list[tuple[float, float]],
                 description: str = "") -> Case:
    """``BisectProgram(steps)`` on ``rand(16) * scale + shift`` for each ``(scale, shift)``,
    the pipeline with ``bug`` injected."""
    def make():
        return {"fn": models.BisectProgram(steps), "stages": models.pipeline(bug),
                "inputs": [(torch.rand(16) * scale + shift,) for scale, shift in inputs]}
    return Case(name, seeded_build(seed, make), description)


def bisect_artifact(function, built) -> dict:
    torch._dynamo.reset()
    try:
        stage = function(built["fn"], [tuple(t.clone() for t in args) for args in built["inputs"]], list(built["stages"]))
    finally:
        torch._dynamo.reset()
    names = [name for name, _ in built["stages"]]
    if stage is not None and stage not in names:
        return {"error": f"first_divergent_stage 应返回阶段名之一（{', '.join(names)}）或 None，实际返回了 {short(stage)}。"}
    return {"stage": stage}


def _compare_bisect(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if got["stage"] == expected["stage"]:
        return PASS
    if expected["stage"] is None:
        message = "所有阶段的输出都与 eager 在容差内一致（浮点运算换了顺序，结果只差最后几位，不算出错），应返回 None。"
    elif got["stage"] is None:
        message = f"阶段 {expected['stage']} 的输出与 eager 不同，但你没有发现：要检查每一个输入。"
    else:
        message = f"第一个与 eager 不一致的阶段是 {expected['stage']}：阶段是累加的，出错之后的阶段也会不一致，要返回第一个。"
    return Verdict(False, message, short(expected["stage"]), short(got["stage"]))


BISECT_BUGS = {"decompose": "gelu", "graph_pass": "scale", "codegen": "relu"}  # the step each bug needs


def _random_bisect_case(rng: random.Random, index: int) -> Case:
    bug = rng.choice([None, *BISECT_BUGS])
    steps = rng.sample(sorted(models.BisectProgram.STEPS), rng.randint(2, 4))
    if bug is not None and BISECT_BUGS[bug] not in steps:
        steps.insert(rng.randrange(len(steps) + 1), BISECT_BUGS[bug])
    inputs = [(1.0, 0.5), (4.0, -2.0)] if rng.random() < 0.5 else [(4.0, -2.0)]
    return _bisect_case(f"hidden-{index}", rng.randrange(10**6), steps, bug, inputs)


EXERCISES.append(Exercise(
    id="01.bisect_backends", title="二分定位出错的编译阶段 (bisecting backends)", function="first_divergent_stage",
    points=3,
    public_cases=lambda: [
        _bisect_case("gelu", 0, ["scale", "gelu", "relu"], "decompose", [(4.0, -2.0)], "某个分解 (decomposition) 写错了"),
        _bisect_case("relu-positive-first", 1, ["shift", "relu", "tanh"], "codegen", [(1.0, 0.5), (4.0, -2.0)],
                     "第一个输入全为正：只有第二个输入暴露问题"),
        _bisect_case("no-bug", 2, ["scale", "tanh"], None, [(4.0, -2.0)], "没有错误，但有一个改变舍入的常量折叠"),
        _bisect_case("fold", 3, ["square", "scale", "relu"], "graph_pass", [(4.0, -2.0)], "图变换 (graph pass) 写错了"),
    ],
    random_cases=lambda rng: [_random_bisect_case(rng, i) for i in range(2)],
    produce=bisect_artifact, compare=_compare_bisect,
    hint="第一步：先用 eager 算出每个输入的参考输出。第二步：按顺序对每个 (name, backend)：torch._dynamo.reset()，"
         "compiled = torch.compile(fn, backend=backend)，在每个输入上与参考比较，用 torch.allclose(..., rtol=1e-4, atol=1e-5)"
         "（不要用 torch.equal）。第三步：第一个不一致的阶段就返回它的名字；都一致返回 None。",
))
