"""Chapter 02's catalogue: plausible wrong answers, each with the belief it embodies, and
correct answers written differently from the reference.

Tests paste this module into notebooks graded in the sandbox, where the solutions are
hidden; a wrong answer that is a reference with one mistake is a :mod:`mutants` mutant.
"""
import copy
import math
from collections import Counter, deque
from typing import Optional

import torch
import torch.nn as nn

from mutants import mutant
from solutions.ch02_torchscript import find_divergent_inputs

# --- 02.trace_divergence --------------------------------------------------------------

def find_divergent_exact(traced, eager, inputs):
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
    with torch.no_grad():
        return [i for i, args in enumerate(inputs)
                if not torch.allclose(traced(*args), eager(*args), atol=1e-5, rtol=1e-4)]


find_divergent_skipping_failures = mutant(find_divergent_inputs, "find_divergent_skipping_failures",
                                          ("divergent.append(index)\n                continue", "continue"))


find_divergent_default_tolerance = mutant(find_divergent_inputs, "find_divergent_default_tolerance",
                                          ("allclose(got, expected, atol=1e-5, rtol=1e-4)", "allclose(got, expected)"))


find_divergent_absolute_tolerance = mutant(
    find_divergent_inputs, "find_divergent_absolute_tolerance",
    ("not torch.allclose(got, expected, atol=1e-5, rtol=1e-4)", "(got - expected).abs().max() > 1e-5"))


def find_divergent_without_shape_check(traced, eager, inputs):
    divergent = []
    with torch.no_grad():
        for index, args in enumerate(inputs):
            try:
                if not torch.allclose(traced(*args), eager(*args), atol=1e-5, rtol=1e-4):
                    divergent.append(index)
            except Exception:
                divergent.append(index)
    return divergent


find_divergent_without_dtype_check = mutant(find_divergent_inputs, "find_divergent_without_dtype_check",
                                            (" or got.dtype != expected.dtype", ""))


find_divergent_cast_to_eager_dtype = mutant(find_divergent_inputs, "find_divergent_cast_to_eager_dtype",
                                            (" or got.dtype != expected.dtype", ""),
                                            ("allclose(got, expected", "allclose(got.to(expected.dtype), expected"))


find_divergent_relative_only = mutant(find_divergent_inputs, "find_divergent_relative_only",
                                      ("atol=1e-5, rtol=1e-4", "atol=0.0, rtol=1e-4"))


def find_divergent_with_assert_close(traced, eager, inputs):
    divergent = []
    with torch.no_grad():
        for index, args in enumerate(inputs):
            try:
                torch.testing.assert_close(traced(*args), eager(*args), atol=1e-5, rtol=1e-4)
            except Exception:
                divergent.append(index)
    return divergent


def _agrees(traced, eager, args) -> bool:
    expected = eager(*args)
    try:
        got = traced(*args)
    except Exception:
        return False
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return False
    return bool(((got - expected).abs() <= 1e-5 + 1e-4 * expected.abs()).all())


def find_divergent_with_explicit_bound(traced, eager, inputs):
    with torch.no_grad():
        return [index for index, args in reversed(list(enumerate(inputs))) if not _agrees(traced, eager, args)]


def _differs_in_double(traced, eager, args) -> bool:
    with torch.inference_mode():
        expected = eager(*args)
        try:
            got = traced(*args)
        except Exception:
            return True
    if tuple(got.size()) != tuple(expected.size()) or str(got.dtype) != str(expected.dtype):
        return True
    got, expected = got.double(), expected.double()
    close = ((got - expected).abs() <= 1e-5 + 1e-4 * expected.abs()) | (~torch.isfinite(expected) & (got == expected))
    return not bool(close.all())


def find_divergent_in_double(traced, eager, inputs):
    return sorted({index for index in range(len(inputs) - 1, -1, -1)
                   if _differs_in_double(traced, eager, tuple(inputs[index]))})


