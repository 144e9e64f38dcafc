"""Plausible wrong answers to chapter 02's exercises, each with the belief it embodies; the checks must reject each one."""
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


class _ExampleRouteRouter(nn.Module):
    """Follows the route the example takes, written without ``if``: what tracing would record."""

    def __init__(self, source, route):
        super().__init__()
        self.proj, self.expert_a, self.expert_b = source.proj, source.expert_a, source.expert_b
        self.route = route

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        h = self.expert_a(h) + x if self.route[0] else self.expert_b(h) * 0.5
        return h / h.abs().max() if self.route[1] else h


def migrate_specialised(model, example):
    """Removes the ``if``s by keeping the branches the example takes: export succeeds, one route only."""
    return torch.export.export(_ExampleRouteRouter(model, model.routes(*example)).eval(), example)


class _WhereRouter(nn.Module):
    """Both branches computed, one picked per call by ``torch.where``: right values, no ``torch.cond``."""

    def __init__(self, source):
        super().__init__()
        self.proj, self.expert_a, self.expert_b = source.proj, source.expert_a, source.expert_b
        self.threshold, self.limit = source.threshold, source.limit

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        h = torch.where(h.mean() > self.threshold, self.expert_a(h) + x, self.expert_b(h) * 0.5)
        peak = h.abs().max()
        return torch.where(peak > self.limit, h / peak, h)


def migrate_with_where(model, example):
    """Replaces each ``if`` with ``torch.where`` instead of ``torch.cond``."""
    return torch.export.export(_WhereRouter(model).eval(), example)


class _SwappedRouter(_WhereRouter):
    def forward(self, x):
        h = torch.tanh(self.proj(x))
        h = torch.cond(h.mean() > self.threshold,
                       lambda h, x: self.expert_b(h) * 0.5, lambda h, x: self.expert_a(h) + x, (h, x))
        peak = h.abs().max()
        return torch.cond(peak > self.limit, lambda h, p: h / p, lambda h, p: h.clone(), (h, peak))


def migrate_swapped_branches(model, example):
    """Uses ``torch.cond`` but passes the else-branch as ``true_fn`` in the first one."""
    return torch.export.export(_SwappedRouter(model).eval(), example)


WRONG_ANSWERS = [
    ("02.trace_divergence", find_divergent_exact,
     "Compares with ``torch.equal``: a frozen program that only changed the last bits counts as divergent."),
    ("02.trace_divergence", find_divergent_unguarded,
     "Uses a tolerance but lets an exception from the traced program escape."),
    ("02.make_scriptable", make_scriptable_by_tracing,
     "Traces instead of scripting: NumPy's result becomes a constant, one branch is baked in,"),
    ("02.make_scriptable", make_scriptable_without_temperature,
     "Scripts fine, but drops the untyped ``temperature=None`` argument instead of typing it."),
    ("02.make_scriptable", make_scriptable_one_branch,
     "Keeps only the branch taken for positive activations."),
    ("02.ir_census", ir_census_top_level,
     "Counts only ``graph.nodes()``: the nodes inside If/Loop blocks are missed."),
    ("02.ir_census", ir_census_blocks_as_nodes,
     "Walks every level, but counts one block per control-flow node (an If has two)."),
    ("02.cond_migration", migrate_specialised,
     "Removes the ``if``s by keeping the branches the example takes: export succeeds, one route only."),
    ("02.cond_migration", migrate_with_where,
     "Replaces each ``if`` with ``torch.where`` instead of ``torch.cond``."),
    ("02.cond_migration", migrate_swapped_branches,
     "Uses ``torch.cond`` but passes the else-branch as ``true_fn`` in the first one."),
]
