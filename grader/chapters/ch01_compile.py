"""Chapter 01 (torch.compile) exercises: a recording backend, predicting recompilations,
removing graph breaks, a rewrite that must be fast once compiled, and reading Inductor's code.

Graphs cross from learner code as :mod:`grader.graph_codec` data: the sandbox captures what
Dynamo hands a backend, the trusted side rebuilds it, runs it on hidden inputs and, for the
speed exercise, compiles *its own* rebuilt graph with Inductor, counts the kernels the
generated code launches and times it against the eager original.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import logging
import random
import re

import torch

from course_models import ch01_models as models

from ..authoring import (PASS, Case, Exercise, SpeedGoal, Verdict, artifact_error, compare_equal,
                        compare_outputs, seeded_build, short)
from ..sandbox.graph_codec import GraphCodecError, decode, encode

EXERCISES: list[Exercise] = []  # in notebook order


def _is_count_dict(value) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and type(v) is int for k, v in value.items())


# --- 01.graph_recorder ------------------------------------------------------------------

def _recorder_case(name: str, seed: int, program: str, inputs, description: str = "") -> Case:
    """``RECORDER_PROGRAMS[program]`` called on ``randn(size) * scale + shift`` for each
    ``(size, scale, shift)``, in order."""
    def make():
        return {"fn": models.RECORDER_PROGRAMS[program],
                "inputs": [torch.randn(size) * scale + shift for size, scale, shift in inputs]}
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
    if len(have) > len(want):
        return Verdict(False, "后端收到的图比实际编译的多：后端只在编译时被调用一次，之后守卫满足的调用直接复用编译好的图，"
                              "不会再交给后端（也不要在两次调用之间 reset，那会丢掉已编译的图）。",
                       str(len(want)), str(len(have)))
    if len(have) < len(want):
        return Verdict(False, "后端收到的图比实际编译的少：每次图中断之后的代码、每次重新编译 (recompile) 都会交给后端一张新图。",
                       str(len(want)), str(len(have)))
    for index, (w, h) in enumerate(zip(want, have)):
        if w != h:
            return Verdict(False, f"第 {index} 张图的算子计数与参考不同（只数 call_function 和 call_method 节点，"
                                  "名字用 node.target.__name__ 或方法名）。", short(w), short(h))
    return PASS


def _random_recorder_case(rng: random.Random, index: int) -> Case:
    """A program of the pool on one or two inputs (each compiles in a tenth of a second or so)."""
    inputs = [(rng.choice([3, 5, 8]), rng.choice([0.1, 1.0, 2.0]), rng.choice([-1, 0, 1]))
              for _ in range(rng.randint(1, 2))]
    return _recorder_case(f"hidden-{index}", rng.randrange(10**6), rng.choice(sorted(models.RECORDER_PROGRAMS)), inputs)


EXERCISES.append(Exercise(
    id="01.graph_recorder", title="自定义后端：记录每张图和它的算子",
    stub=(
        'def record_graphs(fn, inputs: list) -> list[dict]:\n'
        '    """用自定义后端编译 fn，依次在 inputs 上调用；返回后端收到的每张图的 {算子名: 次数}（call_function 与 call_method）。"""'),
    points=3,
    public_cases=lambda: [
        _recorder_case("running_stats", 0, "running_stats", [(8, 1, shift) for shift in (1, -1, 1, -1)],
                       "两处图中断；两个分支各走两次"),
        _recorder_case("seed_chain", 1, "seed_chain", [(n, 1, 0) for n in (4, 8, 16, 8)],
                       "没有图中断，但形状在变：自动动态形状 (automatic dynamic shapes)"),
        _recorder_case("adaptive_clip", 2, "adaptive_clip", [(16, scale, 0) for scale in (0.1, 2.0, 0.1)],
                       ".item() 之后的代码依赖一个 Python 数"),
    ],
    designed_cases=lambda: [
        _recorder_case("list-then-new-shape", 3, "list_append", [(8, 1, 0), (8, 1, 0), (5, 1, 0)]),
        _recorder_case("value-branch-both-ways", 4, "value_branch", [(5, 1, -1), (5, 1, 1), (3, 1, -1)]),
        _recorder_case("three-sizes", 9, "pointwise_chain", [(3, 1, 0), (5, 1, 0), (8, 1, 0)]),
    ],
    random_cases=lambda rng: [_random_recorder_case(rng, 0)],
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


PUBLIC_KERNEL_PROGRAMS = {"linear_gelu": "逐点 → 矩阵乘 → 逐点",
                          "matmul_chain": "两次矩阵乘，中间和之后各有逐点运算",
                          "attention": "批量矩阵乘 (bmm) → softmax → 批量矩阵乘",
                          "mlp_bias": "两次带偏置的矩阵乘 (addmm)，各接一个逐点运算"}
HIDDEN_KERNEL_PROGRAMS = sorted(set(models.KERNEL_PROGRAMS) - set(PUBLIC_KERNEL_PROGRAMS))


def kernels_artifact(function, built) -> dict:
    launches = function(built["code"])
    if not isinstance(launches, (list, tuple)) or not all(isinstance(k, str) for k in launches):
        return {"error": f"kernel_launches 应返回由字符串组成的 list，实际返回了 {short(launches)}。"}
    return {"launches": list(launches)}


EXERCISES.append(Exercise(
    id="01.fused_kernels", title="读生成的代码：找出融合内核与库调用",
    stub=(
        'def kernel_launches(code: str) -> list[str]:\n'
        '    """按顺序返回生成代码中 call() 启动的内核：融合内核的名字，库调用写成 extern_kernels.xxx。"""'),
    points=2,
    public_cases=lambda: [_kernels_case(program, program, description)
                          for program, description in PUBLIC_KERNEL_PROGRAMS.items()],
    designed_cases=lambda: [_kernels_case(program, program) for program in ("two_outputs", "linear_sigmoid", "scores_bias")],
    random_cases=lambda rng: [_kernels_case(f"hidden-{i}", program)
                              for i, program in enumerate(rng.sample(HIDDEN_KERNEL_PROGRAMS, 2))],
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


def _batch_sequences(count: int) -> list[list[tuple[list[int], object]]]:
    """Fixed pools of ``(batch sizes, dynamic)``, one per kind of trap: dynamic=None after a
    leading 1, dynamic=False with sizes that come back, dynamic=True with a 1 among them, and
    anything. Each seed draws one from each pool, so Dynamo is measured once per pool entry
    however many seeds are graded."""
    rng = random.Random(1)

    def draw(sizes: list[int], low: int = 2) -> list[int]:
        return [rng.choice(sizes) for _ in range(rng.randint(low, 12))]

    def with_one(batches: list[int]) -> list[int]:
        batches[rng.randrange(len(batches))] = 1
        return batches

    kinds = [lambda: ([1, *draw(BATCHES)], None),
             lambda: (draw(rng.sample(BATCHES, 3), low=4), False),
             lambda: (with_one(draw(BATCHES)), True),
             lambda: (draw(BATCHES), rng.choice([None, False, True]))]
    return [[kind() for _ in range(count)] for kind in kinds]


BATCH_SEQUENCES = _batch_sequences(6)


EXERCISES.append(Exercise(
    id="01.count_compilations", title="预测编译次数：dynamic=None / False / True",
    stub=(
        'def count_compilations(batch_sizes: list[int], dynamic) -> int:\n'
        '    """预测 torch.compile(lambda x: x * 2 + 1, dynamic=dynamic) 依次处理形状 (batch, 5) 的输入时编译的次数。"""'),
    points=2,
    public_cases=lambda: [
        _compilations_case(f"seed-dynamic={d}", [16, 32, 64, 128], d, "种子文档的 batch 序列")
        for d in (None, False, True)
    ] + [
        _compilations_case("batch-1", [8, 1, 8, 3, 1], None, "batch 为 1 的输入总是被特化 (0/1 specialization)"),
        _compilations_case("only-1-differs", [4, 1, 4, 1], None, "与第一个 batch 不同的只有 1"),
        _compilations_case("1-first", [1, 8, 16], None, "第一个 batch 是 1，之后的 8 就已经与第一个不同"),
        _compilations_case("true-with-1", [8, 1, 8], True, "dynamic=True，序列里有 batch 1"),
        _compilations_case("false-comes-back", [16, 32, 16, 32], False, "dynamic=False，batch 回到之前见过的大小"),
        _compilations_case("many-shapes", [2, 3, 7, 8, 16, 32, 64, 128, 1, 2], False, "10 种形状，dynamic=False"),
    ],
    designed_cases=lambda: [
        _compilations_case("none-back-and-forth", [16, 1, 16, 32, 1, 64], None),
        _compilations_case("none-1-in-between", [64, 1, 64], None),
        _compilations_case("none-1-first-two-sizes", [1, 64, 64, 16], None),
        _compilations_case("none-1-twice-first", [1, 1, 2, 3], None),
        _compilations_case("true-1-first", [1, 1, 2], True),
        _compilations_case("true-1-between", [32, 1, 32, 2], True),
        _compilations_case("false-nine-shapes", [128, 1, 2, 3, 7, 8, 16, 32, 64, 1, 128], False),
        _compilations_case("false-alternating", [8, 1, 8, 1], False),
        _compilations_case("false-two-sizes-back", [3, 7, 3, 7, 3], False),
    ],
    random_cases=lambda rng: [_compilations_case(f"hidden-{i}", *rng.choice(pool))
                              for i, pool in enumerate(BATCH_SEQUENCES)],
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


def _branch_case(name: str, seed: int, size: int, pairs, description: str = "") -> Case:
    """Inputs ``randn(size) * scale + shift`` for each ``(scale, shift)`` in ``pairs``, chosen to
    take every branch; Dynamo captures from the first."""
    def make():
        inputs = [torch.randn(size) * scale + shift for scale, shift in pairs]
        return {"example": inputs[0].clone(), "inputs": inputs}
    return Case(name, seeded_build(seed, make), description)


def _random_branch_case(rng: random.Random, index: int, sizes: list[int], scales: list[float],
                        shifts: list[float]) -> Case:
    """Four inputs of one random size, in random order; two of them take opposite branches
    (the extreme shifts in 01.remove_graph_breaks, the extreme scales in 01.compile_friendly)."""
    pairs = [(rng.choice(scales), rng.choice(shifts)) for _ in range(4)]
    pairs[:2] = [(min(scales), min(shifts)), (max(scales), max(shifts))]
    rng.shuffle(pairs)
    return _branch_case(f"hidden-{index}", rng.randrange(10**6), rng.choice(sizes), pairs)


EXERCISES.append(Exercise(
    id="01.remove_graph_breaks", title="消除图中断 (graph breaks)",
    stub=(
        'def running_stats_fixed(x: torch.Tensor) -> torch.Tensor:\n'
        '    """与 running_stats 结果相同，但 Dynamo 捕获时恰好 1 张图、0 次图中断。"""'),
    points=2,
    public_cases=lambda: [
        _branch_case("both-branches", 0, 8, [(1, 1), (1, -1), (1, 2), (1, -2)], "total > 0 和 total ≤ 0 两个分支"),
        _branch_case("other-first", 1, 32, [(1, -1), (1, 1)], "捕获时走的是另一个分支"),
        _branch_case("last-mean-positive", 5, 8, [(0.01, -0.13), (1, 1)],
                     "x ≈ -0.13：三个平均值约为 -0.10、-0.05、+0.03，total ≈ -0.11 ≤ 0"),
    ],
    designed_cases=lambda: [
        _branch_case("wide-negative-first", 2, 100, [(3, -2), (0.5, 1), (3, 2), (0.5, -1)]),
        _branch_case("single-element", 3, 1, [(1, 2), (1, -2)]),
        _branch_case("near-zero-total", 6, 32, [(0.01, -0.12), (0.01, -0.1), (0.02, -0.14)]),
        _branch_case("mixed-signs", 7, 64, [(3, 0.1), (3, -0.1), (4, 0.3)]),
    ],
    random_cases=lambda rng: [_random_branch_case(rng, 0, [5, 16, 64], [0.5, 1.0, 3.0], [-2, -1, 1, 2])],
    produce=capture_artifact, analyze=single_graph_facts, compare=_compare_capture,
    hint="print 会中断图：删掉它；if total > 0 按张量的值分支：两边都算出来，用 torch.where(total > 0, 甲, 乙) 选；"
         "list.append 不会中断图，可以保留。",
))


# --- 01.compile_friendly ------------------------------------------------------------------------

SPEED_NUMEL = 2**22          # 4M floats (16 MiB): memory-bound, where fusion pays on any CPU
# Ratio of the fastest of 25 interleaved calls on the thread's CPU clock (measure_ratio). Under
# two CPU-burning processes on 2 cores (benchmarks/timing_false_failures.md, 200 runs) the
# reference measured 0.287-0.320 (worst under half of 0.75) and a rewrite exactly as fast as
# eager 0.942-1.047 (best above 0.75); the needless sort 27.8 or more.
SPEED = SpeedGoal(0.75, "编译后的图没有明显快于 eager 的 adaptive_clip", repeats=25)


_KERNEL_LAUNCH = re.compile(r"^\s+(?:\w+ = )?(cpp_fused_\w+|extern_kernels\.\w+|torch\.ops\.\w+\.\w+(?:\.\w+)?)\(",
                            re.MULTILINE)


def launched_kernels(code: str) -> list[str]:
    """What ``call`` in Inductor's generated wrapper launches, in order: fused kernels,
    library calls, and ops that fell back to ATen (``torch.ops.aten.sort.stable``)."""
    return _KERNEL_LAUNCH.findall(code.split("def call(self, args):", 1)[1])


def _graph_key(artifact: dict) -> str:
    """The captured graph as text, tensors by content: equal graphs compile alike."""
    def tensor_digest(value):
        if not isinstance(value, torch.Tensor):
            raise TypeError(type(value).__name__)
        data = value.detach().contiguous().cpu().numpy().tobytes()
        return [str(value.dtype), list(value.shape), hashlib.sha256(data).hexdigest()]
    return json.dumps(artifact["graphs"], sort_keys=True, default=tensor_digest)


def compiled_graph(artifact: dict, example: torch.Tensor) -> tuple:
    """Inductor's compilation of the one captured graph and the kernels its wrapper launches."""
    from torch._inductor.utils import run_and_get_code  # Inductor loads slowly: only when needed

    graph, _ = _single_graph(artifact)
    compiled = torch.compile(graph)
    with torch.no_grad():
        _, sources = run_and_get_code(compiled, example)
    return compiled, launched_kernels(sources[0])


