"""Chapter 00 (comparison and selection guide) exercises: a ``torch.export`` with a dynamic
batch dimension run at other sizes, a benchmark graded against workloads of known cost,
the per-kernel cost of an ATen graph checked against the toy chip's simulated clock, and a
roofline prediction (time and bound) checked against the chip's cost model."""
from __future__ import annotations

import io
import math
import random
import statistics
import zlib

import torch

from course_models import ch00_models as models

from ..authoring import (PASS, Case, Exercise, Verdict, artifact_error, compare_outputs,
                        seeded_build, short)

EXERCISES: list[Exercise] = []  # in notebook order

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


def _export_designed_cases() -> list[Case]:
    """Small and large batches: a program must run on every size (a bound such as
    ``Dim(max=1024)`` fails the few thousand rows, which cost little on these models)."""
    return [
        _export_case("mlp-one-hidden", 10, lambda: models.RandomMLP([24, 12, 4]), [(4, 24)], [1, 3, 128]),
        _export_case("mlp-deep-example-2", 11, lambda: models.RandomMLP([8, 32, 32, 4]), [(2, 8)], [1, 17, 50]),
        _export_case("pair-example-6", 12, models.GatedPair, [(6, 16), (6, 16)], [1, 11]),
        _export_case("images-example-2", 13, models.ImageClassifier, [(2, 1, 28, 28)], [1, 5]),
        _export_case("pair-batch-5000", 14, models.GatedPair, [(3, 16), (3, 16)], [5000]),
    ]


EXERCISES.append(Exercise(
    id="00.export_dynamic", title="torch.export：动态 batch 维",
    stub=(
        'def export_with_dynamic_batch(model, example: tuple):\n'
        '    """用 torch.export 导出 model，所有输入的第 0 维共用一个动态的 batch 维度，返回 ExportedProgram。"""'),
    points=2,
    public_cases=lambda: [
        _export_case("MyModel", 0, models.MyModel, [(32, 100)], [1, 5, 32, 100], "种子 MyModel，示例 batch 32"),
        _export_case("ImageClassifier", 1, models.ImageClassifier, [(8, 1, 28, 28)], [1, 3, 64],
                     "先 flatten 再 MLP：view 的大小依赖 batch"),
        _export_case("GatedPair", 2, models.GatedPair, [(4, 16), (4, 16)], [1, 2, 9],
                     "两个输入，batch 必须是同一个符号"),
        _export_case("MyModel(batch 4096)", 3, models.MyModel, [(32, 100)], [4096],
                     "很大的 batch：batch 维度没有上限"),
    ],
    # No random cases: each case costs an export (about half a second of CPU), and the
    # designed ones already vary what the learner's function sees (models, example batch,
    # number of inputs); a program either has a dynamic batch or it does not.
    designed_cases=_export_designed_cases,
    produce=export_artifact, analyze=run_exported,
    compare=lambda e, g: artifact_error(g) or compare_outputs(e["outputs"], g["outputs"]),
    hint="torch.export.export(model, example, dynamic_shapes=...)：为每个输入给一个 {0: batch} 字典，"
         "所有输入共用同一个 batch = Dim(\"batch\")。",
))


# --- 00.benchmark -------------------------------------------------------------------
# Workloads of known cost: cold first calls (warm-up), rare pauses (median, one call per
# sample), an asynchronous device (synchronise before stopping the clock), and one whose
# warm-up leaves work queued that a single sample must not pay for (synchronise before
# starting it).

