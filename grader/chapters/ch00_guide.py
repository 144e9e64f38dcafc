"""Chapter 00 (comparison and selection guide) exercises: choosing a technology per
scenario, a benchmark graded against workloads of known cost, classifying toy-chip
profiles, and a ``torch.export`` with a dynamic batch dimension run at other sizes."""
from __future__ import annotations

import io
import math
import random
import statistics

import torch

from course_models import ch00_models as models

from ..authoring import (PASS, Case, Exercise, Verdict, artifact_error, compare_equal, compare_outputs,
                        seeded_build, short)

EXERCISES: list[Exercise] = []  # in notebook order

# --- 00.choose_technology -----------------------------------------------------------

CHOICES = ("eager", "torch.compile", "torch.export+AOTInductor", "ExecuTorch", "ONNX", "torch.fx",
           "torch_xla", "PrivateUse1+custom backend", "TorchScript")

REASONS = {
    "torch_xla": "TPU 只能通过 PyTorch/XLA（torch_xla，延迟张量 lazy tensor 的机制）使用，其他技术都不会把算子送到 TPU 上。",
    "PrivateUse1+custom backend": "新芯片要先接入 PyTorch：用 PrivateUse1 注册设备和算子（第 07 章），再给 torch.compile 写自定义后端（第 08 章）。",
    "torch.fx": "要写自己的图变换 (graph pass)：torch.fx 给出可遍历、可修改、能重新生成代码的图（第 03 章）。",
    "torch.export+AOTInductor": "没有 Python 的 C++ 服务器：TorchScript 自 2.5 起已弃用；今天用 torch.export 导出整图，"
                                "再用 AOTInductor 编译打包成 .pt2，C++ 直接加载运行。",
    "ExecuTorch": "手机/边缘设备：ExecuTorch 把 torch.export 的图降级成 .pte 文件，由很小的 C++ 运行时执行"
                  "（旧的 optimize_for_mobile + Lite Interpreter 已弃用）。",
    "ONNX": "交给其他推理引擎（ONNX Runtime、TensorRT 等）：用 torch.onnx.export(..., dynamo=True) 导出 ONNX。",
    "torch.compile": "在 Python 里加速一个运行时间长、每次调用足够大的模型：torch.compile 一行就能用，编译时间被大量调用摊薄。",
}


EAGER_REASONS = {
    "debug": "调试时要能逐行运行、随时打印中间值：用 eager，别编译。",
    "tiny": "单次调用只有几十微秒的小模型：编译后每次调用多出的守卫与包装开销（在 CPU 上约 40–70 µs）比省下的还多，编译版反而更慢。",
    "short": "总运行时间不到一分钟的任务：付不起几秒到十几秒的首次编译时间。",
}


def _reason(choice: str, scenario: dict) -> str:
    if choice != "eager":
        return REASONS[choice]
    if scenario["goal"] == "debug":
        return EAGER_REASONS["debug"]
    return EAGER_REASONS["tiny" if scenario["eager_call_us"] < 100 else "short"]


def _scenario(hardware: str, goal: str, deploy_to=None, eager_call_us: float = 0.0, calls: int = 0) -> dict:
    return {"hardware": hardware, "goal": goal, "deploy_to": deploy_to,
            "eager_call_us": float(eager_call_us), "calls": int(calls)}


PUBLIC_SCENARIOS = [
    ("train-resnet", "用 Python 在 GPU 上训练 ResNet：每步 80 ms，要训练 10 万步", _scenario("cuda", "speed_up", None, 80_000, 100_000)),
    ("cpp-server", "部署到 C++ 推理服务器，服务器上不允许安装 Python", _scenario("cpu", "deploy", "cpp_server", 2_000, 10**8)),
    ("android", "在 Android App 里离线运行模型", _scenario("cpu", "deploy", "mobile", 5_000, 10**6)),
    ("tensorrt", "模型交给另一个团队，用 ONNX Runtime / TensorRT 上线", _scenario("cuda", "deploy", "onnx_runtime", 3_000, 10**7)),
    ("conv-bn-pass", "写一个自动把 Conv+BN 折叠起来的图优化工具", _scenario("cpu", "rewrite_graph", None, 1_000, 1_000)),
    ("new-chip", "公司自研的 AI 芯片要支持 PyTorch", _scenario("new_chip", "speed_up", None, 1_000, 10**6)),
    ("tpu", "在 Google Cloud TPU 上训练", _scenario("tpu", "speed_up", None, 50_000, 10**5)),
    ("seed-mymodel", "种子文档的 MyModel（batch 32）做在线推理：每次调用约 25 µs，一天一千万次", _scenario("cpu", "speed_up", None, 25, 10**7)),
    ("nan-debug", "训练出现 NaN，正在逐行排查", _scenario("cuda", "debug", None, 80_000, 100)),
    ("one-off", "一次性脚本：处理 200 个样本，每个 5 ms", _scenario("cpu", "speed_up", None, 5_000, 200)),
]