# --- 02.make_scriptable -----------------------------------------------------------------

class _ReusedGate(nn.Module):
    """The source gate's layers and its scale as a float; subclasses write forward."""

    def __init__(self, source):
        super().__init__()
        self.fc1, self.fc2, self.scale = source.fc1, source.fc2, float(source.scale)


def make_scriptable_by_tracing(model):
    return torch.jit.trace(model, torch.randn(3, model.fc1.in_features), check_trace=False)


class _GateWithoutTemperature(_ReusedGate):
    def forward(self, x):
        h = self.fc1(x) / self.scale
        gate = torch.tanh(h)
        if bool(h.mean() > 0):
            return self.fc2(h * gate)
        return self.fc2(h) - gate


def make_scriptable_without_temperature(model):
    return torch.jit.script(_GateWithoutTemperature(model))


class _GateTensorTemperature(_ReusedGate):
    def forward(self, x, temperature: Optional[torch.Tensor] = None):
        h = self.fc1(x) / self.scale
        if temperature is not None:
            h = h / temperature
        gate = torch.tanh(h)
        if bool(h.mean() > 0):
            return self.fc2(h * gate)
        return self.fc2(h) - gate


def make_scriptable_tensor_temperature(model):
    return torch.jit.script(_GateTensorTemperature(model))


class _GateUnitTemperature(_ReusedGate):
    def forward(self, x, temperature: float = 1.0):
        h = self.fc1(x) / self.scale / temperature
        gate = torch.tanh(h)
        if bool(h.mean() > 0):
            return self.fc2(h * gate)
        return self.fc2(h) - gate


def make_scriptable_unit_temperature(model):
    return torch.jit.script(_GateUnitTemperature(model))