def _compiled_case(name: str, seed: int, scale: float, check: str, description: str = "") -> Case:
    """One input ``randn(SPEED_NUMEL) * scale``, captured and compiled at that size; ``check``
    says what the case judges beyond equal outputs: ``"kernels"`` or ``"speed"``."""
    def make():
        return {"example": torch.randn(SPEED_NUMEL) * scale, "check": check, "inputs_key": f"{seed}:{scale}"}
    return Case(name, seeded_build(seed, make), description)


_COMPILED: dict[str, tuple] = {}       # graph key -> compiled_graph(): one compilation per graph
_FUSION_FACTS: dict[tuple, dict] = {}  # (graph key, case) -> facts: one measurement per graph and case


def _fusion_measurement(artifact: dict, built: dict, graph_key: str) -> dict:
    """Compile the captured graph, compare its output with eager ``adaptive_clip`` on the
    case's input, and count its kernels or time it."""
    x = built["example"]
    try:
        if graph_key not in _COMPILED:
            _COMPILED[graph_key] = compiled_graph(artifact, x)
        compiled, kernels = _COMPILED[graph_key]
        with torch.no_grad():
            outputs = compare_outputs(models.adaptive_clip(x), _run_graph(compiled, x.clone()))
    except Exception as error:
        return {"error": f"用 Inductor 编译并运行捕获的图时出错：{type(error).__name__}: {str(error)[:200]}"}
    facts = {"outputs": [outputs.ok, outputs.message, outputs.expected, outputs.got]}
    if built["check"] == "kernels":
        return {**facts, "kernels": kernels}
    with torch.no_grad():
        return {**facts, "speed_ratio": SPEED.measure(compiled, models.adaptive_clip, (x,))}


