"""Answers to chapter 03's exercises: plausible wrong ones, each with the belief it embodies
(the checks must reject each one), and right ones written differently from the reference
(every case must accept them).

Tests paste this module into notebooks graded in the sandbox, where the solutions are
hidden; a wrong answer that is a reference with one mistake is a :mod:`mutants` mutant.
"""
import itertools
import time
from collections import Counter

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

import toychip
from mutants import mutant
from solutions.ch03_fx import count_ops


def _name_of(target) -> str:
    """A call_function target by its __name__, a call_method target as it is."""
    return target if isinstance(target, str) else target.__name__


# --- 03.op_census -----------------------------------------------------------------

def count_ops_by_target(gm):
    counts = {}
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method", "call_module"):
            key = _name_of(node.target)
            counts[key] = counts.get(key, 0) + 1
    return counts


def count_ops_every_node(gm):
    counts = {}
    for node in gm.graph.nodes:
        if node.op == "call_module":
            key = type(gm.get_submodule(node.target)).__name__
        elif node.op in ("call_function", "call_method"):
            key = _name_of(node.target)
        else:
            key = node.op
        counts[key] = counts.get(key, 0) + 1
    return counts


count_ops_skipping_methods = mutant(count_ops, "count_ops_skipping_methods",
                                    ('        elif node.op == "call_method":\n            counts[node.target] += 1\n', ""))


def count_ops_with_parameter_reads(gm):
    counts = Counter()
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.op == "call_module":
            counts[type(gm.get_submodule(node.target)).__name__] += 1
        else:
            counts[_name_of(node.target)] += 1
    return dict(counts)


def count_ops_getattr_submodule(gm):
    counts = Counter()
    for node in gm.graph.nodes:
        if node.op == "call_module":
            counts[type(getattr(gm, node.target)).__name__] += 1
        elif node.op in ("call_function", "call_method"):
            counts[_name_of(node.target)] += 1
    return dict(counts)


def count_ops_declared_modules(gm):
    counts = Counter()
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method"):
            counts[_name_of(node.target)] += 1
    for name, module in gm.named_modules():
        if name and not list(module.children()):
            counts[type(module).__name__] += 1
    return dict(counts)


def count_ops_once_per_layer(gm):
    counts, called = Counter(), set()
    for node in gm.graph.nodes:
        if node.op == "call_module":
            if node.target not in called:
                called.add(node.target)
                counts[type(gm.get_submodule(node.target)).__name__] += 1
        elif node.op in ("call_function", "call_method"):
            counts[_name_of(node.target)] += 1
    return dict(counts)


def count_ops_counter_of_labels(gm):
    def label(node):
        if node.op == "call_module":
            return gm.get_submodule(node.target)._get_name()
        return getattr(node.target, "__name__", node.target)

    return Counter(label(n) for n in gm.graph.nodes if n.op.startswith("call_"))


def count_ops_module_table(gm):
    modules = dict(gm.named_modules())
    counts = {}
    for node in reversed(gm.graph.nodes):
        if node.op == "call_module":
            key = modules[node.target].__class__.__name__
        elif node.op in ("call_function", "call_method"):
            key = str(node.target) if node.op == "call_method" else node.target.__name__
        else:
            continue
        counts[key] = counts.get(key, 0) + 1
    return counts


def count_ops_sorted_groups(gm):
    labels = {
        "call_function": lambda node: node.target.__name__,
        "call_method": lambda node: str(node.target),
        "call_module": lambda node: type(gm.get_submodule(node.target)).__name__,
    }
    keys = sorted(labels[node.op](node) for node in gm.graph.nodes if node.op in labels)
    return {key: len(list(group)) for key, group in itertools.groupby(keys)}


# --- 03.node_profiler ----------------------------------------------------------------

def profile_nodes_wall_clock(gm, inputs):
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


class _ProfileByHooks(fx.Interpreter):
    """Times the calls of the opcodes in ``hooked`` (a profile around each call_* method)."""

    def __init__(self, module, hooked):
        super().__init__(module)
        self.hooked, self.times, self.current = hooked, {}, None

    def run_node(self, n):
        self.current = n.name
        return super().run_node(n)

    def _timed(self, opcode, call, target, args, kwargs):
        if opcode not in self.hooked:
            return call(target, args, kwargs)
        with toychip.profile() as p:
            result = call(target, args, kwargs)
        self.times[self.current] = p.time_us
        return result

    def call_function(self, target, args, kwargs):
        return self._timed("call_function", super().call_function, target, args, kwargs)

    def call_method(self, target, args, kwargs):
        return self._timed("call_method", super().call_method, target, args, kwargs)

    def call_module(self, target, args, kwargs):
        return self._timed("call_module", super().call_module, target, args, kwargs)


