"""Reference solutions of chapter 03 (TorchFX).

Each function body is injected into the instructor's copy of
``notebooks/03_fx.ipynb`` between ``### BEGIN SOLUTION`` / ``### END SOLUTION``, so a
body may use only what the notebook imports: ``torch``, ``nn``, ``F``, ``fx``, ``toychip``
and ``collections.Counter``.
"""
from collections import Counter

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

import toychip


def count_ops(gm: fx.GraphModule) -> dict:
    """Census of the operations a graph calls, keyed by function/method name or module class."""
    counts = Counter()
    for node in gm.graph.nodes:
        if node.op == "call_function":
            counts[node.target.__name__] += 1
        elif node.op == "call_method":
            counts[node.target] += 1
        elif node.op == "call_module":
            counts[type(gm.get_submodule(node.target)).__name__] += 1
    return dict(counts)


def profile_nodes(gm: fx.GraphModule, inputs: tuple) -> dict:
    """Simulated microseconds of each call node of ``gm`` on the toy chip, like the FX
    profiler tutorial's Interpreter but on the deterministic clock instead of the wall clock."""
    class NodeProfiler(fx.Interpreter):
        def __init__(self, module):
            super().__init__(module)
            self.times = {}

        def run_node(self, n):
            with toychip.profile() as profile:
                result = super().run_node(n)
            if n.op.startswith("call_"):
                self.times[n.name] = profile.time_us
            return result

    profiler = NodeProfiler(gm)
    profiler.run(*inputs)
    return profiler.times


def relu_to_gelu(gm: fx.GraphModule) -> fx.GraphModule:
    """Rewrite every ReLU (function, method or module; in place or not) into exact ``F.gelu``.

    ``F.relu_`` is ``torch.relu_``. The in-place spellings write into their input, which
    here has no other user, so an out-of-place GELU computes the same graph.
    """
    relu_functions = {torch.relu, torch.relu_, F.relu}
    for node in list(gm.graph.nodes):
        is_relu = (
            (node.op == "call_function" and node.target in relu_functions)
            or (node.op == "call_method" and node.target in ("relu", "relu_"))
            or (node.op == "call_module" and isinstance(gm.get_submodule(node.target), nn.ReLU))
        )
        if is_relu:
            with gm.graph.inserting_after(node):
                gelu = gm.graph.call_function(F.gelu, (node.args[0],))
            node.replace_all_uses_with(gelu)
            gm.graph.erase_node(node)
    gm.graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()
    return gm


def remove_dropout(gm: fx.GraphModule) -> fx.GraphModule:
    """Drop every dropout (``nn.Dropout*`` modules and ``F.dropout`` calls) for inference."""
    for node in list(gm.graph.nodes):
        is_dropout = (
            (node.op == "call_function" and node.target is F.dropout)
            or (node.op == "call_module"
                and isinstance(gm.get_submodule(node.target), nn.modules.dropout._DropoutNd))
        )
        if is_dropout:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()
    return gm


def fold_conv_bn(gm: fx.GraphModule) -> fx.GraphModule:
    """Fold each eval-mode BatchNorm2d into the Conv2d that feeds only it.

    y = gamma * (conv(x) - mean) / sqrt(var + eps) + beta is again a convolution, with
    weight w * s and bias (b - mean) * s + beta, where s = gamma / sqrt(var + eps); a norm
    without affine parameters has gamma = 1, beta = 0. Every other parameter of the conv
    (stride, padding, dilation, groups, padding mode) stays as it is.
    """
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not isinstance(gm.get_submodule(node.target), nn.BatchNorm2d):
            continue
        producer = node.args[0]
        if (not isinstance(producer, fx.Node) or producer.op != "call_module"
                or not isinstance(gm.get_submodule(producer.target), nn.Conv2d)
                or len(producer.users) != 1):
            continue
        conv, bn = gm.get_submodule(producer.target), gm.get_submodule(node.target)
        with torch.no_grad():
            gamma = bn.weight if bn.affine else torch.ones_like(bn.running_var)
            beta = bn.bias if bn.affine else torch.zeros_like(bn.running_mean)
            scale = gamma / torch.sqrt(bn.running_var + bn.eps)
            bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
            fused = torch.nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size,
                                    conv.stride, conv.padding, conv.dilation, conv.groups,
                                    bias=True, padding_mode=conv.padding_mode,
                                    device=conv.weight.device, dtype=conv.weight.dtype)
            fused.weight.copy_(conv.weight * scale.reshape(-1, 1, 1, 1))
            fused.bias.copy_((bias - bn.running_mean) * scale + beta)
        gm.add_submodule(producer.target, fused)
        node.replace_all_uses_with(producer)
        gm.graph.erase_node(node)
    gm.graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()
    return gm


def find_fusion_groups(gm: fx.GraphModule) -> list:
    """Groups of pointwise ATen nodes joined through values that have a single user.

    A pointwise node joins its pointwise producer when that producer has exactly one
    user, so the intermediate never needs to be written to memory. Groups with fewer
    than two nodes are not returned.
    """
    def is_pointwise(node):
        return (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
                and torch.Tag.pointwise in node.target.tags)

    group_of = {}
    for node in gm.graph.nodes:
        if not is_pointwise(node):
            continue
        group = [node.name]
        for producer in node.all_input_nodes:
            if is_pointwise(producer) and len(producer.users) == 1:
                other = group_of[producer.name]
                if other is not group:
                    group.extend(other)
                    for name in other:
                        group_of[name] = group
        for name in group:
            group_of[name] = group
    position = {node.name: index for index, node in enumerate(gm.graph.nodes)}
    unique = {id(group): group for group in group_of.values()}
    return [sorted(group, key=position.get) for group in unique.values() if len(group) >= 2]
