"""Plausible wrong answers to chapter 00's exercises, each with the belief it embodies; the checks must reject each one."""
import statistics
import time

import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.shape_prop import ShapeProp


def benchmark_without_warmup(fn, args, warmup, repeats, synchronize):
    """Times from the very first call: the cold calls land in the samples."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        synchronize()
        samples.append(time.perf_counter() - start)
    return {"median": statistics.median(samples), "samples": samples}


def benchmark_mean(fn, args, warmup, repeats, synchronize):
    """Warms up and synchronises, but reports the mean: one pause drags it up."""
    for _ in range(warmup):
        fn(*args)
    synchronize()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        synchronize()
        samples.append(time.perf_counter() - start)
    return {"median": statistics.fmean(samples), "samples": samples}


def benchmark_without_sync(fn, args, warmup, repeats, synchronize):
    """Never waits for the device: on an asynchronous device it times only the enqueue."""
    for _ in range(warmup):
        fn(*args)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        samples.append(time.perf_counter() - start)
    return {"median": statistics.median(samples), "samples": samples}


def export_static(model, example):
    """Exports with the example's shapes baked in: other batch sizes fail the guard."""
    return torch.export.export(model, example)


def export_separate_dims(model, example):
    """One Dim per input: export refuses when the inputs' batches must be equal."""
    return torch.export.export(model, example, dynamic_shapes=tuple(
        {0: torch.export.Dim(f"batch{i}")} for i in range(len(example))))


def export_with_trace(model, example):
    """The seed's deployment path: a TorchScript trace is not an ExportedProgram."""
    return torch.jit.trace(model, example)


def _aten_nodes(fn, inputs, *, views: bool):
    gm = make_fx(fn)(*inputs)
    ShapeProp(gm).propagate(*inputs)
    return [n for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
            and (views or not n.target.is_view)]


def _bytes(node) -> int:
    metas = [n.meta["tensor_meta"] for n in node.all_input_nodes if "tensor_meta" in n.meta] + [node.meta["tensor_meta"]]
    return sum(m.shape.numel() * m.dtype.itemsize for m in metas)


def kernel_costs_with_views(fn, inputs):
    """Counts every ATen node, views (t, transpose) included: views launch no kernel."""
    return [{"op": n.target.__name__, "bytes": _bytes(n), "flops": n.meta["tensor_meta"].shape.numel()}
            for n in _aten_nodes(fn, inputs, views=True)]


def kernel_costs_output_numel_flops(fn, inputs):
    """Right kernels and bytes, but a matmul's flops taken as its output's numel."""
    return [{"op": n.target.__name__, "bytes": _bytes(n),
             "flops": max(m.meta["tensor_meta"].shape.numel() for m in [*n.all_input_nodes, n] if "tensor_meta" in m.meta)}
            for n in _aten_nodes(fn, inputs, views=False)]


def kernel_costs_output_bytes_only(fn, inputs):
    """Counts only the bytes a kernel writes, not what it reads."""
    kernels = []
    for n in _aten_nodes(fn, inputs, views=False):
        out = n.meta["tensor_meta"]
        matmul = n.target._opname in ("mm", "addmm", "bmm")
        k = n.all_input_nodes[-2].meta["tensor_meta"].shape[-1] if matmul else 0
        flops = 2 * out.shape.numel() * k if matmul else max(
            m.meta["tensor_meta"].shape.numel() for m in [*n.all_input_nodes, n] if "tensor_meta" in m.meta)
        kernels.append({"op": n.target.__name__, "bytes": out.shape.numel() * out.dtype.itemsize, "flops": flops})
    return kernels


def roofline_of_totals(kernels, spec):
    """Adds all bytes and all flops first, then takes one max: wrong when kernels disagree."""
    move = sum(k["bytes"] for k in kernels) / spec["mem_bytes_per_us"]
    work = sum(k["flops"] for k in kernels) / spec["flops_per_us"]
    overhead = len(kernels) * spec["launch_us"]
    parts = {"overhead": overhead, "memory": move if move >= work else 0.0, "compute": work if work > move else 0.0}
    return {"time_us": overhead + max(move, work), "bound": max(parts, key=parts.get)}


def roofline_without_launches(kernels, spec):
    """The classic roofline: per-kernel max of memory and compute, no launch overhead."""
    parts = {"overhead": 0.0, "memory": 0.0, "compute": 0.0}
    for k in kernels:
        move, work = k["bytes"] / spec["mem_bytes_per_us"], k["flops"] / spec["flops_per_us"]
        parts["memory" if move >= work else "compute"] += max(move, work)
    return {"time_us": sum(parts.values()), "bound": max(parts, key=parts.get)}


WRONG_ANSWERS = [
    ("00.export_dynamic", export_static,
     "Exports with the example's shapes baked in: other batch sizes fail the guard."),
    ("00.export_dynamic", export_separate_dims,
     "One Dim per input: export refuses when the inputs' batches must be equal."),
    ("00.export_dynamic", export_with_trace,
     "The seed's deployment path: a TorchScript trace is not an ExportedProgram."),
    ("00.benchmark", benchmark_without_warmup,
     "Times from the very first call: the cold calls land in the samples."),
    ("00.benchmark", benchmark_mean,
     "Warms up and synchronises, but reports the mean: one pause drags it up."),
    ("00.benchmark", benchmark_without_sync,
     "Never waits for the device: on an asynchronous device it times only the enqueue."),
    ("00.kernel_costs", kernel_costs_with_views,
     "Counts every ATen node, views (t, transpose) included: views launch no kernel."),
    ("00.kernel_costs", kernel_costs_output_numel_flops,
     "Right kernels and bytes, but a matmul's flops taken as its output's numel."),
    ("00.kernel_costs", kernel_costs_output_bytes_only,
     "Counts only the bytes a kernel writes, not what it reads."),
    ("00.roofline", roofline_of_totals,
     "Adds all bytes and all flops first, then takes one max: wrong when kernels disagree."),
    ("00.roofline", roofline_without_launches,
     "The classic roofline: per-kernel max of memory and compute, no launch overhead."),
]