def profile_nodes_functions_and_modules(gm, inputs):
    profiler = _ProfileByHooks(gm, {"call_function", "call_module"})
    profiler.run(*inputs)
    return profiler.times


def profile_nodes_every_node(gm, inputs):
    class EveryNode(fx.Interpreter):
        def run_node(self, n):
            with toychip.profile() as p:
                result = super().run_node(n)
            times[n.name] = p.time_us
            return result

    times = {}
    EveryNode(gm).run(*inputs)
    return times


def _profile_call_nodes(gm, inputs, reading, key=lambda node: node.name):
    """Runs ``gm`` with each call node in its own profile; ``reading(profile)`` is its entry."""
    class EachCallNode(fx.Interpreter):
        def run_node(self, n):
            with toychip.profile() as p:
                result = super().run_node(n)
            if n.op.startswith("call_"):
                times[key(n)] = reading(p)
            return result

    times = {}
    EachCallNode(gm).run(*inputs)
    return times


def profile_nodes_kernels_only(gm, inputs):
    return _profile_call_nodes(
        gm, inputs, lambda p: sum(s.time_us for name, s in p.kernels.items() if not name.startswith("copy:")))


def profile_nodes_keyed_by_target(gm, inputs):
    return _profile_call_nodes(gm, inputs, lambda p: p.time_us, key=lambda node: str(node.target))


def profile_nodes_rounded(gm, inputs):
    return _profile_call_nodes(gm, inputs, lambda p: round(p.time_us, 2))


def profile_nodes_fixed_overheads(gm, inputs):
    spec = toychip.DEFAULT_SPEC
    return _profile_call_nodes(gm, inputs, lambda p: p.launches * spec.launch_us + p.copies * spec.copy_us)


def profile_nodes_elapsed(gm, inputs):
    return _profile_call_nodes(gm, inputs, lambda p: p.elapsed_us)


def profile_nodes_running_total(gm, inputs):
    class Differences(fx.Interpreter):
        def run_node(self, n):
            before = total.time_us
            result = super().run_node(n)
            if n.op in ("call_function", "call_method", "call_module"):
                times[n.name] = total.time_us - before
            return result

    times = {}
    with toychip.profile() as total:
        Differences(gm).run(*inputs)
    return times


def profile_nodes_per_opcode_hooks(gm, inputs):
    profiler = _ProfileByHooks(gm, {"call_function", "call_method", "call_module"})
    profiler.run(*inputs)
    return profiler.times


# --- 03.relu_to_gelu ----------------------------------------------------------------

def relu_to_gelu_seed(gm):
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target == torch.relu:
            node.target = F.gelu
    gm.recompile()
    return gm


def _is_relu(gm, node, *, functions=(torch.relu, torch.relu_, F.relu), methods=("relu", "relu_")):
    if node.op == "call_function":
        return node.target in functions
    if node.op == "call_method":
        return node.target in methods
    return node.op == "call_module" and isinstance(gm.get_submodule(node.target), nn.ReLU)


def _replace_relus(gm, is_relu, *, approximate="none", erase=True, recompile=True):
    """Insert a GELU after each node ``is_relu(gm, node)`` accepts and rewire its users."""
    for node in list(gm.graph.nodes):
        if is_relu(gm, node):
            with gm.graph.inserting_after(node):
                gelu = gm.graph.call_function(F.gelu, (node.args[0],), {"approximate": approximate})
            node.replace_all_uses_with(gelu)
            if erase:
                gm.graph.erase_node(node)
    gm.graph.lint()
    if recompile:
        gm.recompile()
    return gm


def relu_to_gelu_keeping_kwargs(gm):
    for node in gm.graph.nodes:
        if _is_relu(gm, node):
            node.op, node.target = "call_function", F.gelu
    gm.recompile()
    return gm


def relu_to_gelu_out_of_place_only(gm):
    return _replace_relus(gm, lambda gm, node: _is_relu(gm, node, functions=(torch.relu, F.relu), methods=("relu",)))


def relu_to_gelu_tanh_approximation(gm):
    return _replace_relus(gm, _is_relu, approximate="tanh")


def relu_to_gelu_by_name_substring(gm):
    def named_relu(gm, node):
        if node.op == "call_module":
            name = type(gm.get_submodule(node.target)).__name__
        elif node.op in ("call_function", "call_method"):
            name = _name_of(node.target)
        else:
            return False
        return "relu" in name.lower()
    return _replace_relus(gm, named_relu)


def relu_to_gelu_module_by_attribute_name(gm):
    def relu_by_name(gm, node):
        if node.op == "call_module":
            return "relu" in node.target.lower()
        return _is_relu(gm, node)
    return _replace_relus(gm, relu_by_name)


def relu_to_gelu_leaving_old_nodes(gm):
    return _replace_relus(gm, _is_relu, erase=False)


def relu_to_gelu_without_recompile(gm):
    return _replace_relus(gm, _is_relu, recompile=False)


