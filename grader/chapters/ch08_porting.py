"""Chapter 08 (porting PyTorch to a chip) exercises: one per layer of a port, graded on what
the toy chip does with the learner's artifact -- memory an allocator policy reserves, the
race report and simulated time of a copy/compute pipeline, what a backend YAML registers in
the dispatcher, launches and simulated time of a partitioned graph, the simulated time a
porting plan leaves, what ``import torch`` loads through an entry point, and a ported
model's training step -- never on printed text.

Every number comes from the deterministic simulated clock or the allocator's bookkeeping;
nothing here reads the wall clock.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import importlib.abc
import importlib.metadata
import importlib.util
import random
import re
import sys
import tempfile
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from packaging.version import InvalidVersion, Version

import toychip
from course_models import ch08_models as models
from toychip import allocator, races, registration

from ..authoring import (PASS, Case, Exercise, PerformanceGoal, Verdict, artifact_error, compare_equal,
                         compare_outputs, seeded_build, short)

EXERCISES: list[Exercise] = []  # in notebook order

KIB, MIB = 1024, 1024 * 1024


# --- 08.allocator_policy -----------------------------------------------------------------

def _trace_case(name: str, make, rng: random.Random, *args) -> Case:
    trace = make(rng, *args)
    return Case(name, lambda: {"trace": list(trace)})


def _cached_case(name: str, cached: list[int], requested: list[int], description: str = "") -> Case:
    return Case(name, lambda: {"trace": models.cached_then_requested(cached, requested)}, description)


def _policy_artifact(function, built) -> dict:
    try:
        return allocator.replay(built["trace"], function)
    except ValueError as error:
        return {"error": f"分配器拒绝了你的策略的返回值：{error}（应返回 free_blocks 的下标 int，或 None 表示向设备申请新块）。"}


def _compare_policy(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    limit = 1.05 * expected["peak_reserved"]
    if got["peak_reserved"] > limit:
        return Verdict(False, "峰值保留显存 (peak reserved) 比参考策略高 5% 以上：你的策略让分配器向设备多申请了块。"
                              "想一想：有没有够用的缓存块被跳过（比如大小正好相等的块、需要切分的大块），"
                              "或者一个后面还要整块使用的大块被切给了小请求。", f"≤ {limit:g}", short(got["peak_reserved"]))
    if got["fragmentation"] > expected["fragmentation"] + 0.05:
        return Verdict(False, "峰值时刻的碎片率（保留了但没有张量使用的比例）比参考高出 0.05 以上。",
                       f"≤ {expected['fragmentation'] + 0.05:.3f}", f"{got['fragmentation']:.3f}")
    return PASS


EXERCISES.append(Exercise(
    id="08.allocator_policy", title="缓存分配器的选块策略 (block-selection policy)",
    stub=(
        'def choose_block(free_blocks: list, size: int):\n'
        '    """返回 free_blocks 中要使用的块的下标（块大小 >= size），或 None 表示向设备申请新块。"""'),
    points=2,
    public_cases=lambda: [
        Case("split-trap", lambda: {"trace": models.SPLIT_TRAP},
             "缓存里先是一个 16 KiB 的块、再是一个 2 KiB 的块；先请求 2 KiB，再请求 16 KiB"),
        Case("layers", lambda: {"trace": models.layers_trace(random.Random(0), 6, 32)},
             "一次训练步的模式：逐层的激活、来了就走的工作区、反向时的梯度"),
        Case("mixed-sizes", lambda: {"trace": models.churn_trace(random.Random(2), 60)},
             "大小混杂（1 KiB 到 2 MiB 以上）的短命张量和几个长命张量"),
    ],
    designed_cases=lambda: [
        _cached_case("small-cached-first", [2 * KIB, 16 * KIB], [2 * KIB, 16 * KIB]),
        _cached_case("big-cached-first", [64 * KIB, 8 * KIB], [8 * KIB, 64 * KIB]),
        _cached_case("same-size-again", [6 * KIB], [6 * KIB, 6 * KIB]),
        _cached_case("one-block-four-requests", [16 * KIB], [4 * KIB] * 4),
        _cached_case("large-block-small-requests", [2 * MIB], [128 * KIB] * 8),
        Case("training-step", lambda: {"trace": models.layers_trace(random.Random(1), 8, 16)}),
    ],
    random_cases=lambda rng: [
        _trace_case("hidden-layers", models.layers_trace, random.Random(rng.randrange(10**6)), 8, 16),
        _trace_case("hidden-churn", models.churn_trace, random.Random(rng.randrange(10**6)), 60),
        _trace_case("hidden-churn-2", models.churn_trace, random.Random(rng.randrange(10**6)), 90),
    ],
    produce=_policy_artifact, compare=_compare_policy,
    hint="在所有 size >= 请求的缓存块里选最小的那个（best-fit）；没有就返回 None。"
         "分配器会把选中的块切开，剩下的部分继续留在缓存里。",
))


# --- 08.overlap_without_races ---------------------------------------------------------

# A pipeline passes when it ends at most this much later than the reference's on the
# simulated clock (right answers written differently end at exactly the reference's time;
# the nearest wrong one, a blocking copy, ends 5 % or more later on every case).
OVERLAP_MARGIN = 0.02
# An answer that ends this close to the sequential run has overlapped nothing.
NO_OVERLAP = 0.97


def _pipeline_artifact(function, built) -> dict:
    """The learner's pipeline on the case's model and batches: its outputs, its simulated time and
    the race report of strict mode, from a clean start (the run's verdict does not depend on what
    ran before it in the process); beside it the sequential run's time."""
    model = models.pipeline_mlp([w.to("toychip") for w in built["weights"]])   # blocking copies: done before the run
    with toychip.profile() as plain:
        models.run_sequentially(model, built["batches"])
    raced_in_run = True
    with races.watching() as reports, toychip.sanitizer("strict"):
        try:
            with toychip.profile() as p:
                outputs = function(model, list(built["batches"]))
            raced_in_run = bool(reports)
            results = _read_back(outputs, len(built["batches"]))   # the caller reads them on its stream
        except Exception:
            if not reports:
                raise
    if reports:
        return {"race": reports[0] if raced_in_run else f"{reports[0]}{READ_BACK_RACE}"}
    if isinstance(results, str):
        return {"error": results}
    return {"outputs": results, "time_us": round(p.elapsed_us, 6), "sequential_us": round(plain.elapsed_us, 6)}


READ_BACK_RACE = "（这是调用者在默认流上读取返回的输出时报出的：返回之前，默认流没有等到输出写完）"


def _read_back(outputs, count: int):
    """The outputs on the host, or why they cannot be (a str)."""
    if not isinstance(outputs, (list, tuple)) or len(outputs) != count or \
            not all(isinstance(o, torch.Tensor) and o.device.type == "toychip" for o in outputs):
        return f"run_pipeline 应返回 {count} 个芯片张量组成的 list（每个 batch 一个输出，按顺序），实际返回了 {_kinds(outputs)}。"
    return [o.cpu() for o in outputs]


def _kinds(value) -> str:
    """What ``value`` is, without its values: ``4 个元素的 list（CPU 张量）``."""
    def kind(item) -> str:
        return f"{item.device.type.upper()} 张量" if isinstance(item, torch.Tensor) else type(item).__name__
    if isinstance(value, (list, tuple)):
        return f"{len(value)} 个元素的 {type(value).__name__}（{'、'.join(sorted({kind(v) for v in value})) or '空'}）"
    return kind(value)