HARDWARE_WORDS = {"cpu": "CPU", "cuda": "NVIDIA GPU", "tpu": "TPU", "new_chip": "新芯片"}
DEPLOY_WORDS = {"cpp_server": "C++ 服务器（无 Python）", "mobile": "手机/边缘设备", "onnx_runtime": "其他推理引擎"}
GOAL_WORDS = {"speed_up": "在 Python 里加速", "deploy": "部署", "rewrite_graph": "改写计算图", "debug": "调试"}


def _describe(s: dict) -> str:
    where = f"到{DEPLOY_WORDS[s['deploy_to']]}" if s["deploy_to"] else ""
    return (f"{HARDWARE_WORDS[s['hardware']]}，目的：{GOAL_WORDS[s['goal']]}{where}，"
            f"eager 单次 {s['eager_call_us']:g} µs，共 {s['calls']} 次")


def _random_scenario(rng: random.Random) -> dict:
    hardware = rng.choices(["cpu", "cuda", "tpu", "new_chip"], [4, 4, 1, 1])[0]
    goal = rng.choice(["speed_up", "speed_up", "deploy", "rewrite_graph", "debug"])
    deploy_to = rng.choice(list(DEPLOY_WORDS)) if goal == "deploy" else None
    tiny = rng.random() < 0.35
    eager_call_us = rng.choice([12, 20, 35, 50, 60]) if tiny else rng.choice([400, 2_000, 15_000, 120_000])
    total_s = rng.choice([0.5, 3, 10, 3_600, 36_000, 10**6])   # far from the 60 s threshold
    return _scenario(hardware, goal, deploy_to, eager_call_us, max(1, round(total_s * 1e6 / eager_call_us)))


def _scenario_case(name: str, description: str, scenario: dict) -> Case:
    return Case(name, lambda: {"scenario": dict(scenario), "description": description}, description)


def choice_artifact(function, built) -> dict:
    """Sandbox side: the learner's choice for one scenario (the description is not passed)."""
    choice = function(dict(built["scenario"]))
    if not isinstance(choice, str) or choice not in CHOICES:
        return {"error": f"choose 应返回以下字符串之一：{', '.join(CHOICES)}；实际返回了 {short(choice)}。"}
    return {"choice": choice}


def _with_description(artifact: dict, built: dict) -> dict:
    return {**artifact, "description": built["description"], "scenario": built["scenario"]}