class _GeluForFunctionsAndModules(fx.Transformer):
    """Replaces the ReLU functions and nn.ReLU modules by F.gelu in a new graph."""

    def call_function(self, target, args, kwargs):
        if target in (torch.relu, torch.relu_, F.relu):
            return F.gelu(args[0])
        return super().call_function(target, args, kwargs)

    def call_module(self, target, args, kwargs):
        if isinstance(self.fetch_attr(target), nn.ReLU):
            return F.gelu(args[0])
        return super().call_module(target, args, kwargs)


class _GeluForEverySpelling(_GeluForFunctionsAndModules):
    """The Tensor methods x.relu() and x.relu_() too."""

    def call_method(self, target, args, kwargs):
        if target in ("relu", "relu_"):
            return F.gelu(args[0])
        return super().call_method(target, args, kwargs)


def relu_to_gelu_transformer_without_methods(gm):
    return _GeluForFunctionsAndModules(gm).transform()


def relu_to_gelu_transformer(gm):
    return _GeluForEverySpelling(gm).transform()


def relu_to_gelu_rewriting_nodes(gm):
    for node in gm.graph.nodes:
        if _is_relu(gm, node):
            node.op, node.target, node.args, node.kwargs = "call_function", F.gelu, node.args[:1], {}
    gm.graph.lint()
    gm.recompile()
    return gm


def relu_to_gelu_swapping_relu_modules(gm):
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in (torch.relu, torch.relu_, F.relu):
            node.target, node.kwargs = F.gelu, {}
        elif node.op == "call_method" and node.target in ("relu", "relu_"):
            node.op, node.target, node.args, node.kwargs = "call_function", torch._C._nn.gelu, node.args[:1], {}
    for name, module in list(gm.named_modules()):
        if type(module) is nn.ReLU:
            gm.add_submodule(name, nn.GELU())
    gm.graph.lint()
    gm.recompile()
    return gm


def relu_to_gelu_gelu_modules(gm):
    for index, node in enumerate(list(gm.graph.nodes)):
        if _is_relu(gm, node):
            gm.add_submodule(f"gelu_{index}", nn.GELU())
            with gm.graph.inserting_before(node):
                gelu = gm.graph.call_module(f"gelu_{index}", (node.args[0],))
            node.replace_all_uses_with(gelu)
            gm.graph.erase_node(node)
    gm.recompile()
    return gm


# --- 03.remove_dropout ----------------------------------------------------------------

def remove_dropout_seed(gm):
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and isinstance(gm.get_submodule(node.target), nn.Dropout):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.recompile()
    return gm


def _remove_nodes(gm, is_dropout, *, recompile=True):
    for node in list(gm.graph.nodes):
        if is_dropout(gm, node):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.graph.lint()
    if recompile:
        gm.recompile()
    return gm


def _any_dropout(gm, node):
    if node.op == "call_module":
        return isinstance(gm.get_submodule(node.target), nn.modules.dropout._DropoutNd)
    return node.op == "call_function" and node.target is F.dropout


def remove_dropout_only_active(gm):
    def active_dropout(gm, node):
        if node.op == "call_module":
            return isinstance(gm.get_submodule(node.target), nn.modules.dropout._DropoutNd)
        return node.op == "call_function" and node.target is F.dropout and node.kwargs.get("training", True)
    return _remove_nodes(gm, active_dropout)


def remove_dropout_nn_dropout_subclasses(gm):
    def dropout(gm, node):
        if node.op == "call_module":
            return isinstance(gm.get_submodule(node.target), nn.Dropout)
        return node.op == "call_function" and node.target is F.dropout
    return _remove_nodes(gm, dropout)


def remove_dropout_by_eval(gm):
    return gm.eval()


def remove_dropout_by_node_name(gm):
    return _remove_nodes(gm, lambda gm, node: node.op.startswith("call_") and "dropout" in node.name)


def remove_dropout_modules_only(gm):
    return _remove_nodes(gm, lambda gm, node: node.op == "call_module" and _any_dropout(gm, node))


def remove_dropout_without_recompile(gm):
    return _remove_nodes(gm, _any_dropout, recompile=False)


def remove_dropout_transformer(gm):
    class NoDropout(fx.Transformer):
        def call_function(self, target, args, kwargs):
            return args[0] if target is F.dropout else super().call_function(target, args, kwargs)

        def call_module(self, target, args, kwargs):
            if isinstance(self.fetch_attr(target), nn.modules.dropout._DropoutNd):
                return args[0]
            return super().call_module(target, args, kwargs)

    return NoDropout(gm).transform()


DROPOUT_CLASSES = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)


