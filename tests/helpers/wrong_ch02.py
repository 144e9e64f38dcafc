"""Plausible wrong answers to chapter 02's exercises; the checks must reject each one."""
from collections import Counter
from typing import Optional

import torch
import torch.nn as nn


def find_divergent_exact(traced, eager, inputs):
    """Compares with ``torch.equal``: a frozen program that only changed the last bits counts as divergent."""
    divergent = []
    with torch.no_grad():
        for index, args in enumerate(inputs):
            try:
                same = torch.equal(traced(*args), eager(*args))
            except RuntimeError:
                same = False
            if not same:
                divergent.append(index)
    return divergent


def find_divergent_unguarded(traced, eager, inputs):
    """Uses a tolerance but lets an exception from the traced program escape."""
    with torch.no_grad():
        return [i for i, args in enumerate(inputs)
                if not torch.allclose(traced(*args), eager(*args), atol=1e-5, rtol=1e-4)]


def make_scriptable_by_tracing(model):
    """Traces instead of scripting: NumPy's result becomes a constant, one branch is baked in,
    and the optional ``temperature`` argument disappears."""
    return torch.jit.trace(model, torch.randn(3, model.fc1.in_features), check_trace=False)


class _GateWithoutTemperature(nn.Module):
    def __init__(self, source):
        super().__init__()
        self.fc1, self.fc2, self.scale = source.fc1, source.fc2, float(source.scale)

    def forward(self, x):
        h = self.fc1(x) / self.scale
        gate = torch.tanh(h)
        if bool(h.mean() > 0):
            return self.fc2(h * gate)
        return self.fc2(h) - gate


def make_scriptable_without_temperature(model):
    """Scripts fine, but drops the untyped ``temperature=None`` argument instead of typing it."""
    return torch.jit.script(_GateWithoutTemperature(model))


class _GateOneBranch(nn.Module):
    def __init__(self, source):
        super().__init__()
        self.fc1, self.fc2, self.scale = source.fc1, source.fc2, float(source.scale)

    def forward(self, x, temperature: Optional[float] = None):
        h = self.fc1(x) / self.scale
        if temperature is not None:
            h = h / temperature
        return self.fc2(h * torch.tanh(h))


def make_scriptable_one_branch(model):
    """Keeps only the branch taken for positive activations."""
    return torch.jit.script(_GateOneBranch(model))


def ir_census_top_level(graph):
    """Counts only ``graph.nodes()``: the nodes inside If/Loop blocks are missed."""
    ops = Counter(node.kind() for node in graph.nodes())
    blocks = sum(len(list(node.blocks())) for node in graph.nodes())
    return {"ops": dict(ops), "blocks": blocks, "max_depth": 1 if blocks else 0}


def ir_census_blocks_as_nodes(graph):
    """Walks every level, but counts one block per control-flow node (an If has two)."""
    ops, control, max_depth = Counter(), 0, 0
    pending = [(graph, 0)]
    while pending:
        container, depth = pending.pop()
        max_depth = max(max_depth, depth)
        for node in container.nodes():
            ops[node.kind()] += 1
            control += node.kind() in ("prim::If", "prim::Loop")
            pending.extend((block, depth + 1) for block in node.blocks())
    return {"ops": dict(ops), "blocks": control, "max_depth": max_depth}


def migrate_static(model, example):
    """Exports without ``dynamic_shapes``: the example's batch size is baked in."""
    return torch.export.export(model.eval(), example)


def migrate_bounded(model, example):
    """A dynamic batch, but bounded by a guess (``max=16``) that real traffic exceeds."""
    batch = torch.export.Dim("batch", max=16)
    return torch.export.export(model.eval(), example, dynamic_shapes={"x": {0: batch}, "mask": {0: batch}})


def migrate_x_only(model, example):
    """Marks only ``x`` dynamic; ``mask`` keeps the example's batch size."""
    return torch.export.export(model.eval(), example,
                               dynamic_shapes={"x": {0: torch.export.Dim("batch")}, "mask": None})


WRONG_ANSWERS = [
    ("02.trace_divergence", find_divergent_exact),
    ("02.trace_divergence", find_divergent_unguarded),
    ("02.make_scriptable", make_scriptable_by_tracing),
    ("02.make_scriptable", make_scriptable_without_temperature),
    ("02.make_scriptable", make_scriptable_one_branch),
    ("02.ir_census", ir_census_top_level),
    ("02.ir_census", ir_census_blocks_as_nodes),
    ("02.export_migration", migrate_static),
    ("02.export_migration", migrate_bounded),
    ("02.export_migration", migrate_x_only),
]