def _compare_choice(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if got["choice"] == expected["choice"]:
        return PASS
    message = f"场景「{expected['description']}」应选 {expected['choice']}。原因：{_reason(expected['choice'], expected['scenario'])}"
    if got["choice"] == "TorchScript":
        message += "（TorchScript 是种子文档的旧建议：torch.jit 自 PyTorch 2.5 起已弃用。）"
    return Verdict(False, message, expected["choice"], got["choice"])


EXERCISES.append(Exercise(
    id="00.choose_technology", title="技术选型 (choosing a technology)", function="choose",
    points=2,
    public_cases=lambda: [_scenario_case(n, d, s) for n, d, s in PUBLIC_SCENARIOS],
    hidden_cases=lambda rng: [_scenario_case(f"hidden-{i}", _describe(s), s)
                              for i, s in enumerate(_random_scenario(rng) for _ in range(8))],
    produce=choice_artifact, analyze=_with_description, compare=_compare_choice,
    hint="按决策树的顺序判断：先看硬件（TPU、新芯片），再看目的（调试、改图、部署到哪里），"
         "最后对「在 Python 里加速」看数字：eager 单次调用 < 100 µs 或总运行时间 < 1 分钟时编译不划算。",
))


# --- 00.benchmark -------------------------------------------------------------------

def _benchmark_case(name: str, workload, warmup: int, repeats: int, description: str) -> Case:
    def build():
        fresh = workload()
        # A sleep overshoots on a loaded machine: "too slow" means half the disturbance (a
        # cold call, a pause) was folded in, and never less than 3x the steady cost.
        slow_s = fresh.steady_s + max(fresh.disturbance_s / 2, 2 * fresh.steady_s)
        return {"fn": fresh, "args": (), "warmup": warmup, "repeats": repeats,
                "synchronize": fresh.synchronize, "true_s": fresh.steady_s, "slow_s": slow_s}
    return Case(name, build, description)


def benchmark_artifact(function, built) -> dict:
    """Sandbox side: the numbers the learner's benchmark reports, and how often it called fn."""
    fn = built["fn"]
    result = function(fn, built["args"], warmup=built["warmup"], repeats=built["repeats"],
                      synchronize=built["synchronize"])
    if not isinstance(result, dict) or not {"median", "samples"} <= set(result):
        return {"error": f"benchmark 应返回包含 'median' 和 'samples' 的 dict，实际返回了 {short(result)}。"}
    samples = result["samples"]
    numbers = [result["median"], *samples] if isinstance(samples, (list, tuple)) else None
    if numbers is None or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers):
        return {"error": "median 应是一个数（秒），samples 应是由数（秒）组成的 list。"}
    return {"median": float(result["median"]), "samples": [float(s) for s in samples], "calls": fn.calls}


def _with_truth(artifact: dict, built: dict) -> dict:
    return {**artifact, "true_s": built["true_s"], "slow_s": built["slow_s"], "warmup": built["warmup"],
            "repeats": built["repeats"]}