class _GateFreshLayers(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc1, self.fc2, self.scale = nn.Linear(dim, dim), nn.Linear(dim, dim), float(dim) ** 0.5

    def forward(self, x, temperature: Optional[float] = None):
        h = self.fc1(x) / self.scale
        if temperature is not None:
            h = h / temperature
        gate = torch.tanh(h)
        if bool(h.mean() > 0):
            return self.fc2(h * gate)
        return self.fc2(h) - gate


def make_scriptable_fresh_layers(model):
    return torch.jit.script(_GateFreshLayers(model.fc1.in_features).eval())


class _GateOneBranch(_ReusedGate):
    def forward(self, x, temperature: Optional[float] = None):
        h = self.fc1(x) / self.scale
        if temperature is not None:
            h = h / temperature
        return self.fc2(h * torch.tanh(h))


def make_scriptable_one_branch(model):
    return torch.jit.script(_GateOneBranch(model))


class _GatePositiveTemperature(_ReusedGate):
    def forward(self, x, temperature: Optional[float] = None):
        h = self.fc1(x) / self.scale
        if temperature is not None and temperature > 0:
            h = h / temperature
        gate = torch.tanh(h)
        if bool(h.mean() > 0):
            return self.fc2(h * gate)
        return self.fc2(h) - gate


def make_scriptable_positive_temperature(model):
    return torch.jit.script(_GatePositiveTemperature(model))


class _GateBeforeTemperature(_ReusedGate):
    def forward(self, x, temperature: Optional[float] = None):
        h = self.fc1(x) / self.scale
        gate = torch.tanh(h)
        if temperature is not None:
            h = h / temperature
        if bool(h.mean() > 0):
            return self.fc2(h * gate)
        return self.fc2(h) - gate


def make_scriptable_gate_before_temperature(model):
    return torch.jit.script(_GateBeforeTemperature(model))


class _GateWithWhere(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.dim = dim

    def forward(self, x, temperature: Optional[float] = None):
        h = self.fc1(x) / math.sqrt(self.dim)
        if temperature is not None:
            h = h / temperature
        gate = torch.tanh(h)
        return torch.where(h.mean() > 0, self.fc2(h * gate), self.fc2(h) - gate)


def make_scriptable_with_where(model):
    gate = _GateWithWhere(model.fc1.in_features)
    gate.load_state_dict(model.state_dict())
    return torch.jit.script(gate.eval())


class _GateTensorCondition(nn.Module):
    def __init__(self, source):
        super().__init__()
        self.fc1, self.fc2 = copy.deepcopy(source.fc1), copy.deepcopy(source.fc2)
        self.scale = source.scale.item()

    def forward(self, x, temperature: Optional[float] = None):
        h = self.fc1(x) / self.scale
        if temperature is not None:
            h = h / temperature
        if h.mean().item() > 0:
            return self.fc2(h * torch.tanh(h))
        return self.fc2(h) - torch.tanh(h)


def make_scriptable_with_copies(model):
    return torch.jit.script(_GateTensorCondition(model))


class _GateBufferScale(nn.Module):
    def __init__(self, source):
        super().__init__()
        self.fc1, self.fc2 = source.fc1, source.fc2
        self.register_buffer("scale", torch.tensor(float(source.scale), dtype=torch.float64))

    def forward(self, x: torch.Tensor, temperature: Optional[float] = None) -> torch.Tensor:
        h = self.fc1(x) / self.scale
        t = temperature
        if t is not None:
            h = h / t
        gate = h.tanh()
        return torch.where(h.mean() > 0, self.fc2(h * gate), self.fc2(h) - gate)


def make_scriptable_with_buffer_scale(model):
    return torch.jit.script(_GateBufferScale(model))


# --- 02.ir_census -----------------------------------------------------------------------

def _walk_census(graph, *, levels: float = math.inf, count_block=lambda block: 1) -> dict:
    """Kinds, blocks and depth, entering blocks only ``levels`` deep."""
    ops, blocks, max_depth = Counter(), 0, 0
    pending = [(graph, 0)]
    while pending:
        container, depth = pending.pop()
        max_depth = max(max_depth, depth)
        for node in container.nodes():
            ops[node.kind()] += 1
            if depth < levels:
                for block in node.blocks():
                    blocks += count_block(block)
                    pending.append((block, depth + 1))
    return {"ops": dict(ops), "blocks": blocks, "max_depth": max_depth}


def _control_nodes(census: dict) -> int:
    return sum(census["ops"].get(kind, 0) for kind in ("prim::If", "prim::Loop"))


def ir_census_top_level(graph):
    ops = Counter(node.kind() for node in graph.nodes())
    blocks = sum(len(list(node.blocks())) for node in graph.nodes())
    return {"ops": dict(ops), "blocks": blocks, "max_depth": 1 if blocks else 0}


def ir_census_blocks_as_nodes(graph):
    census = _walk_census(graph)
    return {**census, "blocks": _control_nodes(census)}


def ir_census_one_level(graph):
    return _walk_census(graph, levels=1)


def ir_census_depth_from_one(graph):
    census = _walk_census(graph)
    return {**census, "max_depth": census["max_depth"] + 1}


def ir_census_without_constants(graph):
    census = _walk_census(graph)
    census["ops"].pop("prim::Constant", None)
    return census


def ir_census_top_level_kinds(graph):
    census = _walk_census(graph)
    return {**census, "ops": {kind: len(graph.findAllNodes(kind)) for kind in {n.kind() for n in graph.nodes()}}}


def ir_census_depth_is_control_count(graph):
    census = _walk_census(graph)
    return {**census, "max_depth": _control_nodes(census)}


def ir_census_inlined(graph):
    inlined = graph.copy()
    torch._C._jit_pass_inline(inlined)
    return _walk_census(inlined)


def ir_census_nonempty_blocks(graph):
    return _walk_census(graph, count_block=lambda block: int(any(True for _ in block.nodes())))


def ir_census_two_levels(graph):
    return _walk_census(graph, levels=2)


def _census_of(container, depth: int, ops: Counter) -> tuple[int, int]:
    """Blocks under ``container`` and their deepest level, counting ``ops`` on the way."""
    blocks, deepest = 0, depth
    for node in container.nodes():
        ops[node.kind()] += 1
        for block in node.blocks():
            inner_blocks, inner_deepest = _census_of(block, depth + 1, ops)
            blocks, deepest = blocks + 1 + inner_blocks, max(deepest, inner_deepest)
    return blocks, deepest


def ir_census_recursive(graph):
    ops = Counter()
    blocks, max_depth = _census_of(graph, 0, ops)
    return {"max_depth": max_depth, "blocks": blocks, "ops": ops}


def ir_census_breadth_first(graph):
    ops, blocks, max_depth = {}, 0, 0
    level, depth = [graph], 0
    while level:
        next_level = []
        for container in level:
            for node in container.nodes():
                ops[node.kind()] = ops.get(node.kind(), 0) + 1
                next_level.extend(node.blocks())
        if next_level:
            depth += 1
            max_depth, blocks = depth, blocks + len(next_level)
        level = next_level
    return {"ops": ops, "blocks": blocks, "max_depth": max_depth}


def _depth_of(node) -> int:
    """How many control-flow nodes own ``node``, following its owning blocks up."""
    depth, owner = 0, node.owningBlock().owningNode()
    while owner is not None:
        depth, owner = depth + 1, owner.owningBlock().owningNode()
    return depth


def ir_census_by_owning_blocks(graph):
    kinds, nodes, queue = set(), [], deque([graph.block()])
    while queue:
        for node in queue.popleft().nodes():
            kinds.add(node.kind())
            nodes.append(node)
            queue.extend(node.blocks())
    blocks = [node for node in nodes if any(True for _ in node.blocks())]
    return {"ops": {kind: len(graph.findAllNodes(kind, True)) for kind in sorted(kinds)},
            "blocks": sum(len(list(node.blocks())) for node in blocks),
            "max_depth": max((_depth_of(node) + 1 for node in blocks), default=0)}


# --- 02.cond_migration ------------------------------------------------------------------

class _ExampleRouteRouter(nn.Module):
    def __init__(self, source, route):
        super().__init__()
        self.proj, self.expert_a, self.expert_b = source.proj, source.expert_a, source.expert_b
        self.route = route

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        h = self.expert_a(h) + x if self.route[0] else self.expert_b(h) * 0.5
        return h / h.abs().max() if self.route[1] else h


def migrate_specialised(model, example):
    return torch.export.export(_ExampleRouteRouter(model, model.routes(*example)).eval(), example)


class _WhereRouter(nn.Module):
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
    return torch.export.export(_WhereRouter(model).eval(), example)


class _WhereForRescaleRouter(_WhereRouter):
    def forward(self, x):
        h = torch.tanh(self.proj(x))
        h = torch.cond(h.mean() > self.threshold,
                       lambda h, x: self.expert_a(h) + x, lambda h, x: self.expert_b(h) * 0.5, (h, x))
        peak = h.abs().max()
        return torch.where(peak > self.limit, h / peak, h)


def migrate_rescale_with_where(model, example):
    return torch.export.export(_WhereForRescaleRouter(model).eval(), example)


class _SwappedRouter(_WhereRouter):
    def forward(self, x):
        h = torch.tanh(self.proj(x))
        h = torch.cond(h.mean() > self.threshold,
                       lambda h, x: self.expert_b(h) * 0.5, lambda h, x: self.expert_a(h) + x, (h, x))
        peak = h.abs().max()
        return torch.cond(peak > self.limit, lambda h, p: h / p, lambda h, p: h.clone(), (h, peak))


def migrate_swapped_branches(model, example):
    return torch.export.export(_SwappedRouter(model).eval(), example)


class _DefaultThresholdsRouter(_WhereRouter):
    def forward(self, x):
        h = torch.tanh(self.proj(x))
        h = torch.cond(h.mean() > 0, lambda h, x: self.expert_a(h) + x, lambda h, x: self.expert_b(h) * 0.5, (h, x))
        peak = h.abs().max()
        return torch.cond(peak > 2.0, lambda h, p: h / p, lambda h, p: h.clone(), (h, peak))


def migrate_default_thresholds(model, example):
    return torch.export.export(_DefaultThresholdsRouter(model).eval(), example)


class _EarlyPeakRouter(_WhereRouter):
    def forward(self, x):
        h = torch.tanh(self.proj(x))
        choose_a, rescale = h.mean() > self.threshold, h.abs().max() > self.limit
        h = torch.cond(choose_a, lambda h, x: self.expert_a(h) + x, lambda h, x: self.expert_b(h) * 0.5, (h, x))
        return torch.cond(rescale, lambda h: h / h.abs().max(), lambda h: h.clone(), (h,))


def migrate_predicates_up_front(model, example):
    return torch.export.export(_EarlyPeakRouter(model).eval(), example)


class _ExamplePathRouter(_WhereRouter):
    def __init__(self, source, route):
        super().__init__(source)
        self.route = route

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        step = (lambda h, x: self.expert_a(h) + x) if self.route[0] else (lambda h, x: self.expert_b(h) * 0.5)
        h = torch.cond(h.mean() > self.threshold, step, step, (h, x))
        scale = (lambda h: h / h.abs().max()) if self.route[1] else (lambda h: h.clone())
        return torch.cond(h.abs().max() > self.limit, scale, scale, (h,))


def migrate_example_path_in_both_branches(model, example):
    return torch.export.export(_ExamplePathRouter(model, model.routes(*example)).eval(), example)


class _SignedPeakRouter(_WhereRouter):
    def forward(self, x):
        h = torch.tanh(self.proj(x))
        h = torch.cond(h.mean() > self.threshold, lambda h, x: self.expert_a(h) + x,
                       lambda h, x: self.expert_b(h) * 0.5, (h, x))
        return torch.cond(h.max() > self.limit, lambda h: h / h.max(), lambda h: h.clone(), (h,))


def migrate_peak_without_abs(model, example):
    return torch.export.export(_SignedPeakRouter(model).eval(), example)


class _ScaleToLimitRouter(_WhereRouter):
    def forward(self, x):
        h = torch.tanh(self.proj(x))
        h = torch.cond(h.mean() > self.threshold, lambda h, x: self.expert_a(h) + x,
                       lambda h, x: self.expert_b(h) * 0.5, (h, x))
        return torch.cond(h.abs().max() > self.limit, lambda h: h / h.abs().max() * self.limit,
                          lambda h: h.clone(), (h,))


def migrate_rescale_to_limit(model, example):
    return torch.export.export(_ScaleToLimitRouter(model).eval(), example)


class _ClosureRouter(nn.Module):
    def __init__(self, source):
        super().__init__()
        self.source = source

    def forward(self, x):
        source = self.source
        h = torch.tanh(source.proj(x))

        def choose_a():
            return source.expert_a(h) + x

        def choose_b():
            return source.expert_b(h) * 0.5

        h = torch.cond(h.mean() > source.threshold, choose_a, choose_b, ())
        return torch.cond(h.abs().max() <= source.limit, lambda t: t.clone(), lambda t: t / t.abs().max(), (h,))


def migrate_with_closures(model, example):
    return torch.export.export(_ClosureRouter(model).eval(), example, strict=True)


class _FunctionalRouter(nn.Module):
    def __init__(self, source):
        super().__init__()
        self.source = copy.deepcopy(source)

    def forward(self, x):
        s = self.source
        h = torch.tanh(s.proj(x))
        h = torch.cond(h.mean() - s.threshold > 0, _expert_a, _expert_b,
                       (h, x, s.expert_a.weight, s.expert_a.bias, s.expert_b.weight, s.expert_b.bias))
        peak = torch.amax(torch.abs(h))
        return torch.cond(peak > s.limit, torch.div, lambda h, p: h * 1.0, (h, peak))


def _expert_a(h, x, wa, ba, wb, bb):
    return torch.nn.functional.linear(h, wa, ba) + x


def _expert_b(h, x, wa, ba, wb, bb):
    return torch.nn.functional.linear(h, wb, bb) * 0.5


def migrate_with_functional_branches(model, example):
    return torch.export.export(_FunctionalRouter(model).eval(), example)


class _NestedRouter(_WhereRouter):
    def rescaled(self, h):
        return torch.cond(h.abs().max() > self.limit, lambda t: t / t.abs().max(), lambda t: t.clone(), (h,))

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        return torch.cond(h.mean() > self.threshold, lambda h, x: self.rescaled(self.expert_a(h) + x),
                          lambda h, x: self.rescaled(self.expert_b(h) * 0.5), (h, x))


def migrate_nested_conds(model, example):
    return torch.export.export(_NestedRouter(model).eval(), example)


WRONG_ANSWERS = [  # (exercise id, function, the misconception)
    ("02.trace_divergence", find_divergent_exact,
     "a correct trace reproduces eager bit for bit, so torch.equal is the test (freezing's last-bit changes count)"),
    ("02.trace_divergence", find_divergent_unguarded,
     "a traced program that raises means a bad input, so the exception may propagate"),
    ("02.trace_divergence", find_divergent_skipping_failures,
     "an input the traced program cannot run is skipped, not reported as divergent"),
    ("02.trace_divergence", find_divergent_default_tolerance,
     "torch.allclose's default tolerances are the right ones for a frozen program"),
    ("02.trace_divergence", find_divergent_absolute_tolerance,
     "a tolerance is an absolute bound |got - expected| <= 1e-5, whatever the values' size"),
    ("02.trace_divergence", find_divergent_without_shape_check,
     "allclose also checks shapes, so a baked rank (output (4,) vs (1, 4)) is caught without a shape check"),
    ("02.trace_divergence", find_divergent_without_dtype_check,
     "only the shape needs an explicit check; allclose takes care of a dtype that tracing baked in"),
    ("02.trace_divergence", find_divergent_cast_to_eager_dtype,
     "a dtype mismatch is only allclose's complaint, so casting the traced output to eager's dtype is fair"),
    ("02.trace_divergence", find_divergent_relative_only,
     "a relative tolerance alone (atol=0) suits values of every size, zero included"),
    ("02.make_scriptable", make_scriptable_by_tracing,
     "torch.jit.trace also returns a ScriptModule, so tracing makes the module scriptable"),
    ("02.make_scriptable", make_scriptable_without_temperature,
     "the optional temperature defaults to None, so dropping the argument keeps the module equivalent"),
    ("02.make_scriptable", make_scriptable_tensor_temperature,
     "TorchScript arguments are tensors, so the optional temperature is Optional[Tensor]"),
    ("02.make_scriptable", make_scriptable_unit_temperature,
     "a float default of 1.0 is the same as None, so Optional is not needed"),
    ("02.make_scriptable", make_scriptable_fresh_layers,
     "a new module of the same architecture computes the same function (weights not reused)"),
    ("02.make_scriptable", make_scriptable_one_branch,
     "TorchScript cannot branch on a tensor's value, so only the positive branch is kept"),
    ("02.make_scriptable", make_scriptable_positive_temperature,
     "a temperature is positive, so a negative one is ignored rather than divided by"),
    ("02.make_scriptable", make_scriptable_gate_before_temperature,
     "the gate belongs to fc1's output, so it is taken before the temperature scales h"),
    ("02.ir_census", ir_census_top_level,
     "graph.nodes() lists every node of the graph, blocks included"),
    ("02.ir_census", ir_census_blocks_as_nodes,
     "each control-flow node owns one block (an If's two branches counted as one)"),
    ("02.ir_census", ir_census_one_level,
     "blocks hold only plain nodes, so one level below the top is enough (no recursion)"),
    ("02.ir_census", ir_census_depth_from_one,
     "top-level nodes are at depth 1, so a graph without control flow has max_depth 1"),
    ("02.ir_census", ir_census_without_constants,
     "prim::Constant nodes are not operations and are left out of 'ops'"),
    ("02.ir_census", ir_census_top_level_kinds,
     "findAllNodes searches inside blocks, so counting the top level's kinds with it covers every kind"),
    ("02.ir_census", ir_census_depth_is_control_count,
     "max_depth is the number of control-flow nodes (each If or Loop adds a level)"),
    ("02.ir_census", ir_census_inlined,
     "the census is of the inlined graph (as inlined_graph prints it), submodule calls expanded"),
    ("02.ir_census", ir_census_nonempty_blocks,
     "an empty block (an if without else) is not a block"),
    ("02.ir_census", ir_census_two_levels,
     "real programs nest at most a loop around an if, so the walk may stop two levels deep"),
    ("02.cond_migration", migrate_specialised,
     "removing the ifs along the example's route is a migration (export succeeds, one route only)"),
    ("02.cond_migration", migrate_with_where,
     "torch.where is a data-dependent branch, so it replaces torch.cond"),
    ("02.cond_migration", migrate_rescale_with_where,
     "only the expert choice is a real branch; the rescale may stay a torch.where"),
    ("02.cond_migration", migrate_swapped_branches,
     "torch.cond takes the else-branch first, like torch.where(cond, ...) read backwards"),
    ("02.cond_migration", migrate_default_thresholds,
     "the thresholds are the defaults seen in the notebook (0 and 2.0), so they can be written as literals"),
    ("02.cond_migration", migrate_predicates_up_front,
     "both predicates can be computed up front from the first activation, before the expert runs"),
    ("02.cond_migration", migrate_example_path_in_both_branches,
     "torch.cond needs two branches, and the example's path may serve as both"),
    ("02.cond_migration", migrate_peak_without_abs,
     "the peak of h is h.max(); the abs() is only for the printout"),
    ("02.cond_migration", migrate_rescale_to_limit,
     "rescaling clips the peak to the limit (h / peak * limit), not to 1"),
]

RIGHT_ANSWERS = [  # (exercise id, function, how it differs from the reference)
    ("02.trace_divergence", find_divergent_with_assert_close,
     "torch.testing.assert_close (shape, dtype, tolerance) inside one try/except"),
    ("02.trace_divergence", find_divergent_with_explicit_bound,
     "the allclose bound written out, indices collected in descending order"),
    ("02.trace_divergence", find_divergent_in_double,
     "inference_mode, sizes and dtypes compared as tuples and strings, the bound checked in float64"),
    ("02.make_scriptable", make_scriptable_with_where,
     "a fresh module loaded with model.state_dict(), math.sqrt scale, torch.where instead of if"),
    ("02.make_scriptable", make_scriptable_with_copies,
     "deep copies of the layers, .item() for the scale and the condition"),
    ("02.make_scriptable", make_scriptable_with_buffer_scale,
     "the scale as a float64 buffer, both branches computed and picked with torch.where"),
    ("02.ir_census", ir_census_recursive,
     "a recursive walk returning a Counter, keys in another order"),
    ("02.ir_census", ir_census_breadth_first,
     "level by level, a plain dict, depth counted per level"),
    ("02.ir_census", ir_census_by_owning_blocks,
     "findAllNodes(kind, recurse=True) per kind, depth from each node's chain of owning blocks"),
    ("02.cond_migration", migrate_with_closures,
     "branch functions close over h and x (no operands), inverted second predicate, strict=True export"),
    ("02.cond_migration", migrate_with_functional_branches,
     "module-level branch functions taking the weights as operands, torch.div as a branch"),
    ("02.cond_migration", migrate_nested_conds,
     "the rescale cond nested in each branch of the routing cond (three conds, a method as a helper)"),
]