def fusion_facts(artifact: dict, built: dict) -> dict:
    """Outputs of the rebuilt graph; on the compiled cases, whether Inductor's compilation of
    it matches eager and how many kernels it launches, or how fast it runs against the eager
    original. Measured where analysis runs (the grader's confined analysis process; the
    learner's kernel in self-study), on a graph rebuilt from the artifact, never on learner
    code; equal graphs on the same case are measured once."""
    if "check" not in built:
        return single_graph_facts(artifact, built)
    _, error = _single_graph(artifact)
    if error is not None:
        return error
    graph_key = _graph_key(artifact)
    key = (graph_key, built["inputs_key"], built["check"])
    if key not in _FUSION_FACTS:
        _FUSION_FACTS[key] = _fusion_measurement(artifact, built, graph_key)
    return _FUSION_FACTS[key]


def _compare_fusion(expected, got) -> Verdict:
    """Equal outputs first; then no more kernel launches than the reference's graph, or a
    compiled graph clearly faster than eager."""
    if (error := artifact_error(got)) is not None:
        return error
    if "kernels" not in got and "speed_ratio" not in got:
        return _compare_capture(expected, got)
    if not (outputs := Verdict(*got["outputs"])).ok:
        return outputs
    if "speed_ratio" in got:
        return SPEED.judge_ratio(got["speed_ratio"])
    want, have = expected["kernels"], got["kernels"]
    if len(have) <= len(want):
        return PASS
    return Verdict(False, f"Inductor 编译你的图后，call() 依次启动 {len(have)} 个内核，参考答案的图全部融合进 "
                          f"{len(want)} 个。多出来的内核来自无法与其他运算融合的计算（例如排序会回退为单独的 ATen 调用），"
                          "每多一个内核，数据就要多读写一遍。", short(want), short(have))


