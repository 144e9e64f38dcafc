"""Reference solutions of chapter 02 (TorchScript).

Each function body is injected into the instructor's copy of
``notebooks/02_torchscript.ipynb`` between ``### BEGIN SOLUTION`` / ``### END SOLUTION``,
so a body may use only what the notebook imports: ``torch``, ``nn``, ``Optional`` and
``collections.Counter``.
"""
from collections import Counter
from typing import Optional

import torch
import torch.nn as nn


def find_divergent_inputs(traced, eager, inputs) -> list:
    """Indices of the argument tuples on which ``traced`` raises or disagrees with ``eager``.

    Agreement means same shape and dtype and values within ``allclose(atol=1e-5,
    rtol=1e-4)``: a frozen or re-optimised program may change the last bits legitimately.
    """
    divergent = []
    with torch.no_grad():
        for index, args in enumerate(inputs):
            expected = eager(*args)
            try:
                got = traced(*args)
            except Exception:
                divergent.append(index)
                continue
            if (got.shape != expected.shape or got.dtype != expected.dtype
                    or not torch.allclose(got, expected, atol=1e-5, rtol=1e-4)):
                divergent.append(index)
    return divergent


def make_scriptable(model: nn.Module) -> torch.jit.ScriptModule:
    """A scripted equivalent of a ``NumpyGate``: same weights, both branches, optional temperature."""
    class ScriptableGate(nn.Module):
        def __init__(self, source: nn.Module):
            super().__init__()
            self.fc1, self.fc2 = source.fc1, source.fc2
            self.scale = float(source.scale)  # a NumPy float becomes a plain float attribute

        def forward(self, x, temperature: Optional[float] = None):
            h = self.fc1(x) / self.scale
            if temperature is not None:
                h = h / temperature
            gate = torch.tanh(h)  # torch instead of NumPy: stays in the graph
            if bool(h.mean() > 0):
                return self.fc2(h * gate)
            return self.fc2(h) - gate

    return torch.jit.script(ScriptableGate(model).eval())


def ir_census(graph) -> dict:
    """Node kinds at every nesting level, the number of blocks, and the deepest nesting."""
    ops, blocks, max_depth = Counter(), 0, 0
    pending = [(graph, 0)]  # a Graph and a Block both have .nodes()
    while pending:
        container, depth = pending.pop()
        max_depth = max(max_depth, depth)
        for node in container.nodes():
            ops[node.kind()] += 1
            for block in node.blocks():
                blocks += 1
                pending.append((block, depth + 1))
    return {"ops": dict(ops), "blocks": blocks, "max_depth": max_depth}


def migrate_to_cond(model: nn.Module, example: tuple) -> torch.export.ExportedProgram:
    """Export a ``RoutedExperts`` with each ``prim::If`` rewritten as ``torch.cond``, so both
    branches of both ``if``s are in the program instead of the example's route only."""
    class CondRouter(nn.Module):
        def __init__(self, source: nn.Module):
            super().__init__()
            self.proj, self.expert_a, self.expert_b = source.proj, source.expert_a, source.expert_b
            self.threshold, self.limit = source.threshold, source.limit

        def forward(self, x):
            h = torch.tanh(self.proj(x))
            h = torch.cond(h.mean() > self.threshold,
                           lambda h, x: self.expert_a(h) + x, lambda h, x: self.expert_b(h) * 0.5, (h, x))
            peak = h.abs().max()
            return torch.cond(peak > self.limit, lambda h, peak: h / peak, lambda h, peak: h.clone(), (h, peak))

    return torch.export.export(CondRouter(model).eval(), example)