def _benchmark_case(name: str, workload, warmup: int, repeats: int, description: str = "") -> Case:
    def build():
        fresh = workload()
        # A sleep overshoots on a loaded machine: "too slow" means half the disturbance (a
        # cold call, a pause) was folded in, and never less than 3x the steady cost.
        slow_s = fresh.steady_s + max(fresh.disturbance_s / 2, 2 * fresh.steady_s)
        # A sleep never undershoots: one sample per call sees the longest timed call whole.
        longest_s = max(fresh.call_s(n) for n in range(warmup + 1, warmup + repeats + 1))
        return {"fn": fresh, "args": (), "warmup": warmup, "repeats": repeats,
                "synchronize": fresh.synchronize, "true_s": fresh.steady_s, "slow_s": slow_s,
                "longest_s": longest_s}
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
    return {**artifact, **{key: built[key] for key in ("true_s", "slow_s", "longest_s", "warmup", "repeats")}}


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
        return Verdict(False, "median 应是 samples 的中位数（不是平均值，也不是最小值）。",
                       f"{statistics.median(samples):.6f}", f"{got['median']:.6f}")
    shown = (f"≈ {true_s * 1e3:.1f} ms", f"{got['median'] * 1e3:.2f} ms")
    if got["median"] > 300 * true_s:
        return Verdict(False, "测得的时间是真实耗时的几百倍以上：median 和 samples 的单位应是秒（不是毫秒）。", *shown)
    if got["median"] < 0.5 * true_s:
        return Verdict(False, "测得的时间远小于真实耗时：在异步设备上 fn 只是把工作排进队列就返回了，"
                              "停表前要调用 synchronize()。", *shown)
    if got["median"] > got["slow_s"]:
        return Verdict(False, "测得的时间远大于稳定状态的耗时：预热调用、偶发停顿，或预热时排进队列还没做完的工作"
                              "被算进去了（开始计时前也要调用 synchronize()）。", *shown)
    if max(samples) < 0.9 * got["longest_s"]:
        return Verdict(False, "samples 里最长的样本也比某次被计时的调用的真实耗时短：每个样本应单独计时一次 fn 调用"
                              "（把整个循环计时后平均分摊，会把偶发的停顿抹平）。",
                       f"≥ {got['longest_s'] * 1e3:.1f} ms", f"{max(samples) * 1e3:.2f} ms")
    return PASS


def _cold(steady_s, cold_calls, cold_s):
    return lambda: models.ColdStartWorkload(steady_s, cold_calls, cold_s)


def _pausing(steady_s, period, pause_s):
    return lambda: models.PausingWorkload(steady_s, period, pause_s)


def _async(steady_s, cold_calls=0, cold_s=0.0):
    return lambda: models.AsyncDevice(steady_s, cold_calls, cold_s)


def _benchmark_designed_cases() -> list[Case]:
    return [
        _benchmark_case("cold-start-long", _cold(0.002, 4, 0.03), 4, 7),
        _benchmark_case("pauses-every-third", _pausing(0.002, 3, 0.04), 1, 7),
        _benchmark_case("async-steady", _async(0.003), 1, 5),
        _benchmark_case("async-queued-warmup-one-sample", _async(0.003, 2, 0.03), 2, 1),
    ]


def _random_benchmark_case(rng: random.Random, index: int) -> Case:
    """Odd sample counts (every median is the middle sample), and pauses in fewer than half
    of the samples (a period of 3 or more, at least 5 samples)."""
    steady, warmup = rng.choice([0.002, 0.003, 0.005]), rng.randint(2, 4)
    match rng.choice(["cold", "pausing", "async"]):
        case "cold":
            workload, repeats = _cold(steady, warmup, rng.choice([0.02, 0.03])), rng.choice([3, 5, 7])
        case "pausing":
            workload, repeats = _pausing(steady, rng.choice([3, 4]), rng.choice([0.03, 0.05])), rng.choice([5, 7])
        case "async":
            workload, repeats = _async(steady, rng.randint(0, warmup), 0.02), rng.choice([1, 3, 5])
    return _benchmark_case(f"random-{index}", workload, warmup, repeats)


EXERCISES.append(Exercise(
    id="00.benchmark", title="写一个诚实的计时函数 (benchmark)",
    stub=(
        'def benchmark(fn, args: tuple, warmup: int, repeats: int, synchronize) -> dict:\n'
        '    """预热 warmup 次后采集 repeats 个单次调用的样本（前后都 synchronize），返回 {"median": ..., "samples": [...]}（秒）。"""'),
    points=3,
    public_cases=lambda: [
        _benchmark_case("cold-start", _cold(0.004, 3, 0.04), 3, 5,
                        "前 3 次调用各 40 ms（像首次编译），之后每次 4 ms"),
        _benchmark_case("pauses", _pausing(0.003, 4, 0.05), 2, 9,
                        "每次 3 ms，但每 4 次调用有一次额外停顿 50 ms（像垃圾回收）"),
        _benchmark_case("async-device", _async(0.005, 2, 0.03), 2, 7,
                        "像 GPU 一样异步：调用立即返回，工作 5 ms 后才完成"),
        _benchmark_case("async-queued-warmup", _async(0.004, 3, 0.03), 3, 1,
                        "异步设备，预热的 3 次调用各排进 30 ms 的工作；只采 1 个样本"),
    ],
    designed_cases=_benchmark_designed_cases,
    random_cases=lambda rng: [_random_benchmark_case(rng, i) for i in range(2)],
    produce=benchmark_artifact, analyze=_with_truth, confine_analysis=False, compare=_compare_benchmark,
    hint="三件事：先调用 warmup 次不计时；每个样本用 time.perf_counter() 计一次调用，"
         "开始计时前和停表前都调用 synchronize()；最后取中位数 statistics.median，而不是平均值。",
))