def remove_dropout_listing_classes(gm):
    def dropout(gm, node):
        if node.op == "call_module":
            return type(gm.get_submodule(node.target)) in DROPOUT_CLASSES
        return node.op == "call_function" and node.target == torch.nn.functional.dropout
    for node in reversed(list(gm.graph.nodes)):
        if dropout(gm, node):
            node.replace_all_uses_with(node.all_input_nodes[0])
            gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    return gm


def remove_dropout_by_class_name(gm):
    for node in reversed(list(gm.graph.nodes)):
        if node.op == "call_module":
            hit = "Dropout" in type(gm.get_submodule(node.target)).__name__
        else:
            hit = node.op == "call_function" and node.target is torch.nn.functional.dropout
        if hit:
            node.replace_all_uses_with(node.args[0] if node.args else node.kwargs["input"])
            gm.graph.erase_node(node)
    gm.delete_all_unused_submodules()
    gm.recompile()
    return gm


# --- 03.fold_conv_bn ----------------------------------------------------------------

# Each wrong fold below makes exactly one of these mistakes.
IGNORE_CONV_USERS = "folds even when the conv's output has other users"
CHECK_BN_USERS = "checks the BN's users instead of the conv's"
CHECK_BOTH_USERS = "requires the BN's output to have one user too"
KEEP_MEAN = "forgets to subtract the running mean"
DIVIDE_BY_VARIANCE = "divides by the variance instead of the standard deviation"
EPS_AFTER_SQRT = "adds eps after the square root: sqrt(var) + eps"
DROP_CONV_BIAS = "leaves the conv's own bias out of the new bias"
DEFAULT_EPS = "uses eps = 1e-5 whatever the norm's eps"
ASSUME_AFFINE = "reads bn.weight and bn.bias as if every norm had them"
FEW_CONV_PARAMETERS = "builds the new conv from channels, kernel, stride and padding only"
NO_RECOMPILE = "never calls recompile()"


def _producer_to_fold(gm, node, mistake):
    """The conv node ``node`` (a BatchNorm2d call) would be folded into, or None."""
    if node.op != "call_module" or not isinstance(gm.get_submodule(node.target), nn.BatchNorm2d):
        return None
    producer = node.args[0]
    if producer.op != "call_module" or not isinstance(gm.get_submodule(producer.target), nn.Conv2d):
        return None
    if mistake == CHECK_BOTH_USERS and len(node.users) != 1:
        return None
    users = {IGNORE_CONV_USERS: 1, CHECK_BN_USERS: len(node.users)}.get(mistake, len(producer.users))
    return producer if users == 1 else None


def _spread(bn, mistake):
    """The denominator of s = gamma / spread."""
    eps = 1e-5 if mistake == DEFAULT_EPS else bn.eps
    if mistake == DIVIDE_BY_VARIANCE:
        return bn.running_var + eps
    if mistake == EPS_AFTER_SQRT:
        return torch.sqrt(bn.running_var) + eps
    return torch.sqrt(bn.running_var + eps)


def _folded_parameters(conv, bn, mistake):
    if mistake == ASSUME_AFFINE:
        gamma, beta = bn.weight, bn.bias
    else:
        gamma = bn.weight if bn.affine else torch.ones_like(bn.running_var)
        beta = bn.bias if bn.affine else torch.zeros_like(bn.running_mean)
    scale = gamma / _spread(bn, mistake)
    has_bias = conv.bias is not None and mistake != DROP_CONV_BIAS
    bias = conv.bias if has_bias else torch.zeros_like(bn.running_mean)
    mean = 0 if mistake == KEEP_MEAN else bn.running_mean
    return conv.weight * scale.reshape(-1, 1, 1, 1), (bias - mean) * scale + beta


def _fold_conv_bn_with(gm, mistake):
    for node in list(gm.graph.nodes):
        producer = _producer_to_fold(gm, node, mistake)
        if producer is None:
            continue
        conv, bn = gm.get_submodule(producer.target), gm.get_submodule(node.target)
        with torch.no_grad():
            weight, bias = _folded_parameters(conv, bn, mistake)
            if mistake == FEW_CONV_PARAMETERS:
                conv = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size,
                                 stride=conv.stride, padding=conv.padding)
                gm.add_submodule(producer.target, conv)
            conv.weight = nn.Parameter(weight)
            conv.bias = nn.Parameter(bias)
        node.replace_all_uses_with(producer)
        gm.graph.erase_node(node)
    gm.graph.lint()
    if mistake != NO_RECOMPILE:
        gm.recompile()
    return gm


def fold_conv_bn_ignoring_users(gm):
    return _fold_conv_bn_with(gm, IGNORE_CONV_USERS)


def fold_conv_bn_checking_bn_users(gm):
    return _fold_conv_bn_with(gm, CHECK_BN_USERS)


def fold_conv_bn_without_mean(gm):
    return _fold_conv_bn_with(gm, KEEP_MEAN)


