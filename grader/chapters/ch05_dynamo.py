"""Chapter 05 (TorchDynamo) exercises: a bytecode → FX tracer, a backend reporting the
ATen ops of each graph it gets, a generator of one cache entry's guards, a guard predictor,
and the cure of a recompile storm.

Graded on artifacts: the op list and outputs of a rebuilt graph (never raw opcodes: they
change between Python versions), per-graph op histograms and outputs of a compiled run,
what the real guards of a cache entry accept, which calls Dynamo really compiled
(measured), and the compiles and graph runs a counting backend saw.
Every case calls ``torch._dynamo.reset()`` first; only cheap backends (``CompileCounter``,
a counting backend, the learner's own) are used, never Inductor.
"""
from __future__ import annotations

import random

import torch
import torch._dynamo
import torch.fx as fx
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._dynamo.testing import CompileCounter
from torch._dynamo.utils import counters

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


class _NoCompiling:
    """While the learner's code runs, torch.compile runs eagerly: what the exercise asks
    for is to be derived, not read from what Dynamo does."""

    def __enter__(self):
        self.stance = torch.compiler.set_stance("force_eager")
        self.stance.__enter__()

    def __exit__(self, *exc):
        self.stance.__exit__(*exc)


class _NoOtherTracer(_NoCompiling):
    """Also refuses FX's own tracer: the exercise is to interpret the bytecode, not to call
    another tracer."""

    def __enter__(self):
        super().__enter__()
        self.trace = fx.Tracer.trace

        def refused(*args, **kwargs):
            raise RuntimeError("评分时不能调用 torch.fx 的 symbolic_trace：请自己解释字节码。")
        fx.Tracer.trace = refused

    def __exit__(self, *exc):
        fx.Tracer.trace = self.trace
        super().__exit__(*exc)


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


# --- 05.aten_histogram --------------------------------------------------------------------------

def _histogram_case(name: str, source: str, seed: int, description: str = "") -> Case:
    """``source`` called twice on the same arguments: positive SIZE×SIZE tensors."""
    arguments = models.load_program(source).__code__.co_argcount
    return Case(name, seeded_build(seed, lambda: {
        "source": source, "args": tuple(torch.rand(SIZE, SIZE) + 0.1 for _ in range(arguments))}), description)


def _is_histogram_list(value) -> bool:
    return isinstance(value, list) and all(
        isinstance(h, dict) and all(isinstance(k, str) and type(v) is int for k, v in h.items()) for h in value)


def histogram_artifact(function, built) -> dict:
    """Sandbox side: the program compiled with the learner's backend and called twice; what
    the backend put in ``report``, and the outputs."""
    fn = models.load_program(built["source"])
    report: list = []
    torch._dynamo.reset()
    try:
        compiled = torch.compile(fn, backend=function(report))
        with models.quiet_dynamo():
            outputs = [compiled(*[a.clone() for a in built["args"]]) for _ in range(2)]
    finally:
        torch._dynamo.reset()
    if not _is_histogram_list(report):
        return {"error": f"report 里应是一个个 {{ATen 算子名: 次数}} dict，实际是 {short(report)}。"}
    if not all(type(o) is torch.Tensor for o in outputs):
        return {"error": f"编译后的程序应返回张量，实际返回了 {short(outputs[0])}：后端返回的函数要真的运行这张图。"}
    return {"report": [dict(h) for h in report], "outputs": [o.detach() for o in outputs]}