def _compare_benchmark(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    warmup, repeats, true_s = got["warmup"], got["repeats"], got["true_s"]
    if got["calls"] != warmup + repeats:
        return Verdict(False, f"fn 应被调用 warmup + repeats = {warmup} + {repeats} 次（先预热，再每个样本调用一次）。",
                       str(warmup + repeats), str(got["calls"]))
    samples = got["samples"]
    if len(samples) != repeats:
        return Verdict(False, "samples 应恰好有 repeats 个样本（预热调用不算）。", str(repeats), str(len(samples)))
    if not math.isclose(got["median"], statistics.median(samples), rel_tol=1e-6, abs_tol=1e-9):
        return Verdict(False, "median 应是 samples 的中位数（不是平均值）。",
                       f"{statistics.median(samples):.6f}", f"{got['median']:.6f}")
    shown = (f"≈ {true_s * 1e3:.1f} ms", f"{got['median'] * 1e3:.2f} ms")
    if got["median"] < 0.5 * true_s:
        return Verdict(False, "测得的时间远小于真实耗时：在异步设备上 fn 只是把工作排进队列就返回了，"
                              "计时前、读表前都要调用 synchronize()。", *shown)
    if got["median"] > got["slow_s"]:
        return Verdict(False, "测得的时间远大于稳定状态的耗时：预热调用或偶发停顿被算进去了。", *shown)
    return PASS


def _cold(steady_s, cold_calls, cold_s):
    return lambda: models.ColdStartWorkload(steady_s, cold_calls, cold_s)


def _pausing(steady_s, period, pause_s):
    return lambda: models.PausingWorkload(steady_s, period, pause_s)


def _async(steady_s, cold_calls=0, cold_s=0.0):
    return lambda: models.AsyncDevice(steady_s, cold_calls, cold_s)


def _random_benchmark_case(rng: random.Random, index: int) -> Case:
    steady = rng.choice([0.002, 0.003, 0.005])
    kind = rng.choice(["cold", "pausing", "async"])
    warmup, repeats = rng.randint(2, 4), rng.choice([5, 7, 9])
    workload = {"cold": _cold(steady, warmup, rng.choice([0.02, 0.03])),
                "pausing": _pausing(steady, rng.choice([4, 5]), rng.choice([0.03, 0.05])),
                "async": _async(steady, rng.randint(0, warmup), 0.02)}[kind]
    return _benchmark_case(f"hidden-{index}", workload, warmup, repeats, kind)


EXERCISES.append(Exercise(
    id="00.benchmark", title="写一个诚实的计时函数 (benchmark)", function="benchmark",
    points=3,
    public_cases=lambda: [
        _benchmark_case("cold-start", _cold(0.004, 3, 0.04), 3, 5,
                        "前 3 次调用各 40 ms（像首次编译），之后每次 4 ms"),
        _benchmark_case("pauses", _pausing(0.003, 4, 0.05), 2, 9,
                        "每次 3 ms，但每 4 次调用有一次额外停顿 50 ms（像垃圾回收）"),
        _benchmark_case("async-device", _async(0.005, 2, 0.03), 2, 7,
                        "像 GPU 一样异步：调用立即返回，工作 5 ms 后才完成"),
    ],
    hidden_cases=lambda rng: [_random_benchmark_case(rng, i) for i in range(3)],
    produce=benchmark_artifact, analyze=_with_truth, compare=_compare_benchmark,
    hint="三件事：先调用 warmup 次不计时；每个样本用 time.perf_counter() 计一次调用，"
         "开始计时前和停表前都调用 synchronize()；最后取中位数 statistics.median，而不是平均值。",
))


# --- 00.bottleneck ------------------------------------------------------------------

BOTTLENECKS = ("overhead", "memory", "compute")


def _profile_case(name: str, kind: str, params: tuple, description: str, **spec) -> Case:
    return Case(name, lambda: {"profile": models.toychip_profile(kind, params, **spec)}, description)


def _components(profile: dict) -> list[float]:
    """Launch, memory and compute time: used only to keep hidden cases unambiguous."""
    return [profile["launches"] * profile["launch_us"], profile["bytes"] / profile["mem_bytes_per_us"],
            profile["flops"] / profile["flops_per_us"]]


CHIP_SPECS = [{}, {"launch_us": 20.0}, {"launch_us": 2.0, "mem_bytes_per_us": 100e3},
              {"flops_per_us": 50e6}, {"mem_bytes_per_us": 1000e3, "flops_per_us": 5e6}]


def _random_chip_workload(rng: random.Random) -> tuple[str, tuple]:
    kind = rng.choice(list(models.CHIP_WORKLOADS))
    if kind == "mlp":
        batch = rng.choice([1, 4, 64, 512])
        return kind, (batch, tuple(rng.choice([32, 256, 1024, 2048]) for _ in range(rng.randint(2, 3))))
    if kind == "pointwise":
        return kind, (rng.choice([1_000, 50_000, 1_000_000, 3_000_000]), rng.randint(1, 20))
    return kind, tuple(rng.choice([64, 512, 1024, 1536]) for _ in range(3))


def _hidden_profile_cases(rng: random.Random, count: int = 4) -> list[Case]:
    """Random workloads on random chips whose dominant cost leads by at least 2×."""
    cases = []
    while len(cases) < count:
        (kind, params), spec = _random_chip_workload(rng), rng.choice(CHIP_SPECS)
        parts = sorted(_components(models.toychip_profile(kind, params, **spec)))
        if parts[-1] >= 2 * parts[-2]:
            cases.append(_profile_case(f"hidden-{len(cases)}", kind, params, "", **spec))
    return cases


def bottleneck_artifact(function, built) -> dict:
    label = function(dict(built["profile"]))
    if label not in BOTTLENECKS:
        return {"error": f"bottleneck 应返回 'overhead'、'memory' 或 'compute'，实际返回了 {short(label)}。"}
    return {"label": label}


EXERCISES.append(Exercise(
    id="00.bottleneck", title="瓶颈分类：开销、内存还是计算", function="bottleneck",
    points=2,
    public_cases=lambda: [
        _profile_case("MyModel", "mlp", (32, (100, 50, 10)), "种子 MyModel，batch 32"),
        _profile_case("tiny-loop", "pointwise", (4096, 25), "对 4096 个数做 25 轮小的逐点运算（100 次发射）"),
        _profile_case("pointwise-2M", "pointwise", (2_000_000, 1), "对 200 万个数做一轮逐点链"),
        _profile_case("gemv", "mlp", (1, (2048, 2048)), "batch 1 的 2048×2048 Linear（矩阵乘向量）"),
        _profile_case("matmul-1024", "matmul", (1024, 1024, 1024), "1024×1024×1024 矩阵乘 + ReLU"),
    ],
    hidden_cases=_hidden_profile_cases,
    produce=bottleneck_artifact,
    compare=lambda e, g: artifact_error(g) or compare_equal(
        e["label"], g["label"], "瓶颈分类不对：分别估算发射开销、搬运数据、计算三部分的时间，看哪一部分最大（总时间本身说明不了瓶颈在哪）。"),
    hint="发射开销 = launches × launch_us；内存时间 = bytes / mem_bytes_per_us；计算时间 = flops / flops_per_us。",
))


# --- 00.export_dynamic --------------------------------------------------------------

def _export_case(name: str, seed: int, make_model, example_shapes, batches, description: str = "") -> Case:
    def make():
        model = make_model().eval()
        example = tuple(torch.randn(*shape) for shape in example_shapes)
        inputs = [tuple(torch.randn(b, *shape[1:]) for shape in example_shapes) for b in batches]
        return {"model": model, "example": example, "batches": list(batches), "inputs": inputs}
    return Case(name, seeded_build(seed, make), description)


def export_artifact(function, built) -> dict:
    """Sandbox side: the learner's ExportedProgram, serialised with ``torch.export.save``."""
    program = function(built["model"], built["example"])
    if not isinstance(program, torch.export.ExportedProgram):
        return {"error": f"应返回 torch.export.ExportedProgram，实际返回了 {type(program).__name__}。"}
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    return {"program": torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)}