EXERCISES.append(Exercise(
    id="01.compile_friendly", title="改写成编译友好的代码，并真正变快",
    stub=(
        'def adaptive_clip_fast(x: torch.Tensor) -> torch.Tensor:\n'
        '    """与 adaptive_clip 结果相同，捕获为 1 张图、0 次中断，编译后明显快于 eager 的 adaptive_clip。"""'),
    points=3,
    public_cases=lambda: [
        _branch_case("both-branches", 0, 64, [(0.2, 0), (2.0, 0), (0.1, 0), (5.0, 0)], "limit ≤ 1 与 limit > 1 两个分支"),
        _branch_case("large-first", 1, 16, [(3.0, 0), (0.2, 0)], "捕获时走的是 limit > 1 的分支"),
        _compiled_case("one-kernel", 2, 2.0, "kernels", "在 400 万个数上捕获，数 Inductor 编译后启动的内核"),
        _compiled_case("faster(timed)", 3, 2.0, "speed", "在 400 万个数上与 eager 计时"),
    ],
    designed_cases=lambda: [
        _branch_case("wide-small-first", 4, 100, [(0.1, 0), (4.0, 0), (0.2, 0), (2.0, 0)]),
        _compiled_case("one-kernel-small-limit", 5, 0.2, "kernels"),
    ],
    random_cases=lambda rng: [_random_branch_case(rng, 0, [9, 32, 100], [0.1, 0.2, 2.0, 4.0], [0])],
    produce=capture_artifact, analyze=fusion_facts, compare=_compare_fusion,
    hint="把 .item() 去掉，让 limit 保持为 0 维张量；两个分支都算出来再用 torch.where(limit > 1, 甲, 乙) 选。"
         "不要做结果用不到的额外计算：Inductor 能把逐点运算和求平均融合进一个内核，但排序之类的运算只能单独执行。",
))


