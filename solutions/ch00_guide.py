"""Reference solutions of chapter 00 (comparison and selection guide).

Each function body is injected into the instructor's copy of ``notebooks/00_guide.ipynb``
between ``### BEGIN SOLUTION`` / ``### END SOLUTION``, so a body may use only what the
notebook imports: ``time``, ``statistics``, ``torch`` and ``Dim`` (``torch.export.Dim``).
"""
import statistics
import time

import torch
from torch.export import Dim


def choose(scenario: dict) -> str:
    """The technology for one scenario: hardware first, then the goal, then the numbers."""
    if scenario["hardware"] == "tpu":
        return "torch_xla"
    if scenario["hardware"] == "new_chip":
        return "PrivateUse1+custom backend"
    if scenario["goal"] == "debug":
        return "eager"
    if scenario["goal"] == "rewrite_graph":
        return "torch.fx"
    if scenario["goal"] == "deploy":
        return {"cpp_server": "torch.export+AOTInductor", "mobile": "ExecuTorch",
                "onnx_runtime": "ONNX"}[scenario["deploy_to"]]
    # speed_up inside Python: compiling costs seconds up front and ~40-70 µs per call
    if scenario["eager_call_us"] < 100:
        return "eager"
    if scenario["calls"] * scenario["eager_call_us"] < 60e6:
        return "eager"
    return "torch.compile"


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


def bottleneck(profile: dict) -> str:
    """Which part of the roofline-with-launches cost dominates: launches, bytes or flops."""
    parts = {
        "overhead": profile["launches"] * profile["launch_us"],
        "memory": profile["bytes"] / profile["mem_bytes_per_us"],
        "compute": profile["flops"] / profile["flops_per_us"],
    }
    return max(parts, key=parts.get)


def export_with_dynamic_batch(model, example: tuple):
    """``torch.export`` with dimension 0 of every input as one shared symbolic batch size."""
    batch = Dim("batch")
    return torch.export.export(model, example, dynamic_shapes=tuple({0: batch} for _ in example))
