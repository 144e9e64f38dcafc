"""Chapter 05 (TorchDynamo) exercises: a bytecode → FX tracer, a reader of Dynamo's
transformed bytecode, a guard predictor, compiling once for every batch size, and the
cache lookup of the C frame-evaluation hook redone in Python.

Graded on artifacts: the op list and outputs of a rebuilt graph, names and counts of
compiled and resume functions (never raw opcodes: they change between Python versions),
which calls Dynamo really compiled (measured), and compile ids of real cache entries.
Every case calls ``torch._dynamo.reset()`` first; only the cheap ``"eager"`` backend or a
``CompileCounter`` is used, never Inductor.
"""
from __future__ import annotations

import random

import torch
import torch._dynamo
import torch.fx as fx
from torch._dynamo.testing import CompileCounter

from course_models import ch05_models as models

from ..authoring import (PASS, Case, Exercise, Verdict, artifact_error, compare_equal, compare_outputs,
                         graph_facts, graph_pass_artifact, seeded_build, short)

EXERCISES: list[Exercise] = []  # in notebook order

SIZE = 4  # programs run on SIZE×SIZE tensors


# --- 05.bytecode_tracer --------------------------------------------------------------------

def _program_case(name: str, source: str, seed: int, description: str = "") -> Case:
    arguments = models.load_program(source).__code__.co_argcount
    return Case(name, seeded_build(seed, lambda: {
        "source": source, "inputs": tuple(torch.randn(SIZE, SIZE) for _ in range(arguments))}), description)


class _NoOtherTracer:
    """While the learner's tracer runs, FX's own tracer is refused and torch.compile runs
    eagerly: the exercise is to interpret the bytecode, not to call another tracer."""

    def __enter__(self):
        self.trace, self.stance = fx.Tracer.trace, torch.compiler.set_stance("force_eager")
        self.stance.__enter__()

        def refused(*args, **kwargs):
            raise RuntimeError("评分时不能调用 torch.fx 的 symbolic_trace：请自己解释字节码。")
        fx.Tracer.trace = refused

    def __exit__(self, *exc):
        fx.Tracer.trace = self.trace
        self.stance.__exit__(*exc)


def tracer_artifact(function, built) -> dict:
    """Sandbox side: the learner's graph of the case's program, serialised."""
    fn = models.load_program(built["source"])
    with _NoOtherTracer():
        return graph_pass_artifact(function, {"module": fn})


# An operator written with its torch function (torch.div for ``/``) is the same operator.
_SAME_OPERATOR = {"truediv": "div", "true_divide": "div", "divide": "div", "subtract": "sub", "multiply": "mul",
                  "negative": "neg"}


def tracer_facts(artifact: dict, built: dict) -> dict:
    """Trusted side: the rebuilt graph without unused nodes, its ops (one name per operator)
    and outputs."""
    facts = graph_facts(artifact, built, drop_unused=True)
    if "nodes" in facts:
        facts["nodes"] = [_SAME_OPERATOR.get(label, label) for label in facts["nodes"]]
    return facts