def _compare_histograms(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_outputs(expected["outputs"], got["outputs"], label="编译后程序的输出")
    if not verdict.ok:
        return verdict
    want, have = expected["report"], got["report"]
    if len(want) != len(have):
        return Verdict(False, "report 里的直方图个数不对：后端每收到一张图（每次编译一个帧，图中断会把函数分成几张图）"
                              "就记一个；同一张图运行多少次都不再交给后端。", str(len(want)), str(len(have)))
    for index, (w, h) in enumerate(zip(want, have)):
        if w != h:
            return Verdict(False, f"第 {index} 张图的直方图不同：键是 ATen 图里 call_function 节点的 str(node.target)"
                                  "（如 'aten.mm.default'）。想想后端收到的图是哪一层的，AOTAutograd 默认做不做分解。",
                           short(w), short(h))
    return PASS


# Fixed hidden programs: ops whose torch name and ATen name differ, and breaks.
_HISTOGRAM_PROGRAMS = {
    "designed-linear": '''
def linear(x, w):
    h = torch.nn.functional.linear(x, w)
    return torch.nn.functional.silu(h).mean(dim=0, keepdim=True) - 1
''',
    "designed-print-and-branch": '''
def print_and_branch(x):
    y = torch.tanh(x - 0.5)
    print("checkpoint")
    if y.sum() > 0:
        y = y * 3
    return y.exp() + 1
''',
    "designed-break-then-rsub": '''
def break_then_rsub(x):
    y = torch.softmax(x, dim=1)
    torch._dynamo.graph_break()
    return 1 - y.var() * x.t()
''',
}


EXERCISES.append(Exercise(
    id="05.aten_histogram", title="后端看到的 ATen 图：逐图算子直方图",
    stub=(
        'def aten_histogram_backend(report: list):\n'
        '    """返回一个 Dynamo 后端：每收到一张图，把这张图变成的 ATen 图的 {算子: 次数} 追加到 report，并返回运行这张图的函数。"""'),
    points=2,
    public_cases=lambda: [
        _histogram_case("two_breaks", models.BREAK_PROGRAMS["two_breaks"], 0, "两次 graph_break()：三张图"),
        _histogram_case("affine_relu", models.STRAIGHT_LINE_PROGRAMS["affine_relu"], 1, "矩阵乘、加偏置、relu"),
        _histogram_case("normalize", models.STRAIGHT_LINE_PROGRAMS["normalize"], 2,
                        "mean(dim=..., keepdim=True)、var、sqrt、clamp"),
    ],
    designed_cases=lambda: [_histogram_case(name, source, 100 + index)
                            for index, (name, source) in enumerate(_HISTOGRAM_PROGRAMS.items())],
    produce=histogram_artifact, compare=_compare_histograms,
    hint="Dynamo 交给后端的是 torch 层面的图（torch.relu、operator.add、方法调用），ATen 图要由 AOTAutograd 再追踪一遍："
         "aot_autograd 包起来的那个函数和后端的签名一样，它收到的是哪一层的图？一张图只编译一次、却可能运行很多次："
         "记录该发生在哪一边？",
))


# --- 05.guard_generator -------------------------------------------------------------------------

def _tensor_spec(shape=(4, 4), dtype="float32", requires_grad=False, transposed=False, fill=1.0) -> dict:
    return {"shape": list(shape), "dtype": dtype, "requires_grad": requires_grad, "transposed": transposed,
            "fill": fill}


def _blend_spec(x=None, y=None, alpha=2, mode="none", shifts=None, note="first") -> dict:
    """A call of ``blend`` as plain data (``shifts``: a list or a tuple, ``[1, 2]`` if not given)."""
    return {"x": x or _tensor_spec(), "y": y, "alpha": alpha, "mode": mode,
            "shifts": [1, 2] if shifts is None else shifts, "note": note}


def _changed(spec: dict, **fields) -> dict:
    return {**spec, **fields}


def _changed_x(spec: dict, **fields) -> dict:
    return {**spec, "x": {**spec["x"], **fields}}


def _probes(example: dict) -> list[tuple[str, dict]]:
    """What a call can change relative to ``example``: one thing per probe."""
    x, alpha, y, shifts = example["x"], example["alpha"], example["y"], example["shifts"]
    kind = type(shifts)
    row = [x["shape"][1]]                                   # a y that broadcasts over x's rows
    probes = [
        ("x 的值变了（形状、dtype、步长不变）", _changed_x(example, fill=-0.5)),
        ("x 的 dtype 变了", _changed_x(example, dtype="float64" if x["dtype"] == "float32" else "float32")),
        ("x 的形状变了", _changed_x(example, shape=[x["shape"][0] + 1, x["shape"][1]])),
        ("x 换成同形状的转置视图（步长不同）", _changed_x(example, transposed=not x["transposed"])),
        ("x 的 requires_grad 变了", _changed_x(example, requires_grad=not x["requires_grad"])),
        ("y 在 None 和张量之间变了", _changed(example, y=None if y else _tensor_spec(shape=row))),
        ("alpha 的值变了", _changed(example, alpha=alpha + 1)),
        ("mode 换成另一个字符串", _changed(example, mode="none" if example["mode"] == "tanh" else "tanh")),
        ("mode 在 'relu' 和别的值之间变了", _changed(example, mode="none" if example["mode"] == "relu" else "relu")),
        ("shifts 多了一个元素", _changed(example, shifts=kind([*shifts, 1]))),
        ("shifts 元素相同、list 与 tuple 互换", _changed(example, shifts=(list if kind is tuple else tuple)(shifts))),
        ("note 变了", _changed(example, note="second")),
        ("同样的调用", dict(example)),
    ]
    if y is not None:
        probes.append(("y 的形状变了", _changed(example, y=_tensor_spec(shape=x["shape"] if y["shape"] == row else row))))
    if shifts:
        probes.append(("shifts 的元素变了", _changed(example, shifts=kind(s + 1 for s in shifts))))
    if alpha == int(alpha):
        probes.append(("alpha 的值相等、类型不同（int 与 float）",
                       _changed(example, alpha=float(alpha) if type(alpha) is int else int(alpha))))
    return probes


def _generator_case(name: str, example: dict, description: str = "") -> Case:
    return Case(name, lambda: {"example": example, "probes": _probes(example)}, description)


def generator_artifact(function, built) -> dict:
    """Sandbox side: the learner's predicate built from the example, asked about each probe."""
    with _NoCompiling():
        accepts = function(models.make_blend_call(built["example"]))
        answers = [accepts(models.make_blend_call(spec)) for _, spec in built["probes"]]
    if not all(type(a) is bool for a in answers):
        return {"error": f"build_guard 返回的函数应对每个调用返回 bool，实际返回了 {short(answers)}。"}
    return {"answers": answers}


_GUARD_VERDICTS: dict = {}


def _real_guard_verdicts(built: dict) -> list[bool]:
    """Trusted side: compile ``blend`` on the example, ask the real cache entry's guards."""
    key = repr(built)
    if key not in _GUARD_VERDICTS:
        torch._dynamo.reset()
        try:
            with models.quiet_dynamo():
                torch.compile(models.blend, backend=CompileCounter())(**models.make_blend_call(built["example"]))
            entry, = _debug_get_cache_entry_list(models.blend)
            _GUARD_VERDICTS[key] = [entry.guard_manager.check(models.make_blend_call(spec))
                                    for _, spec in built["probes"]]
        finally:
            torch._dynamo.reset()
    return _GUARD_VERDICTS[key]


def _with_real_guards(artifact: dict, built: dict) -> dict:
    if "error" in artifact:
        return artifact
    return {**artifact, "real": _real_guard_verdicts(built), "probes": [label for label, _ in built["probes"]]}


def _compare_guards(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    for label, real, answer in zip(got["probes"], got["real"], got["answers"]):
        if real != answer:
            return Verdict(False, f"有一个调用，Dynamo 的守卫{'接受' if real else '拒绝'}了它，你的守卫"
                                  f"{'接受' if answer else '拒绝'}了：想想 blend 的追踪读到了这个参数的什么。",
                           f"{'接受' if real else '拒绝'}（{label}）", "接受" if answer else "拒绝")
    return PASS


def _generator_public_cases() -> list[Case]:
    return [
        _generator_case("int-alpha-no-y", _blend_spec(), "alpha 是 int，y 是 None，mode 不是 'relu'"),
        _generator_case("float-alpha-y-relu", _blend_spec(y=_tensor_spec(shape=[4]), alpha=0.5, mode="relu",
                                                          shifts=[3]), "alpha 是 float，y 是张量，mode 是 'relu'"),
    ]


def _generator_designed_cases() -> list[Case]:
    return [
        _generator_case("designed-transposed-grad", _blend_spec(
            x=_tensor_spec(shape=[3, 5], requires_grad=True, transposed=True), y=_tensor_spec(shape=[3, 5]),
            alpha=3.0, mode="tanh", shifts=(2,))),
        _generator_case("designed-float64-empty", _blend_spec(
            x=_tensor_spec(shape=[5, 3], dtype="float64"), alpha=1, mode="relu", shifts=[], note=None)),
    ]


EXERCISES.append(Exercise(
    id="05.guard_generator", title="守卫生成器：从示例输入写出一个缓存条目的守卫",
    stub=(
        'def build_guard(example: dict):\n'
        '    """返回 accepts(call: dict) -> bool：blend(**example) 编译出的缓存条目的守卫是否接受 blend(**call)。"""'),
    points=2,
    public_cases=_generator_public_cases,
    designed_cases=_generator_designed_cases,
    produce=generator_artifact, analyze=_with_real_guards, confine_analysis=False, compare=_compare_guards,
    hint="守卫只覆盖追踪时真正读到、并且影响了图的东西；按参数的种类想：张量的哪些元数据进了图、"
         "Python 值被当成常量烧进图时要守住什么、容器的结构。拿不准时，在 notebook 里打印一个条目的 guard_manager，"
         "或者对比两个调用是否重新编译。",
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
                    None, "整数参数先变，再变形状"),
        _guard_case("same-calls-static", [_spec(n=2), _spec(n=5), _spec(n=2), _spec(size=8, n=5)], False,
                    "dynamic=False：新的值和用过的值交替"),
        _guard_case("flag-dtype-grad", [_spec(), _spec(flag=False), _spec(), _spec(dtype="float64"),
                                        _spec(requires_grad=True), _spec(size=6, requires_grad=True)], None,
                    "flag、dtype、requires_grad 依次变化"),
        _guard_case("sticky-dynamic", [_spec(size=4), _spec(size=8), _spec(size=4, flag=False),
                                       _spec(size=6, flag=False)], None,
                    "size 变过之后，flag 也变了"),
        _guard_case("changed-since-first", [_spec(size=4), _spec(size=8), _spec(size=8, flag=False),
                                            _spec(size=6, flag=False)], None,
                    "size 变成 8 并停在 8，然后 flag 变了"),
        _guard_case("size-one", [_spec(size=4), _spec(size=8), _spec(size=1), _spec(size=1), _spec(size=6)], None,
                    "size 出现 1，而且出现两次"),
        _guard_case("size-one-then-first", [_spec(size=4), _spec(size=1), _spec(size=4, flag=False),
                                            _spec(size=6, flag=False)], None,
                    "size 先变成 1、再回到第一次的值，然后 flag 变了"),
        _guard_case("recompile-limit", _distinct_calls(10) + [_spec(size=1, n=2)], False,
                    "dynamic=False，十组不同的值，之后再来一组"),
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
    hint="把缓存想成一个条目列表：被某个条目接受的调用不编译，否则编译并新增一个条目，每个条目记下编译时的值和"
         "其中哪些是动态的。哪些字段会变成动态、从什么时候起、动态的字段接受哪些值、条目有没有上限，都用 measure_compiles "
         "做小实验来定：一次只改一个字段，再试试改回去、换个顺序、出现 1 的时候。",
))


# --- 05.recompile_storm -------------------------------------------------------------------------

def _storm_case(name: str, model: str, calls: list[tuple[int, float]], seed: int, description: str = "") -> Case:
    """``STORM_MODELS[model]`` called with ``(batch size, scale)`` in order; one weight."""
    def make():
        return {"model": model, "w": torch.randn(models.FEATURES, models.FEATURES) * 0.3,
                "xs": [torch.randn(batch, models.FEATURES) for batch, _ in calls],
                "scales": [scale for _, scale in calls]}
    return Case(name, seeded_build(seed, make), description)


class _CountingBackend:
    """Counts its compiles, and the runs of what it compiled."""

    def __init__(self):
        self.compiles, self.runs = 0, 0

    def __call__(self, gm, example_inputs):
        self.compiles += 1

        def run(*args):
            self.runs += 1
            return gm.forward(*args)
        return run


def storm_artifact(function, built) -> dict:
    """Sandbox side: the learner's ``run`` over the case's calls; the backend's compiles and
    runs, and the graphs Dynamo itself counted."""
    fn, backend = models.STORM_MODELS[built["model"]], _CountingBackend()
    torch._dynamo.reset()
    graphs_before = counters["stats"]["unique_graphs"]
    try:
        run = function(fn, backend)
        with models.quiet_dynamo():
            outputs = [run(x.clone(), built["w"], scale) for x, scale in zip(built["xs"], built["scales"])]
    finally:
        torch._dynamo.reset()
    if not all(type(o) is torch.Tensor for o in outputs):
        return {"error": f"storm_free 返回的函数应返回张量，实际返回了 {short(outputs[0])}。"}
    return {"outputs": [o.detach() for o in outputs], "compiles": backend.compiles, "runs": backend.runs,
            "dynamo_graphs": counters["stats"]["unique_graphs"] - graphs_before}


def _compare_storm(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_outputs(expected["outputs"], got["outputs"])
    if not verdict.ok:
        return Verdict(False, "某次调用的输出与原函数不同。", verdict.expected, verdict.got)
    if got["compiles"] != got["dynamo_graphs"]:
        return Verdict(False, "后端被调用的次数和 Dynamo 捕获的图数不一致：把 backend 交给 torch.compile，不要自己调用它。",
                       str(got["dynamo_graphs"]), str(got["compiles"]))
    verdict = compare_equal(1, got["compiles"], "后端应恰好被调用 1 次：0 次说明没有编译，多于 1 次说明序列里有调用"
                                                "触发了重新编译——用 recompiles 日志看是哪个守卫失败了。")
    if not verdict.ok:
        return verdict
    return compare_equal(len(expected["outputs"]), got["runs"],
                         "有的调用没有运行编译好的图（由 Python 直接运行了）：风暴要消除，不是绕开。")


EXERCISES.append(Exercise(
    id="05.recompile_storm", title="平息重新编译风暴：批大小与 Python 浮点数",
    stub=(
        'def storm_free(fn, backend):\n'
        '    """返回 run(x, w, scale)：结果与 fn(x, w, scale) 相同；批大小 1–64、scale 任意变化时 backend 恰好被调用一次，'
        '每次调用都运行编译好的图。"""'),
    points=2,
    public_cases=lambda: [
        _storm_case("mlp-8-first", "storm_mlp", [(8, 0.5), (16, 0.25), (3, 1.5), (1, 0.7), (40, 0.3)], 0,
                    "第一个批大小等于特征维 8；有批大小 1；scale 每次都变"),
        _storm_case("positions-1-first", "storm_positions", [(1, 1.0), (5, 1.0), (64, 1.0), (2, 1.0)], 1,
                    "第一个批大小是 1；scale 不变；x.shape[0] 参与 Python 计算"),
        _storm_case("halves-scales", "storm_halves", [(6, 0.5), (9, 2.0), (12, 0.1), (7, 0.5)], 2,
                    "批大小都 ≥ 2；scale 每次都变"),
    ],
    designed_cases=lambda: [
        _storm_case("designed-one-in-the-middle", "storm_mlp", [(5, 1.0), (1, 1.0), (1, 1.0), (33, 1.0)], 100),
        _storm_case("designed-same-batch-new-scales", "storm_positions", [(8, 0.5), (8, 0.75), (8, 1.25)], 101),
        _storm_case("designed-eight-then-one", "storm_halves", [(8, 0.5), (2, 0.5), (1, 2.0), (64, 0.5)], 102),
    ],
    produce=storm_artifact, compare=_compare_storm,
    hint="先不改任何东西，打开 recompiles 日志跑一遍，逐条读失败的守卫：每一类失败对应第 4 节里的一个机制。"
         "张量的一维可以在调用前标记；有的尺寸值在编译时“没有来历”，于是也就没有 0/1 特化；"
         "一个 Python 数要么被烧进图、要么成为图的输入——张量总是输入。",
))
