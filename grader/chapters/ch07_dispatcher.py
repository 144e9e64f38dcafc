"""Chapter 07 (the dispatcher) exercises: kernels, key sets, registrations and a custom op.

Every exercise registers something with the dispatcher, and the dispatcher is global
state: each case registers into a fresh ``torch.library.Library`` (or a fresh op
namespace, or a ``toychip.kernel_scope()``) that is torn down when the case ends, so
cases never see each other's kernels -- in the sandbox, and in the learner's own kernel
where ``check()`` runs the reference and the public cases.
"""
from __future__ import annotations

import contextlib
import random
import uuid

import torch
import torch.nn.functional as F
from torch._C import DispatchKey, DispatchKeySet

import toychip

from ..authoring import (PASS, Case, Exercise, PerformanceGoal, Verdict, artifact_error, compare_equal,
                         compare_outputs, seeded_build, short)

EXERCISES: list[Exercise] = []  # in notebook order


def _fresh_namespace(prefix: str) -> str:
    """A namespace no earlier case used: an op can be defined only once per process."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def _coverage_delta(before: toychip.Coverage) -> tuple[list[str], list[str]]:
    """Ops that ran natively / fell back since ``before`` (sorted names)."""
    after = toychip.coverage()
    native = sorted(op for op, n in after.native.items() if n > before.native.get(op, 0))
    fallback = sorted(op for op, n in after.fallback.items() if n > before.fallback.get(op, 0))
    return native, fallback


# --- 07.gelu_native ------------------------------------------------------------------

# One ulp of the 16-bit formats: a kernel computed in float32 another way may round to the neighbour.
LOW_PRECISION_TOLERANCE = {torch.float16: {"atol": 1e-3, "rtol": 2e-3}, torch.bfloat16: {"atol": 1e-2, "rtol": 1.6e-2}}
GELU_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _chip_layout(tensor: torch.Tensor, layout: str) -> torch.Tensor:
    """A chip copy of ``tensor`` seen as ``layout``: contiguous, transposed, or every other column
    from the second row on (a view with a storage offset and a stride of 2)."""
    chip = tensor.to("toychip")
    if layout == "transposed":
        return chip.t()
    if layout == "sliced":
        return chip[1:, ::2]
    return chip


def _gelu_artifact(function, built) -> dict:
    """One call of aten::gelu (forward) or aten::gelu_backward on the chip, the learner's kernels registered."""
    approximate, forward = built["approximate"], built["direction"] == "forward"
    op = "gelu.default" if forward else "gelu_backward.default"
    with toychip.kernel_scope():
        function()
        x = _chip_layout(built["x"], built["layout"])
        grad = None if forward else _chip_layout(built["grad"], built["layout"])
        inputs = [x] if forward else [grad, x]
        before_values, before = [t.cpu() for t in inputs], toychip.coverage()
        with toychip.profile() as p:
            if forward:
                result = F.gelu(x, approximate=approximate)
            else:
                result = torch.ops.aten.gelu_backward(grad, x, approximate=approximate)
        native, fallback = _coverage_delta(before)
        unchanged = all(torch.equal(t.cpu(), v) for t, v in zip(inputs, before_values))
    return {"op": op, "what": f"approximate='{approximate}' 的 {op.split('.')[0]}", "output": result.cpu(),
            "native": native, "fallback": fallback, "inputs_unchanged": unchanged, "time_us": round(p.time_us, 6)}