def fold_conv_bn_also_checking_bn_users(gm):
    return _fold_conv_bn_with(gm, CHECK_BOTH_USERS)


def fold_conv_bn_eps_after_sqrt(gm):
    return _fold_conv_bn_with(gm, EPS_AFTER_SQRT)


def fold_conv_bn_without_conv_bias(gm):
    return _fold_conv_bn_with(gm, DROP_CONV_BIAS)


def fold_conv_bn_without_recompile(gm):
    return _fold_conv_bn_with(gm, NO_RECOMPILE)


def fold_conv_bn_dividing_by_variance(gm):
    return _fold_conv_bn_with(gm, DIVIDE_BY_VARIANCE)


def fold_conv_bn_default_eps(gm):
    return _fold_conv_bn_with(gm, DEFAULT_EPS)


def fold_conv_bn_assuming_affine(gm):
    return _fold_conv_bn_with(gm, ASSUME_AFFINE)


def fold_conv_bn_new_conv_few_parameters(gm):
    return _fold_conv_bn_with(gm, FEW_CONV_PARAMETERS)


def fold_conv_bn_scale_and_shift(gm):
    for index, node in enumerate(list(gm.graph.nodes)):
        if _producer_to_fold(gm, node, None) is None:
            continue
        bn = gm.get_submodule(node.target)
        with torch.no_grad():
            scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
            shift = bn.bias - bn.running_mean * scale
        gm.register_buffer(f"bn_scale_{index}", scale.reshape(1, -1, 1, 1))
        gm.register_buffer(f"bn_shift_{index}", shift.reshape(1, -1, 1, 1))
        with gm.graph.inserting_before(node):
            scaled = gm.graph.call_function(torch.mul, (node.args[0], gm.graph.get_attr(f"bn_scale_{index}")))
            shifted = gm.graph.call_function(torch.add, (scaled, gm.graph.get_attr(f"bn_shift_{index}")))
        node.replace_all_uses_with(shifted)
        gm.graph.erase_node(node)
    gm.recompile()
    return gm


def fold_conv_bn_in_place(gm):
    return _fold_conv_bn_with(gm, None)


def fold_conv_bn_with_torch_fusion(gm):
    for node in list(gm.graph.nodes):
        producer = _producer_to_fold(gm, node, None)
        if producer is not None:
            fused = nn.utils.fusion.fuse_conv_bn_eval(gm.get_submodule(producer.target), gm.get_submodule(node.target))
            gm.add_submodule(producer.target, fused)
            node.replace_all_uses_with(producer)
            gm.graph.erase_node(node)
    gm.recompile()
    return gm


def fold_conv_bn_in_double_precision(gm):
    modules = dict(gm.named_modules())
    pairs = [(node.args[0], node) for node in gm.graph.nodes
             if node.op == "call_module" and type(modules[node.target]) is nn.BatchNorm2d
             and isinstance(node.args[0], fx.Node) and node.args[0].op == "call_module"
             and isinstance(modules[node.args[0].target], nn.Conv2d) and list(node.args[0].users) == [node]]
    for conv_node, bn_node in pairs:
        conv, bn = modules[conv_node.target], modules[bn_node.target]
        with torch.no_grad():
            mean = bn.running_mean.double()
            scale = torch.rsqrt(bn.running_var.double() + bn.eps) * (bn.weight.double() if bn.affine else 1.0)
            shift = bn.bias.double() if bn.affine else torch.zeros_like(mean)
            old_bias = conv.bias.double() if conv.bias is not None else torch.zeros_like(mean)
            conv.weight.mul_(scale.to(conv.weight.dtype).view(-1, 1, 1, 1))
            conv.bias = nn.Parameter(((old_bias - mean) * scale + shift).to(conv.weight.dtype))
        bn_node.replace_all_uses_with(conv_node)
        gm.graph.erase_node(bn_node)
    gm.graph.lint()
    gm.recompile()
    return gm


def fold_conv_bn_with_fx_optimization_fuse(gm):
    from torch.fx.experimental.optimization import fuse

    return fuse(gm)


# --- 03.fusion_groups ----------------------------------------------------------------

# Each wrong grouping below makes exactly one of these mistakes.
IGNORE_USERS = "joins through values with several users"
CONSUMER_USERS = "counts the consumer's users instead of the producer's"
SKIP_OUTPUT_USER = "does not count the output node as a user"
FIRST_OPERAND = "looks only at the first argument"
SINGLETONS = "keeps groups of one node"
NO_MERGE = "joins a node to its first fusible producer's group without merging the others"
NAMED_BREAKERS = "treats every op but matmuls and reductions as pointwise"
ANY_PRODUCER = "joins any single-user producer, pointwise or not"

BREAKERS = {"mm", "bmm", "addmm", "matmul", "sum", "mean", "amax", "amin", "max", "min", "prod"}