def _compare_traced(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_equal(expected["nodes"], got["nodes"],
                            "图的节点（去掉没人用的节点之后，按顺序）与参考不同：每条 CALL / CALL_KW / BINARY_OP / "
                            "UNARY_NEGATIVE 指令应成为一个节点，参数各是一个 placeholder。")
    if not verdict.ok:
        return verdict
    verdict = compare_outputs(expected["outputs"], got["outputs"])
    if not verdict.ok:
        return Verdict(False, "图的输出与原函数不同：检查操作数的顺序（栈顶是右操作数）、常量和关键字参数的名字。",
                       verdict.expected, verdict.got)
    return PASS


_PUBLIC_PROGRAMS = [
    ("affine_relu", "矩阵乘、加法、torch.relu、乘以常量"),
    ("normalize", "带关键字参数的方法调用 x.mean(dim=0, keepdim=True)，之后的调用只有位置参数；"
                  "torch.clamp(..., max=2.0) 只给了第二个可选参数"),
    ("gated", "常量在左边的减法 1 - gate，取负 -y"),
    ("constants", "只有常量参与的运算和调用：torch.pi / 4、torch.finfo(torch.float32).eps（常量折叠）"),
    ("imported", "导入的函数 relu(x)（LOAD_GLOBAL 自己压 NULL）和导入的模块里的函数 F.silu（普通 LOAD_ATTR）"),
]

# Fixed hidden programs, one pitfall each.
_DESIGNED_PROGRAMS = {
    "designed-constant-left": '''
def constant_left(a, b):
    return 2.0 / (a * a + 1.0) - (3.0 - b)
''',
    "designed-keywords-out-of-order": '''
def keywords_out_of_order(a):
    total = a.sum(keepdim=True, dim=0)
    return torch.clamp(a - total, max=0.5)
''',
    "designed-keywords-then-positional": '''
def keywords_then_positional(a, b):
    clipped = torch.clamp(a, max=0.5)
    return torch.maximum(clipped, b) - b.sum(1, keepdim=True)
''',
    "designed-imported-calls": '''
from torch import tanh
import torch.nn.functional as F

def imported_calls(a, b):
    t = tanh(a) * 2.0
    return b - F.softplus(t)
''',
    "designed-module-attributes": '''
def module_attributes(a, b):
    return a @ b - torch.nn.functional.gelu(b)
''',
    "designed-negation": '''
def negation(a, b):
    return -a * torch.sigmoid(-b)
''',
    "designed-constant-expression": '''
def constant_expression(a):
    return a * (torch.pi / 4)
''',
}


def _random_program_case(rng: random.Random, index: int) -> Case:
    source = models.random_straight_line(rng, f"program_{index}", rng.randint(1, 3), rng.randint(4, 7))
    return _program_case(f"hidden-{index}", source, rng.randrange(10**6))


EXERCISES.append(Exercise(
    id="05.bytecode_tracer", title="迷你字节码 → FX 追踪器",
    stub=(
        'def bytecode_to_fx(fn) -> fx.GraphModule:\n'
        '    """符号执行 fn 的字节码（直线型张量代码），返回输入为 fn 的参数、输出为 fn 返回值的 FX GraphModule。"""'),
    points=3,
    public_cases=lambda: [_program_case(name, models.STRAIGHT_LINE_PROGRAMS[name], index, description)
                          for index, (name, description) in enumerate(_PUBLIC_PROGRAMS)],
    designed_cases=lambda: [_program_case(name, source, 100 + index)
                            for index, (name, source) in enumerate(_DESIGNED_PROGRAMS.items())],
    random_cases=lambda rng: [_random_program_case(rng, i) for i in range(4)],
    produce=tracer_artifact, analyze=tracer_facts, compare=_compare_traced,
    hint="用一个 Python 列表模拟 CPython 的值栈：LOAD_FAST 压入 placeholder 节点，LOAD_CONST 压入常量；"
         "取方法（3.11 的 LOAD_METHOD，3.12 起带方法标志 inst.arg & 1 的 LOAD_ATTR）压入两项，"
         "LOAD_GLOBAL 的 inst.arg & 1 为真时也多压一个 NULL（3.13 压在上面）；CALL n 弹出 n 个参数和下面两项："
         "其中一项是 NULL 就调用另一项，否则下面那项是方法、上面那项是 self；关键字参数的名字来自 KW_NAMES（3.11/3.12）"
         "或 CALL_KW 先弹出的元组（3.13）；BINARY_OP 先弹出右操作数；RETURN_VALUE → graph.output。",
))


# --- 05.bytecode_inspector ----------------------------------------------------------------------

def _break_case(name: str, source: str, seed: int, description: str = "") -> Case:
    return Case(name, seeded_build(seed, lambda: {"source": source, "x": torch.randn(SIZE).abs() + 0.1}),
                description)


def _is_report(value) -> bool:
    return (isinstance(value, list) and all(
        isinstance(r, dict) and set(r) == {"name", "compiled", "resumes"} and isinstance(r["name"], str)
        and type(r["compiled"]) is int and type(r["resumes"]) is int for r in value))


def inspector_artifact(function, built) -> dict:
    fn = models.load_program(built["source"])
    torch._dynamo.reset()
    try:
        with models.quiet_dynamo():
            report = function(fn, (built["x"].clone(),))
    finally:
        torch._dynamo.reset()
    if not _is_report(report):
        return {"error": "inspect_bytecode 应返回 list，每项是 {'name': str, 'compiled': int, 'resumes': int}，"
                         f"实际返回了 {short(report)}。"}
    return {"report": report}


def _compare_reports(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    want, have = expected["report"], got["report"]
    if len(want) != len(have):
        return Verdict(False, "Dynamo 改写的帧（代码对象）个数不对：原函数一个，每个被调用到的续行函数 (resume function) 各一个。",
                       short([r["name"] for r in want]), short([r["name"] for r in have]))
    for index, (w, h) in enumerate(zip(want, have)):
        if w != h:
            return Verdict(False, f"第 {index} 个被改写的帧不同（name 是原代码对象的 co_name；"
                                  "compiled / resumes 数的是新字节码用 LOAD_GLOBAL 读取的不同名字）。", short(w), short(h))
    return PASS


EXERCISES.append(Exercise(
    id="05.bytecode_inspector", title="读 Dynamo 改写后的字节码：编译图与续行函数",
    stub=(
        'def inspect_bytecode(fn, args: tuple) -> list[dict]:\n'
        '    """编译并运行 fn(*args) 一次；对 Dynamo 改写的每个帧，返回 {"name": 原 co_name, "compiled": 编译图个数, "resumes": 续行函数个数}。"""'),
    points=2,
    public_cases=lambda: [
        _break_case("one_print", models.BREAK_PROGRAMS["one_print"], 0, "print 中断一次：两个帧"),
        _break_case("two_breaks", models.BREAK_PROGRAMS["two_breaks"], 1, "两次 graph_break()：三个帧"),
        _break_case("value_branch", models.BREAK_PROGRAMS["value_branch"], 2,
                    "按张量的值分支：新字节码里有两个续行函数，只有走到的那个被编译"),
    ],
    random_cases=lambda rng: [
        _break_case(f"hidden-{i}", models.random_break_program(rng, f"program_{i}"), rng.randrange(10**6))
        for i in range(1)
    ],
    produce=inspector_artifact, compare=_compare_reports,
    hint="register_bytecode_hook(hook) 的 hook(code, new_code) 在每个帧编译完成时被调用一次（包括续行函数的帧），"
         "用完 handle.remove()；在 dis.get_instructions(new_code) 里找 opname == 'LOAD_GLOBAL' 的指令，"
         "数 argval 以 '__compiled_fn' 和 '__resume_at' 开头的不同名字。",
))


# --- 05.guard_predictor ------------------------------------------------------------------------

def _spec(size=4, dtype="float32", requires_grad=False, n=2, flag=True) -> dict:
    return {"size": size, "dtype": dtype, "requires_grad": requires_grad, "n": n, "flag": flag}


DEFAULT_RECOMPILE_LIMIT = 8  # torch's default recompile_limit, the one the prompt names


def _guard_case(name: str, calls: list[dict], dynamic, description: str = "",
                recompile_limit: int = DEFAULT_RECOMPILE_LIMIT) -> Case:
    return Case(name, lambda: {"calls": [dict(c) for c in calls], "dynamic": dynamic,
                               "recompile_limit": recompile_limit}, description)


def predictor_artifact(function, built) -> dict:
    """Sandbox side: the prediction, made while ``recompile_limit`` is the case's (as the
    measurement is); the function reads the limit when called."""
    with torch._dynamo.config.patch(recompile_limit=built["recompile_limit"]):
        prediction = function([dict(c) for c in built["calls"]], built["dynamic"])
    if not isinstance(prediction, (list, tuple)) or not all(type(p) is bool for p in prediction):
        return {"error": f"predict_recompiles 应返回由 bool 组成的 list，实际返回了 {short(prediction)}。"}
    return {"prediction": list(prediction)}


_MEASURED: dict = {}


def _with_measurement(artifact: dict, built: dict) -> dict:
    """Trusted side: which calls Dynamo really compiled (measured once per case)."""
    if "error" in artifact:
        return artifact
    key = (repr(built["calls"]), built["dynamic"], built["recompile_limit"])
    if key not in _MEASURED:
        _MEASURED[key] = models.measure_compiles(built["calls"], built["dynamic"], built["recompile_limit"])
    return {**artifact, "measured": _MEASURED[key], "calls": built["calls"], "dynamic": built["dynamic"],
            "recompile_limit": built["recompile_limit"]}


def _compare_prediction(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    measured, prediction = got["measured"], got["prediction"]
    if len(prediction) != len(measured):
        return Verdict(False, "每次调用应有一个预测（True = 这次调用会编译）。", str(len(measured)), str(len(prediction)))
    for index, (m, p) in enumerate(zip(measured, prediction)):
        if m != p:  # the call and its setting go with the expected value, never shown for a hidden case
            return Verdict(False, f"第 {index} 次调用"
                                  f"{'实际编译了' if m else '实际没有编译（命中了缓存，或条目数已到 recompile_limit）'}。",
                           f"{short(measured)}（dynamic={got['dynamic']}，recompile_limit={got['recompile_limit']}；"
                           f"第 {index} 次调用 {got['calls'][index]}）", short(prediction))
    return PASS


GUARD_SIZES = (1, 3, 4, 6, 8)  # the sizes of x in the predictor's calls: 1 shows 0/1 specialisation


def _distinct_calls(count: int) -> list[dict]:
    """``count`` calls that no earlier entry accepts under ``dynamic=False``."""
    return [_spec(size=size, n=n) for n in (2, 5, 7) for size in GUARD_SIZES][:count]


def _guard_public_cases() -> list[Case]:
    return [
        _guard_case("int-then-shape", [_spec(n=2), _spec(n=5), _spec(n=7), _spec(size=8, n=7), _spec(size=3, n=2)],
                    None, "整数参数和形状先后变化：自动动态"),
        _guard_case("same-calls-static", [_spec(n=2), _spec(n=5), _spec(n=2), _spec(size=8, n=5)], False,
                    "dynamic=False：每组新的值编译一次，旧的值命中缓存"),
        _guard_case("flag-dtype-grad", [_spec(), _spec(flag=False), _spec(), _spec(dtype="float64"),
                                        _spec(requires_grad=True), _spec(size=6, requires_grad=True)], None,
                    "bool、dtype、requires_grad 都有守卫"),
        _guard_case("sticky-dynamic", [_spec(size=4), _spec(size=8), _spec(size=4, flag=False),
                                       _spec(size=6, flag=False)], None,
                    "size 变成动态之后，因为 flag 再编译的条目里 size 仍是动态的"),
        _guard_case("changed-since-first", [_spec(size=4), _spec(size=8), _spec(size=8, flag=False),
                                            _spec(size=6, flag=False)], None,
                    "第三次编译时 size 和上一次编译相同、和第一次编译不同"),
        _guard_case("size-one", [_spec(size=4), _spec(size=8), _spec(size=1), _spec(size=1), _spec(size=6)], None,
                    "大小为 1 的维度：0/1 特化"),
        _guard_case("size-one-then-first", [_spec(size=4), _spec(size=1), _spec(size=4, flag=False),
                                            _spec(size=6, flag=False)], None,
                    "size 为 1 的那次编译之后，因为 flag 再编译"),
        _guard_case("recompile-limit", _distinct_calls(10) + [_spec(size=1, n=2)], False,
                    "十组不同的值：条目数到了 recompile_limit 之后"),
        _guard_case("recompile-limit-3", _distinct_calls(5) + [_spec(size=1, n=2)], False,
                    "recompile_limit 改成 3 时（评分时用 torch._dynamo.config.patch）", recompile_limit=3),
    ]


def _guard_designed_cases() -> list[Case]:
    return [
        _guard_case("designed-sticky-n", [_spec(n=2), _spec(n=5), _spec(n=2, flag=False), _spec(n=7, flag=False)],
                    None),
        _guard_case("designed-n-changed-since-first", [_spec(n=2), _spec(n=5), _spec(n=5, flag=False),
                                                       _spec(n=7, flag=False)], None),
        _guard_case("designed-size-one-then-first", [_spec(size=6), _spec(size=1), _spec(size=6, flag=False),
                                                     _spec(size=3, flag=False), _spec(size=1, flag=False)], None),
        _guard_case("designed-second-size", [_spec(size=6), _spec(size=6, flag=False), _spec(size=6),
                                             _spec(size=3), _spec(size=8, flag=False)], None),
        _guard_case("designed-size-one-first", [_spec(size=1), _spec(size=4), _spec(size=6), _spec(size=1),
                                                _spec(size=1, dtype="float64"), _spec(size=3, dtype="float64")], None),
        _guard_case("designed-static-shapes", [_spec(size=3), _spec(size=4), _spec(size=3), _spec(size=6),
                                               _spec(size=1), _spec(size=4, n=5)], False),
        _guard_case("designed-requires-grad", [_spec(requires_grad=True), _spec(), _spec(requires_grad=True),
                                               _spec(n=5), _spec(n=7, requires_grad=True)], None),
        _guard_case("designed-limit-dynamic", [_spec(flag=flag, dtype=dtype, requires_grad=grad)
                                               for grad in (False, True) for dtype in ("float32", "float64")
                                               for flag in (True, False)] + [_spec(size=8), _spec(n=5, flag=False)],
                    None),
        _guard_case("designed-limit-4-dynamic", [_spec(n=2), _spec(n=5), _spec(n=7, flag=False),
                                                 _spec(size=8, dtype="float64"), _spec(size=6, n=2, flag=False),
                                                 _spec(size=1), _spec(size=3, dtype="float64")], None,
                    recompile_limit=4),
    ]


EXERCISES.append(Exercise(
    id="05.guard_predictor", title="守卫预测器：哪些调用会重新编译",
    stub=(
        'def predict_recompiles(calls: list[dict], dynamic) -> list[bool]:\n'
        '    """对 torch.compile(scale_shift, dynamic=dynamic) 依次处理 calls，逐次预测是否会编译（True = 编译）。"""'),
    points=2,
    public_cases=_guard_public_cases,
    designed_cases=_guard_designed_cases,
    random_cases=lambda rng: [
        _guard_case(f"hidden-{i}", models.random_calls(rng, rng.randint(5, 8), GUARD_SIZES), rng.choice([None, False]))
        for i in range(2)
    ],
    produce=predictor_artifact, analyze=_with_measurement, confine_analysis=False, compare=_compare_prediction,
    hint="维护一个缓存条目列表：每个条目记下编译时的 (size, dtype, requires_grad, n, flag) 和其中哪些是动态的；"
         "一次调用命中 = 某个条目的每个静态字段都相等、每个动态的 size 都 ≥ 2。未命中才编译：dynamic=None 时，size 或 n "
         "只要在某次编译时和第一次编译时的值不同（size 变成 1 也算），从这次起编译的条目就把它当作动态"
         "（只是 size 为 1 的条目里 size 仍是静态的 1）；bool、dtype、requires_grad 永远是静态的；dynamic=False 时"
         "一切都是静态的；条目数到了 recompile_limit（调用时读 torch._dynamo.config.recompile_limit）就不再编译。",
))


# --- 05.compile_once --------------------------------------------------------------------------

def _batch_case(name: str, model: str, batches: list[int], seed: int, description: str = "") -> Case:
    def make():
        return {"fn": models.BATCH_MODELS[model], "w": torch.randn(models.FEATURES, models.FEATURES) * 0.3,
                "xs": [torch.randn(b, models.FEATURES) for b in batches]}
    return Case(name, seeded_build(seed, make), description)


def compile_once_artifact(function, built) -> dict:
    torch._dynamo.reset()
    counter = CompileCounter()
    try:
        compiled = function(built["fn"], counter)
        with models.quiet_dynamo():
            outputs = [compiled(x.clone(), built["w"]) for x in built["xs"]]
    finally:
        torch._dynamo.reset()
    if not all(type(o) is torch.Tensor for o in outputs):
        return {"error": f"compile_once 返回的函数应返回张量，实际返回了 {short(outputs[0])}。"}
    return {"outputs": [o.detach() for o in outputs], "frames": counter.frame_count}


def _compare_compile_once(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_outputs(expected["outputs"], got["outputs"])
    if not verdict.ok:
        return Verdict(False, "某个批大小的输出与原函数不同。", verdict.expected, verdict.got)
    return compare_equal(1, got["frames"], "后端应恰好被调用 1 次（frame_count == 1）：0 次说明没有编译，"
                                           "多于 1 次说明某个批大小触发了重新编译。")


def _random_batches(rng: random.Random) -> list[int]:
    first = rng.choice([models.FEATURES, rng.randint(2, 64)])
    return [first] + [rng.randint(2, 64) for _ in range(rng.randint(3, 5))]


EXERCISES.append(Exercise(
    id="05.compile_once", title="一次编译，覆盖批大小 2–64",
    stub=(
        'def compile_once(fn, backend):\n'
        '    """返回 run(x, w)：结果与 fn(x, w) 相同，批大小 2–64 任意变化时 backend 恰好被调用一次。"""'),
    points=2,
    public_cases=lambda: [
        _batch_case("mlp-8-first", "batch_mlp", [8, 16, 3, 64], 0, "第一个批大小恰好等于特征维 8"),
        _batch_case("positions-8-first", "batch_positions", [8, 2, 40, 17], 1, "x.shape[0] 参与 Python 计算"),
        _batch_case("halves-8-first", "batch_halves", [8, 9, 64, 2], 2, "在 x.shape[0] // 2 处切片"),
    ],
    random_cases=lambda rng: [
        _batch_case(f"hidden-{i}", rng.choice(sorted(models.BATCH_MODELS)), _random_batches(rng), rng.randrange(10**6))
        for i in range(1)
    ],
    produce=compile_once_artifact, compare=_compare_compile_once,
    hint="dynamic=None 先编译一张静态图；dynamic=True 把所有维度都当作动态，第一个批大小等于 8 时会和特征维"
         "“鸭子合并”(duck sizing) 成同一个符号。只把 x 的第 0 维标为动态：在调用编译后的函数之前 torch._dynamo.mark_dynamic(x, 0)。",
))


# --- 05.cache_lookup ----------------------------------------------------------------------------

def _lookup_case(name: str, setup: list[dict], probes: list[dict], description: str = "") -> Case:
    return Case(name, lambda: {"setup": [dict(c) for c in setup], "probes": [dict(c) for c in probes]}, description)


def lookup_artifact(function, built) -> dict:
    """Sandbox side: compile ``scale_shift`` on the setup calls, then for each probe ask the
    learner which cache entry it would run, and run it."""
    torch._dynamo.reset()
    counter = CompileCounter()
    compiled = torch.compile(models.scale_shift, backend=counter)
    answers, compiled_flags = [], []
    try:
        with models.quiet_dynamo():
            for spec in built["setup"]:
                compiled(*models.make_call(spec))
            for spec in built["probes"]:
                answers.append(function(models.scale_shift, models.make_call(spec)))
                before = counter.frame_count
                compiled(*models.make_call(spec))
                compiled_flags.append(counter.frame_count > before)
    finally:
        torch._dynamo.reset()
    if not all(a is None or type(a) is str for a in answers):
        return {"error": f"cached_entry 应返回编译 id 字符串（如 '0/1'）或 None，实际返回了 {short(answers)}。"}
    return {"answers": answers, "compiled": compiled_flags}


def _compare_lookup(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    for index, (e, g) in enumerate(zip(expected["answers"], got["answers"])):
        if e != g:
            return Verdict(False, f"第 {index} 个探测调用选中的缓存条目不同（None 表示没有条目的守卫通过，调用会重新编译；"
                                  f"这次调用实际{'重新编译了' if got['compiled'][index] else '命中了缓存'}）。",
                           short(expected["answers"]), short(got["answers"]))
    return PASS


def _random_lookup(rng: random.Random, index: int) -> Case:
    calls = models.random_calls(rng, rng.randint(6, 9))
    split = rng.randint(2, 4)
    return _lookup_case(f"hidden-{index}", calls[:split], calls[split:])


EXERCISES.append(Exercise(
    id="05.cache_lookup", title="用 Python 重做缓存查找：哪个缓存条目会运行",
    stub=(
        'def cached_entry(fn, args: tuple):\n'
        '    """返回调用 fn(*args) 时会运行的缓存条目的编译 id（如 "0/1"），没有条目的守卫通过则返回 None。"""'),
    points=2,
    public_cases=lambda: [
        _lookup_case("two-accept", [_spec(n=2), _spec(n=5)], [_spec(n=2), _spec(n=7), _spec(size=6)],
                     "静态条目和动态条目都接受 n=2：先检查的那个胜出"),
        _lookup_case("flags", [_spec(), _spec(n=5), _spec(n=2, flag=False)],
                     [_spec(), _spec(n=7, flag=False), _spec(dtype="float64"), _spec(dtype="float64")],
                     "bool 与 dtype 的守卫；第二次 float64 命中刚编译的条目"),
    ],
    random_cases=lambda rng: [_random_lookup(rng, i) for i in range(2)],
    produce=lookup_artifact, compare=_compare_lookup,
    hint="_debug_get_cache_entry_list(fn) 按 C 代码检查的顺序（最近命中的在前）列出缓存条目；把参数按 fn.__code__.co_varnames "
         "配成 {名字: 值} 的 dict，交给 entry.guard_manager.check(...)；第一个返回 True 的条目的 str(entry.compile_id) 就是答案，"
         "都不通过则返回 None。",
))
