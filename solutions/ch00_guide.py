"""Reference solutions of chapter 00 (comparison and selection guide).

Each function body is injected into the instructor's copy of ``notebooks/00_guide.ipynb``
between ``### BEGIN SOLUTION`` / ``### END SOLUTION``, so a body may use only what the
notebook imports: ``time``, ``statistics``, ``torch``, ``Dim`` (``torch.export.Dim``),
``make_fx`` and ``ShapeProp``.
"""
import statistics
import time

import torch
from torch.export import Dim
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.shape_prop import ShapeProp


def export_with_dynamic_batch(model, example: tuple):
    """``torch.export`` with dimension 0 of every input as one shared symbolic batch size."""
    batch = Dim("batch")
    return torch.export.export(model, example, dynamic_shapes=tuple({0: batch} for _ in example))


def benchmark(fn, args: tuple, warmup: int, repeats: int, synchronize) -> dict:
    """Median per-call seconds of ``fn(*args)``: warm up, synchronise around every sample."""
    for _ in range(warmup):
        fn(*args)
    synchronize()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        synchronize()
        samples.append(time.perf_counter() - start)
    return {"median": statistics.median(samples), "samples": samples}


def kernel_costs(fn, inputs: tuple) -> list[dict]:
    """One entry per ATen op that launches a kernel (views do not): bytes of its tensor
    inputs and output, and its flops (2·M·N·K for matmuls, else the largest operand's numel)."""
    gm = make_fx(fn)(*inputs)
    ShapeProp(gm).propagate(*inputs)
    kernels = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload) or node.target.is_view:
            continue
        tensors = [n.meta["tensor_meta"] for n in node.all_input_nodes if "tensor_meta" in n.meta]
        out = node.meta["tensor_meta"]
        nbytes = sum(t.shape.numel() * t.dtype.itemsize for t in [*tensors, out])
        if node.target._opname in ("mm", "addmm", "bmm"):
            flops = 2 * out.shape.numel() * tensors[-2].shape[-1]
        else:
            flops = max(t.shape.numel() for t in [*tensors, out])
        kernels.append({"op": node.target.__name__, "bytes": nbytes, "flops": flops})
    return kernels


def roofline(kernels: list[dict], spec: dict) -> dict:
    """Predicted time (launch + max(memory, compute) per kernel, summed) and the largest part."""
    parts = {"overhead": len(kernels) * spec["launch_us"], "memory": 0.0, "compute": 0.0}
    for k in kernels:
        move, work = k["bytes"] / spec["mem_bytes_per_us"], k["flops"] / spec["flops_per_us"]
        parts["memory" if move >= work else "compute"] += max(move, work)
    return {"time_us": sum(parts.values()), "bound": max(parts, key=parts.get)}