def _compare_pipeline(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if "race" in got:
        return Verdict(False, "严格模式的数据竞争报告（toychip.sanitizer(\"strict\")）报出了数据竞争。想一想报告里的那块内存："
                              "它上一次在哪条流上被写或读，现在用它的流有没有先等那条流（wait_stream / Event.wait）；"
                              "一块在另一条流上用过的内存被释放、再分出去之前，分配器知不知道那条流（record_stream）。",
                       "没有数据竞争", got["race"])
    verdict = compare_outputs(expected["outputs"], got["outputs"], label="各个 batch 的输出（与顺序执行的结果相比）")
    if not verdict.ok:
        return verdict
    limit = (1 + OVERLAP_MARGIN) * expected["time_us"]
    if got["time_us"] <= limit:
        return PASS
    if got["time_us"] >= NO_OVERLAP * expected["sequential_us"]:
        message = (f"模拟时间和顺序执行（{expected['sequential_us']:g} us）几乎一样：拷贝没有和计算重叠。"
                   "同一条流上的工作按顺序执行；主机等待（synchronize、阻塞的拷贝）之后发出的工作也不会提前开始。")
    else:
        message = ("拷贝和计算只重叠了一部分，模拟时间超过参考实现的 "
                   f"{1 + OVERLAP_MARGIN:g} 倍。看看有没有让主机等待的操作：阻塞的拷贝（non_blocking=False）会让主机"
                   "等到拷贝结束；源张量不在锁页内存里时，主机要先把数据搬进驱动的暂存缓冲区 (staging buffer)，"
                   "模拟时钟把它算作主机等到拷贝结束。主机等待之后发出的内核都不能提前开始。")
    return Verdict(False, message, f"≤ {limit:g} us", f"{got['time_us']:g} us")


def _pipeline_case(name: str, seed: int, batches: int, rows: int, widths: tuple, description: str = "") -> Case:
    """``batches`` host batches of ``rows`` x ``widths[0]``; a chip MLP through ``widths``."""
    def build() -> dict:
        weights = [torch.randn(a, b) / a ** 0.5 for a, b in zip(widths, widths[1:])]
        return {"weights": weights, "batches": [torch.randn(rows, widths[0]) for _ in range(batches)]}
    return Case(name, seeded_build(seed, build), description)


def _random_pipeline_case(name: str, rng: random.Random) -> Case:
    widths = (rng.choice([128, 256, 512]), *rng.sample([64, 128, 256], rng.randint(1, 2)))
    return _pipeline_case(name, rng.randrange(10**6), rng.randint(3, 6), rng.choice([32, 64, 128]), widths)


EXERCISES.append(Exercise(
    id="08.overlap_without_races", title="拷贝与计算重叠，且没有数据竞争 (overlap without races)",
    stub=(
        'def run_pipeline(model, batches: list) -> list:\n'
        '    """在芯片上对每个主机 batch 计算 model，下一个 batch 的拷贝与当前的计算重叠；按顺序返回各 batch 的输出（芯片张量）。"""'),
    points=3,
    public_cases=lambda: [
        _pipeline_case("four-batches", 0, 4, 64, (256, 256, 256), "4 个 64×256 的 batch，两层 256 宽的 MLP"),
        _pipeline_case("copy-bound", 1, 5, 128, (512, 64), "5 个 128×512 的 batch，一层 MLP：拷贝比计算长"),
        _pipeline_case("compute-bound", 2, 3, 32, (128, 256, 256, 128), "3 个 32×128 的 batch，三层 MLP：计算比拷贝长"),
    ],
    designed_cases=lambda: [
        _pipeline_case("six-small-batches", 3, 6, 32, (256, 128)),
        _pipeline_case("three-wide-batches", 4, 3, 128, (512, 256, 64)),
        _pipeline_case("deep-model", 5, 4, 64, (128, 128, 128, 128, 128)),
        _pipeline_case("many-batches", 6, 8, 64, (256, 256)),
    ],
    random_cases=lambda rng: [_random_pipeline_case(f"hidden-{i}", rng) for i in range(2)],
    produce=_pipeline_artifact, compare=_compare_pipeline,
    hint="三件事各管一样：拷贝放在另一条流上、从锁页内存 non_blocking 地发出，才能和计算重叠；"
         "默认流用一个 batch 之前要等它的拷贝（wait_stream 或事件）；一个在旁路流上分配、在默认流上用过的张量，"
         "释放之前要告诉分配器（record_stream），否则它的块会被下一次拷贝拿去覆盖。",
))


# --- 08.yaml_registration ----------------------------------------------------------------

def _vendor_library() -> dict:
    """The "vendor operator library": NumPy kernels under torchgen's names of the ATen
    overloads they implement (several overloads of one op, default ones without a suffix)."""
    def flip(a, dims):
        return np.ascontiguousarray(np.flip(a, tuple(dims)))

    def roll(a, shifts, dims=()):
        return np.ascontiguousarray(np.roll(a, tuple(shifts), tuple(dims) if len(dims) else None))

    def cumsum(a, dim, *, dtype=None):
        return np.cumsum(a, axis=dim).astype(a.dtype)

    def cumsum_out(a, dim, *, dtype=None, out):
        return np.cumsum(a, axis=dim, out=out)

    def max_dim(a, dim, keepdim=False):
        return np.max(a, axis=dim, keepdims=keepdim), np.argmax(a, axis=dim, keepdims=keepdim)

    return {"flip": flip, "roll": roll, "cumsum": cumsum, "cumsum.out": cumsum_out,
            "tril": lambda a, diagonal=0: np.tril(a, diagonal), "triu": lambda a, diagonal=0: np.triu(a, diagonal),
            "sign": np.sign, "atan": np.arctan, "sinh": np.sinh, "log1p": np.log1p, "expm1": np.expm1,
            "remainder.Tensor": np.remainder, "remainder.Scalar": np.remainder, "remainder.Scalar_Tensor": np.remainder,
            "fmod.Tensor": np.fmod, "fmod.Scalar": np.fmod,
            "max": lambda a: np.asarray(np.max(a)), "max.dim": max_dim,
            "atan2": np.arctan2, "atan2.out": lambda a, b, *, out: np.arctan2(a, b, out=out)}


# What a program calls for each op (on chip and on CPU): the op names are ATen's.
CALLS = {
    "aten::flip.default": lambda t: torch.flip(t, [0]),
    "aten::roll.default": lambda t: torch.roll(t, 1, 1),
    "aten::cumsum.default": lambda t: torch.cumsum(t, 1),
    "aten::cumsum.out": lambda t: torch.cumsum(t, 0, out=torch.empty_like(t)),
    "aten::tril.default": lambda t: t.tril(1),
    "aten::triu.default": lambda t: t.triu(-1),
    "aten::sign.default": torch.sign,
    "aten::atan.default": torch.atan,
    "aten::sinh.default": torch.sinh,
    "aten::log1p.default": lambda t: torch.log1p(t.abs()),
    "aten::expm1.default": torch.expm1,
    "aten::remainder.Tensor": lambda t: torch.remainder(t, t.abs() + 0.5),
    "aten::remainder.Scalar": lambda t: torch.remainder(t, 0.7),
    "aten::remainder.Scalar_Tensor": lambda t: torch.remainder(2.5, t.abs() + 0.5),
    "aten::fmod.Tensor": lambda t: torch.fmod(t, t.abs() + 0.5),
    "aten::fmod.Scalar": lambda t: torch.fmod(t, 0.7),
    "aten::max.default": torch.max,
    "aten::max.dim": lambda t: list(torch.max(t, 1)),
    "aten::atan2.default": lambda t: torch.atan2(t, t + 1),
    "aten::atan2.out": lambda t: torch.atan2(t, 1 - t, out=torch.empty_like(t)),
}


def _explain(message: str, library: list[str]) -> str:
    """The registration's error in Chinese, with what to do about it."""
    if match := re.search(r"declares aten::(\S+), which ATen does not have", message):
        return (f"YAML 里的名字 {match[1]} 在 ATen 里找不到对应的算子或重载。名字用 torchgen 的写法："
                "去掉 aten:: 前缀，保留重载名，只有默认重载不写 .default"
                "（aten::add.Tensor → add.Tensor，aten::relu.default → relu）。")
    if (match := re.search(r"declares aten::(\S+?), which has no kernel", message)) and match[1].endswith(".default"):
        return (f"YAML 声明了 {match[1]}：torchgen 的写法里默认重载不写 .default，应写 "
                f"{match[1].removesuffix('.default')}（ATen 也没有叫 default 的重载名）。")
    if match := re.search(r"declares aten::(\S+?), which has no kernel", message):
        packet = match[1].split(".")[0]
        siblings = [name for name in library if name.split(".")[0] == packet]
        if siblings:
            return (f"YAML 声明了 {match[1]}，但厂商算子库没有这个重载的内核，它有的是 {', '.join(siblings)}："
                    "同一个算子的不同重载是不同的条目，torchgen 的名字要保留重载名。")
        return (f"YAML 声明了 {match[1]}，但厂商算子库里没有它的内核（算子库有：{', '.join(library)}）。"
                "只声明题目给出的算子。")
    if match := re.search(r"backend must be PrivateUse1, got (.*)", message):
        return f"backend 应是调度键 PrivateUse1，而不是 {match[1]}（设备名 toychip 是 PrivateUse1 改名后的名字）。"
    if "unknown keys" in message:
        return "YAML 里有不认识的键：只能用 torchgen 认识的键（这道题只需要 backend、cpp_namespace、supported）。"
    if "declared twice" in message:
        return ("有名字被声明了两次：同一个算子的几个重载要写成不同的名字（remainder.Tensor、remainder.Scalar），"
                "不能都写成 remainder。")
    return "YAML 不合法。"


def _on_cpu(result):
    return [t.cpu() for t in result] if isinstance(result, list) else result.cpu()


def _yaml_artifact(function, built) -> dict:
    ops = list(built["ops"])
    text = function(list(ops))
    if not isinstance(text, str):
        return {"error": f"backend_yaml 应返回 YAML 文本 (str)，实际返回了 {short(text)}。"}
    library = torch.library.Library("aten", "IMPL")
    vendor = _vendor_library()
    kernels = {name: toychip.chip_kernel(f"aten::{name}", fn) for name, fn in vendor.items()}
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "toychip_native_functions.yaml"
            path.write_text(text)
            try:
                decl = registration.register(library, kernels, path=path)
            except registration.RegistrationError as error:
                return {"error": f"registration 拒绝了你的 YAML：{_explain(str(error), list(vendor))}"
                                 f"（原文：{error}）"}
            except (RuntimeError, ValueError, TypeError, AttributeError) as error:
                return {"error": f"加载或注册 YAML 时出错（{type(error).__name__}: {str(error).splitlines()[0]}）："
                                 "YAML 里的算子名要用 torchgen 的写法，例如 add.Tensor、relu（默认重载不写 .default）。"}
        registered = sorted(name for name in vendor
                            if torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "PrivateUse1"))
        chip = built["x"].to("toychip")
        outputs, fallbacks = {}, []
        for op in ops:
            try:
                with toychip.strict():
                    outputs[op] = _on_cpu(CALLS[op](chip))
            except toychip.FallbackError as error:
                fallbacks.append(str(error))
        return {"declared": sorted(map(str, decl.supported)), "cpp_namespace": str(decl.cpp_namespace),
                "registered": registered, "outputs": outputs, "fallbacks": fallbacks}
    finally:
        library._destroy()