def _is_pointwise(node, mistake=None):
    if node.op != "call_function":
        return False
    if mistake == NAMED_BREAKERS:
        return str(node.target).split(".")[1] not in BREAKERS
    return isinstance(node.target, torch._ops.OpOverload) and torch.Tag.pointwise in node.target.tags


def _fusible_producers(node, mistake):
    inputs = node.args[:1] if mistake == FIRST_OPERAND else node.all_input_nodes
    for producer in inputs:
        if not isinstance(producer, fx.Node) or not (mistake == ANY_PRODUCER or _is_pointwise(producer, mistake)):
            continue
        users = {
            IGNORE_USERS: 1,
            CONSUMER_USERS: len(node.users),
            SKIP_OUTPUT_USER: sum(user.op != "output" for user in producer.users),
        }.get(mistake, len(producer.users))
        if users == 1:
            yield producer


def _fusion_groups_with(gm, mistake):
    group_of = {}
    for node in gm.graph.nodes:
        if not _is_pointwise(node, mistake):
            continue
        group = [node.name]
        for producer in _fusible_producers(node, mistake):
            other = group_of.setdefault(producer.name, [producer.name])
            if other is not group:
                group.extend(other)
                for name in other:
                    group_of[name] = group
            if mistake == NO_MERGE:
                break
        for name in group:
            group_of[name] = group
    unique = {id(group): group for group in group_of.values()}
    smallest = 1 if mistake == SINGLETONS else 2
    return [group for group in unique.values() if len(group) >= smallest]


def find_fusion_groups_ignoring_users(gm):
    return _fusion_groups_with(gm, IGNORE_USERS)


def find_fusion_groups_checking_consumer_users(gm):
    return _fusion_groups_with(gm, CONSUMER_USERS)


def find_fusion_groups_not_counting_output(gm):
    return _fusion_groups_with(gm, SKIP_OUTPUT_USER)


def find_fusion_groups_first_operand_only(gm):
    return _fusion_groups_with(gm, FIRST_OPERAND)


def find_fusion_groups_with_singletons(gm):
    return _fusion_groups_with(gm, SINGLETONS)


def find_fusion_groups_without_merging(gm):
    return _fusion_groups_with(gm, NO_MERGE)


def find_fusion_groups_named_breakers(gm):
    return _fusion_groups_with(gm, NAMED_BREAKERS)


def find_fusion_groups_any_producer(gm):
    return _fusion_groups_with(gm, ANY_PRODUCER)


def find_fusion_groups_union_find(gm):
    parent = {}

    def root(name):
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    pointwise = [n for n in gm.graph.nodes if _is_pointwise(n)]
    for node in pointwise:
        parent[node.name] = node.name
    for node in pointwise:
        for producer in node.all_input_nodes:
            if _is_pointwise(producer) and len(producer.users) == 1:
                parent[root(producer.name)] = root(node.name)
    groups = {}
    for name in parent:
        groups.setdefault(root(name), []).append(name)
    return [group for group in groups.values() if len(group) > 1]


def find_fusion_groups_of_node_sets(gm):
    def fusible(producer, consumer):
        return _is_pointwise(producer) and _is_pointwise(consumer) and len(producer.users) == 1

    seen, groups = set(), []
    for start in gm.graph.nodes:
        if start in seen or not _is_pointwise(start):
            continue
        component, stack = set(), [start]
        while stack:
            node = stack.pop()
            if node in component:
                continue
            component.add(node)
            stack += [p for p in node.all_input_nodes if fusible(p, node)]
            stack += [u for u in node.users if fusible(node, u)]
        seen |= component
        if len(component) >= 2:
            groups.append(component)
    return tuple(groups)


def find_fusion_groups_from_each_producer(gm):
    def pointwise(node):
        return node.op == "call_function" and hasattr(node.target, "tags") and torch.Tag.pointwise in node.target.tags

    label = {node: node.name for node in gm.graph.nodes if pointwise(node)}
    members = {name: [name] for name in label.values()}
    for producer in label:
        if len(producer.users) != 1:
            continue
        (user,) = producer.users
        if user not in label or label[producer] == label[user]:
            continue
        kept, moved = sorted((label[producer], label[user]), key=lambda name: -len(members[name]))
        members[kept].extend(members.pop(moved))
        for node in label:
            if label[node] == moved:
                label[node] = kept
    return [tuple(group) for group in members.values() if len(group) >= 2]


