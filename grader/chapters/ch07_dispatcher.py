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

APPROXIMATIONS = ("none", "tanh")


def _gelu_artifact(function, built) -> dict:
    """Forward and backward of both GELU variants on the chip, with coverage and simulated time."""
    artifact = {}
    with toychip.kernel_scope():
        function()
        before = toychip.coverage()
        with toychip.profile() as p:
            for approximate in APPROXIMATIONS:
                x = built["x"].to("toychip").requires_grad_()
                y = F.gelu(x, approximate=approximate)
                (grad,) = torch.autograd.grad(y, x, torch.ones_like(y))
                artifact[f"output_{approximate}"], artifact[f"grad_{approximate}"] = y.detach().cpu(), grad.cpu()
        artifact["native"], artifact["fallback"] = _coverage_delta(before)
    artifact["time_us"] = round(p.time_us, 6)
    return artifact


def _compare_gelu(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    missing = [op for op in ("gelu.default", "gelu_backward.default") if op not in got["native"]]
    if missing:
        return Verdict(False, f"这些算子没有在芯片上原生运行（还在走 CPU 回退）：{', '.join(missing)}。",
                       "gelu.default, gelu_backward.default", short(got["native"]))
    if got["fallback"]:
        return Verdict(False, f"前向+反向过程中仍有算子回退到 CPU：{', '.join(got['fallback'])}。")
    for approximate in APPROXIMATIONS:
        for what, label in (("output", "前向输出"), ("grad", "梯度")):
            verdict = compare_outputs(expected[f"{what}_{approximate}"], got[f"{what}_{approximate}"],
                                      label=f"approximate='{approximate}' 的{label}")
            if not verdict.ok:
                return verdict
    return PASS


def _gelu_case(name: str, seed: int, shape, scale: float, description: str = "") -> Case:
    return Case(name, seeded_build(seed, lambda: {"x": torch.randn(*shape) * scale}), description)


EXERCISES.append(Exercise(
    id="07.gelu_native", title="给玩具芯片加上原生 GELU（前向 + 反向）", function="register_gelu_kernels",
    points=3,
    public_cases=lambda: [
        _gelu_case("4x8", 0, (4, 8), 2.0, "approximate='none' 和 'tanh' 的前向与反向"),
        _gelu_case("wide-range", 1, (3, 5), 5.0, "取值范围更大的输入（|x| 到 10 以上）"),
    ],
    random_cases=lambda rng: [
        _gelu_case(f"hidden-{i}", rng.randrange(10**6), (rng.randint(1, 6), rng.randint(2, 9)), rng.choice([1.0, 3.0]))
        for i in range(3)
    ],
    produce=_gelu_artifact, compare=_compare_gelu,
    performance=PerformanceGoal(lambda facts: facts["time_us"], 1.0,
                                "模拟时间不应超过参考实现（每次前向、反向各一次内核启动，没有主机↔设备拷贝）"),
    hint="用 toychip.register_kernel 注册两个 NumPy 函数：aten::gelu(a, approximate) 和 "
         "aten::gelu_backward(grad, a, approximate)；两种 approximate 都要支持，erf 用 "
         "toychip.kernels.KERNELS['erf'].fn；保持 float32 计算。",
))


# --- scenarios shared by 07.dispatch_keys and 07.probe_path ---------------------------

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


@contextlib.contextmanager
def _enter_mode(mode: str):
    """The thread-local state a scenario runs under."""
    guards = {
        "plain": contextlib.nullcontext,
        "no_grad": torch.no_grad,
        "inference_mode": torch.inference_mode,
        "autocast_cpu": lambda: torch.autocast("cpu"),
        "autocast_chip": lambda: torch.autocast("toychip", dtype=torch.bfloat16),
        "exclude_autograd_cpu": lambda: torch._C._ExcludeDispatchKeyGuard(DispatchKeySet(DispatchKey.AutogradCPU)),
    }
    with guards[mode]():
        yield


TENSOR_SPECS = ["cpu", "cpu_requires_grad", "chip", "meta", "inference_cpu", "chip+cpu_scalar",
                "cpu+inference_cpu"]
MODES = ["plain", "no_grad", "inference_mode", "autocast_cpu", "autocast_chip", "exclude_autograd_cpu"]


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


# --- 07.dispatch_keys ------------------------------------------------------------------

def _keys_artifact(function, built) -> dict:
    result = {}
    for spec, mode in built["scenarios"]:
        tensors = _make_tensors(spec)
        with _enter_mode(mode):
            keys, error = _key_names(function(tensors), "effective_dispatch_keys")
        if error:
            return error
        result[f"{spec}|{mode}"] = keys
    return result


def _keys_case(name: str, scenarios, description: str = "") -> Case:
    return Case(name, lambda: {"scenarios": [list(s) for s in scenarios]}, description)


def _random_scenarios(rng: random.Random, count: int):
    return [(rng.choice(TENSOR_SPECS), rng.choice(MODES)) for _ in range(count)]


EXERCISES.append(Exercise(
    id="07.dispatch_keys", title="调度键计算器 (dispatch key set)", function="effective_dispatch_keys",
    points=2,
    public_cases=lambda: [
        _keys_case("devices", [("cpu", "plain"), ("chip", "plain"), ("meta", "plain"), ("chip+cpu_scalar", "plain")],
                   "不同设备的张量，默认模式"),
        _keys_case("modes", [("cpu_requires_grad", "no_grad"), ("cpu", "inference_mode"), ("cpu", "autocast_cpu"),
                             ("chip", "autocast_chip"), ("inference_cpu", "plain")],
                   "no_grad、inference_mode、autocast 与推理张量"),
    ],
    random_cases=lambda rng: [_keys_case(f"hidden-{i}", _random_scenarios(rng, 5)) for i in range(3)],
    produce=_keys_artifact, compare=lambda e, g: _compare_scenarios(e, g, "算出的调度键"),
    hint="键集 = 所有张量参数的键集之并 | 线程局部 include 集，再减去线程局部 exclude 集"
         "（torch._C._dispatch_tls_local_include_set / _exclude_set）；按优先级从高到低读出："
         "反复取 highestPriorityTypeId() 再 remove()。",
))


# --- 07.probe_path ---------------------------------------------------------------------

PROBE_KEYS = ["AutocastCPU", "AutocastPrivateUse1", "AutogradCPU", "AutogradPrivateUse1", "ADInplaceOrView",
              "CPU", "PrivateUse1"]
PROBE_SCENARIOS = [("cpu", "plain"), ("chip", "plain"), ("cpu", "autocast_cpu"), ("cpu", "inference_mode"),
                   ("chip", "autocast_chip"), ("cpu_requires_grad", "no_grad"), ("inference_cpu", "plain"),
                   ("chip", "autocast_cpu"), ("cpu", "exclude_autograd_cpu")]


def _probe_artifact(function, built) -> dict:
    namespace = _fresh_namespace("ch07probe")
    lib = torch.library.Library(namespace, "DEF")
    log: list = []
    try:
        function(lib, list(built["keys"]), log)
        probe = getattr(torch.ops, namespace).probe
        result = {}
        for spec, mode in built["scenarios"]:
            (x,) = _make_tensors(spec)
            log.clear()
            with _enter_mode(mode):
                probe(x)
            keys, error = _key_names(list(log), "探针记录的 log")
            if error:
                return error
            result[f"{spec}|{mode}"] = keys
        return result
    finally:
        lib._destroy()


def _probe_case(name: str, keys, scenarios, description: str = "") -> Case:
    return Case(name, lambda: {"keys": list(keys), "scenarios": [list(s) for s in scenarios]}, description)


def _hidden_probe_case(rng: random.Random, index: int) -> Case:
    optional = [k for k in PROBE_KEYS if k not in ("CPU", "PrivateUse1")]
    keys = sorted(rng.sample(optional, rng.randint(1, len(optional))), key=PROBE_KEYS.index) + ["CPU", "PrivateUse1"]
    return _probe_case(f"hidden-{index}", keys, rng.sample(PROBE_SCENARIOS, 4))


EXERCISES.append(Exercise(
    id="07.probe_path", title="探针算子：亲眼看到调度路径 (with_keyset + redispatch)", function="install_probe",
    points=3,
    public_cases=lambda: [
        _probe_case("all-keys", PROBE_KEYS, PROBE_SCENARIOS[:5], "在 7 个键上都注册了探针：CPU、芯片、autocast、inference_mode"),
        _probe_case("some-keys", ["AutogradCPU", "AutogradPrivateUse1", "CPU", "PrivateUse1"], PROBE_SCENARIOS[5:],
                    "只在部分键上注册：没有内核的键被跳过"),
    ],
    random_cases=lambda rng: [_hidden_probe_case(rng, i) for i in range(3)],
    produce=_probe_artifact, compare=lambda e, g: _compare_scenarios(e, g, "探针记录的路径"),
    hint="lib.define('probe(Tensor x) -> Tensor')；每个键用 lib.impl('probe', kernel, key, with_keyset=True)，"
         "内核先 log.append(key)，再 op.redispatch(keyset & torch._C._dispatch_keyset_full_after(DispatchKey.<key>), x)；"
         "CPU / PrivateUse1 上直接返回 x.clone()。",
))


# --- 07.boxed_fallback -----------------------------------------------------------------

def _program_functional_and_inplace(x):
    row = x[1]
    total = torch.cumsum(x, 1)       # no chip kernel: the composite calls cumsum.out(..., out=fresh)
    x.tril_()                        # in place: self is written
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
    return {"sorted": values, "order": indices, "max": top, "argmax": where}


def _program_lists(x):
    return {"cat": torch.cat([x, x * 2], 1), "stacked": torch.stack([x, -x])}


PROGRAMS = {"functional_and_inplace": _program_functional_and_inplace, "out_arguments": _program_out_arguments,
            "multi": _program_multi, "lists": _program_lists}


def _plain(value):
    return value.cpu() if isinstance(value, torch.Tensor) else value


def _fallback_artifact(function, built) -> dict:
    calls: list[str] = []

    def counted(op, *args, **kwargs):
        calls.append(str(op))
        return function(op, *args, **kwargs)

    with toychip.use_fallback(counted):
        results = PROGRAMS[built["program"]](built["x"].to("toychip"))
        results = {name: _plain(value) for name, value in results.items()}
    return {"results": results, "fallback_ops": sorted(set(calls))}


def _compare_fallback(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if not got["fallback_ops"]:
        return Verdict(False, "你的回退函数一次也没有被调用。")
    for name, want in expected["results"].items():
        verdict = compare_outputs(want, got["results"].get(name),
                                  label=f"结果 {name} 不对（是否把被写入的参数 Tensor(a!)，包括 kwarg-only 的 out=，"
                                        f"写回了芯片？）：它")
        if not verdict.ok:
            return verdict
    return PASS


def _fallback_case(name: str, program: str, seed: int, shape=(3, 4), description: str = "") -> Case:
    return Case(name, seeded_build(seed, lambda: {"program": program, "x": torch.randn(*shape)}), description)


EXERCISES.append(Exercise(
    id="07.boxed_fallback", title="自己写一个装箱 (boxed) CPU 回退", function="chip_fallback",
    points=3,
    public_cases=lambda: [
        _fallback_case("functional+inplace", "functional_and_inplace", 0,
                       description="cumsum 在芯片上没有内核（走 cumsum.out）；tril_ 原地修改，视图也要看到新值"),
        _fallback_case("out-arguments", "out_arguments", 1,
                       description="用户传入 out=（需要 resize）、sort 的两个 out、原地 cumsum_"),
    ],
    random_cases=lambda rng: [
        _fallback_case(f"hidden-{program}", program, rng.randrange(10**6), (rng.randint(2, 5), rng.randint(2, 6)))
        for program in ["multi", "lists", rng.choice(["functional_and_inplace", "out_arguments"])]
    ],
    produce=_fallback_artifact, compare=_compare_fallback,
    hint="op._schema.arguments[i].alias_info.is_write 标出被写入的参数（原地算子的 self、out=，"
         "out 是 kwarg_only）；把 CPU 结果写回这些芯片张量（形状变了先 resize_），"
         "返回值若与它们同别名（alias_info.before_set 相同）就返回那个参数对象本身。",
))


# --- 07.bias_gelu ----------------------------------------------------------------------

CHIP_OPCHECK_TESTS = ("test_schema", "test_faketensor")  # test_autograd_registration: CPU/CUDA/XPU only


def _error_text(op, error: Exception) -> str:
    """The error, with the case's throw-away namespace shown as ``ns`` (it differs every run)."""
    return f"{type(error).__name__}: {str(error).replace(op.namespace, 'ns')[:300]}"


def _opcheck(op, args, tests=None) -> dict:
    kwargs = {} if tests is None else {"test_utils": tests}
    try:
        return {test: str(outcome) for test, outcome in torch.library.opcheck(op, args, **kwargs).items()}
    except Exception as error:  # opcheck raises on the first failing test
        return {"failed": _error_text(op, error)}


def _compiled_output(op, x, bias):
    compiled = torch.compile(lambda a, b: op(a, b) * 2, fullgraph=True, backend="aot_eager")
    try:
        return compiled(x, bias).detach()
    except Exception as error:
        return _error_text(op, error)
    finally:
        torch._dynamo.reset()


def _bias_gelu_artifact(function, built) -> dict:
    namespace = _fresh_namespace("ch07op")
    function(namespace)
    op = getattr(torch.ops, namespace).bias_gelu.default
    x, bias = built["x"].requires_grad_(), built["bias"].requires_grad_()
    y = op(x, bias)
    grad_x, grad_bias = torch.autograd.grad(y, (x, bias), torch.ones_like(y))
    chip_x = built["x"].detach().to("toychip").requires_grad_()
    chip_bias = built["bias"].detach().to("toychip").requires_grad_()
    before = toychip.coverage()
    with toychip.profile() as p:
        chip_y = op(chip_x, chip_bias)
    _, fallback = _coverage_delta(before)
    return {
        "opcheck_cpu": _opcheck(op, (x, bias)),
        "opcheck_chip": _opcheck(op, (chip_x, chip_bias), CHIP_OPCHECK_TESTS),
        "output": y.detach(), "grad_x": grad_x, "grad_bias": grad_bias,
        "chip_output": chip_y.detach().cpu(), "chip_launches": p.launches, "chip_copies": p.copies,
        "chip_fallback": fallback, "compiled": _compiled_output(op, x, bias),
    }


def _compare_bias_gelu(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    for where in ("opcheck_cpu", "opcheck_chip"):
        failed = {test: outcome for test, outcome in got[where].items() if outcome != "SUCCESS"}
        if failed:
            return Verdict(False, f"torch.library.opcheck（{'CPU' if where == 'opcheck_cpu' else '芯片'}输入）没有通过："
                                  f"{short(failed)}")
    checks = [("output", "CPU 前向输出"), ("grad_x", "x 的梯度"), ("grad_bias", "bias 的梯度"), ("chip_output", "芯片上的输出")]
    for name, label in checks:
        verdict = compare_outputs(expected[name], got[name], label=label)
        if not verdict.ok:
            return verdict
    if got["chip_fallback"] or got["chip_copies"]:
        return Verdict(False, "芯片上调用时有算子回退到 CPU：请用 register_kernel('toychip') 注册芯片内核。",
                       "没有回退", short(got["chip_fallback"]))
    if isinstance(got["compiled"], str):
        return Verdict(False, f"torch.compile(fullgraph=True) 失败：{got['compiled']}")
    return compare_outputs(expected["compiled"], got["compiled"], label="torch.compile(fullgraph=True) 编译后的输出")


def _bias_gelu_case(name: str, seed: int, shape, description: str = "") -> Case:
    return Case(name, seeded_build(seed, lambda: {"x": torch.randn(*shape), "bias": torch.randn(shape[-1])}),
                description)


EXERCISES.append(Exercise(
    id="07.bias_gelu", title="自定义算子 bias_gelu：opcheck + 芯片内核 + fullgraph 编译", function="define_bias_gelu",
    points=3,
    public_cases=lambda: [_bias_gelu_case("3d", 0, (2, 3, 4), "x 为 2×3×4，bias 为 4：opcheck、梯度、芯片、编译")],
    random_cases=lambda rng: [_bias_gelu_case(
        "hidden", rng.randrange(10**6), tuple(rng.randint(2, 5) for _ in range(rng.randint(2, 4))))],
    produce=_bias_gelu_artifact, compare=_compare_bias_gelu,
    performance=PerformanceGoal(lambda facts: facts["chip_launches"], 1.0,
                                "芯片上一次 bias_gelu 的内核启动次数不应多于参考实现（一个融合内核）"),
    hint="@custom_op(f'{namespace}::bias_gelu', mutates_args=())；register_fake 返回 torch.empty_like(x)；"
         "register_autograd 的 backward 要返回 (grad_x, grad_bias)，grad_bias 要用 sum_to_size(bias.shape) 归约；"
         "芯片内核：op.register_kernel('toychip')(toychip.chip_kernel(f'{namespace}::bias_gelu', numpy_fn))。",
))