def _compare_gelu(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    op = expected["op"]
    if op not in got["native"]:
        return Verdict(False, f"{op} 没有在芯片上原生运行（还在走 CPU 回退）。", op, short(got["native"]))
    if got["fallback"]:
        return Verdict(False, f"调用 {op} 时仍有算子回退到 CPU：{', '.join(got['fallback'])}。")
    if not got["inputs_unchanged"]:
        return Verdict(False, f"{op} 改写了它的输入张量：NumPy 函数拿到的数组就是芯片上的内存，"
                              "gelu / gelu_backward 不是原地算子，只能读它们、把结果放进新数组返回。")
    tolerance = LOW_PRECISION_TOLERANCE.get(expected["output"].dtype, {})
    return compare_outputs(expected["output"], got["output"], label=f"{expected['what']} 的输出", **tolerance)


def _gelu_case(name: str, seed: int, approximate: str, direction: str, *, shape=(4, 8), scale: float = 3.0,
               dtype=torch.float32, layout: str = "contiguous", description: str = "") -> Case:
    def make():
        x, grad = torch.randn(*shape) * scale, torch.randn(*shape)
        return {"x": x.to(dtype), "grad": grad.to(dtype), "approximate": approximate, "direction": direction,
                "layout": layout}
    return Case(name, seeded_build(seed, make), description)


GELU_CALLS = {"forward": "F.gelu(x, approximate='{approximate}')",
              "backward": "aten::gelu_backward(grad_output, x, approximate='{approximate}')，grad_output 随机"}


def _gelu_cases_for_both_modes(prefix: str, seed: int, describe: str = "", **options) -> list[Case]:
    """Forward and backward, for approximate='none' and 'tanh', on the same input."""
    return [_gelu_case(f"{prefix}{approximate}-{direction}", seed, approximate, direction,
                       description=describe and describe + GELU_CALLS[direction].format(approximate=approximate),
                       **options)
            for approximate in ("none", "tanh") for direction in ("forward", "backward")]


def _gelu_designed_cases() -> list[Case]:
    """Wide inputs in both modes; non-contiguous views; every dtype the chip stores."""
    cases = _gelu_cases_for_both_modes("wide-", 10, scale=6.0)
    for layout, approximate, direction in [("transposed", "none", "forward"), ("transposed", "tanh", "backward"),
                                           ("sliced", "tanh", "forward"), ("sliced", "none", "backward")]:
        cases.append(_gelu_case(f"{layout}-{approximate}-{direction}", 11, approximate, direction, shape=(5, 6),
                                layout=layout))
    for dtype in GELU_DTYPES[1:]:
        for approximate, direction in [("none", "forward"), ("tanh", "backward")]:
            name = f"{str(dtype).removeprefix('torch.')}-{approximate}-{direction}"
            cases.append(_gelu_case(name, 12, approximate, direction, dtype=dtype))
    return cases


def _gelu_random_case(rng: random.Random, index: int) -> Case:
    return _gelu_case(f"random-{index}", rng.randrange(10**6), rng.choice(["none", "tanh"]),
                      rng.choice(["forward", "backward"]), shape=(rng.randint(2, 6), rng.randint(2, 9)),
                      scale=rng.choice([1.0, 3.0, 5.0]), dtype=rng.choice(GELU_DTYPES),
                      layout=rng.choice(["contiguous", "transposed", "sliced"]))


EXERCISES.append(Exercise(
    id="07.gelu_native", title="给玩具芯片加上原生 GELU（前向 + 反向）",
    stub=(
        'def register_gelu_kernels() -> None:\n'
        '    """用 toychip.register_kernel 为 aten::gelu 和 aten::gelu_backward 注册 NumPy 内核（两种 approximate 都支持）。"""'),
    points=3,
    public_cases=lambda: _gelu_cases_for_both_modes("", 0, "4×8 的 float32 芯片张量 x = 3·randn：调用 "),
    designed_cases=_gelu_designed_cases,
    random_cases=lambda rng: [_gelu_random_case(rng, i) for i in range(4)],
    produce=_gelu_artifact, compare=_compare_gelu,
    performance=PerformanceGoal(lambda facts: facts["time_us"], 1.0,
                                "模拟时间不应超过参考实现（每次调用一次内核启动、没有主机↔设备拷贝，"
                                "内核返回与输入同 dtype 的数组）"),
    hint="用 toychip.register_kernel 注册两个 NumPy 函数：aten::gelu(a, approximate='none') 和 "
         "aten::gelu_backward(grad, a, approximate='none')（取默认值时调度器不传 approximate）；两种 approximate "
         "都要支持，erf 用 toychip.kernels.KERNELS['erf'].fn；保持输入的 dtype 计算（float32 进、float32 出）。",
))


# --- scenarios shared by 07.probe_path and 07.mini_dispatcher -------------------------

def _make_tensors(spec: str) -> list[torch.Tensor]:
    """The tensor arguments a scenario names ("chip+cpu_scalar": two arguments)."""
    return [_make_tensor(part) for part in spec.split("+")]


def _make_tensor(name: str) -> torch.Tensor:
    if name == "cpu":
        return torch.ones(2)
    if name == "cpu_requires_grad":
        return torch.ones(2, requires_grad=True)
    if name == "cpu_scalar":
        return torch.tensor(2.0)
    if name == "chip":
        return torch.ones(2).to("toychip")
    if name == "meta":
        return torch.empty(2, device="meta")
    if name == "inference_cpu":
        with torch.inference_mode():
            return torch.ones(2)
    raise ValueError(f"unknown tensor spec {name!r}")


MODE_GUARDS = {
    "plain": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
    "autocast_cpu": lambda: torch.autocast("cpu"),
    "autocast_chip": lambda: torch.autocast("toychip", dtype=torch.bfloat16),
    "exclude_autograd_cpu": lambda: torch._C._ExcludeDispatchKeyGuard(DispatchKeySet(DispatchKey.AutogradCPU)),
    "include_autograd_cpu": lambda: torch._C._IncludeDispatchKeyGuard(DispatchKey.AutogradCPU),
    "include_autocast_cpu": lambda: torch._C._IncludeDispatchKeyGuard(DispatchKey.AutocastCPU),
    # The course's tracer: the Python dispatcher hands every kernel the call's whole key set,
    # keys above the kernel's own included.
    "trace_dispatch": toychip.dispatch_trace.recording,
}


@contextlib.contextmanager
def _enter_mode(mode: str):
    """The thread-local state a scenario runs under ("autocast_cpu+trace_dispatch": both, in order)."""
    with contextlib.ExitStack() as stack:
        for part in mode.split("+"):
            stack.enter_context(MODE_GUARDS[part]())
        yield


TENSOR_SPECS = ["cpu", "cpu_requires_grad", "chip", "meta", "inference_cpu", "chip+cpu_scalar",
                "cpu+inference_cpu"]
MODES = ["plain", "no_grad", "inference_mode", "autocast_cpu", "autocast_chip", "exclude_autograd_cpu",
         "include_autograd_cpu", "include_autocast_cpu", "inference_mode+autocast_cpu"]


def _compare_scenarios(expected, got, what: str) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    for scenario, keys in expected.items():
        if got.get(scenario) != keys:
            spec, mode = scenario.split("|")
            return Verdict(False, f"张量 {spec}、模式 {mode} 下{what}不对。", short(keys), short(got.get(scenario)))
    return compare_equal(sorted(expected), sorted(got), "场景集合与参考不一致。")


def _key_names(value, function_name: str):
    if not isinstance(value, (list, tuple)) or not all(isinstance(k, str) for k in value):
        return None, {"error": f"{function_name} 应返回由调度键名字（str）组成的 list，实际返回了 {short(value)}。"}
    return list(value), None


# --- 07.probe_path ---------------------------------------------------------------------

PROBE_KEYS = ["AutocastCPU", "AutocastPrivateUse1", "AutogradCPU", "AutogradPrivateUse1", "ADInplaceOrView",
              "CPU", "PrivateUse1"]
SOME_KEYS_SCENARIOS = [("cpu_requires_grad", "no_grad"), ("inference_cpu", "plain"), ("chip", "autocast_cpu"),
                       ("cpu", "exclude_autograd_cpu")]
TRACED_SCENARIOS = [("cpu", "trace_dispatch"), ("chip", "trace_dispatch"), ("cpu", "autocast_cpu+trace_dispatch")]
PROBE_SCENARIOS = [("cpu", "plain"), ("chip", "plain"), ("cpu", "autocast_cpu"), ("cpu", "inference_mode"),
                   ("chip", "autocast_chip"), *SOME_KEYS_SCENARIOS, *TRACED_SCENARIOS,
                   ("chip", "autocast_chip+trace_dispatch")]


def _probe_output_problem(x: torch.Tensor, out) -> str | None:
    """What is wrong with the probe's result: it must be a new tensor holding x's values (a meta tensor holds none)."""
    if not isinstance(out, torch.Tensor):
        return f"探针返回了 {type(out).__name__}，应返回张量"
    if out is x:
        return "探针返回了输入 x 本身（模式 probe(Tensor x) -> Tensor 承诺返回一个新张量）"
    if not x.is_meta and not torch.equal(out.cpu(), x.cpu()):
        return "探针返回的张量与 x 的值不同"
    return None


def _probe_artifact(function, built) -> dict:
    namespace = _fresh_namespace("ch07probe")
    lib = torch.library.Library(namespace, "DEF")
    log: list = []
    try:
        function(lib, list(built["keys"]), log)
        probe = getattr(torch.ops, namespace).probe
        result = {}
        for spec, mode in built["scenarios"]:
            tensors = _make_tensors(spec)
            log.clear()
            try:
                with _enter_mode(mode):
                    out = probe(*tensors)
            except RecursionError:
                return {"error": f"张量 {spec}、模式 {mode} 下调用探针时无限递归（RecursionError）："
                                 "某个内核 redispatch 之后，调用又回到了已经走过的键。传给 redispatch 的键集合"
                                 "只能留下优先级比这个内核自己的键低的键（4.4 节）；Python 调度器开启时"
                                 "（trace_dispatch），内核收到的 keyset 里还有比它高的键。"}
            keys, error = _key_names(list(log), "探针记录的 log")
            if error:
                return error
            if (problem := _probe_output_problem(tensors[0], out)) is not None:
                return {"error": f"张量 {spec}、模式 {mode} 下{problem}。"}
            result[f"{spec}|{mode}"] = keys
        return result
    finally:
        lib._destroy()


def _probe_case(name: str, keys, scenarios, description: str = "") -> Case:
    return Case(name, lambda: {"keys": list(keys), "scenarios": [list(s) for s in scenarios]}, description)


def _probe_designed_cases() -> list[Case]:
    """Only the autocast keys, then only the autograd keys, each under the modes that reach them;
    then a subset under the tracer, where a kernel's key set still holds the keys above it."""
    return [
        _probe_case("autocast-keys", ["AutocastCPU", "AutocastPrivateUse1", "ADInplaceOrView", "CPU", "PrivateUse1"],
                    [("cpu", "autocast_cpu"), ("chip", "autocast_chip"), ("chip", "autocast_cpu"),
                     ("inference_cpu", "plain")]),
        _probe_case("autograd-keys", ["AutogradCPU", "AutogradPrivateUse1", "ADInplaceOrView", "CPU", "PrivateUse1"],
                    [("cpu_requires_grad", "no_grad"), ("cpu", "exclude_autograd_cpu"), ("cpu", "inference_mode"),
                     ("chip", "plain")]),
        _probe_case("traced-some-keys", ["AutocastPrivateUse1", "AutogradCPU", "AutogradPrivateUse1", "CPU",
                                         "PrivateUse1"],
                    [("chip", "autocast_chip+trace_dispatch"), ("cpu_requires_grad", "trace_dispatch"),
                     ("inference_cpu", "trace_dispatch")]),
    ]


def _random_probe_case(rng: random.Random, index: int) -> Case:
    optional = [k for k in PROBE_KEYS if k not in ("CPU", "PrivateUse1")]
    keys = sorted(rng.sample(optional, rng.randint(1, len(optional))), key=PROBE_KEYS.index) + ["CPU", "PrivateUse1"]
    return _probe_case(f"random-{index}", keys, rng.sample(PROBE_SCENARIOS, 4))


EXERCISES.append(Exercise(
    id="07.probe_path", title="探针算子：亲眼看到调度路径 (with_keyset + redispatch)",
    stub=(
        'def install_probe(lib: Library, keys: list, log: list) -> None:\n'
        '    """在 lib 中定义 probe(Tensor x) -> Tensor；在 keys 的每个键上注册内核：记录键名，后端键返回 x.clone()，其余 redispatch。"""'),
    points=3,
    public_cases=lambda: [
        _probe_case("all-keys-cpu", PROBE_KEYS, [("cpu", "plain"), ("cpu", "autocast_cpu"), ("cpu", "inference_mode")],
                    "在 7 个键上都注册了探针：CPU 张量，默认、autocast(cpu)、inference_mode"),
        _probe_case("all-keys-chip", PROBE_KEYS, [("chip", "plain"), ("chip", "autocast_chip")],
                    "在 7 个键上都注册了探针：芯片张量，默认与 autocast(toychip)"),
        _probe_case("some-keys", ["AutogradCPU", "AutogradPrivateUse1", "CPU", "PrivateUse1"], SOME_KEYS_SCENARIOS,
                    "只在部分键上注册：没有内核的键被跳过"),
        _probe_case("traced", PROBE_KEYS, TRACED_SCENARIOS,
                    "在 7 个键上都注册了探针，在 trace_dispatch 之下调用（Python 调度器开启，1.2 节；"
                    "练习后的对比单元格就这样调用）：CPU 张量、芯片张量、autocast(cpu) 里的 CPU 张量"),
    ],
    designed_cases=_probe_designed_cases,
    random_cases=lambda rng: [_random_probe_case(rng, i) for i in range(3)],
    produce=_probe_artifact, compare=lambda e, g: _compare_scenarios(e, g, "探针记录的路径"),
    hint="lib.define('probe(Tensor x) -> Tensor')；每个键用 lib.impl('probe', kernel, key, with_keyset=True)，"
         "内核先 log.append(key)，再 op.redispatch(keyset & torch._C._dispatch_keyset_full_after(DispatchKey.<key>), x)；"
         "CPU / PrivateUse1 上直接返回 x.clone()。",
))


# --- 07.mini_dispatcher ----------------------------------------------------------------

KERNEL_KINDS = ("redispatch", "return", "fallthrough")
BACKEND_KEYS = ("CPU", "PrivateUse1", "Meta")
WRAPPER_KEYS = ("AutocastCPU", "AutocastPrivateUse1", "AutogradCPU", "AutogradPrivateUse1", "AutogradMeta",
                "ADInplaceOrView", "BackendSelect")


def _install_kernel_table(lib, entries, log: list) -> None:
    """The probe of 07.probe_path with a kind per key: a kernel that logs its key and then
    redispatches below it or returns, or a fallthrough. ``entries``: (key name, kind) pairs."""
    lib.define("probe(Tensor x, Tensor? other=None) -> Tensor")
    probe = getattr(torch.ops, lib.ns).probe.default

    def kernel_at(name: str, kind: str):
        below = torch._C._dispatch_keyset_full_after(getattr(DispatchKey, name))

        def kernel(keyset, x, other=None):
            log.append(name)
            return x.clone() if kind == "return" else probe.redispatch(keyset & below, x, other)
        return kernel

    for name, kind in entries:
        if kind == "fallthrough":
            lib.impl("probe", torch.library.fallthrough_kernel, name)
        else:
            lib.impl("probe", kernel_at(name, kind), name, with_keyset=True)


def _call_keys(spec: str, mode: str) -> tuple[list, DispatchKeySet, DispatchKeySet]:
    """What the dispatcher starts from: each tensor argument's key set, and the thread-local sets under the mode."""
    tensor_keys = [torch._C._dispatch_keys(t) for t in _make_tensors(spec)]
    with _enter_mode(mode):
        return tensor_keys, torch._C._dispatch_tls_local_include_set(), torch._C._dispatch_tls_local_exclude_set()


def _dispatcher_artifact(function, built) -> dict:
    """The learner's predicted chain for every scenario (called outside the mode: the sets are its arguments)."""
    chains = {}
    for spec, mode in built["scenarios"]:
        chain, error = _key_names(function(dict(built["table"]), *_call_keys(spec, mode)), "dispatch_chain")
        if error:
            return error
        chains[f"{spec}|{mode}"] = chain
    return {"chains": chains}


_REAL_CHAINS: dict[str, dict] = {}


def _with_real_chains(artifact: dict, built: dict) -> dict:
    """Trusted side: the path PyTorch really takes in each scenario, logged by a probe (measured once per case)."""
    if "error" in artifact:
        return artifact
    key = repr((built["table"], built["scenarios"]))
    if key not in _REAL_CHAINS:
        _REAL_CHAINS[key] = _probe_artifact(_install_kernel_table, {"keys": list(built["table"].items()),
                                                                     "scenarios": built["scenarios"]})
    return {**artifact, "real": _REAL_CHAINS[key]}


def _chain_difference(real: list, predicted: list) -> str:
    """Where a predicted chain leaves the real one, and what to think about there."""
    same = next((i for i, (a, b) in enumerate(zip(real, predicted)) if a != b), min(len(real), len(predicted)))
    if same == 0:
        return "第一个运行的内核就不对：这次调用的键集合里到底有哪些键（张量带来的、include 加上的、exclude 去掉的）？"
    if same == len(real):
        return f"前 {same} 个内核一致，真实的调用到这里就结束了，你的预测还在往下走。"
    return (f"前 {same} 个内核一致，之后就不同了：{predicted[same - 1]} 的内核 redispatch 之后，"
            "调用还能到达哪些键？透传的键、没有内核的键呢？")


def _compare_chains(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    for scenario, real in expected["real"].items():
        predicted = got["chains"].get(scenario)
        if predicted != real:
            spec, mode = scenario.split("|")
            return Verdict(False, f"张量 {spec}、模式 {mode} 下预测的路径不对。" + _chain_difference(real, predicted or []),
                           short(real), short(predicted))
    return PASS


def _dispatcher_case(name: str, table: dict, scenarios, description: str = "") -> Case:
    return Case(name, lambda: {"table": dict(table), "scenarios": [list(s) for s in scenarios]}, description)


def _dispatcher_designed_cases() -> list[Case]:
    """A mixed-device call past a per-backend fallthrough; kernels only include or exclude guards
    reach or hide; kernels that return early."""
    return [
        _dispatcher_case("designed-mixed-devices",
                         {"AutocastCPU": "redispatch", "AutogradCPU": "redispatch", "AutogradPrivateUse1": "fallthrough",
                          "ADInplaceOrView": "return", "CPU": "return", "PrivateUse1": "return"},
                         [("chip+cpu_scalar", "autocast_cpu"), ("cpu_requires_grad", "no_grad"),
                          ("cpu+inference_cpu", "inference_mode+autocast_cpu"), ("chip+cpu_scalar", "inference_mode")]),
        _dispatcher_case("designed-guards",
                         {"AutocastCPU": "redispatch", "AutogradCPU": "redispatch", "AutogradMeta": "redispatch",
                          "BackendSelect": "redispatch", "ADInplaceOrView": "fallthrough", "CPU": "return",
                          "Meta": "return"},
                         [("inference_cpu", "include_autograd_cpu"), ("cpu", "include_autocast_cpu"),
                          ("meta", "inference_mode"), ("inference_cpu", "autocast_cpu"), ("meta", "plain")]),
        _dispatcher_case("designed-early-return",
                         {"AutocastPrivateUse1": "return", "AutogradCPU": "return", "AutogradPrivateUse1": "redispatch",
                          "BackendSelect": "fallthrough", "ADInplaceOrView": "redispatch", "CPU": "return",
                          "PrivateUse1": "return"},
                         [("chip", "autocast_chip"), ("chip", "exclude_autograd_cpu"),
                          ("chip+cpu_scalar", "inference_mode"), ("inference_cpu", "plain"), ("cpu", "no_grad")]),
    ]


def _random_dispatcher_case(rng: random.Random, index: int) -> Case:
    """Some wrapper keys, each with a random kind; every backend returns, so every call ends at a kernel."""
    table = {name: rng.choice(KERNEL_KINDS) for name in rng.sample(WRAPPER_KEYS, rng.randint(2, len(WRAPPER_KEYS)))}
    table.update({name: "return" for name in BACKEND_KEYS})
    return _dispatcher_case(f"random-{index}", table, [(rng.choice(TENSOR_SPECS), rng.choice(MODES)) for _ in range(4)])


EXERCISES.append(Exercise(
    id="07.mini_dispatcher", title="自己做一个小调度器：预测一次调用经过哪些内核",
    stub=(
        'def dispatch_chain(table: dict, tensor_keys: list, include: DispatchKeySet, exclude: DispatchKeySet) -> list:\n'
        '    """算子的内核表 table（键名 → "redispatch" / "return" / "fallthrough"）、各张量参数的键集合、'
        '线程局部的 include / exclude 集合：返回这次调用依次运行的内核所在的键名。"""'),
    points=2,
    public_cases=lambda: [
        _dispatcher_case("autocast-autograd",
                         {"AutocastCPU": "redispatch", "AutogradCPU": "redispatch", "AutogradPrivateUse1": "redispatch",
                          "ADInplaceOrView": "fallthrough", "CPU": "return", "PrivateUse1": "return"},
                         [("cpu", "plain"), ("cpu", "autocast_cpu"), ("cpu", "inference_mode"),
                          ("chip+cpu_scalar", "plain"), ("chip", "exclude_autograd_cpu")],
                         "Autocast 与 Autograd 上的内核、ADInplaceOrView 透传：默认、autocast(cpu)、inference_mode、"
                         "芯片张量 + CPU 标量、手动排除 AutogradCPU 的芯片张量"),
        _dispatcher_case("include-set",
                         {"AutocastCPU": "redispatch", "AutogradCPU": "redispatch", "ADInplaceOrView": "redispatch",
                          "BackendSelect": "redispatch", "CPU": "return"},
                         [("inference_cpu", "plain"), ("inference_cpu", "inference_mode"),
                          ("cpu", "inference_mode+autocast_cpu"), ("inference_cpu", "include_autograd_cpu"),
                          ("cpu", "include_autocast_cpu")],
                         "ADInplaceOrView 与 BackendSelect 上也有内核：推理张量、inference_mode 里的 autocast、"
                         "手动 include AutogradCPU / AutocastCPU"),
    ],
    designed_cases=_dispatcher_designed_cases,
    random_cases=lambda rng: [_random_dispatcher_case(rng, i) for i in range(2)],
    produce=_dispatcher_artifact, analyze=_with_real_chains, confine_analysis=False, compare=_compare_chains,
    hint="先得到这次调用真正的键集合（用集合自己的运算，不要读打印出来的名字），再像调度器一样从最高的键往下走："
         "一个内核 redispatch 时，交出去的只是比它低的那些键。",
))


# --- 07.boxed_fallback -----------------------------------------------------------------

def _program_functional_and_inplace(x):
    row = x[1]
    total = torch.cumsum(x, 1)       # no chip kernel: the composite calls cumsum.out(..., out=fresh)
    x.tril_()                        # in place: tril.out(x, out=x) writes self
    return {"cumsum": total, "flip": torch.flip(x, [0]), "x": x, "view_of_x": row}


def _program_out_arguments(x):
    out = torch.empty(0, device=x.device)                   # wrong size: the op resizes it
    torch.cumsum(x, 0, out=out)
    values, indices = torch.empty(0, device=x.device), torch.empty(0, dtype=torch.int64, device=x.device)
    torch.sort(x, 1, out=(values, indices))
    x.cumsum_(1)
    return {"out": out, "values": values, "indices": indices, "x": x}


def _program_multi(x):
    values, indices = torch.sort(x, 0, descending=True)
    top, where = torch.max(x, 1)
    running, at = torch.cummax(x, 1)  # _cummax_helper(self, Tensor(a!) values, Tensor(b!) indices, dim) -> ()
    return {"sorted": values, "order": indices, "max": top, "argmax": where, "cummax": running, "cummax_at": at}


def _program_lists(x):
    return {"cat": torch.cat([x, x * 2], 1), "stacked": torch.stack([x, -x])}


def _program_boxed_calls(x):
    """Mutating ops called through ``torch.ops`` on inference tensors.

    Called from C++ (``torch.cumsum(..., out=out)``: the unboxed wrapper of a boxed kernel),
    or through the Autograd and ADInplaceOrView kernels that an ordinary tensor's calls pass,
    an op that writes an argument returns that argument whatever the fallback returned. An
    inference tensor has neither key, and a ``torch.ops`` call is boxed: here the caller gets
    exactly what the fallback returns.
    """
    with torch.inference_mode():
        x = x.clone()
        out = torch.empty(0, device=x.device)
        returned_out = torch.ops.aten.cumsum.out(x, 0, out=out)
        y = x.clone()
        returned_y = torch.ops.aten.masked_fill_.Scalar(y, y < 0, 0.0)
        values, indices = torch.empty(0, device=x.device), torch.empty(0, dtype=torch.int64, device=x.device)
        returned_pair = torch.ops.aten.sort.values_stable(x, stable=True, dim=1, values=values, indices=indices)
    return {"out": out, "y": y, "values": values, "indices": indices,
            "cumsum.out → out": returned_out is out, "masked_fill_ → self": returned_y is y,
            "sort.values_stable → (values, indices)": returned_pair[0] is values and returned_pair[1] is indices}


PROGRAMS = {"functional_and_inplace": _program_functional_and_inplace, "out_arguments": _program_out_arguments,
            "multi": _program_multi, "lists": _program_lists, "boxed_calls": _program_boxed_calls}


def _fallback_artifact(function, built) -> dict:
    calls: list[str] = []

    def counted(op, *args, **kwargs):
        calls.append(str(op))
        return function(op, *args, **kwargs)

    try:
        with toychip.use_fallback(counted):
            results = PROGRAMS[built["program"]](built["x"].to("toychip"))
    except RecursionError:
        return {"error": f"程序无限递归（RecursionError，最后进入回退函数的是 {calls[-1] if calls else '（无）'}）："
                         "回退函数在 CPU 上调用 op 时，参数里还有芯片张量，调用又回到了回退函数自己。"
                         "所有芯片张量都要先拷到 CPU，包括列表/元组里的（例如 torch.cat 的输入）。"}
    tensors = {name: value for name, value in results.items() if isinstance(value, torch.Tensor)}
    return {"tensors": {name: value.cpu() for name, value in tensors.items()},
            "devices": {name: value.device.type for name, value in tensors.items()},
            "aliases": {name: value for name, value in results.items() if isinstance(value, bool)},
            "fallback_ops": sorted(set(calls))}


def _compare_fallback(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if not got["fallback_ops"]:
        return Verdict(False, "你的回退函数一次也没有被调用。")
    for name, device in got["devices"].items():
        if device != "toychip":
            return Verdict(False, f"结果 {name} 在 {device} 上：回退函数要把结果拷回芯片。", "toychip", device)
    for name, want in expected["tensors"].items():
        verdict = compare_outputs(want, got["tensors"].get(name),
                                  label=f"结果 {name} 不对（是否把被写入的参数 Tensor(a!)，包括 kwarg-only 的 out=，"
                                        f"原地写回了芯片上的那个张量？）：它")
        if not verdict.ok:
            return verdict
    for claim in expected["aliases"]:
        if not got["aliases"].get(claim):
            return Verdict(False, f"通过 torch.ops 直接调用时，调用者拿到的正是回退函数的返回值：{claim} "
                                  "应当返回被写入的那个参数本身（模式里与它同别名的 Tensor(a!) 返回值），"
                                  "你的回退函数返回了另一个张量。")
    return PASS


def _fallback_case(name: str, program: str, seed: int, shape=(3, 4), description: str = "") -> Case:
    return Case(name, seeded_build(seed, lambda: {"program": program, "x": torch.randn(*shape)}), description)


EXERCISES.append(Exercise(
    id="07.boxed_fallback", title="自己写一个装箱 (boxed) CPU 回退",
    stub=(
        'def chip_fallback(op, *args, **kwargs):\n'
        '    """装箱 CPU 回退：参数拷到 CPU 执行 op，把结果写回模式中标为 (a!) 的芯片参数，其余结果拷回芯片。"""'),
    points=3,
    public_cases=lambda: [
        _fallback_case("functional+inplace", "functional_and_inplace", 0,
                       description="cumsum 在芯片上没有内核（走 cumsum.out）；tril_ 原地修改，视图也要看到新值；"
                                   "flip（函数式）的结果"),
        _fallback_case("out-arguments", "out_arguments", 1,
                       description="用户传入 out=（需要 resize）、sort 的两个 out、原地 cumsum_"),
        _fallback_case("multi", "multi", 3,
                       description="多返回值：sort、max(dim) 与 cummax（其 _cummax_helper 没有返回值，写入两个位置参数）"),
        _fallback_case("lists", "lists", 4, description="张量列表作参数：torch.cat 与 torch.stack"),
        _fallback_case("boxed-calls", "boxed_calls", 2,
                       description="inference_mode 下用 torch.ops.aten 直接调用 cumsum.out、masked_fill_、"
                                   "sort.values_stable，检查返回的就是被写入的参数本身"),
    ],
    designed_cases=lambda: [_fallback_case(f"designed-{program}", program, 100 + i, (4, 5))
                            for i, program in enumerate(PROGRAMS)],
    random_cases=lambda rng: [
        _fallback_case(f"random-{program}", program, rng.randrange(10**6), (rng.randint(2, 5), rng.randint(2, 6)))
        for program in rng.sample(sorted(PROGRAMS), 3)
    ],
    produce=_fallback_artifact, compare=_compare_fallback,
    hint="op._schema.arguments[i].alias_info.is_write 标出被写入的参数（原地算子的 self、out=，"
         "out 是 kwarg_only）；把 CPU 结果写回这些芯片张量（形状变了先 resize_），"
         "返回值若与它们同别名（alias_info.before_set 相同）就返回那个参数对象本身。",
))


# --- 07.bias_gelu ----------------------------------------------------------------------

CHIP_OPCHECK_TESTS = ("test_schema", "test_faketensor")  # test_autograd_registration: CPU/CUDA/XPU only


def _error_text(namespace: str, error: Exception) -> str:
    """The error, with the case's throw-away namespace shown as ``ns`` (it differs every run)."""
    return f"{type(error).__name__}: {str(error).replace(namespace, 'ns')[:300]}"


def _operator_name(handle) -> str | None:
    """The qualified name of an operator handle: custom_op's result, a torch.ops packet or overload."""
    for attribute in ("_qualname", "_qualified_op_name"):
        if isinstance(name := getattr(handle, attribute, None), str):
            return name
    return handle.name() if isinstance(handle, torch._ops.OpOverload) else None


def _opcheck_facts(op, args, tests=None) -> dict:
    kwargs = {} if tests is None else {"test_utils": tests}
    try:
        outcomes = torch.library.opcheck(op, args, **kwargs)
    except Exception as error:  # opcheck raises on the first failing test
        return {"opcheck": {"failed": _error_text(op.namespace, error)}}
    return {"opcheck": {test: str(outcome) for test, outcome in outcomes.items()}}


def _forward_facts(op, x, bias, grad) -> dict:
    return {"output": op(x, bias)}


def _grad_facts(op, x, bias, grad) -> dict:
    x, bias = x.requires_grad_(), bias.requires_grad_()
    try:
        grad_x, grad_bias = torch.autograd.grad(op(x, bias), (x, bias), grad)
    except RuntimeError as error:  # autograd rejects a gradient of the wrong shape
        return {"error": f"反向传播出错：{_error_text(op.namespace, error)}"}
    return {"grad_x": grad_x, "grad_bias": grad_bias}


def _chip_facts(op, x, bias, grad) -> dict:
    chip_x, chip_bias = x.to("toychip"), bias.to("toychip")
    before = toychip.coverage()
    with toychip.profile() as p:
        chip_output = op(chip_x, chip_bias)
    _, fallback = _coverage_delta(before)
    return {"chip_output": chip_output.cpu(), "chip_launches": p.launches, "chip_copies": p.copies,
            "chip_fallback": fallback}


def _compile_facts(op, x, bias, grad) -> dict:
    compiled = torch.compile(lambda a, b: op(a, b) * 2, fullgraph=True, backend="aot_eager")
    try:
        return {"compiled": compiled(x.requires_grad_(), bias.requires_grad_()).detach()}
    except Exception as error:
        return {"compiled": _error_text(op.namespace, error)}
    finally:
        torch._dynamo.reset()


BIAS_GELU_CHECKS = {
    "forward": _forward_facts,
    "grads": _grad_facts,
    "opcheck_cpu": lambda op, x, bias, grad: _opcheck_facts(op, (x.requires_grad_(), bias.requires_grad_())),
    "opcheck_chip": lambda op, x, bias, grad: _opcheck_facts(op, (x.to("toychip"), bias.to("toychip")),
                                                             CHIP_OPCHECK_TESTS),
    "chip": _chip_facts,
    "compile": _compile_facts,
}


def _bias_gelu_artifact(function, built) -> dict:
    """Define the op in a fresh namespace, then run the one check the case names."""
    namespace = _fresh_namespace("ch07op")
    handle = function(namespace)
    if _operator_name(handle) != f"{namespace}::bias_gelu":
        return {"error": "define_bias_gelu 应返回定义好的算子（@custom_op 得到的对象），"
                         f"实际返回了 {short(handle)}。"}
    op = getattr(torch.ops, namespace).bias_gelu.default
    return BIAS_GELU_CHECKS[built["check"]](op, built["x"], built["bias"], built["grad"])


def _compare_opcheck(expected, got) -> Verdict:
    failed = {test: outcome for test, outcome in got["opcheck"].items() if outcome != "SUCCESS"}
    if failed:
        return Verdict(False, f"torch.library.opcheck 没有通过：{short(failed)}")
    return PASS


def _compare_chip(expected, got) -> Verdict:
    if got["chip_fallback"] or got["chip_copies"]:
        return Verdict(False, "芯片上调用时有算子回退到 CPU（或有主机↔设备拷贝）：请用 register_kernel('toychip') "
                              "注册一个 NumPy 芯片内核。", "没有回退", short(got["chip_fallback"]))
    return compare_outputs(expected["chip_output"], got["chip_output"], label="芯片上的输出")


def _compare_compiled(expected, got) -> Verdict:
    if isinstance(got["compiled"], str):
        return Verdict(False, f"torch.compile(fullgraph=True) 失败：{got['compiled']}")
    return compare_outputs(expected["compiled"], got["compiled"], label="torch.compile(fullgraph=True) 编译后的输出")


def _compare_bias_gelu(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if "opcheck" in expected:
        return _compare_opcheck(expected, got)
    if "chip_output" in expected:
        return _compare_chip(expected, got)
    if "compiled" in expected:
        return _compare_compiled(expected, got)
    labels = {"output": "CPU 上的前向输出", "grad_x": "x 的梯度", "grad_bias": "bias 的梯度"}
    for name in expected:
        verdict = compare_outputs(expected[name], got[name], label=labels[name])
        if not verdict.ok:
            return verdict
    return PASS


def _bias_gelu_case(check: str, seed: int, shape, dtype=torch.float32, description: str = "") -> Case:
    def make():
        x, bias, grad = torch.randn(*shape) * 2, torch.randn(shape[-1]), torch.randn(*shape)
        return {"check": check, "x": x.to(dtype), "bias": bias.to(dtype), "grad": grad.to(dtype)}
    name = f"{check}-{'x'.join(map(str, shape))}"
    if dtype != torch.float32:
        name += "-" + str(dtype).removeprefix("torch.")
    return Case(name, seeded_build(seed, make), description)


def _random_bias_gelu_case(rng: random.Random, check: str) -> Case:
    shape = tuple(rng.randint(2, 5) for _ in range(rng.randint(1, 4)))
    case = _bias_gelu_case(check, rng.randrange(10**6), shape)
    return Case(f"random-{case.name}", case.build)


EXERCISES.append(Exercise(
    id="07.bias_gelu", title="自定义算子 bias_gelu：opcheck + 芯片内核 + fullgraph 编译",
    stub=(
        'def define_bias_gelu(namespace: str):\n'
        '    """定义自定义算子 {namespace}::bias_gelu(x, bias) = gelu(x + bias, approximate="tanh")：CPU 实现、fake、autograd、芯片融合内核；返回该算子。"""'),
    points=3,
    public_cases=lambda: [
        _bias_gelu_case("forward", 0, (2, 3, 4), description="x 为 2×3×4，bias 为 4：CPU 上的输出"),
        _bias_gelu_case("grads", 0, (2, 3, 4), description="同一输入，随机的 grad_output：x 与 bias 的梯度"),
        _bias_gelu_case("grads", 0, (6,), description="一维的 x（形状 6，与 bias 相同）：x 与 bias 的梯度"),
        _bias_gelu_case("opcheck_cpu", 0, (2, 3, 4), description="CPU 输入上 opcheck 的四项检查"),
        _bias_gelu_case("opcheck_chip", 0, (2, 3, 4), description="芯片输入上 opcheck 的 test_schema 与 test_faketensor"),
        _bias_gelu_case("chip", 0, (2, 3, 4), description="芯片上的输出、没有回退、内核启动次数"),
        _bias_gelu_case("compile", 0, (2, 3, 4), description="torch.compile(fullgraph=True, backend='aot_eager') 的输出"),
    ],
    designed_cases=lambda: [
        _bias_gelu_case("forward", 1, (5, 2, 3, 6)),
        _bias_gelu_case("grads", 1, (5, 2, 3, 6)),
        _bias_gelu_case("grads", 2, (7,)),
        _bias_gelu_case("opcheck_cpu", 3, (3, 5), torch.float64),
        _bias_gelu_case("opcheck_chip", 4, (4, 1, 3)),
        _bias_gelu_case("chip", 5, (3, 2, 5)),
    ],
    random_cases=lambda rng: [_random_bias_gelu_case(rng, check) for check in ("forward", "grads", "chip")],
    produce=_bias_gelu_artifact, compare=_compare_bias_gelu,
    performance=PerformanceGoal(lambda facts: facts.get("chip_launches", 0), 1.0,
                                "芯片上一次 bias_gelu 的内核启动次数不应多于参考实现（一个融合内核）"),
    hint="@custom_op(f'{namespace}::bias_gelu', mutates_args=())；register_fake 返回 torch.empty_like(x)；"
         "register_autograd 的 backward 要返回 (grad_x, grad_bias)，grad_bias 要用 sum_to_size(bias.shape) 归约；"
         "芯片内核：op.register_kernel('toychip')(toychip.chip_kernel(f'{namespace}::bias_gelu', numpy_fn))。",
))