# --- 00.kernel_costs ------------------------------------------------------------------

def _costs_case(name: str, kind: str, params: tuple, description: str = "") -> Case:
    return Case(name, seeded_build(zlib.crc32(repr((kind, params)).encode()), lambda: dict(
        zip(("fn", "inputs"), models.chip_workload(kind, params)))), description)


def costs_artifact(function, built) -> dict:
    """Sandbox side: the learner's per-kernel list, checked to be plain ``{op, bytes, flops}`` dicts."""
    kernels = function(built["fn"], built["inputs"])
    ok = isinstance(kernels, (list, tuple)) and all(
        isinstance(k, dict) and isinstance(k.get("op"), str) and type(k.get("bytes")) is int
        and type(k.get("flops")) is int for k in kernels)
    if not ok:
        return {"error": "kernel_costs 应返回 list，每个元素是 {'op': str, 'bytes': int, 'flops': int}，"
                         f"实际返回了 {short(kernels)}。"}
    return {"kernels": [{"op": k["op"], "bytes": k["bytes"], "flops": k["flops"]} for k in kernels]}


def _with_chip(artifact: dict, built: dict) -> dict:
    """Trusted side: the toy chip's own count of the same program, per kernel name."""
    if "error" in artifact:
        return artifact
    return {**artifact, "chip": models.chip_profile(built["fn"], built["inputs"])["kernels"]}


def _per_op(kernels: list[dict]) -> dict:
    totals: dict = {}
    for k in kernels:
        calls, nbytes, flops = totals.get(k["op"], (0, 0, 0))
        totals[k["op"]] = (calls + 1, nbytes + k["bytes"], flops + k["flops"])
    return totals