def _compare_yaml(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if got["cpp_namespace"] != expected["cpp_namespace"]:
        return Verdict(False, "cpp_namespace 应是厂商自己的 C++ 命名空间 toychip（torchgen 把生成的包装函数放在这里），"
                              "不是算子所在的 aten。", expected["cpp_namespace"], got["cpp_namespace"])
    extra = sorted(set(got["declared"]) - set(expected["declared"]))
    if extra:
        return Verdict(False, f"YAML 声明了这次不需要的名字：{', '.join(extra)}（只声明给出的算子，每个重载一个名字）。",
                       short(expected["declared"]), short(got["declared"]))
    verdict = compare_equal(expected["declared"], got["declared"],
                            "YAML 少声明了给出的算子：每个给出的重载都要有一个 torchgen 名字。")
    if not verdict.ok:
        return verdict
    verdict = compare_equal(expected["registered"], got["registered"],
                            "注册后调度器里 PrivateUse1 上有内核的算子（torch._C._dispatch_has_kernel_for_dispatch_key）"
                            "与参考不一致。")
    if not verdict.ok:
        return verdict
    if got["fallbacks"]:
        return Verdict(False, "注册之后，给出的算子在芯片上仍然回退到 CPU（toychip.strict() 报错）。",
                       "没有回退", got["fallbacks"][0])
    for op, want in expected["outputs"].items():
        verdict = compare_outputs(want, got["outputs"].get(op), label="芯片上的计算结果")
        if not verdict.ok:
            return verdict
    return PASS


def _yaml_case(name: str, ops: list[str], seed: int, description: str = "") -> Case:
    return Case(name, seeded_build(seed, lambda: {"ops": list(ops), "x": torch.randn(4, 5)}), description)


def _overloads_of(op: str) -> list[str]:
    """The overloads in :data:`CALLS` of the op ``op`` ("aten::remainder.Tensor") names."""
    packet = op.split(".")[0]
    return [name for name in CALLS if name.split(".")[0] == packet]


def _random_yaml_ops(rng: random.Random) -> list[str]:
    """Several overloads of one op, among a few other ops, in random order."""
    family = _overloads_of(rng.choice([op for op in CALLS if len(_overloads_of(op)) > 1]))
    others = rng.sample([op for op in CALLS if op not in family], rng.randint(1, 3))
    ops = rng.sample(family, rng.randint(2, len(family))) + others
    rng.shuffle(ops)
    return ops


EXERCISES.append(Exercise(
    id="08.yaml_registration", title="用后端 YAML 注册一组算子 (backend YAML)",
    stub=(
        'def backend_yaml(ops: list) -> str:\n'
        '    """返回后端 YAML 文本：backend: PrivateUse1、cpp_namespace: toychip、supported: ops 的 torchgen 名字。"""'),
    points=2,
    public_cases=lambda: [
        _yaml_case("flip-cumsum", ["aten::flip.default", "aten::cumsum.default"], 0, "两个默认重载"),
        _yaml_case("remainder-overloads", ["aten::remainder.Tensor", "aten::remainder.Scalar"], 1,
                   "同一个算子的两个非默认重载"),
        _yaml_case("mixed-overloads", ["aten::tril.default", "aten::cumsum.default", "aten::max.dim",
                                       "aten::cumsum.out", "aten::atan.default"], 2,
                   "默认重载、out 重载与 max.dim 混在一起"),
    ],
    designed_cases=lambda: [
        _yaml_case("max-default-and-dim", ["aten::max.default", "aten::max.dim"], 3),
        _yaml_case("fmod-overloads-roll-expm1", ["aten::fmod.Scalar", "aten::roll.default", "aten::fmod.Tensor",
                                                 "aten::expm1.default"], 4),
        _yaml_case("atan2-and-out", ["aten::atan2.out", "aten::triu.default", "aten::atan2.default"], 5),
        _yaml_case("three-remainders", ["aten::remainder.Scalar_Tensor", "aten::remainder.Scalar",
                                        "aten::remainder.Tensor"], 6),
        _yaml_case("defaults-only", ["aten::sign.default", "aten::sinh.default", "aten::log1p.default",
                                     "aten::tril.default"], 7),
    ],
    random_cases=lambda rng: [
        _yaml_case(f"hidden-{i}", _random_yaml_ops(rng), rng.randrange(10**6)) for i in range(3)
    ],
    produce=_yaml_artifact, compare=_compare_yaml,
    hint="YAML 三个键：backend: PrivateUse1、cpp_namespace: toychip、supported: 列表；"
         "列表里的名字是 torchgen 的写法：去掉 aten:: 前缀，保留重载名，默认重载去掉 .default"
         "（aten::add.Tensor → add.Tensor，aten::add.out → add.out，aten::relu.default → relu）。",
))


# --- 08.compile_partitioning -------------------------------------------------------------

def _partition_artifact(function, built) -> dict:
    gm = models.chip_graph(built["program"], built["x"], built["w"])
    islands = function(gm)
    try:
        return models.run_partitioned(gm, islands, (built["x"], built["w"]))
    except Exception as error:  # a malformed partition can break fusion or code generation
        return {"error": f"按你的分区编译或运行时出错：{type(error).__name__}: {str(error)[:200]}"}


def _compare_partition(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    verdict = compare_outputs(expected["outputs"], got["outputs"], label="分区后图的输出")
    if not verdict.ok:
        return verdict
    if got["launches"] > expected["launches"]:
        return Verdict(False, f"内核启动次数比参考多（{got['launches']} > {expected['launches']}）："
                              "能放进同一个岛的芯片节点被拆开了，岛内的融合机会就丢了。",
                       short(expected["launches"]), short(got["launches"]))
    return PASS


def _partition_case(name: str, program: str, seed: int, n: int, k: int, description: str = "") -> Case:
    return Case(name, seeded_build(seed, lambda: {"program": program, "x": torch.randn(n, k),
                                                  "w": torch.randn(k, k) / k ** 0.5}), description)


EXERCISES.append(Exercise(
    id="08.compile_partitioning", title="编译后端的分区：把芯片能跑的节点圈成岛 (partitioning)",
    stub=(
        'def chip_islands(gm: fx.GraphModule) -> list:\n'
        '    """返回芯片岛的列表，每个岛是一组节点名；岛内节点都受 ChipSupport 支持，且不形成依赖环。"""'),
    points=3,
    public_cases=lambda: [
        _partition_case("cumsum-middle", "cumsum_middle", 0, 8, 16, "cumsum 没有芯片内核，夹在两段芯片算子中间"),
        _partition_case("two-branches", "two_branches", 1, 6, 12, "flip 没有芯片内核，在两条分支中的一条上"),
        _partition_case("side-input", "side_input", 2, 8, 16, "cumsum 没有芯片内核，只读图的输入，结果加到芯片算子链的末尾"),
        _partition_case("multi-output-node", "norm_branches", 9, 6, 12,
                        "native_layer_norm 有三个结果（由 getitem 节点取出）；flip 没有芯片内核"),
    ],
    designed_cases=lambda: [
        _partition_case("all-chip", "all_chip", 3, 6, 12),
        _partition_case("two-cpu-ops", "sandwich", 4, 8, 16),
        _partition_case("residual-after-cpu", "residual_after_cpu", 5, 4, 8),
        _partition_case("multi-output-node-wide", "norm_branches", 6, 8, 16),
        _partition_case("two-branches-wide", "two_branches", 7, 12, 8),
        _partition_case("side-input-small", "side_input", 8, 4, 8),
    ],
    random_cases=lambda rng: [
        _partition_case(f"hidden-{i}-{program}", program, rng.randrange(10**6), rng.choice([4, 8, 12]),
                        rng.choice([8, 16]))
        for i, program in enumerate(rng.sample(sorted(models.PROGRAMS), 3))
    ],
    produce=_partition_artifact, compare=_compare_partition,
    performance=PerformanceGoal(lambda facts: facts["time_us"], 1.0,
                                "模拟时间不应超过参考分区"),
    hint="先在一张图上比较两种分法：每个芯片节点自成一岛（能跑，但启动多），所有芯片节点一个岛（常被拒绝）。"
         "被拒绝的岛里，找一条从岛里出去、经过岛外节点、又回到岛里的路径：合并两个岛之前就要检查有没有这样的路径。"
         "还没找到做法的话：从图的输出往输入方向处理节点，一个节点能并进它的使用者所在的岛就并进去。",
))


# --- 08.welford_combine -----------------------------------------------------------------

class CombineResultError(Exception):
    """The learner's welford_combine returned something a kernel cannot store (Chinese text)."""


def _checked_combine(function):
    """``function`` as the kernels call it, with its result checked: three arrays, one
    column each (the block's rows, the reduced axis kept with length 1)."""
    def combine(mean, m2, weight):
        result = function(mean, m2, weight)
        if not (isinstance(result, (tuple, list)) and len(result) == 3):
            raise CombineResultError(f"welford_combine 应返回三个数组 (mean, m2, weight)，实际返回了 {short(result)}。")
        rows = mean.shape[:-1] + (1,)
        for name, part in zip(("mean", "m2", "weight"), result):
            if np.shape(part) != rows:
                raise CombineResultError(
                    f"合并后的 {name} 形状是 {np.shape(part)}，应是 {rows}：每一行合并成一个数，"
                    "沿最后一维归约并保留这一维（keepdims=True），内核才能按行写回。")
        return result
    return combine


def _welford_artifact(function, built) -> dict:
    try:
        return models.split_reduction_step(built["program"], built["shape"], built["seed"], _checked_combine(function))
    except CombineResultError as error:
        return {"error": str(error)}


WELFORD_LABELS = {"outputs": "输出", "grads": "梯度", "stats": "BatchNorm 的运行统计量"}
# Per tensor, max|got - expected| / max|expected|: a right combination, however it sums
# (a running fold in float32 over a 6667-element chunk included), stays below 1e-5; a
# wrong one misses by 2e-4 or more on the public cases.
WELFORD_TOLERANCE = 1e-4


def _compare_welford(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    for key, label in WELFORD_LABELS.items():
        if expected[key] and not (error := _relative_error(expected[key], got[key])) <= WELFORD_TOLERANCE:
            return Verdict(False, f"拆分归约后的{label}与参考（它与 CPU 一致）不一致：相对误差超过 {WELFORD_TOLERANCE:g}。"
                                  "想一想合并时每组该算多少份，以及各组均值彼此不同时，所有数离合并均值的平方和比各组 m2 之和多出什么。",
                           f"≤ {WELFORD_TOLERANCE:g}", f"{error:.2e}")
    return PASS


SPLIT_DESCRIPTIONS = {"var_mean": "torch.var_mean(x, dim=1)，x 的形状 {shape}",
                      "layer_norm": "LayerNorm 的前向与反向，输入形状 {shape}",
                      "batch_norm": "训练模式 BatchNorm 的前向与反向（含运行统计量），输入形状 {shape}"}


def _split_case(name: str, program: str, shape: tuple, seed: int, note: str = "") -> Case:
    description = SPLIT_DESCRIPTIONS[program].format(shape=shape) + note
    return Case(name, lambda: {"program": program, "shape": shape, "seed": seed}, description)


def _random_split_case(name: str, rng: random.Random) -> Case:
    """A program at a shape from a small grid (each shape compiles once per process), new data."""
    program = rng.choice(sorted(models.SPLIT_PROGRAMS))
    rows, length = rng.choice([2, 3, 5]), rng.choice([9001, 12000, 20000])
    shape = (length, rows) if program == "batch_norm" else (rows, length)
    return _split_case(name, program, shape, rng.randrange(10**6))


EXERCISES.append(Exercise(
    id="08.welford_combine", title="拆分的归约：合并 Welford 部分结果 (split reductions)",
    stub=(
        'def welford_combine(mean: np.ndarray, m2: np.ndarray, weight: np.ndarray) -> tuple:\n'
        '    """沿最后一维合并各组的 (均值, m2, 权重)，返回三个数组 (mean, m2, weight)，每个都保留最后一维（长度 1）。"""'),
    points=3,
    public_cases=lambda: [
        _split_case("var-mean-partial-chunk", "var_mean", (3, 20000), 0, "：每行分成几段，最后一段不满"),
        _split_case("layer-norm", "layer_norm", (5, 12345), 1),
        _split_case("batch-norm", "batch_norm", (9000, 3), 2),
    ],
    designed_cases=lambda: [
        _split_case("var-mean-short-tail", "var_mean", (3, 8193), 3),
        _split_case("var-mean-one-row", "var_mean", (1, 9000), 4),
        _split_case("layer-norm-even-chunks", "layer_norm", (2, 9000), 5),
        _split_case("batch-norm-five-features", "batch_norm", (8193, 5), 6),
    ],
    random_cases=lambda rng: [_random_split_case(f"hidden-{i}", rng) for i in range(2)],
    produce=_welford_artifact, compare=_compare_welford,
    hint="把每组想成 weight 个数，它们的均值是 mean，离均值的平方和是 m2。合并后的均值是所有数的均值；"
         "合并后的 m2 是所有数离合并均值的平方和：每组的数离合并均值的平方和，可以拆成它们离本组均值的部分和本组均值离合并均值的部分。"
         "权重为 0 的组（超出末尾的那一段）什么也不贡献。",
))


# --- 08.porting_plan ---------------------------------------------------------------------

# A plan passes when its step takes at most this much longer than the reference plan's.
PLAN_MARGIN = 0.01


def _plan_artifact(function, built) -> dict:
    """Learner side: only the plan, a list of op names; what it is worth is measured on the trusted side."""
    plan = function(copy.deepcopy(built["profile"]), built["k"])
    if not isinstance(plan, (list, tuple)) or not all(isinstance(op, str) for op in plan):
        return {"error": f"porting_plan 应返回由算子名 (str) 组成的 list，实际返回了 {short(plan)}。"}
    return {"plan": [str(op) for op in plan]}


def _plan_problem(plan: list[str], profile: dict, k: int) -> str | None:
    """What makes ``plan`` no plan for this budget and profile (None: it is one)."""
    ops = [models.plan_op(op) for op in plan]
    if len(ops) > k:
        return f"预算只有 k = {k} 个内核，你的计划有 {len(ops)} 个算子。"
    if len(set(ops)) < len(ops):
        return f"计划里有重复的算子：{short(plan)}（同一个算子的不同写法，如 cumsum 与 cumsum.out，算同一个）。"
    known = {models.plan_op(row["op"]) for row in profile["ops"]}
    unknown = [op for op, name in zip(ops, plan) if op not in known]
    if unknown:
        return f"计划里的 {short(unknown)} 不是 profile 里的算子：名字取自 profile[\"ops\"] 各行的 \"op\"。"
    return None


def _measure_plan(artifact: dict, built: dict) -> dict:
    """Trusted side: the step's simulated time once the plan's ops have the vendor's kernels."""
    if "error" in artifact:
        return artifact
    profile, plan = built["profile"], artifact["plan"]
    if (problem := _plan_problem(plan, profile, built["k"])) is not None:
        return {"error": problem}
    on_chip = {models.plan_op(row["op"]) for row in profile["ops"] if row["where"] == "chip"}
    ops = frozenset(map(models.plan_op, plan))
    return {**_step_time(built["stages"], ops, built["spec"]), "before_us": profile["time_us"],
            "already_native": sorted({models.plan_op(op) for op in plan} & on_chip)}


def _compare_plan(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    limit = expected["time_us"] * (1 + PLAN_MARGIN)
    if got["time_us"] <= limit:
        return PASS
    shown = (f"≤ {limit:.2f} us", f"{got['time_us']:.2f} us")
    if got["already_native"]:
        return Verdict(False, f"计划里的 {', '.join(got['already_native'])} 本来就在芯片上运行（profile 里 where 是 "
                              "\"chip\"）：给它写内核不省任何时间，预算白花了。", *shown)
    if got["time_us"] > got["before_us"]:
        return Verdict(False, f"按你的计划，这一步比一个内核都不写（{got['before_us']:.2f} us）还慢：有的算子写成原生内核，"
                              "新增的开销比它的回退省下的还多。对照 profile 的 spec 算一算两边各是多少。", *shown)
    return Verdict(False, "按你的计划，这一步的模拟时间比参考计划多出 1% 以上。想一想：一个算子从回退变成原生内核，"
                          "省下的是哪几项、又多出哪几项？调用次数、每次拷贝几个张量、张量多大，各自怎样影响这两边？",
                   *shown)


@functools.cache
def _profile(stages: tuple, spec: toychip.ChipSpec) -> dict:
    """The step's profile (deterministic, so each case profiles its step once)."""
    return models.porting_profile(stages, spec)


@functools.cache
def _step_time(stages: tuple, ops: frozenset, spec: toychip.ChipSpec) -> dict:
    return models.step_time_with(stages, sorted(ops), spec)


def _plan_case(name: str, stages: list, k: int, spec: toychip.ChipSpec = toychip.DEFAULT_SPEC,
               description: str = "") -> Case:
    stages = tuple(stages)
    return Case(name, lambda: {"profile": copy.deepcopy(_profile(stages, spec)), "k": k, "stages": stages,
                               "spec": spec}, description)


# Chips whose data sheet differs from toychip's: slow launches (a driver round trip each),
# a fast host link, and launches so slow that no fallback is worth a kernel.
SLOW_LAUNCH = toychip.ChipSpec(name="slow-launch", launch_us=40.0)
FAST_LINK = toychip.ChipSpec(name="fast-link", launch_us=8.0, copy_us=2.0, link_bytes_per_us=64e3)
VERY_SLOW_LAUNCH = toychip.ChipSpec(name="very-slow-launch", launch_us=150.0)


def _random_stages(rng: random.Random) -> list:
    """A native op and three fallback ops, each with its own calls and size."""
    ops = rng.sample([op for op in models.PORTING_LIBRARY], 3)
    return [("tanh", rng.randint(1, 20), (64, 64))] + [
        (op, rng.choice([1, 2, 5, 10]), rng.choice([(4, 4), (32, 64), (128, 256), (256, 256)])) for op in ops]


EXERCISES.append(Exercise(
    id="08.porting_plan", title="移植计划：先写哪几个内核 (porting plan)",
    stub=(
        'def porting_plan(profile: dict, k: int) -> list:\n'
        '    """返回最多 k 个算子名（取自 profile["ops"] 的 "op"）：给它们写芯片内核后，这一步的模拟时间最短。"""'),
    points=2,
    public_cases=lambda: [
        _plan_case("training-step", [("tanh", 40, (64, 64)), ("flip", 8, (4, 4)), ("cumsum", 1, (256, 512)),
                                     ("atan2", 2, (64, 64)), ("sign", 3, (8, 8))], 2,
                   description="toychip 的默认规格，k = 2：tanh 在芯片上，四个算子回退"),
        _plan_case("slow-launch", [("tanh", 40, (64, 64)), ("flip", 10, (4, 4)), ("cumsum", 1, (256, 512)),
                                   ("roll", 2, (128, 256)), ("sign", 3, (8, 8))], 3, SLOW_LAUNCH,
                   "一次内核启动要 40 us 的芯片，k = 3"),
    ],
    designed_cases=lambda: [
        _plan_case("many-small-one-large", [("tanh", 40, (64, 64)), ("flip", 20, (4, 4)),
                                            ("roll", 1, (1024, 720))], 1),
        _plan_case("slow-launch-spare-budget", [("tanh", 6, (64, 64)), ("sign", 6, (8, 8)), ("roll", 1, (512, 512)),
                                                ("expm1", 2, (64, 64)), ("tril", 1, (256, 256))], 3, SLOW_LAUNCH),
        _plan_case("per-call-trap", [("tanh", 12, (64, 64)), ("flip", 10, (8, 8)), ("cumsum", 1, (128, 256))], 1),
        _plan_case("out-buffer-copies", [("tanh", 12, (64, 64)), ("flip", 4, (16, 16)), ("sign", 3, (16, 16)),
                                         ("roll", 2, (16, 16))], 1),
        _plan_case("nothing-worth-a-kernel", [("tanh", 4, (64, 64)), ("flip", 6, (8, 8)), ("cumsum", 2, (32, 32)),
                                              ("atan2", 1, (64, 64))], 2, VERY_SLOW_LAUNCH),
        _plan_case("fast-link-traffic", [("tanh", 6, (64, 64)), ("flip", 5, (128, 256)), ("sign", 2, (4, 4)),
                                         ("expm1", 5, (32, 64))], 3, FAST_LINK),
        _plan_case("fast-link", [("tanh", 25, (64, 64)), ("tril", 5, (8, 8)), ("roll", 3, (256, 256)),
                                 ("atan2", 1, (512, 512))], 2, FAST_LINK),
    ],
    random_cases=lambda rng: [
        _plan_case("hidden-mix", _random_stages(rng), rng.randint(1, 3), rng.choice([toychip.DEFAULT_SPEC, SLOW_LAUNCH,
                                                                                    FAST_LINK])),
    ],
    produce=_plan_artifact, analyze=_measure_plan, confine_analysis=False, compare=_compare_plan,
    hint="先做实验：对 profile 里每个回退的算子，单独用 models.step_time_with(stages, [op], spec) 测一次，"
         "看省下的时间和它那一行的哪几列对得上。还对不上的话：省下的 = 回退的拷贝时间 − 原生内核的时间，"
         "而原生内核每次调用都要付一次启动（spec 里的 launch_us）和它的内存流量；省下的不是正数的算子不值得写。",
))


# --- 08.autoload_package -----------------------------------------------------------------

class _ServeHidden(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an import of a hidden module with the module object it already was: importing
    it puts it back in ``sys.modules`` without running it a second time (toychip renames
    PrivateUse1 when it runs, which a process can do only once)."""

    def __init__(self, hidden: dict):
        self.hidden = hidden

    def find_spec(self, fullname, path=None, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname in self.hidden else None

    def create_module(self, spec):
        return self.hidden[spec.name]

    def exec_module(self, module):
        pass


@contextlib.contextmanager
def _chip_not_yet_imported(site: Path, name: str):
    """Inside the block, ``site`` is on the path and toychip looks not imported yet, as in a
    fresh interpreter (it is missing from ``sys.modules``; importing it, by any means, puts it
    back); afterwards toychip is as it was and the package ``name`` is forgotten again."""
    hidden = {m: module for m, module in sys.modules.items() if _is_chip_module(m)}
    specs = {m: module.__spec__ for m, module in hidden.items()}
    finder = _ServeHidden(hidden)
    for module in hidden:
        del sys.modules[module]
    sys.meta_path.insert(0, finder)
    sys.path.insert(0, str(site))
    try:
        yield
    finally:
        sys.path.remove(str(site))
        sys.meta_path.remove(finder)
        for module, spec in specs.items():
            sys.modules[module] = hidden[module]
            hidden[module].__spec__ = spec
        for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[module]


def _is_chip_module(module: str) -> bool:
    return module == "toychip" or module.startswith("toychip.")


def _chip_imported() -> bool:
    return "toychip" in sys.modules


def _entry_points(site: Path) -> list:
    return [ep for dist in importlib.metadata.distributions(path=[str(site)]) for ep in dist.entry_points]


def _project_facts(site: Path, name: str, files: dict) -> dict:
    """``[project]``'s name and version as setuptools validates them (PEP 621: strings; the
    version PEP 440's)."""
    project = tomllib.loads(files["pyproject"])["project"]
    facts = {key: {"missing": key not in project, "string": isinstance(project.get(key), str),
                   "text": str(project.get(key, ""))} for key in ("name", "version")}
    try:
        Version(facts["version"]["text"])
        facts["version"]["pep440"] = True
    except InvalidVersion:
        facts["version"]["pep440"] = False
    return {"project": facts}


def _group_facts(site: Path, name: str, files: dict) -> dict:
    return {"groups": sorted({ep.group for ep in _entry_points(site)})}


def _target_facts(site: Path, name: str, files: dict) -> dict:
    return {"targets": sorted(re.sub(r"\s+", "", ep.value) for ep in _entry_points(site))}


def _package_facts(site: Path, name: str, files: dict) -> dict:
    """Import the package and call its ``_autoload``, as the entry point's loader would, where
    toychip is not imported yet."""
    with _chip_not_yet_imported(site, name):
        try:
            autoload = getattr(importlib.import_module(name), "_autoload", None)
            if not callable(autoload):
                return {"problem": f"包 {name} 里没有可调用的 _autoload（实际是 {short(autoload)}）。"}
            autoload()
        except Exception as error:
            return {"problem": f"导入包 {name} 或调用 _autoload() 时出错（{type(error).__name__}: {str(error)[:200]}）。"}
        loaded = _chip_imported()
    return {"problem": "" if loaded else "在 toychip 还没有被导入的进程里调用 _autoload() 之后，toychip 仍然没有被导入。"}


def _import_torch_facts(site: Path, name: str, files: dict) -> dict:
    """What ``torch._import_device_backends`` does at ``import torch`` -- load and call every
    ``torch.backends`` entry point -- for the distributions on ``site`` only, in this process,
    with toychip not imported yet as at a fresh ``import torch``."""
    entry_points = [ep for ep in _entry_points(site) if ep.group == "torch.backends"]
    with _chip_not_yet_imported(site, name):
        try:
            for ep in entry_points:
                ep.load()()
        except Exception as error:
            return {"loaded": False, "result": f"import torch 会失败：加载入口点时出错（{type(error).__name__}: "
                                               f"{str(error)[:200]}）"}
        loaded = _chip_imported()
    if not loaded:
        return {"loaded": False, "result": "import torch 之后 toychip 没有被加载"}
    return {"loaded": True, "result": f"{torch.randn(2, device='toychip').device} {torch.toychip.device_count()}"}


# What each case observes of the installed package (one requirement of the prompt each), and its description.
AUTOLOAD_REQUIREMENTS = {
    "project": (_project_facts, "[project] 的 name 与 version"),
    "entry-point-group": (_group_facts, "入口点在 import torch 查找的组里"),
    "entry-point-target": (_target_facts, "入口点的对象引用指向包里的 _autoload"),
    "package": (_package_facts, "导入包、调用 _autoload() 之后 toychip 已加载"),
    "import-torch": (_import_torch_facts, "import torch（_import_device_backends）加载了芯片"),
}


def _autoload_artifact(function, built) -> dict:
    """Learner side: only the two file texts; what they do is judged in the analysis process."""
    files = function(built["name"])
    if not isinstance(files, dict) or set(files) != {"pyproject", "module"} or \
            not all(isinstance(v, str) for v in files.values()):
        return {"error": f"autoload_package 应返回 {{'pyproject': str, 'module': str}}，实际返回了 {short(files)}。"}
    return {"pyproject": files["pyproject"], "module": files["module"]}


def _load_package(artifact: dict, built: dict) -> dict:
    """Trusted side (the confined analysis process, where no learner cell ran): install the
    package on a temporary site, as pip would, and observe the case's requirement."""
    if "error" in artifact:
        return artifact
    name, aspect = built["name"], built["aspect"]
    with tempfile.TemporaryDirectory() as folder:
        site = Path(folder)
        if (problem := models.install_package(site, name, artifact)) is not None:
            return {"error": problem}
        facts, _ = AUTOLOAD_REQUIREMENTS[aspect]
        return {"aspect": aspect, "name": name, **facts(site, name, artifact)}


def _distribution_name(name: str) -> str:
    """PEP 503's normalised form: ``Chip-Port``, ``chip_port`` and ``chip.port`` are one project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _compare_project(name: str, project: dict) -> Verdict:
    """name and version as pip (through setuptools) accepts them, the name the package's."""
    project_name, version = project["name"], project["version"]
    if project_name["missing"] or version["missing"]:
        return Verdict(False, "pyproject 的 [project] 表要有 name（就是包名）和 version（例如 \"0.1\"）："
                              "pip 用它们给安装的包命名（*.dist-info 目录），importlib.metadata 也靠它们找到包。",
                       "name 与 version 都有", f"缺少 {'name' if project_name['missing'] else 'version'}")
    for key, value in (("name", project_name), ("version", version)):
        if not value["string"]:
            return Verdict(False, f"[project] 的 {key} 必须是 TOML 字符串（带引号，例如 version = \"0.1\"）："
                                  f"PEP 621 这样规定，pip 构建时 setuptools 会拒绝（`project.{key}` must be string）。",
                           f'{key} = "..."', f"{key} = {value['text']}（不是字符串）")
    if _distribution_name(project_name["text"]) != _distribution_name(name):
        return Verdict(False, "[project] 的 name 应是包名（按 PEP 503 规范化后比较）：pip 用它给安装的包命名。",
                       repr(name), repr(project_name["text"]))
    if not version["pep440"]:
        return Verdict(False, "[project] 的 version 不符合 PEP 440（例如 \"0.1\"、\"1.0.post1\"），setuptools 会拒绝。",
                       '"0.1"', repr(version["text"]))
    return PASS


def _compare_autoload(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    name, aspect = got["name"], got["aspect"]
    if aspect == "project":
        return _compare_project(name, got["project"])
    if aspect == "entry-point-group":
        if "torch.backends" not in got["groups"]:
            return Verdict(False, "没有声明在 import torch 查找的那个组里的入口点（组名见 _import_device_backends 的源码）。"
                                  "如果你写了组名：TOML 表头里没有引号的点号会把一个键拆成几层嵌套的表。",
                           "import torch 查找的组", short(got["groups"]))
    elif aspect == "entry-point-target":
        if f"{name}:_autoload" not in got["targets"]:
            return Verdict(False, "入口点的对象引用没有指向你这个包里的 _autoload 函数：对象引用要同时写出模块和模块里的属性，"
                                  "写法见 PyPA 的入口点规范（object reference）。",
                           f"指向 {name} 包里的 _autoload", short(got["targets"]))
    elif aspect == "package":
        if got["problem"]:
            return Verdict(False, f"包的 __init__.py 不对：{got['problem']}")
    elif got["result"] != expected["result"]:
        return Verdict(False, "按 import torch 的方式（_import_device_backends：找出它查找的那个组的入口点，"
                              "加载并调用）执行后，芯片没有加载成功。", expected["result"], got["result"])
    return PASS


def _autoload_cases(prefix: str, name: str, aspects) -> list[Case]:
    return [Case(f"{prefix}{aspect}", lambda aspect=aspect: {"name": name, "aspect": aspect},
                 f"包名 {name}：{AUTOLOAD_REQUIREMENTS[aspect][1]}") for aspect in aspects]


EXERCISES.append(Exercise(
    id="08.autoload_package", title="打包：让 import torch 自动加载芯片 (entry points)",
    stub=(
        'def autoload_package(name: str) -> dict:\n'
        '    """返回 {"pyproject": pyproject.toml 文本, "module": name/__init__.py 文本}：装上这个包，import torch 就加载芯片。"""'),
    points=2,
    # torch's own loader, in the analysis process: a fresh interpreter per case
    # (models.import_torch_in_subprocess, which the notebook runs) costs a torch import per case
    public_cases=lambda: _autoload_cases("", "toychip_plugin", AUTOLOAD_REQUIREMENTS),
    designed_cases=lambda: _autoload_cases("npu-bridge-", "npu_bridge", AUTOLOAD_REQUIREMENTS),
    random_cases=lambda rng: _autoload_cases("hidden-", f"chip_port_{rng.randrange(10**6)}",
                                             rng.sample(sorted(AUTOLOAD_REQUIREMENTS), 2)),
    produce=_autoload_artifact, analyze=_load_package, compare=_compare_autoload,
    hint="先读 6.2 节打印的 _import_device_backends：它按哪个组名找入口点，拿到入口点之后做了哪两步？"
         "再查 TOML 的键规则：组名里的点号在表头里会被当成什么？最后想一想：入口点的对象引用怎样同时写出模块和函数，"
         "那个函数被调用时必须做什么芯片才算加载了。",
))


# --- 08.port_model -----------------------------------------------------------------------

def _train_net(built: dict) -> dict:
    """Two training steps of the capstone's net (``built`` names its channels and activations)."""
    torch.manual_seed(built["seed"])
    model = models.make_port_net(built["channels"], tuple(built["acts"]))
    return models.train_steps(model, built["x"], built["y"], "toychip")


def _activation_at(built: dict) -> dict:
    """One activation module's output and input gradient on the chip, at ``built["x"]``."""
    x = built["x"].to("toychip").requires_grad_()
    y = models.ACTIVATIONS[built["act"]]()(x)
    y.backward(built["grad"].to("toychip"))
    return {"act": built["act"], "output": y.detach().cpu(), "input_grad": x.grad.cpu()}


def _port_artifact(function, built) -> dict:
    run = _activation_at if "act" in built else _train_net
    with toychip.kernel_scope():
        function()
        try:
            with toychip.strict(), toychip.profile() as p:
                results = run(built)
        except toychip.FallbackError as error:
            return {"error": f"toychip.strict() 报错：{error}。这个算子还没有芯片内核：用 toychip.register_kernel 注册它"
                             "（报错里若是 .out、.grad_input 这样的 out 变体，给题目表格里的函数式算子注册内核即可，"
                             "调用就不再经过 out 变体）。"}
    results["time_us"] = round(p.time_us, 6)
    results["copies"] = p.copies
    return results


def _compare_activation(expected, got) -> Verdict:
    module = f"nn.{models.ACTIVATIONS[got['act']]()!r}"
    verdict = compare_outputs(expected["output"], got["output"])
    if not verdict.ok:
        return Verdict(False, f"{module} 在分段的端点处及两侧的前向输出与 PyTorch 的 CPU 内核不一致。",
                       verdict.expected, verdict.got)
    verdict = compare_outputs(expected["input_grad"], got["input_grad"])
    if not verdict.ok:
        return Verdict(False, f"{module} 在分段的端点处及两侧的输入梯度（反向内核的结果）与 PyTorch 的 CPU 内核不一致："
                              "对照表格看每一段在端点处是开还是闭（端点上的导数取哪一段的），"
                              "以及反向内核返回的是不是 grad_output 乘以导数。", verdict.expected, verdict.got)
    return PASS


def _compare_port(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    if "act" in got:
        return _compare_activation(expected, got)
    for key, label in (("loss", "损失"), ("grads", "梯度"), ("params", "更新后的参数"), ("buffers", "BatchNorm 的运行统计量")):
        verdict = compare_outputs(expected[key], got[key], label=f"训练两步后的{label}")
        if not verdict.ok:
            return verdict
    return PASS


def _port_case(name: str, seed: int, channels: int, acts, description: str = "") -> Case:
    return Case(name, seeded_build(seed, lambda: {
        "seed": seed, "channels": channels, "acts": list(acts),
        "x": torch.randn(6, 3, 8, 8), "y": torch.randint(0, 5, (6,))}), description)


# Where each activation's pieces meet: torch's CPU kernels decide which piece owns the end point.
PIECE_ENDS = {"hardswish": (-3.0, 3.0), "leaky_relu": (0.0,), "leaky_relu_0.3": (0.0,), "relu6": (0.0, 6.0),
              "hardtanh": (-0.5, 2.0)}


def _at_piece_ends(act: str) -> list[float]:
    """Every end point of ``act``'s pieces, and points just beside it and well inside each piece
    (exact in float32)."""
    return [end + step for end in PIECE_ENDS[act] for step in (-1.5, -0.25, 0.0, 0.25, 1.5)]


def _ends_case(name: str, act: str, seed: int, mixed: bool = False, description: str = "") -> Case:
    """``act`` at its pieces' end points, with a random output gradient; ``mixed``: as many
    random points again, all shuffled into two rows."""
    def build() -> dict:
        rng, points = random.Random(seed), _at_piece_ends(act)
        if mixed:
            points += [round(rng.uniform(-8.0, 8.0), 3) for _ in points]
            rng.shuffle(points)
        x = torch.tensor(points).reshape(2 if mixed else 1, -1)
        return {"act": act, "x": x, "grad": torch.randn(x.shape)}
    return Case(name, seeded_build(seed, build), description)


EXERCISES.append(Exercise(
    id="08.port_model", title="完整适配案例：把一个卷积网络移植到芯片上 (porting a model)",
    stub=(
        'def port_model() -> None:\n'
        '    """用 toychip.register_kernel 为 hardswish、leaky_relu、hardtanh 及它们的 backward 注册芯片内核。"""'),
    points=4,
    public_cases=lambda: [
        _port_case("hardswish+leaky", 0, 4, ("hardswish", "leaky_relu"), "Hardswish 与 LeakyReLU(0.1)"),
        _port_case("relu6+hardtanh", 1, 6, ("relu6", "hardtanh"), "ReLU6 与 Hardtanh(-0.5, 2.0)"),
        _ends_case("ends-hardswish", "hardswish", 10, description="Hardswish 在 −3、3 与两侧的输出和梯度"),
        _ends_case("ends-leaky0.3", "leaky_relu_0.3", 11, description="LeakyReLU(0.3) 在 0 与两侧的输出和梯度"),
        _ends_case("ends-relu6", "relu6", 12, description="ReLU6 在 0、6 与两侧的输出和梯度"),
        _ends_case("ends-hardtanh", "hardtanh", 13, description="Hardtanh(-0.5, 2.0) 在 −0.5、2 与两侧的输出和梯度"),
    ],
    designed_cases=lambda: [
        _port_case("leaky0.3+hardswish", 2, 3, ("leaky_relu_0.3", "hardswish")),
        _port_case("hardtanh+leaky", 3, 8, ("hardtanh", "leaky_relu")),
        _port_case("hardswish+relu6", 4, 4, ("hardswish", "relu6")),
        *(_ends_case(f"ends-mixed-{act}", act, 20 + i, mixed=True)
          for i, act in enumerate(["hardswish", "leaky_relu", "relu6", "hardtanh"])),
    ],
    random_cases=lambda rng: [
        *(_port_case(f"hidden-{i}", rng.randrange(10**6), rng.choice([3, 4, 8]),
                     rng.sample(sorted(models.ACTIVATIONS), 2)) for i in range(2)),
        _ends_case("hidden-ends", rng.choice(sorted(models.ACTIVATIONS)), rng.randrange(10**6), mixed=True),
    ],
    produce=_port_artifact, compare=_compare_port,
    performance=PerformanceGoal(lambda facts: facts["time_us"], 1.05,
                                "模拟时间不应超过参考实现的 1.05 倍（每个激活前向、反向各一次内核启动）"),
    hint="strict 模式报出的算子：hardswish / hardswish_backward、leaky_relu / leaky_relu_backward"
         "（参数 negative_slope、self_is_result）、hardtanh / hardtanh_backward（min_val、max_val；ReLU6 也走它）。"
         "每个用 toychip.register_kernel('aten::名字', numpy 函数) 注册。",
))


# --- 08.capstone -------------------------------------------------------------------------

# Simulated time of the learner's stack over the course's (the reference assembled from the
# course's pieces): full credit within the first ratio, the time cases' partial credit up to the second.
CAPSTONE_RATIOS = (1.1, 1.5)
GRAD_TOLERANCE = 1e-5
# Recent training runs by (function, workload): the facets of one workload share one run
# (a few are kept: grading runs the reference's case beside the learner's).
RUNS_KEPT = 4


@functools.lru_cache(maxsize=RUNS_KEPT)
def _train_with(function, activation: str, sizes: tuple, seed: int) -> dict:
    """Train the block on the chip with the backend ``function`` assembles from the course's
    pieces (its fallback counted); the run's numbers, or why there are none."""
    from toychip import stack   # imported here: it loads Dynamo, which grading other exercises never needs

    calls = {"fallback": 0}

    def counted_fallback(op, *args, **kwargs):
        calls["fallback"] += 1
        return toychip.cpu_fallback(op, *args, **kwargs)

    pieces = replace(stack.course_pieces(), fallback=counted_fallback)
    with toychip.kernel_scope():
        backend = function(pieces)
        if not callable(backend):
            return {"error": f"chip_backend 应返回一个 torch.compile 后端（可调用对象 (gm, example_inputs) -> 可调用对象），"
                             f"实际返回了 {short(backend)}。"}
        try:
            run = models.train_block(backend, activation=activation, sizes=dict(sizes), seed=seed)
        except torch._dynamo.exc.BackendCompilerFailed as error:
            inner = getattr(error, "inner_exception", None) or error
            if isinstance(inner, NotImplementedError):
                return {"error": f"后端编译时调用了还没有实现的函数（{inner}）：先完成本章前面的练习。"}
            return {"error": f"你的后端编译图时出错：{type(inner).__name__}: {str(inner)[:300]}"}
    return {**run, "fallback_piece_calls": calls["fallback"]}


def _capstone_artifact(function, built) -> dict:
    run = _train_with(function, built["activation"], tuple(sorted(built["sizes"].items())), built["seed"])
    return {**run, "facet": built["facet"], "max_ratio": built["max_ratio"]}


def _relative_error(expected: list, got: list) -> float:
    """max over tensors of max|got - expected| / max|expected| (the benchmark's measure)."""
    return max(float((g - e).abs().max() / e.abs().max().clamp_min(1e-30)) for e, g in zip(expected, got))


def _compare_parity(expected, got) -> Verdict:
    for key, label in (("losses", "每一步的损失"), ("grads", "最后一步的梯度")):
        if len(got[key]) != len(expected[key]) or any(g.shape != e.shape for e, g in zip(expected[key], got[key])):
            return Verdict(False, f"{label}的个数或形状与参考不一致。")
        error = _relative_error(expected[key], got[key])
        if not error <= GRAD_TOLERANCE:
            return Verdict(False, f"{label}与参考（它与 CPU 一致）的相对误差超过 {GRAD_TOLERANCE:g}："
                                  "看看优化器的就地更新（optimizer.step 改写参数和状态）有没有写回，"
                                  "以及反向图是不是按前向保存的值计算的。",
                           f"≤ {GRAD_TOLERANCE:g}", f"{error:.2e}")
    return PASS


def _op_name(kernel: str) -> str:
    return kernel.split(".")[0]


def _compare_native(expected, got) -> Verdict:
    required = {_op_name(op) for op in models.NATIVE_REQUIRED}
    fell_back = sorted(op for op in got["fallbacks"] if _op_name(op) in required)
    if fell_back:
        return Verdict(False, "这些算子在训练步里回退到了 CPU：想一想它们在编译栈的哪一层应该留在芯片上——"
                              "是在追踪时被分解成芯片有的算子，还是在岛外由芯片内核执行？",
                       "没有回退", ", ".join(fell_back))
    if expected["fallback_piece_calls"] and not got["fallback_piece_calls"]:
        return Verdict(False, "岛外没有芯片内核的算子（比如 split 的反向 cat）回退到了 CPU，却没有经过 pieces.fallback："
                              "栈给你的回退函数没有装上，用的是芯片默认的回退。",
                       "经过 pieces.fallback", "没有经过")
    return PASS


def _compare_time(expected, got) -> Verdict:
    limit = got["max_ratio"] * expected["time_us"]
    if got["time_us"] > limit:
        return Verdict(False, f"训练一步的模拟时间超过课程编译栈的 {got['max_ratio']:g} 倍。对照 launches（内核启动次数）"
                              "和 copies（主机与芯片间的拷贝）想一想：哪一部分图没有编译成芯片岛，"
                              "或者岛里的算子没有融合？", f"≤ {limit:.1f} us", f"{got['time_us']:.1f} us"
                              f"（launches {got['launches']}，参考 {expected['launches']}）")
    return PASS


# The memory cases train the GELU block only: its forward and backward are each one island, so
# the order of allocations is the same however chip_islands is written, and every right answer
# measured reserves exactly the reference's peak (no margin needed); without the policy the peak
# is 1024 bytes higher. With the activation outside the islands, a right chip_islands of another
# island order raised the peak above the reference's (leaky_relu: +1024 bytes where the policy
# saves 3072; at seq 24, +9216 where it saves 6144): those cases would grade the islands' order.
def _compare_memory(expected, got) -> Verdict:
    if got["peak_reserved"] > expected["peak_reserved"]:
        return Verdict(False, "训练一步的峰值保留显存 (peak reserved) 比参考答案多：芯片上的每块显存都由缓存分配器分出，"
                              "一次分配能不能切开、重用一个缓存块，取决于分配器那一刻用的选块策略。"
                              "想一想：编译好的图运行的时候，分配器用的是哪个策略？",
                       f"≤ {expected['peak_reserved']} bytes", f"{got['peak_reserved']} bytes")
    return PASS


CAPSTONE_FACETS = {"parity": _compare_parity, "native": _compare_native, "time": _compare_time,
                   "memory": _compare_memory}


def _compare_capstone(expected, got) -> Verdict:
    if (error := artifact_error(got)) is not None:
        return error
    return CAPSTONE_FACETS[got["facet"]](expected, got)


WIDE_BLOCK = {"batch": 3, "seq": 6, "d_model": 24, "heads": 4, "ff": 48, "vocab": 40}
FACET_DESCRIPTIONS = {"parity": "损失与梯度和 CPU 一致", "native": "列出的算子不回退、岛外经过栈的回退",
                      "time": "模拟时间不超过课程编译栈的 {ratio:g} 倍", "memory": "峰值保留显存不超过参考答案"}


def _capstone_case(activation: str, facet: str, *, sizes: dict = models.BLOCK_SIZES, seed: int = 0,
                   max_ratio: float | None = None, label: str = "") -> Case:
    name = f"{label or activation}-{facet}" + (f"-{max_ratio:g}x" if max_ratio else "")
    built = {"activation": activation, "facet": facet, "sizes": dict(sizes), "seed": seed, "max_ratio": max_ratio}
    return Case(name, lambda: dict(built),
                f"MLP 用 {activation} 的块训练两步：{FACET_DESCRIPTIONS[facet].format(ratio=max_ratio)}")


EXERCISES.append(Exercise(
    id="08.capstone", title="毕业项目：用你的编译栈在芯片上训练 Transformer 块 (capstone)",
    stub=(
        'def chip_backend(pieces):\n'
        '    """返回芯片的 torch.compile 后端：用 pieces（分解表、融合策略、回退）和本章的 chip_islands、port_model、choose_block 组装。"""'),
    points=6,
    public_cases=lambda: [
        _capstone_case("gelu", "parity"), _capstone_case("gelu", "native"),
        _capstone_case("gelu", "time", max_ratio=CAPSTONE_RATIOS[0]), _capstone_case("gelu", "memory"),
        _capstone_case("leaky_relu", "parity"), _capstone_case("leaky_relu", "native"),
    ],
    designed_cases=lambda: [
        _capstone_case("relu6", "parity"), _capstone_case("relu6", "native"),
        *(_capstone_case("gelu", facet, sizes=WIDE_BLOCK, seed=1, max_ratio=ratio, label="wide-gelu")
          for facet, ratio in (("parity", None), ("time", CAPSTONE_RATIOS[1]), ("time", CAPSTONE_RATIOS[0]),
                               ("memory", None))),
    ],
    produce=_capstone_artifact, compare=_compare_capstone,
    hint="按数据流的顺序想每个部件挂在哪里：分解表在 AOTAutograd 追踪时生效；chip_islands 和 pieces.fusion 作用在"
         "AOTAutograd 交给你的每一张 ATen 图上（前向、反向、优化器步）；回退和 choose_block 要在编译好的图运行时生效；"
         "port_model 的内核照顾留在岛外的激活。",
))
