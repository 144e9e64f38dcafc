"""Reference solutions of chapter 01 (torch.compile).

Each function body is injected into the instructor's copy of
``notebooks/01_compile.ipynb`` between ``### BEGIN SOLUTION`` / ``### END SOLUTION``, so a
body may use only what the notebook imports: ``torch``, ``re`` and ``collections.Counter``.
"""
import re
from collections import Counter

import torch


def record_graphs(fn, inputs: list) -> list[dict]:
    """Compile ``fn`` with a backend that counts the ops of every graph it is handed."""
    records = []

    def recording_backend(gm, example_inputs):
        counts = Counter()
        for node in gm.graph.nodes:
            if node.op == "call_function":
                counts[node.target.__name__] += 1
            elif node.op == "call_method":
                counts[node.target] += 1
        records.append(dict(counts))
        return gm.forward

    compiled = torch.compile(fn, backend=recording_backend)
    for x in inputs:
        compiled(x)
    return records


def count_compilations(batch_sizes: list[int], dynamic) -> int:
    """How many graphs Dynamo compiles for inputs of shape ``(batch, 5)``, in this order."""
    if dynamic is False:
        return min(len(set(batch_sizes)), torch._dynamo.config.recompile_limit)
    graphs = set()              # batch sizes that got a static graph, and "dynamic"
    changed = False
    for batch in batch_sizes:
        changed = changed or batch != batch_sizes[0]
        if batch in graphs or (batch >= 2 and "dynamic" in graphs):
            continue            # an existing graph's guards accept this input
        symbolic = batch >= 2 and (dynamic is True or changed)
        graphs.add("dynamic" if symbolic else batch)
    return len(graphs)


def running_stats_fixed(x: torch.Tensor) -> torch.Tensor:
    """``running_stats`` without graph breaks: no print, the branch as ``torch.where``."""
    history = []
    for _ in range(3):
        x = torch.tanh(x * 1.5 + 0.1)
        history.append(x.mean())
    total = torch.stack(history).sum()
    return torch.where(total > 0, x * total, x - total)


def adaptive_clip_fast(x: torch.Tensor) -> torch.Tensor:
    """``adaptive_clip`` as one graph: the limit stays a tensor and both branches are computed."""
    limit = x.abs().mean() * 3
    y = x / limit
    y = torch.where(limit > 1.0, y.clamp(-1, 1) * limit, y * 0.5 + 0.5)
    return torch.relu(y) + 0.01 * y


def kernel_launches(code: str) -> list[str]:
    """Kernels the generated ``call`` launches, in order: fused kernels and library calls."""
    body = re.split(r"def call\(.*\):", code, maxsplit=1)[1]
    return re.findall(r"^\s+(cpp_fused_\w+|extern_kernels\.\w+)\(", body, flags=re.MULTILINE)


def first_divergent_stage(fn, inputs: list[tuple], stages: list[tuple]):
    """Compile ``fn`` with each stage in order; the first whose output leaves eager's
    tolerance on any input is where the bug is (stages are cumulative), else ``None``."""
    expected = [fn(*args) for args in inputs]
    for name, backend in stages:
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=backend)
        for args, want in zip(inputs, expected):
            if not torch.allclose(compiled(*args), want, rtol=1e-4, atol=1e-5):
                return name
    return None