def _compare_costs(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    chip = {op: (s["calls"], s["bytes"], s["flops"]) for op, s in got["chip"].items()}
    mine = _per_op(got["kernels"])
    launches, counted = sum(c for c, _, _ in chip.values()), len(got["kernels"])
    if counted != launches:
        extra = sorted(set(mine) - set(chip))
        why = f"（芯片上没有发射这些算子：{', '.join(extra)}——视图 (view) 不发射内核）" if extra else ""
        return Verdict(False, f"内核个数与玩具芯片实际发射的次数不同{why}。", str(launches), str(counted))
    for op, (calls, nbytes, flops) in chip.items():
        have = mine.get(op)
        if have is None or have[0] != calls:
            return Verdict(False, f"算子 {op} 的发射次数不对（名字用 node.target.__name__，例如 'addmm.default'）。",
                           str(calls), str(have[0] if have else 0))
        if have[1] != nbytes:
            return Verdict(False, f"算子 {op} 搬运的字节数不对：每次发射 = 所有张量输入 + 输出的字节数（标量不算），"
                                  "每个张量按它自己的形状和 dtype 的元素大小算。",
                           str(nbytes), str(have[1]))
        if have[2] != flops:
            return Verdict(False, f"算子 {op} 的浮点运算数不对：矩阵乘是 2·M·N·K，其他算子（包括归约）是最大的那个操作数的元素个数。",
                           str(flops), str(have[2]))
    return PASS


def _costs_designed_cases() -> list[Case]:
    return [
        _costs_case("gemv-batch-1", "mlp", (1, (64, 48, 8))),
        _costs_case("matmul-12x40x8", "matmul", (12, 40, 8)),
        _costs_case("attention-3x4x8", "attention", (3, 4, 8)),
        _costs_case("pointwise-float16", "pointwise", (500, 1, torch.float16)),
        _costs_case("normalize-5x24", "normalize", (5, 24)),
        _costs_case("inplace-6x10", "inplace", (6, 10)),
    ]


def _random_costs_case(rng: random.Random, index: int) -> Case:
    kind = rng.choice(sorted(models.CHIP_WORKLOADS))
    params = {"mlp": lambda: (rng.choice([1, 4, 16]), tuple(rng.choice([8, 24, 40]) for _ in range(rng.randint(2, 4)))),
              "pointwise": lambda: (rng.choice([100, 1000]), rng.randint(1, 2),
                                    rng.choice([torch.float32, torch.float64, torch.float16])),
              "matmul": lambda: tuple(rng.choice([4, 12, 32]) for _ in range(3)),
              "attention": lambda: (rng.choice([1, 3]), rng.choice([4, 8, 16]), rng.choice([8, 16])),
              "normalize": lambda: (rng.choice([2, 7]), rng.choice([8, 33])),
              "inplace": lambda: (rng.choice([3, 16]), rng.choice([5, 32]))}[kind]()
    return _costs_case(f"random-{index}", kind, params, kind)


EXERCISES.append(Exercise(
    id="00.kernel_costs", title="从 ATen 图估算每个内核的字节数与运算量",
    stub=(
        'def kernel_costs(fn, inputs: tuple) -> list[dict]:\n'
        '    """make_fx + ShapeProp 追踪 fn(*inputs)，为每个发射内核的 ATen 算子（跳过视图）返回 {"op", "bytes", "flops"}。"""'),
    points=3,
    public_cases=lambda: [
        _costs_case("MyModel", "mlp", (32, (100, 50, 10)), "种子 MyModel，batch 32：addmm、relu（t 是视图）"),
        _costs_case("pointwise", "pointwise", (1000, 2), "两轮 (x*2+1).relu()-0.5：标量不算字节"),
        _costs_case("pointwise-float64", "pointwise", (300, 1, torch.float64), "同上，float64：每个元素 8 字节"),
        _costs_case("attention", "attention", (2, 8, 16), "bmm、transpose（视图）、softmax"),
        _costs_case("RowNormalize", "normalize", (4, 16), "归约 mean / amax（keepdim），结果广播回每一行"),
        _costs_case("BiasReluSum", "inplace", (8, 16), "原地的 add_ / relu_，广播的 bias，按 batch 求和"),
    ],
    designed_cases=_costs_designed_cases,
    random_cases=lambda rng: [_random_costs_case(rng, i) for i in range(2)],
    produce=costs_artifact, analyze=_with_chip, confine_analysis=False, compare=_compare_costs,
    hint="第一步：gm = make_fx(fn)(*inputs)，ShapeProp(gm).propagate(*inputs)，然后只看 op == 'call_function' 的节点，"
         "跳过 node.target.is_view 的视图。第二步：字节 = 每个张量输入 (node.all_input_nodes) 和输出的 "
         "meta['tensor_meta'] 的 numel × dtype.itemsize 之和。第三步：mm/addmm/bmm 的运算量是 2 × 输出元素数 × K，"
         "其他算子取最大操作数的元素个数。",
))


# --- 00.roofline ----------------------------------------------------------------------

BOUNDS = ("overhead", "memory", "compute")
SPEC_KEYS = ("launch_us", "mem_bytes_per_us", "flops_per_us")


def _parts(kernels: list[dict], spec: dict) -> dict[str, float]:
    """Trusted side: launch overhead, and each kernel's ``max`` credited to the side that wins it."""
    parts = {"overhead": len(kernels) * spec["launch_us"], "memory": 0.0, "compute": 0.0}
    for k in kernels:
        move, work = k["bytes"] / spec["mem_bytes_per_us"], k["flops"] / spec["flops_per_us"]
        parts["memory" if move >= work else "compute"] += max(move, work)
    return parts


def _roofline_case(name: str, kernels: list[dict], spec: dict, description: str = "") -> Case:
    return Case(name, lambda: {"kernels": [dict(k) for k in kernels], "spec": dict(spec)}, description)


def roofline_artifact(function, built) -> dict:
    result = function([dict(k) for k in built["kernels"]], dict(built["spec"]))
    if not isinstance(result, dict) or result.get("bound") not in BOUNDS or not isinstance(
            result.get("time_us"), (int, float)) or isinstance(result.get("time_us"), bool):
        return {"error": "roofline 应返回 {'time_us': 数, 'bound': 'overhead' | 'memory' | 'compute'}，"
                         f"实际返回了 {short(result)}。"}
    return {"time_us": float(result["time_us"]), "bound": result["bound"]}


def _with_clock(artifact: dict, built: dict) -> dict:
    """Trusted side: the chip's own clock (``ChipSpec.kernel_us``) and the three parts."""
    if "error" in artifact:
        return artifact
    import toychip

    spec = toychip.ChipSpec(**built["spec"])
    clock = sum(spec.kernel_us(k["bytes"], k["flops"]) for k in built["kernels"])
    parts = _parts(built["kernels"], built["spec"])
    return {**artifact, "clock_us": clock, "parts": parts}


def _compare_roofline(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if not math.isclose(got["time_us"], got["clock_us"], rel_tol=1e-6, abs_tol=1e-6):
        return Verdict(False, "预测的时间与玩具芯片模拟时钟的时间不同：每个内核单独算 launch_us + max(字节/带宽, 运算量/算力)，再求和"
                              "（先把字节、运算量加总再取 max 会算错）。", f"{got['clock_us']:.3f} µs", f"{got['time_us']:.3f} µs")
    parts = got["parts"]
    want = max(parts, key=parts.get)
    if got["bound"] != want:
        shown = "，".join(f"{k} {v:.2f} µs" for k, v in parts.items())
        return Verdict(False, f"瓶颈判断不对：三部分时间为 {shown}。每个内核的 max 归到赢的那一边，再比较三部分的总和。",
                       want, got["bound"])
    return PASS


def _kernel(op: str, nbytes: int, flops: int) -> dict:
    return {"op": op, "bytes": nbytes, "flops": flops}


MYMODEL_KERNELS = [_kernel("addmm.default", 39400, 320000), _kernel("relu.default", 12800, 1600),
                   _kernel("addmm.default", 9720, 32000)]
GEMV_KERNELS = [_kernel("mm.default", 4 * (2048 + 2048 * 2048 + 2048), 2 * 2048 * 2048)]
MIXED_KERNELS = [_kernel("mm.default", 4 * 3 * 2048**2, 2 * 2048**3)] + [_kernel("gelu.default", 2**23, 2**21)] * 2
# Compute-bound overall, yet memory-bound if the matmul's bytes were counted too: the
# parts credit each kernel's max to one side only.
BALANCED_KERNELS = [_kernel("mm.default", 4 * 3 * 1024**2, 2 * 1024**3)] + [_kernel("gelu.default", 2**23, 2**21)] * 4
CHIPS = [{"launch_us": 5.0, "mem_bytes_per_us": 200e3, "flops_per_us": 10e6},
         {"launch_us": 20.0, "mem_bytes_per_us": 200e3, "flops_per_us": 10e6},
         {"launch_us": 2.0, "mem_bytes_per_us": 100e3, "flops_per_us": 50e6},
         {"launch_us": 1.0, "mem_bytes_per_us": 1000e3, "flops_per_us": 5e6}]


def _big_and_small(side: str, big_us: float, small_us: float, count: int, spec: dict) -> list[dict]:
    """One big kernel and ``count`` small ones, all won by ``side`` (memory or compute),
    taking ``big_us`` and ``small_us`` on ``spec``. With ``small_us`` below ``launch_us``,
    each small kernel's largest term is its launch, yet its time still belongs to ``side``."""
    def kernel(us: float) -> dict:
        if side == "memory":
            nbytes = round(us * spec["mem_bytes_per_us"])
            return _kernel("add.Tensor", nbytes, round(nbytes / 8 * spec["flops_per_us"] / spec["mem_bytes_per_us"]))
        flops = round(us * spec["flops_per_us"])
        return _kernel("mm.default", round(flops / 8 * spec["mem_bytes_per_us"] / spec["flops_per_us"]), flops)
    return [kernel(big_us)] + [kernel(small_us)] * count


# Memory 180 µs against launches 105 µs on CHIPS[0]: each of the twenty small kernels
# moves its bytes in less time (4 µs) than its launch takes (5 µs), yet that is memory time.
BIG_AND_SMALL_KERNELS = _big_and_small("memory", 100.0, 4.0, 20, CHIPS[0])


def _random_big_and_small(rng: random.Random, spec: dict) -> list[dict]:
    """A big kernel and 8 to 30 small ones shorter than a launch, all on one side. The big
    kernel's time makes that side lead the launches by 1.5× (it is the bound), yet falls
    short of the small kernels' launches and times together (so that crediting a kernel's
    whole time to its largest term would make the launches win)."""
    launch, count, fraction = spec["launch_us"], rng.randint(8, 30), rng.uniform(0.6, 0.9)
    low, high = 1.5 * (count + 1) - count * fraction, count * (1 + fraction) - 1
    big = launch * rng.uniform(low, high)
    return _big_and_small(rng.choice(["memory", "compute"]), big, launch * fraction, count, spec)


def _random_kernels(rng: random.Random) -> list[dict]:
    kernels = []
    for _ in range(rng.randint(1, 12)):
        if rng.random() < 0.3:
            m, k, n = (rng.choice([16, 256, 1024, 2048]) for _ in range(3))
            kernels.append(_kernel("mm.default", 4 * (m * k + k * n + m * n), 2 * m * k * n))
        else:
            numel = rng.choice([1_000, 100_000, 4_000_000])
            kernels.append(_kernel(rng.choice(["add.Tensor", "relu.default", "mul.Tensor"]), 8 * numel, numel))
    return kernels


def _random_roofline_cases(rng: random.Random, count: int = 4, prefix: str = "random") -> list[Case]:
    """Random kernels on random chips whose largest part leads the next by at least 1.5×."""
    cases = []
    while len(cases) < count:
        spec = rng.choice(CHIPS)
        kernels = _random_big_and_small(rng, spec) if rng.random() < 0.3 else _random_kernels(rng)
        top, second = sorted(_parts(kernels, spec).values())[:-3:-1]
        if top >= 1.5 * second:
            cases.append(_roofline_case(f"{prefix}-{len(cases)}", kernels, spec))
    return cases


def _roofline_designed_cases() -> list[Case]:
    wide_matmul = _kernel("mm.default", 4 * (2 * 2048 * 512 + 2048**2), 2 * 2048 * 512 * 2048)
    return [_roofline_case("matmul-and-nine-pointwise", [wide_matmul] + [_kernel("relu.default", 2**23, 2**21)] * 9,
                           CHIPS[0]),
            _roofline_case("gemv-expensive-launch", GEMV_KERNELS * 3, CHIPS[1]),
            _roofline_case("many-small-kernels", [_kernel("mul.Tensor", 12_000, 1_000)] * 25, CHIPS[0]),
            _roofline_case("big-matmul-small-matmuls", _big_and_small("compute", 100.0, 4.0, 20, CHIPS[0]), CHIPS[0]),
            _roofline_case("big-copy-small-copies-slow-memory", _big_and_small("memory", 40.0, 1.6, 24, CHIPS[2]),
                           CHIPS[2])] \
        + _random_roofline_cases(random.Random(2026), 3, "fixed")


EXERCISES.append(Exercise(
    id="00.roofline", title="屋顶线预测：时间与瓶颈 (roofline)",
    stub=(
        'def roofline(kernels: list[dict], spec: dict) -> dict:\n'
        '    """逐个内核计算 launch_us + max(bytes/带宽, flops/算力) 并求和；把每个 max 记到赢的一边，返回 {"time_us", "bound"}。"""'),
    points=3,
    public_cases=lambda: [
        _roofline_case("MyModel", MYMODEL_KERNELS, CHIPS[0], "种子 MyModel 的三个内核，默认芯片"),
        _roofline_case("gemv", GEMV_KERNELS, CHIPS[1], "batch 1 的 2048×2048 Linear（矩阵乘向量），发射开销 20 µs 的芯片"),
        _roofline_case("mixed", MIXED_KERNELS, CHIPS[0], "一个 2048³ 矩阵乘 + 两个大的逐点内核：先加总再取 max 会算错时间"),
        _roofline_case("tiny-many", [_kernel("add.Tensor", 8000, 1000)] * 40, CHIPS[2], "40 个小的逐点内核"),
        _roofline_case("balanced", BALANCED_KERNELS, CHIPS[0],
                       "一个 1024³ 矩阵乘 + 四个大的逐点内核：每个内核只把它的 max 记到一边"),
        _roofline_case("big-and-small", BIG_AND_SMALL_KERNELS, CHIPS[0],
                       "一个 100 µs 的逐点内核 + 20 个 4 µs 的逐点内核（每个都比 5 µs 的发射开销短）"),
    ],
    designed_cases=_roofline_designed_cases,
    random_cases=_random_roofline_cases,
    produce=roofline_artifact, analyze=_with_clock, confine_analysis=False, compare=_compare_roofline,
    hint="第一步：对每个内核算 move = bytes / mem_bytes_per_us、work = flops / flops_per_us，时间是 launch_us + max(move, work)。"
         "第二步：把 max 记到赢的那一边（move ≥ work 记内存，否则记计算），发射开销 = 内核数 × launch_us。"
         "第三步：time_us 是三部分之和，bound 是最大的那一部分。",
))