def run_exported(artifact: dict, built: dict) -> dict:
    """Trusted side: load the program and run it at every batch size of the case."""
    if "error" in artifact:
        return artifact
    try:
        program = torch.export.load(io.BytesIO(artifact["program"].numpy().tobytes()))
    except Exception as error:
        return {"error": f"无法加载导出的程序：{type(error).__name__}: {str(error)[:200]}"}
    outputs = []
    for batch, inputs in zip(built["batches"], built["inputs"]):
        try:
            with torch.no_grad():
                outputs.append(program.module()(*inputs))
        except Exception as error:
            return {"error": f"导出的程序在 batch = {batch} 时无法运行（{type(error).__name__}: "
                             f"{str(error).splitlines()[0][:150]}）。batch 维度应该是动态的 (dynamic)。"}
    return {"outputs": outputs}


def _random_export_case(rng: random.Random, index: int) -> Case:
    widths = [rng.choice([8, 16, 24])] + [rng.choice([4, 12, 32]) for _ in range(rng.randint(1, 3))]
    batches = rng.sample([1, 2, 3, 6, 17, 50, 128], 3)
    return _export_case(f"hidden-{index}", rng.randrange(10**6), lambda: models.RandomMLP(widths),
                        [(rng.choice([4, 8, 16]), widths[0])], batches)


EXERCISES.append(Exercise(
    id="00.export_dynamic", title="torch.export：动态 batch 维", function="export_with_dynamic_batch",
    points=2,
    public_cases=lambda: [
        _export_case("MyModel", 0, models.MyModel, [(32, 100)], [1, 5, 32, 100], "种子 MyModel，示例 batch 32"),
        _export_case("ImageClassifier", 1, models.ImageClassifier, [(8, 1, 28, 28)], [1, 3, 64],
                     "先 flatten 再 MLP：view 的大小依赖 batch"),
        _export_case("GatedPair", 2, models.GatedPair, [(4, 16), (4, 16)], [1, 2, 9],
                     "两个输入，batch 必须是同一个符号"),
    ],
    hidden_cases=lambda rng: [_random_export_case(rng, i) for i in range(2)]
    + [_export_case("hidden-pair", rng.randrange(10**6), models.GatedPair, [(6, 16), (6, 16)], [1, 11])],
    produce=export_artifact, analyze=run_exported,
    compare=lambda e, g: artifact_error(g) or compare_outputs(e["outputs"], g["outputs"]),
    hint="torch.export.export(model, example, dynamic_shapes=...)：为每个输入给一个 {0: batch} 字典，"
         "所有输入共用同一个 batch = Dim(\"batch\")。",
))