# --- 01.bisect_backends ---------------------------------------------------------------------------

VECTOR = (16,)


def _bisect_case(name: str, seed: int, steps: list[str], bug, inputs: list[tuple], description: str = "") -> Case:
    """``BisectProgram(steps)`` on ``rand(shape) * scale + shift`` for each ``(scale, shift, shape)``,
    the pipeline with ``bug`` injected."""
    def make():
        return {"fn": models.BisectProgram(steps), "stages": models.pipeline(bug),
                "inputs": [(torch.rand(shape) * scale + shift,) for scale, shift, shape in inputs]}
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
        message = (f"阶段 {expected['stage']} 的输出与 eager 不同，但你没有发现：要检查每一组输入；换阶段之前要 "
                   "torch._dynamo.reset()，否则编译次数累计到 recompile_limit 之后，后面的阶段会退回 eager 运行。")
    else:
        message = f"第一个与 eager 不一致的阶段是 {expected['stage']}：阶段是累加的，出错之后的阶段也会不一致，要返回第一个。"
    return Verdict(False, message, short(expected["stage"]), short(got["stage"]))


BISECT_BUGS = {"decompose": "gelu", "graph_pass": "scale", "codegen": "relu"}  # the step each bug needs
BISECT_SHAPES = [VECTOR, (4, 4), (2, 8), (2, 2, 4)]