WRONG_ANSWERS = [  # (exercise id, function, the misconception)
    ("03.op_census", count_ops_by_target, "a call_module node's target names the layer's type"),
    ("03.op_census", count_ops_every_node, "every node is an operation, placeholders and the output included"),
    ("03.op_census", count_ops_skipping_methods,
     "Tensor methods (x.relu()) are recorded as call_function nodes, so call_method needs no branch"),
    ("03.op_census", count_ops_with_parameter_reads,
     "only the graph's inputs and output are not operations: get_attr parameter reads count too"),
    ("03.op_census", count_ops_getattr_submodule, "getattr(gm, node.target) finds any submodule, nested ones too"),
    ("03.op_census", count_ops_declared_modules,
     "modules are counted from the model's declared submodules, not from the call_module nodes"),
    ("03.op_census", count_ops_once_per_layer, "the census counts layers, not calls: a layer called twice counts once"),

    ("03.node_profiler", profile_nodes_wall_clock,
     "the FX profiler tutorial verbatim: wall-clock seconds per node instead of the chip's clock"),
    ("03.node_profiler", profile_nodes_cumulative,
     "one profile around the whole run, read after each node, gives each node's time"),
    ("03.node_profiler", profile_nodes_functions_and_modules,
     "overriding call_function and call_module covers every node; Tensor methods (x.sigmoid()) are missed"),
    ("03.node_profiler", profile_nodes_every_node, "every node gets an entry, placeholders and the output too"),
    ("03.node_profiler", profile_nodes_kernels_only,
     "a node's time is its kernel launches; the CPU fallback's copies are not the node's"),
    ("03.node_profiler", profile_nodes_keyed_by_target, "a node is named by its target"),
    ("03.node_profiler", profile_nodes_rounded, "times are rounded to 2 decimals, as the demo cell prints them"),
    ("03.node_profiler", profile_nodes_fixed_overheads,
     "on small tensors a node's time is its launches and copies times their fixed costs (bytes and flops ignored)"),

    ("03.relu_to_gelu", relu_to_gelu_seed, "seed 000's rewrite: torch.relu is the only spelling of ReLU"),
    ("03.relu_to_gelu", relu_to_gelu_keeping_kwargs,
     "retargeting a node to F.gelu is enough: F.relu's inplace kwarg goes along"),
    ("03.relu_to_gelu", relu_to_gelu_out_of_place_only,
     "the in-place spellings (x.relu_(), torch.relu_) are other ops, not ReLU"),
    ("03.relu_to_gelu", relu_to_gelu_tanh_approximation, "GELU means the tanh approximation (as in BERT and GPT-2)"),
    ("03.relu_to_gelu", relu_to_gelu_by_name_substring,
     "anything named like relu is a ReLU: ReLU6, LeakyReLU, relu6 and leaky_relu too"),
    ("03.relu_to_gelu", relu_to_gelu_module_by_attribute_name,
     "an nn.ReLU submodule is recognised by its attribute name ('relu'), not by its type"),
    ("03.relu_to_gelu", relu_to_gelu_leaving_old_nodes,
     "after replace_all_uses_with the old ReLU node disappears by itself"),
    ("03.relu_to_gelu", relu_to_gelu_without_recompile,
     "editing gm.graph is enough: gm runs its graph (recompile() is optional)"),
    ("03.relu_to_gelu", relu_to_gelu_transformer_without_methods,
     "a Transformer needs call_function and call_module only: x.relu() is a call_function too"),

    ("03.remove_dropout", remove_dropout_seed, "seed 000's pass: nn.Dropout modules are the only dropout"),
    ("03.remove_dropout", remove_dropout_only_active,
     "an F.dropout traced with training=False is already a no-op and may stay in the graph"),
    ("03.remove_dropout", remove_dropout_nn_dropout_subclasses,
     "every dropout layer is an nn.Dropout (Dropout1d, AlphaDropout are not its subclasses)"),
    ("03.remove_dropout", remove_dropout_by_eval, "switching the module to eval mode removes dropout from the graph"),
    ("03.remove_dropout", remove_dropout_by_node_name, "a node's name says it is a dropout"),
    ("03.remove_dropout", remove_dropout_modules_only,
     "dropout is a layer: every dropout in a graph is a call_module node (F.dropout is forgotten)"),
    ("03.remove_dropout", remove_dropout_without_recompile,
     "editing gm.graph is enough: gm runs its graph (recompile() is optional)"),

    ("03.fold_conv_bn", fold_conv_bn_ignoring_users, "a BN can be folded even when the conv's output has other users"),
    ("03.fold_conv_bn", fold_conv_bn_without_mean, "the folded bias is b * s + beta: the running mean is forgotten"),
    ("03.fold_conv_bn", fold_conv_bn_checking_bn_users, "the single-user rule is about the BN's output, not the conv's"),
    ("03.fold_conv_bn", fold_conv_bn_also_checking_bn_users,
     "the single-user rule holds for the BN's output too: a BN whose output is reused stays"),
    ("03.fold_conv_bn", fold_conv_bn_dividing_by_variance, "s = gamma / (var + eps): the variance, not its square root"),
    ("03.fold_conv_bn", fold_conv_bn_eps_after_sqrt, "s = gamma / (sqrt(var) + eps): eps added after the square root"),
    ("03.fold_conv_bn", fold_conv_bn_without_conv_bias, "the folded bias is beta - mean * s: the conv's own bias is dropped"),
    ("03.fold_conv_bn", fold_conv_bn_without_recompile,
     "editing gm.graph and the conv's parameters is enough: recompile() is optional"),
    ("03.fold_conv_bn", fold_conv_bn_default_eps, "eps is always 1e-5"),
    ("03.fold_conv_bn", fold_conv_bn_assuming_affine, "every BatchNorm2d has weight and bias (affine)"),
    ("03.fold_conv_bn", fold_conv_bn_new_conv_few_parameters,
     "the new Conv2d needs only channels, kernel size, stride and padding (not dilation, groups, padding_mode)"),
    ("03.fold_conv_bn", fold_conv_bn_scale_and_shift,
     "folding means replacing the BN by a cheaper scale-and-shift after the conv"),

    ("03.fusion_groups", find_fusion_groups_ignoring_users,
     "connected pointwise nodes fuse even through values with several users"),
    ("03.fusion_groups", find_fusion_groups_checking_consumer_users,
     "the single-user rule is about the consumer's users, not the producer's"),
    ("03.fusion_groups", find_fusion_groups_not_counting_output,
     "only operations are users: a value the graph returns and one op consumes still has one user"),
    ("03.fusion_groups", find_fusion_groups_first_operand_only, "a node's producer is its first argument"),
    ("03.fusion_groups", find_fusion_groups_with_singletons, "a lone pointwise node is a group of its own"),
    ("03.fusion_groups", find_fusion_groups_without_merging,
     "a node joins its first fusible producer's group; two groups never merge"),
    ("03.fusion_groups", find_fusion_groups_named_breakers,
     "only matmuls and reductions cut a chain: views and dtype casts fuse too"),
    ("03.fusion_groups", find_fusion_groups_any_producer,
     "any producer with one user fuses with its consumer, pointwise or not"),
]

