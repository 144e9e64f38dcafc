"""Reference solutions of chapter 08 (porting PyTorch to a chip).

Each function body is injected into the instructor's copy of ``notebooks/08_porting.ipynb``,
so a body may use only what the notebook imports: ``math``, ``numpy as np``, ``torch``,
``F``, ``nn``, ``fx``, ``toychip`` and ``ChipSupport`` (a body needing more imports it itself).
"""
import math

import numpy as np
import torch
import torch.fx as fx

import toychip
from toychip.compiler import ChipSupport


def choose_block(free_blocks: list, size: int):
    """Best fit: the smallest cached block that holds ``size`` bytes (the allocator splits
    off the rest); ``None`` when no cached block is big enough."""
    best = None
    for i, block in enumerate(free_blocks):
        if block >= size and (best is None or block < free_blocks[best]):
            best = i
    return best


def run_pipeline(model, batches: list) -> list:
    """Prefetch on a side stream: each batch is pinned and copied there with ``non_blocking=True``
    while the default stream computes the one before; the default stream waits for a copy
    before using it, and ``record_stream`` keeps the batch's block (the side stream's) from being
    handed to a later copy before the default stream is done with it."""
    compute = torch.toychip.current_stream()
    side = torch.toychip.Stream()

    def fetch(batch):
        with torch.toychip.stream(side):
            return batch.pin_memory().to("toychip", non_blocking=True)

    outputs, upcoming = [], fetch(batches[0])
    for i in range(len(batches)):
        compute.wait_stream(side)
        current = upcoming
        current.record_stream(compute)
        if i + 1 < len(batches):
            upcoming = fetch(batches[i + 1])
        outputs.append(model(current))
    return outputs


def backend_yaml(ops: list) -> str:
    """A backend YAML declaring ``ops`` under torchgen's names: ``aten::flip.default`` is ``flip``,
    ``aten::remainder.Scalar`` keeps its overload, ``remainder.Scalar``."""
    lines = ["backend: PrivateUse1", "cpp_namespace: toychip", "supported:"]
    for op in ops:
        name = op.removeprefix("aten::")
        lines.append(f"  - {name.removesuffix('.default')}")
    return "\n".join(lines) + "\n"


def chip_islands(gm: fx.GraphModule) -> list:
    """Chip islands as PyTorch's capability-based partitioner proposes them: maximal groups
    of chip-supported nodes that form no cycle through a node left on the CPU (the notebook
    does not import the partitioner: the learner derives its rule)."""
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner

    partitioner = CapabilityBasedPartitioner(gm, ChipSupport(), allows_single_node_partition=True)
    return [[node.name for node in partition.nodes] for partition in partitioner.propose_partitions()]


def welford_combine(mean: np.ndarray, m2: np.ndarray, weight: np.ndarray) -> tuple:
    """Chan et al.'s parallel combination of groups (mean, m2, weight) along the last axis:
    the weighted mean of the means, and the groups' m2 plus each group's spread around the
    combined mean, weight times squared distance (the m2 of its weight points at its mean).
    A group of weight 0 counts for nothing; so does a row of them (mean 0)."""
    total = np.sum(weight, axis=-1, keepdims=True)
    combined = np.sum(weight * mean, axis=-1, keepdims=True) / np.maximum(total, 1)
    spread = weight * np.square(mean - combined)
    return combined, np.sum(m2 + spread, axis=-1, keepdims=True), total


def porting_plan(profile: dict, k: int) -> list:
    """The k fallback ops whose kernels save the most simulated time. A kernel removes its
    fallback's copies and adds one launch per call plus the memory traffic of its tensors
    (about the bytes the copies moved); an op whose kernel costs more than it saves is left out."""
    spec = profile["spec"]

    def saving(row):
        return row["time_us"] - row["calls"] * spec["launch_us"] - row["bytes"] / spec["mem_bytes_per_us"]

    worth_a_kernel = [row for row in profile["ops"] if row["where"] == "cpu" and saving(row) > 0]
    return [row["op"] for row in sorted(worth_a_kernel, key=saving, reverse=True)[:k]]


def autoload_package(name: str) -> dict:
    """The two files of a package ``name`` whose ``torch.backends`` entry point loads the chip."""
    pyproject = (f'[project]\nname = "{name}"\nversion = "0.1"\n\n'
                 f'[project.entry-points."torch.backends"]\ntoychip = "{name}:_autoload"\n')
    module = "def _autoload():\n    import toychip  # registers the chip with PyTorch\n"
    return {"pyproject": pyproject, "module": module}


def port_model() -> None:
    """Chip kernels for the activations the capstone's nets use, forward and backward."""
    def hardswish(a):
        return a * np.clip(a + 3, 0, 6) / 6

    def hardswish_backward(grad, a):
        return grad * np.where(a <= -3, 0, np.where(a < 3, a / 3 + 0.5, 1)).astype(a.dtype)

    def leaky_relu(a, negative_slope=0.01):
        return np.where(a > 0, a, a * negative_slope).astype(a.dtype)

    def leaky_relu_backward(grad, a, negative_slope, self_is_result):
        return np.where(a > 0, grad, grad * negative_slope).astype(grad.dtype)

    def hardtanh(a, min_val=-1.0, max_val=1.0):
        return np.clip(a, min_val, max_val)

    def hardtanh_backward(grad, a, min_val, max_val):
        return np.where((a <= min_val) | (a >= max_val), 0, grad).astype(grad.dtype)

    for name, fn in [("hardswish", hardswish), ("hardswish_backward", hardswish_backward),
                     ("leaky_relu", leaky_relu), ("leaky_relu_backward", leaky_relu_backward),
                     ("hardtanh", hardtanh), ("hardtanh_backward", hardtanh_backward)]:
        toychip.register_kernel(f"aten::{name}", fn)


def chip_backend(pieces):
    """The chip's ``torch.compile`` backend from the stack's pieces: AOTAutograd traces the
    forward and backward with the decomposition table; in each ATen graph ``chip_islands``
    marks the islands, each compiled with the fusion policy; the rest runs op by op through
    the dispatcher (``port_model``'s kernels, else the fallback), on memory ``choose_block``
    hands out."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

    from toychip import allocator, compiler, stack

    def compile_graph(gm, example_inputs):
        compiler.expand_foreach(gm)  # the optimiser's _foreach_* ops, one op per tensor
        nodes = {node.name: node for node in gm.graph.nodes}
        islands = [dict.fromkeys(nodes[name] for name in island) for island in chip_islands(gm)]
        fused = fuse_by_partitions(gm, islands, prefix="island_") if islands else gm
        for node in fused.graph.nodes:
            if node.op == "call_module" and node.target.startswith("island_"):
                island = stack.compile_island(getattr(fused, node.target), node.target, pieces.fusion)
                setattr(fused, node.target, island)
        fused.recompile()

        def run(*args):
            with toychip.use_fallback(pieces.fallback), allocator.use_policy(choose_block):
                return fused(*args)
        return make_boxed_func(run)

    port_model()
    return aot_autograd(fw_compiler=compile_graph, bw_compiler=compile_graph, decompositions=pieces.decompositions,
                        keep_inference_input_mutations=True)