def _random_bisect_case(rng: random.Random, index: int) -> Case:
    """A random program with a random bug (or none), on one or two inputs of one random shape
    (positive first when two, so that only the second may expose a bug that needs negatives;
    one shape, so that each stage compiles once)."""
    bug = rng.choice([None, *BISECT_BUGS])
    steps = rng.sample(sorted(models.BisectProgram.STEPS), rng.randint(2, 4))
    if bug is not None and BISECT_BUGS[bug] not in steps:
        steps.insert(rng.randrange(len(steps) + 1), BISECT_BUGS[bug])
    values = [(1.0, 0.5), (4.0, -2.0)] if rng.random() < 0.5 else [(4.0, -2.0)]
    shape = rng.choice(BISECT_SHAPES)
    inputs = [(scale, shift, shape) for scale, shift in values]
    return _bisect_case(f"hidden-{index}", rng.randrange(10**6), steps, bug, inputs)


EXERCISES.append(Exercise(
    id="01.bisect_backends", title="二分定位出错的编译阶段 (bisecting backends)",
    stub=(
        'def first_divergent_stage(fn, inputs: list[tuple], stages: list[tuple]):\n'
        '    """按顺序用每个阶段编译 fn，在所有输入上与 eager 比较（allclose）；返回第一个不一致的阶段名，或 None。"""'),
    points=3,
    public_cases=lambda: [
        _bisect_case("gelu", 0, ["scale", "gelu", "relu"], "decompose", [(4.0, -2.0, VECTOR)],
                     "某个分解 (decomposition) 写错了"),
        _bisect_case("relu-positive-first", 1, ["shift", "relu", "tanh"], "codegen",
                     [(1.0, 0.5, VECTOR), (4.0, -2.0, VECTOR)], "第一个输入全为正：只有第二个输入暴露问题"),
        _bisect_case("no-bug", 2, ["scale", "tanh"], None, [(4.0, -2.0, VECTOR)], "没有错误，但有一个改变舍入的常量折叠"),
        _bisect_case("fold", 3, ["square", "scale", "relu"], "graph_pass", [(4.0, -2.0, VECTOR)],
                     "图变换 (graph pass) 写错了"),
        _bisect_case("two-shapes", 6, ["shift", "relu", "tanh"], "codegen", [(1.0, 0.5, VECTOR), (4.0, -2.0, (4, 4))],
                     "两组输入形状不同（16 和 4×4）：每个阶段要编译两次"),
    ],
    designed_cases=lambda: [
        _bisect_case("codegen-after-fold", 4, ["scale", "relu", "tanh"], "codegen",
                     [(1.0, 0.5, VECTOR), (4.0, -2.0, VECTOR)]),
        _bisect_case("decompose-first-step", 5, ["gelu", "shift", "relu"], "decompose", [(4.0, -2.0, VECTOR)]),
        _bisect_case("graph-pass-three-shapes", 8, ["square", "scale", "relu"], "graph_pass",
                     [(4.0, -2.0, shape) for shape in (VECTOR, (4, 4), (2, 2, 4))]),
    ],
    random_cases=lambda rng: [_random_bisect_case(rng, 0)],
    produce=bisect_artifact, compare=_compare_bisect,
    hint="第一步：先用 eager 算出每组输入的参考输出。第二步：按顺序对每个 (name, backend)：torch._dynamo.reset()，"
         "compiled = torch.compile(fn, backend=backend)，在每个输入上与参考比较，用 torch.allclose(..., rtol=1e-4, atol=1e-5)"
         "（不要用 torch.equal）。第三步：第一个不一致的阶段就返回它的名字；都一致返回 None。",
))