RIGHT_ANSWERS = [  # (exercise id, function, how it differs from the reference)
    ("03.op_census", count_ops_counter_of_labels, "returns the Counter itself; module class via _get_name()"),
    ("03.op_census", count_ops_module_table,
     "dict(gm.named_modules()) as a lookup table, nodes visited in reverse, plain dict"),
    ("03.op_census", count_ops_sorted_groups, "sorts the labels and counts runs with itertools.groupby"),
    ("03.node_profiler", profile_nodes_running_total,
     "one profile around the run; each node's time is the difference of the running total"),
    ("03.node_profiler", profile_nodes_per_opcode_hooks,
     "overrides call_function, call_method and call_module instead of run_node"),
    ("03.node_profiler", profile_nodes_elapsed, "reads each node's profile.elapsed_us instead of time_us"),
    ("03.relu_to_gelu", relu_to_gelu_transformer, "an fx.Transformer that returns a new GraphModule"),
    ("03.relu_to_gelu", relu_to_gelu_rewriting_nodes, "rewrites each ReLU node's op, target, args and kwargs in place"),
    ("03.relu_to_gelu", relu_to_gelu_gelu_modules, "replaces each ReLU by an nn.GELU() submodule"),
    ("03.relu_to_gelu", relu_to_gelu_swapping_relu_modules,
     "retargets functions and methods to gelu in place; swaps every nn.ReLU submodule for nn.GELU()"),
    ("03.remove_dropout", remove_dropout_transformer, "an fx.Transformer that returns a new GraphModule"),
    ("03.remove_dropout", remove_dropout_listing_classes,
     "lists the dropout classes, visits nodes in reverse, rewires to all_input_nodes[0]"),
    ("03.remove_dropout", remove_dropout_by_class_name,
     "module classes recognised by 'Dropout' in their name; no lint; unused submodules deleted"),
    ("03.fold_conv_bn", fold_conv_bn_in_place, "folds into the existing conv's parameters instead of a new module"),
    ("03.fold_conv_bn", fold_conv_bn_with_torch_fusion, "torch.nn.utils.fusion.fuse_conv_bn_eval"),
    ("03.fold_conv_bn", fold_conv_bn_with_fx_optimization_fuse,
     "torch.fx.experimental.optimization.fuse: retraces and returns a new GraphModule"),
    ("03.fold_conv_bn", fold_conv_bn_in_double_precision,
     "collects the pairs first, computes in float64 with rsqrt, rewrites the conv's parameters in place"),
    ("03.fusion_groups", find_fusion_groups_union_find, "union-find over node names"),
    ("03.fusion_groups", find_fusion_groups_of_node_sets,
     "depth-first search over fusible edges both ways; a tuple of sets of Node objects"),
    ("03.fusion_groups", find_fusion_groups_from_each_producer,
     "walks producers to their single user, merging label lists smaller into larger; tuples"),
]
