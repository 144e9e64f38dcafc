"""Plausible wrong answers to chapter 03's exercises, each with the belief it embodies; the checks must reject each one.

Self-contained (no import of the references): tests paste this module into notebooks
that are graded in the sandbox, where the solutions are hidden.
"""
import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

import toychip


def count_ops_by_target(gm):
    """Keys call_module nodes by the submodule's name ('linear1') instead of its class."""
    counts = {}
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method", "call_module"):
            key = node.target if isinstance(node.target, str) else node.target.__name__
            counts[key] = counts.get(key, 0) + 1
    return counts


def count_ops_every_node(gm):
    """Counts every node, placeholders and the output included."""
    counts = {}
    for node in gm.graph.nodes:
        if node.op == "call_module":
            key = type(gm.get_submodule(node.target)).__name__
        elif node.op in ("call_function", "call_method"):
            key = node.target if isinstance(node.target, str) else node.target.__name__
        else:
            key = node.op
        counts[key] = counts.get(key, 0) + 1
    return counts


def profile_nodes_wall_clock(gm, inputs):
    """The FX profiler tutorial verbatim: wall-clock seconds per node instead of the chip's clock."""
    import time

    class WallClockProfiler(fx.Interpreter):
        def run_node(self, n):
            start = time.perf_counter()
            result = super().run_node(n)
            if n.op.startswith("call_"):
                times[n.name] = time.perf_counter() - start
            return result

    times = {}
    WallClockProfiler(gm).run(*inputs)
    return times


def profile_nodes_cumulative(gm, inputs):
    """One profile around the whole run, read after each node: running totals, not per-node times."""
    class RunningTotal(fx.Interpreter):
        def run_node(self, n):
            result = super().run_node(n)
            if n.op.startswith("call_"):
                times[n.name] = total.time_us
            return result

    times = {}
    with toychip.profile() as total:
        RunningTotal(gm).run(*inputs)
    return times


def profile_nodes_functions_and_modules(gm, inputs):
    """Overrides call_function and call_module only: Tensor-method nodes (x.sigmoid()) are missed."""
    class Partial(fx.Interpreter):
        def call_function(self, target, args, kwargs):
            with toychip.profile() as p:
                result = super().call_function(target, args, kwargs)
            times[self.current_node] = p.time_us
            return result

        def call_module(self, target, args, kwargs):
            with toychip.profile() as p:
                result = super().call_module(target, args, kwargs)
            times[self.current_node] = p.time_us
            return result

        def run_node(self, n):
            self.current_node = n.name
            return super().run_node(n)

    times = {}
    Partial(gm).run(*inputs)
    return times


def relu_to_gelu_seed(gm):
    """Seed 000's rewrite: only ``torch.relu`` calls, not F.relu, x.relu() or nn.ReLU."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target == torch.relu:
            node.target = F.gelu
    gm.recompile()
    return gm


def remove_dropout_seed(gm):
    """Seed 000's pass: removes nn.Dropout modules but leaves F.dropout calls."""
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and isinstance(gm.get_submodule(node.target), nn.Dropout):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.recompile()
    return gm


def _fold_conv_bn_flawed(gm, *, require_single_user: bool, subtract_mean: bool):
    """Conv+BN folding with one of two classic mistakes switched on."""
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not isinstance(gm.get_submodule(node.target), nn.BatchNorm2d):
            continue
        producer = node.args[0]
        if (producer.op != "call_module" or not isinstance(gm.get_submodule(producer.target), nn.Conv2d)
                or (require_single_user and len(producer.users) != 1)):
            continue
        conv, bn = gm.get_submodule(producer.target), gm.get_submodule(node.target)
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
        shift = bn.running_mean if subtract_mean else 0
        with torch.no_grad():
            conv.weight.mul_(scale.reshape(-1, 1, 1, 1))
            conv.bias = nn.Parameter((bias - shift) * scale + bn.bias)
        node.replace_all_uses_with(producer)
        gm.graph.erase_node(node)
    gm.recompile()
    return gm


def fold_conv_bn_ignoring_users(gm):
    """Folds even when the conv's output is also used elsewhere."""
    return _fold_conv_bn_flawed(gm, require_single_user=False, subtract_mean=True)


def fold_conv_bn_without_mean(gm):
    """Forgets to subtract the running mean from the bias."""
    return _fold_conv_bn_flawed(gm, require_single_user=True, subtract_mean=False)


def find_fusion_groups_ignoring_users(gm: fx.GraphModule):
    """Joins connected pointwise nodes even through values with several users."""
    def is_pointwise(node):
        return (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
                and torch.Tag.pointwise in node.target.tags)

    groups = []
    for node in gm.graph.nodes:
        if not is_pointwise(node):
            continue
        joined = [g for g in groups if any(p.name in g for p in node.all_input_nodes if is_pointwise(p))]
        merged = {node.name}.union(*joined)
        groups = [g for g in groups if g not in joined] + [merged]
    return [sorted(g) for g in groups if len(g) >= 2]


WRONG_ANSWERS = [
    ("03.op_census", count_ops_by_target,
     "Keys call_module nodes by the submodule's name ('linear1') instead of its class."),
    ("03.op_census", count_ops_every_node,
     "Counts every node, placeholders and the output included."),
    ("03.node_profiler", profile_nodes_wall_clock,
     "The FX profiler tutorial verbatim: wall-clock seconds per node instead of the chip's clock."),
    ("03.node_profiler", profile_nodes_cumulative,
     "One profile around the whole run, read after each node: running totals, not per-node times."),
    ("03.node_profiler", profile_nodes_functions_and_modules,
     "Overrides call_function and call_module only: Tensor-method nodes (x.sigmoid()) are missed."),
    ("03.relu_to_gelu", relu_to_gelu_seed,
     "Seed 000's rewrite: only ``torch.relu`` calls, not F.relu, x.relu() or nn.ReLU."),
    ("03.remove_dropout", remove_dropout_seed,
     "Seed 000's pass: removes nn.Dropout modules but leaves F.dropout calls."),
    ("03.fold_conv_bn", fold_conv_bn_ignoring_users,
     "Folds even when the conv's output is also used elsewhere."),
    ("03.fold_conv_bn", fold_conv_bn_without_mean,
     "Forgets to subtract the running mean from the bias."),
    ("03.fusion_groups", find_fusion_groups_ignoring_users,
     "Joins connected pointwise nodes even through values with several users."),
]
