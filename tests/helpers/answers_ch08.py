"""Chapter 08's catalogue: plausible wrong answers, each with the belief it embodies (the
checks must reject each one), and right answers written differently from the references.

Self-contained (no import of the references): tests paste this module into notebooks
that are graded in the sandbox, where the solutions are hidden.
"""
import bisect
import heapq
import itertools
import json
import operator
import re
from collections import defaultdict

import numpy as np
import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner

import toychip
from mutants import mutant
from solutions.ch08_porting import chip_backend, run_pipeline
from toychip.compiler import ChipSupport


# --- 08.allocator_policy ------------------------------------------------------------------

def _fitting(free_blocks, size, fits=lambda block, size: block >= size):
    return [i for i, block in enumerate(free_blocks) if fits(block, size)]


def first_fit(free_blocks, size):
    for i, block in enumerate(free_blocks):
        if block >= size:
            return i
    return None


def exact_size_only(free_blocks, size):
    return free_blocks.index(size) if size in free_blocks else None


def worst_fit(free_blocks, size):
    return max(_fitting(free_blocks, size), key=lambda i: free_blocks[i], default=None)


def best_fit_strictly_larger(free_blocks, size):
    fits = _fitting(free_blocks, size, lambda block, size: block > size)
    return min(fits, key=lambda i: free_blocks[i], default=None)


def best_fit_separate_pools(free_blocks, size):
    large = size > 1 << 20
    fits = [i for i in _fitting(free_blocks, size) if (free_blocks[i] > 1 << 20) == large]
    return min(fits, key=lambda i: free_blocks[i], default=None)


def best_fit_no_big_split(free_blocks, size):
    fits = [i for i in _fitting(free_blocks, size) if free_blocks[i] <= 2 * size]
    return min(fits, key=lambda i: free_blocks[i], default=None)


def best_fit_power_of_two_classes(free_blocks, size):
    need = 1 << (size - 1).bit_length()
    return min(_fitting(free_blocks, need), key=lambda i: free_blocks[i], default=None)


def best_fit_latest_on_ties(free_blocks, size):
    return min(_fitting(free_blocks, size), key=lambda i: (free_blocks[i], -i), default=None)


def best_fit_index_among_fitting(free_blocks, size):
    fitting = [block for block in free_blocks if block >= size]
    return fitting.index(min(fitting)) if fitting else None


def best_fit_by_numpy_argmin(free_blocks, size):
    if not free_blocks:
        return None
    blocks = np.asarray(free_blocks, dtype=np.int64)
    waste = np.where(blocks >= size, blocks - size, np.iinfo(np.int64).max)
    best = int(np.argmin(waste))
    return best if blocks[best] >= size else None


def best_fit_by_bisect(free_blocks, size):
    by_size = sorted((block, i) for i, block in enumerate(free_blocks))
    at = bisect.bisect_left(by_size, (size, -1))
    return by_size[at][1] if at < len(by_size) else None


# --- 08.yaml_registration -----------------------------------------------------------------

def _yaml(names, backend="PrivateUse1", namespace="toychip"):
    lines = [f"backend: {backend}", f"cpp_namespace: {namespace}", "supported:"]
    return "\n".join(lines + [f"  - {name}" for name in names]) + "\n"


def yaml_with_default_suffix(ops):
    return _yaml(op.removeprefix("aten::") for op in ops)


def yaml_with_device_name(ops):
    return _yaml((op.removeprefix("aten::").removesuffix(".default") for op in ops), backend="toychip")


def yaml_with_aten_prefix(ops):
    return _yaml(op.removesuffix(".default") for op in ops)


def yaml_cpp_namespace_aten(ops):
    return _yaml((op.removeprefix("aten::").removesuffix(".default") for op in ops), namespace="aten")


def yaml_first_op_only(ops):
    for op in ops:
        return _yaml([op.removeprefix("aten::").removesuffix(".default")])


def yaml_op_names_only(ops):
    return _yaml(op.removeprefix("aten::").split(".")[0] for op in ops)


def yaml_one_entry_per_op(ops):
    return _yaml(dict.fromkeys(op.removeprefix("aten::").split(".")[0] for op in ops))


def yaml_rstrip_default(ops):
    return _yaml(op.removeprefix("aten::").rstrip(".default") for op in ops)


def yaml_lstrip_namespace(ops):
    return _yaml(op.lstrip("aten::").removesuffix(".default") for op in ops)


def yaml_whole_library(ops):
    return _yaml(["flip", "roll", "cumsum", "tril", "triu", "sign", "atan", "sinh", "log1p", "expm1"])


def yaml_with_functional_too(ops):
    names = []
    for op in ops:
        name = op.removeprefix("aten::").removesuffix(".default")
        for declared in (name.split(".")[0], name):
            if declared not in names:
                names.append(declared)
    return _yaml(names)


def yaml_from_op_schemas(ops):
    names = []
    for op in ops:
        name, _, overload = op.removeprefix("aten::").partition(".")
        schema = getattr(getattr(torch.ops.aten, name), overload)._schema
        names.append(f"{name}.{schema.overload_name}" if schema.overload_name else name)
    return json.dumps({"backend": "PrivateUse1", "cpp_namespace": "toychip", "supported": sorted(names)})


def yaml_by_regex(ops):
    names = [re.sub(r"\.default$", "", re.fullmatch(r"aten::(\S+)", op)[1]) for op in ops]
    lines = ["# toychip's vendor ops", "backend: 'PrivateUse1'", "cpp_namespace: \"toychip\"", "supported:"]
    return "\n".join(lines + [f"- '{name}'" for name in reversed(names)])


def yaml_flow_list_keys_reordered(ops):
    pattern = re.compile(r"^(?:\w+::)?(?P<name>\w+)(?:\.(?P<overload>\w+))?$")
    names = set()
    for op in ops:
        match = pattern.match(op.strip())
        overload = match["overload"]
        names.add(match["name"] if overload in (None, "default") else f"{match['name']}.{overload}")
    body = ", ".join(f'"{name}"' for name in sorted(names))
    return ("cpp_namespace: toychip   # C++ namespace of the wrappers\n"
            f"supported: [{body}]\n"
            "backend: PrivateUse1     # the dispatch key\n")


# --- 08.compile_partitioning --------------------------------------------------------------

def _supported_nodes(gm):
    support = ChipSupport()
    return [n for n in gm.graph.nodes if support.is_node_supported(None, n)]


def _leaves_and_returns(group):
    """Does a path leave ``group`` through a node outside it and come back in?"""
    stack, seen = [u for n in group for u in n.users if u not in group], set()
    while stack:
        node = stack.pop()
        if node in group:
            return True
        if node not in seen:
            seen.add(node)
            stack.extend(node.users)
    return False


def _merge_greedily(nodes, neighbours):
    """Each node joins the islands of its ``neighbours`` (all of them, else one) unless that
    makes a cycle; otherwise it starts an island of its own."""
    island_of, members = {}, {}
    for node in nodes:
        candidates = list(dict.fromkeys(island_of[n] for n in neighbours(node) if n in island_of))
        home = None
        for choice in ([candidates] if len(candidates) > 1 else []) + [[c] for c in candidates]:
            group = {node, *(m for c in choice for m in members[c])}
            if not _leaves_and_returns(group):
                home = choice[0]
                for other in choice[1:]:
                    for m in members.pop(other):
                        island_of[m] = home
                members[home] = list(group)
                break
        if home is None:
            home = node
            members[home] = [node]
        island_of[node] = home
    return [[n.name for n in group] for group in members.values()]


def one_island_per_node(gm):
    return [[n.name] for n in _supported_nodes(gm)]


def all_supported_in_one_island(gm):
    return [[n.name for n in _supported_nodes(gm)]]


def islands_end_at_cpu_nodes(gm):
    support, islands, current = ChipSupport(), [], []
    for node in gm.graph.nodes:
        if support.is_node_supported(None, node):
            current.append(node.name)
        elif node.op == "call_function" and current:
            islands.append(current)
            current = []
    return islands + [current] if current else islands


def connected_chip_nodes(gm):
    nodes = _supported_nodes(gm)
    island_of = {n: i for i, n in enumerate(nodes)}
    for node in nodes:
        for source in node.all_input_nodes:
            if source in island_of:
                old, new = island_of[node], island_of[source]
                island_of = {n: new if i == old else i for n, i in island_of.items()}
    islands = {}
    for node in nodes:
        islands.setdefault(island_of[node], []).append(node.name)
    return list(islands.values())


def merge_into_producers_in_order(gm):
    return _merge_greedily(_supported_nodes(gm), lambda node: node.all_input_nodes)


def merge_into_users_in_reverse(gm):
    return _merge_greedily(list(reversed(_supported_nodes(gm))), lambda node: node.users)


def _partitioner_islands(gm):
    partitioner = CapabilityBasedPartitioner(gm, ChipSupport(), allows_single_node_partition=True)
    return [list(partition.nodes) for partition in partitioner.propose_partitions()]


def islands_without_getitems(gm):
    return [[n.name for n in island if n.target is not operator.getitem] for island in _partitioner_islands(gm)]


def islands_without_unused_getitems(gm):
    return [[n.name for n in island if n.target is not operator.getitem or n.users] for island in _partitioner_islands(gm)]


def islands_of_nodes_not_names(gm):
    return _partitioner_islands(gm)


def join_first_chip_producer(gm):
    island_of, islands = {}, []
    for node in _supported_nodes(gm):
        home = next((island_of[n] for n in node.all_input_nodes if n in island_of), None)
        if home is None:
            home = len(islands)
            islands.append([])
        island_of[node] = home
        islands[home].append(node.name)
    return islands


def _islands_by_level(gm, level):
    """The chip nodes grouped by ``level`` (a dict over all nodes), lowest level first."""
    support, groups = ChipSupport(), defaultdict(list)
    for node in gm.graph.nodes:
        if support.is_node_supported(None, node):
            groups[level[node]].append(node.name)
    return [groups[k] for k in sorted(groups)]


def islands_as_early_as_possible(gm):
    support, level = ChipSupport(), {}
    for node in gm.graph.nodes:
        level[node] = max((level[a] + (support.is_node_supported(None, a) and not support.is_node_supported(None, node))
                           for a in node.all_input_nodes), default=0)
    return _islands_by_level(gm, level)


def islands_by_cpu_crossings_from_outputs(gm):
    """A path that leaves an island through a CPU node comes back only at a lower level, so
    the chip nodes of one level form an island; a getitem goes with its producer."""
    support, level = ChipSupport(), {}
    for node in reversed(gm.graph.nodes):
        level[node] = -max((-level[u] + (support.is_node_supported(None, u) and not support.is_node_supported(None, node))
                            for u in node.users if u.op != "output"), default=0)
    for node in gm.graph.nodes:
        if node.target is operator.getitem:
            level[node] = level[node.args[0]]
    return _islands_by_level(gm, level)


def partitioner_default_options(gm):
    partitions = CapabilityBasedPartitioner(gm, ChipSupport()).propose_partitions()
    return [{node.name for node in partition.nodes} for partition in partitions]


# --- 08.porting_plan ---------------------------------------------------------------------

def _fallbacks(profile):
    return [row for row in profile["ops"] if row["where"] == "cpu"]


def _saving(row, launch_us, mem_bytes_per_us):
    """A fallback's copies go; a launch per call and the kernel's memory traffic come."""
    return row["time_us"] - row["calls"] * launch_us - row["bytes"] / mem_bytes_per_us


def _top(rows, key, k):
    return [row["op"] for row in sorted(rows, key=key, reverse=True)[:k]]


def plan_most_calls(profile, k):
    return _top(_fallbacks(profile), lambda row: row["calls"], k)


def plan_top_of_the_table(profile, k):
    return _top(profile["ops"], lambda row: row["time_us"], k)


def plan_most_fallback_time(profile, k):
    return _top(_fallbacks(profile), lambda row: row["time_us"], k)


def plan_most_copies(profile, k):
    return _top(_fallbacks(profile), lambda row: row["copies"], k)


def plan_fills_the_budget(profile, k):
    spec = profile["spec"]
    return _top(_fallbacks(profile), lambda row: _saving(row, spec["launch_us"], spec["mem_bytes_per_us"]), k)


def plan_default_data_sheet(profile, k):
    rows = [row for row in _fallbacks(profile) if _saving(row, 5.0, 200e3) > 0]
    return _top(rows, lambda row: _saving(row, 5.0, 200e3), k)


def plan_best_saving_per_call(profile, k):
    spec = profile["spec"]
    per_call = {row["op"]: _saving(row, spec["launch_us"], spec["mem_bytes_per_us"]) / row["calls"]
                for row in _fallbacks(profile)}
    return [op for op in sorted(per_call, key=per_call.get, reverse=True) if per_call[op] > 0][:k]


def plan_kernel_traffic_free(profile, k):
    launch_us = profile["spec"]["launch_us"]
    rows = [row for row in _fallbacks(profile) if _saving(row, launch_us, float("inf")) > 0]
    return _top(rows, lambda row: _saving(row, launch_us, float("inf")), k)


def plan_with_heapq(profile, k):
    spec = profile["spec"]
    savings = {}
    for row in profile["ops"]:
        if row["where"] == "cpu":
            kernel_us = row["calls"] * spec["launch_us"] + row["bytes"] / spec["mem_bytes_per_us"]
            savings[row["op"].split(".")[0]] = row["time_us"] - kernel_us
    return [op for op in heapq.nlargest(k, savings, key=savings.get) if savings[op] > 0]


def plan_exhaustive_over_subsets(profile, k):
    spec = profile["spec"]
    savings = {row["op"]: _saving(row, spec["launch_us"], spec["mem_bytes_per_us"]) for row in _fallbacks(profile)}
    subsets = (plan for size in range(min(k, len(savings)) + 1) for plan in itertools.combinations(savings, size))
    return list(max(subsets, key=lambda plan: sum(savings[op] for op in plan)))


# --- 08.autoload_package ------------------------------------------------------------------

def _package(name, entry_points, module="def _autoload():\n    import toychip\n", project=None):
    project = project or f'name = "{name}"\nversion = "0.1"\n'
    return {"pyproject": f"[project]\n{project}\n{entry_points}", "module": module}


def autoload_wrong_group(name):
    return _package(name, f'[project.entry-points."torch_dynamo_backends"]\ntoychip = "{name}:_autoload"\n')


def autoload_unquoted_group(name):
    return _package(name, f'[project.entry-points.torch.backends]\ntoychip = "{name}:_autoload"\n')


def autoload_module_not_function(name):
    return _package(name, f'[project.entry-points."torch.backends"]\ntoychip = "{name}"\n', module="import toychip\n")


def autoload_dotted_target(name):
    return _package(name, f'[project.entry-points."torch.backends"]\ntoychip = "{name}._autoload"\n')


def autoload_chip_own_hook(name):
    return _package(name, '[project.entry-points."torch.backends"]\ntoychip = "toychip:_autoload"\n',
                    module="")


def autoload_returns_module_name(name):
    return _package(name, f'[project.entry-points."torch.backends"]\ntoychip = "{name}:_autoload"\n',
                    module='def _autoload():\n    return "toychip"\n')


def autoload_without_version(name):
    return _package(name, f'[project.entry-points."torch.backends"]\ntoychip = "{name}:_autoload"\n',
                    project=f'name = "{name}"\n')


def autoload_version_as_number(name):
    return _package(name, f'[project.entry-points."torch.backends"]\ntoychip = "{name}:_autoload"\n',
                    project=f'name = "{name}"\nversion = 0.1\n')


def autoload_dynamic_version(name):
    return _package(name, f'[project.entry-points."torch.backends"]\ntoychip = "{name}:_autoload"\n',
                    project=f'name = "{name}"\ndynamic = ["version"]\n')


def autoload_empty_hook_like_toychip(name):
    return _package(name, f'[project.entry-points."torch.backends"]\ntoychip = "{name}:_autoload"\n',
                    module='def _autoload():\n    """Nothing left to do, as toychip._autoload."""\n')


def autoload_import_without_hook(name):
    return _package(name, f'[project.entry-points."torch.backends"]\ntoychip = "{name}:_autoload"\n',
                    module="import toychip  # importing the plugin loads the chip\n")


def autoload_guarded_import(name):
    module = ("import sys\n\n\ndef _autoload():\n"
              "    if \"toychip\" not in sys.modules:  # torch calls every entry point at import\n"
              "        import toychip\n")
    return _package(name, f'[project.entry-points."torch.backends"]\ntoychip = "{name}:_autoload"\n', module=module)


def autoload_inline_table(name):
    pyproject = (f"[project]\nname = '{name}'\nversion = '1.0'\n"
                 f"entry-points.\"torch.backends\" = {{ {name} = '{name}:_autoload' }}\n")
    return {"pyproject": pyproject, "module": "__all__ = ['_autoload']\n\n\ndef _autoload():\n    __import__('toychip')\n"}


def autoload_dotted_keys(name):
    project = (f'name = "{name.replace("_", "-")}"\nversion = "2.13.0"\n'
               f'entry-points."torch.backends".my_chip = "{name}:_autoload"\n')
    module = "import importlib\n\n\ndef _autoload():\n    importlib.import_module('toychip')\n"
    return {"pyproject": f"[build-system]\nrequires = [\"setuptools\"]\n\n[project]\n{project}", "module": module}


def autoload_imports_at_module_level(name):
    return _package(name, f"[project.entry-points.'torch.backends']\nchip = '{name}:_autoload'\n",
                    module="import toychip  # loaded with the package\n\n\ndef _autoload():\n    pass\n")


# --- 08.welford_combine ------------------------------------------------------------------

def _total(weight):
    return np.sum(weight, axis=-1, keepdims=True)


def _weighted_mean(mean, weight):
    return np.sum(weight * mean, axis=-1, keepdims=True) / np.maximum(_total(weight), 1)


def combine_unweighted_means(mean, m2, weight):
    mu = np.mean(mean, axis=-1, keepdims=True)
    return mu, np.sum(m2 + weight * np.square(mean - mu), axis=-1, keepdims=True), _total(weight)


def combine_m2_without_spread(mean, m2, weight):
    return _weighted_mean(mean, weight), np.sum(m2, axis=-1, keepdims=True), _total(weight)


def combine_returns_variance(mean, m2, weight):
    mu, n = _weighted_mean(mean, weight), _total(weight)
    return mu, np.sum(m2 + weight * np.square(mean - mu), axis=-1, keepdims=True) / np.maximum(n, 1), n


def combine_spread_around_unweighted_mean(mean, m2, weight):
    spread = weight * np.square(mean - np.mean(mean, axis=-1, keepdims=True))
    return _weighted_mean(mean, weight), np.sum(m2 + spread, axis=-1, keepdims=True), _total(weight)


def combine_weight_counts_groups(mean, m2, weight):
    mu = _weighted_mean(mean, weight)
    groups = np.full(mu.shape, mean.shape[-1], dtype=mean.dtype)
    return mu, np.sum(m2 + weight * np.square(mean - mu), axis=-1, keepdims=True), groups


def combine_without_keepdims(mean, m2, weight):
    n = np.sum(weight, axis=-1)
    mu = np.sum(weight * mean, axis=-1) / np.maximum(n, 1)
    return mu, np.sum(m2 + weight * np.square(mean - mu[..., None]), axis=-1), n


def combine_by_pairwise_fold(mean, m2, weight):
    """Chan's update applied group by group, left to right (a running combination)."""
    mu, acc, n = mean[..., :1], m2[..., :1], weight[..., :1]
    for i in range(1, mean.shape[-1]):
        b_mean, b_m2, b_n = mean[..., i:i + 1], m2[..., i:i + 1], weight[..., i:i + 1]
        total = n + b_n
        delta = b_mean - mu
        share = np.divide(b_n, total, out=np.zeros_like(total), where=total > 0)
        mu = mu + delta * share
        acc = acc + b_m2 + np.square(delta) * n * share
        n = total
    return mu, acc, n


def combine_with_np_average(mean, m2, weight):
    """np.average for the mean (float64 sums), the spread as the m2 of each group's points."""
    mean64, weight64 = mean.astype(np.float64), weight.astype(np.float64)
    total = weight64.sum(axis=-1, keepdims=True)
    mu = np.average(mean64, axis=-1, weights=np.where(total > 0, weight64, 1), keepdims=True)
    m2_total = m2.sum(axis=-1, keepdims=True) + (weight64 * (mean64 - mu) ** 2).sum(axis=-1, keepdims=True)
    return mu, m2_total, total


# --- 08.port_model ------------------------------------------------------------------------

def _register(kernels):
    for name, fn in kernels.items():
        toychip.register_kernel(f"aten::{name}", fn)


def _hardswish(a):
    return a * np.clip(a + 3, 0, 6) / 6


def _hardswish_derivative(a):
    return np.where(a <= -3, 0, np.where(a < 3, a / 3 + 0.5, 1)).astype(a.dtype)


def _leaky_relu(a, negative_slope=0.01):
    return np.where(a > 0, a, a * negative_slope).astype(a.dtype)


def _hardtanh(a, min_val=-1.0, max_val=1.0):
    return np.clip(a, min_val, max_val)


def _hardtanh_inside(a, min_val, max_val):
    return ((a > min_val) & (a < max_val)).astype(a.dtype)


FORWARD = {"hardswish": _hardswish, "leaky_relu": _leaky_relu, "hardtanh": _hardtanh}
BACKWARD = {
    "hardswish_backward": lambda grad, a: grad * _hardswish_derivative(a),
    "leaky_relu_backward": lambda grad, a, negative_slope, self_is_result:
        np.where(a > 0, grad, grad * negative_slope).astype(grad.dtype),
    "hardtanh_backward": lambda grad, a, min_val, max_val: grad * _hardtanh_inside(a, min_val, max_val),
}


def port_forward_only():
    _register(FORWARD)


def port_fixed_slope():
    _register({**FORWARD, **BACKWARD,
               "leaky_relu": lambda a, negative_slope=0.01: _leaky_relu(a, 0.01),
               "leaky_relu_backward": lambda grad, a, negative_slope, self_is_result:
                   np.where(a > 0, grad, grad * 0.01).astype(grad.dtype)})


def port_demo_activations_only():
    _register({name: fn for name, fn in {**FORWARD, **BACKWARD}.items() if not name.startswith("hardtanh")})


def port_backward_returns_derivative():
    _register({**FORWARD,
               "hardswish_backward": lambda grad, a: _hardswish_derivative(a),
               "leaky_relu_backward": lambda grad, a, negative_slope, self_is_result:
                   np.where(a > 0, 1, negative_slope).astype(a.dtype),
               "hardtanh_backward": lambda grad, a, min_val, max_val: _hardtanh_inside(a, min_val, max_val)})


def port_hardswish_backward_without_product_rule():
    _register({**FORWARD, **BACKWARD,
               "hardswish_backward": lambda grad, a: grad * np.clip(a + 3, 0, 6) / 6})


def port_slope_of_demo_net():
    _register({**FORWARD, **BACKWARD,
               "leaky_relu": lambda a, negative_slope=0.01: _leaky_relu(a, 0.1),
               "leaky_relu_backward": lambda grad, a, negative_slope, self_is_result:
                   np.where(a > 0, grad, grad * 0.1).astype(grad.dtype)})


def port_leaky_backward_like_relu():
    _register({**FORWARD, **BACKWARD,
               "leaky_relu_backward": lambda grad, a, negative_slope, self_is_result:
                   np.where(a > 0, grad, 0).astype(grad.dtype)})


def port_hardtanh_as_relu6_only():
    _register({**FORWARD, **BACKWARD,
               "hardtanh": lambda a, min_val=-1.0, max_val=1.0: _hardtanh(a, 0.0, 6.0),
               "hardtanh_backward": lambda grad, a, min_val, max_val: grad * _hardtanh_inside(a, 0.0, 6.0)})


def port_relu6_own_op():
    _register({**{name: fn for name, fn in {**FORWARD, **BACKWARD}.items() if name != "hardtanh_backward"},
               "relu6": lambda a: np.clip(a, 0, 6)})


def port_hardtanh_gradient_on_closed_range():
    _register({**FORWARD, **BACKWARD, "hardtanh_backward": lambda grad, a, min_val, max_val:
               np.where((a >= min_val) & (a <= max_val), grad, 0).astype(grad.dtype)})


def port_hardswish_middle_piece_closed():
    _register({**FORWARD, **BACKWARD, "hardswish_backward": lambda grad, a:
               grad * np.where(a < -3, 0, np.where(a <= 3, a / 3 + 0.5, 1)).astype(a.dtype)})


def port_leaky_gradient_one_at_zero():
    _register({**FORWARD, **BACKWARD, "leaky_relu_backward": lambda grad, a, negative_slope, self_is_result:
               np.where(a >= 0, grad, grad * negative_slope).astype(grad.dtype)})


def port_backward_input_first():
    _register({**FORWARD, **{name: (lambda fn: lambda a, grad, *rest: fn(grad, a, *rest))(fn)
                             for name, fn in BACKWARD.items()}})


def port_with_masks_and_overloads():
    def hardswish(a):
        return a * np.minimum(np.maximum(a + 3, 0), 6) / 6

    def hardswish_backward(grad_output, x):
        slope = np.select([x <= -3, x >= 3], [0.0, 1.0], default=x / 3 + 0.5)
        return (grad_output * slope).astype(grad_output.dtype)

    def leaky_relu(x, negative_slope):
        return x * np.where(x > 0, 1, negative_slope).astype(x.dtype)

    def leaky_relu_backward(grad_output, x, negative_slope, self_is_result):
        return grad_output * np.where(x > 0, 1, negative_slope).astype(x.dtype)

    def hardtanh(x, min_val, max_val):
        return np.minimum(np.maximum(x, min_val), max_val)

    def hardtanh_backward(grad_output, x, min_val, max_val):
        return grad_output * ((x > min_val) & (x < max_val))

    aten = torch.ops.aten
    for op, fn in [(aten.hardswish.default, hardswish), (aten.hardswish_backward.default, hardswish_backward),
                   (aten.leaky_relu.default, leaky_relu), (aten.leaky_relu_backward.default, leaky_relu_backward),
                   (aten.hardtanh.default, hardtanh), (aten.hardtanh_backward.default, hardtanh_backward)]:
        toychip.register_kernel(op, fn)


def port_in_float64():
    def hardswish(a):
        a = a.astype(np.float64)
        return a * np.clip(a + 3, 0, 6) / 6

    def hardswish_backward(grad, a):
        return grad.astype(np.float64) * np.piecewise(a.astype(np.float64), [a <= -3, a >= 3],
                                                      [0.0, 1.0, lambda x: x / 3 + 0.5])

    def leaky_relu(a, negative_slope=0.01):
        return np.where(a > 0, a.astype(np.float64), a * float(negative_slope))

    def leaky_relu_backward(grad, a, negative_slope, self_is_result):
        return np.where(a > 0, 1.0, float(negative_slope)) * grad

    def hardtanh(a, min_val=-1.0, max_val=1.0):
        return np.clip(a.astype(np.float64), min_val, max_val)

    def hardtanh_backward(grad, a, min_val, max_val):
        return np.where((a > min_val) & (a < max_val), grad.astype(np.float64), 0.0)

    _register({"hardswish": hardswish, "hardswish_backward": hardswish_backward,
               "leaky_relu": leaky_relu, "leaky_relu_backward": leaky_relu_backward,
               "hardtanh": hardtanh, "hardtanh_backward": hardtanh_backward})


def port_with_mask_arithmetic():
    aten = torch.ops.aten

    def hardswish(a):
        return (a * np.minimum(np.maximum(a + 3.0, 0.0), 6.0) / 6.0).astype(a.dtype, copy=False)

    def hardswish_backward(grad_output, a):
        middle, upper = (a > -3.0) & (a < 3.0), a >= 3.0
        return (grad_output * (middle * (a / 3.0 + 0.5) + upper * 1.0)).astype(a.dtype, copy=False)

    def leaky_relu(a, negative_slope=0.01):
        positive = a > 0
        return (a * positive + a * negative_slope * ~positive).astype(a.dtype, copy=False)

    def leaky_relu_backward(grad_output, a, negative_slope, self_is_result):
        positive = a > 0
        return (grad_output * (positive + negative_slope * ~positive)).astype(a.dtype, copy=False)

    def hardtanh(a, min_val=-1.0, max_val=1.0):
        return np.minimum(np.maximum(a, min_val), max_val).astype(a.dtype, copy=False)

    def hardtanh_backward(grad_output, a, min_val, max_val):
        return (grad_output * ((a > min_val) & (a < max_val))).astype(a.dtype, copy=False)

    for op, fn in ((aten.hardswish.default, hardswish), (aten.hardswish_backward.default, hardswish_backward),
                   (aten.leaky_relu.default, leaky_relu), (aten.leaky_relu_backward.default, leaky_relu_backward),
                   (aten.hardtanh.default, hardtanh), (aten.hardtanh_backward.default, hardtanh_backward)):
        toychip.register_kernel(op, fn)


def port_with_default_suffixed_names():
    def hardswish(a):
        return np.select([a <= -3, a >= 3], [np.zeros_like(a), a], a * (a + 3) / 6)

    def hardswish_backward(g, a):
        return g * np.piecewise(a.astype(np.float64), [a <= -3, (a > -3) & (a < 3), a >= 3],
                                [0.0, lambda v: v / 3 + 0.5, 1.0])

    def leaky_relu(a, negative_slope=0.01):
        return np.maximum(a, 0) + negative_slope * np.minimum(a, 0)

    def leaky_relu_backward(g, a, negative_slope, self_is_result):
        return g * np.where(a > 0, 1.0, negative_slope)

    def hardtanh(a, min_val=-1, max_val=1):
        return np.select([a < min_val, a > max_val], [np.full_like(a, min_val), np.full_like(a, max_val)], a)

    def hardtanh_backward(g, a, min_val, max_val):
        return g * ((a > min_val) & (a < max_val)).astype(g.dtype)

    for op, fn in {"aten::hardswish.default": hardswish, "aten::hardswish_backward.default": hardswish_backward,
                   "aten::leaky_relu.default": leaky_relu, "aten::leaky_relu_backward.default": leaky_relu_backward,
                   "aten::hardtanh.default": hardtanh, "aten::hardtanh_backward.default": hardtanh_backward}.items():
        toychip.register_kernel(op, fn)


WRONG_ANSWERS = [
    ("08.allocator_policy", first_fit,
     "the first cached block big enough is as good as any (first-fit splits a big block a later request needs whole)"),
    ("08.allocator_policy", exact_size_only,
     "only a cached block of exactly the requested size class can be reused, as the default policy does"),
    ("08.allocator_policy", worst_fit,
     "taking the largest cached block leaves the most useful leftover (worst-fit)"),
    ("08.allocator_policy", best_fit_strictly_larger,
     "a chosen block must be strictly larger than the request, since the allocator splits it"),
    ("08.allocator_policy", best_fit_separate_pools,
     "small requests (<= 1 MiB) must never be served from a large block, as CUDA keeps separate pools"),
    ("08.allocator_policy", best_fit_no_big_split,
     "splitting a block more than twice the request's size only fragments memory, so ask the device instead"),
    ("08.allocator_policy", best_fit_power_of_two_classes,
     "size classes are powers of two, so a request needs a cached block of at least the next power of two"),
    ("08.allocator_policy", best_fit_index_among_fitting,
     "the index to return is the chosen block's position among the blocks that fit"),
    ("08.yaml_registration", yaml_with_default_suffix,
     "the YAML names keep ATen's '.default' suffix"),
    ("08.yaml_registration", yaml_with_device_name,
     "backend: names the device (toychip), not the dispatch key"),
    ("08.yaml_registration", yaml_with_aten_prefix,
     "the YAML names keep the aten:: namespace prefix"),
    ("08.yaml_registration", yaml_cpp_namespace_aten,
     "cpp_namespace: is the namespace of the ops implemented (aten), not the vendor's"),
    ("08.yaml_registration", yaml_first_op_only,
     "a YAML is built by returning from inside the loop over ops (only the first op is declared)"),
    ("08.yaml_registration", yaml_op_names_only,
     "the YAML lists op names; the overload name is dropped like '.default'"),
    ("08.yaml_registration", yaml_one_entry_per_op,
     "one YAML entry per op covers all its overloads, so overloads of one op are declared once"),
    ("08.yaml_registration", yaml_rstrip_default,
     "str.rstrip('.default') removes the suffix '.default' (it strips those characters: tril -> tri)"),
    ("08.yaml_registration", yaml_lstrip_namespace,
     "str.lstrip('aten::') removes the prefix 'aten::' (it strips those characters: atan -> '')"),
    ("08.yaml_registration", yaml_whole_library,
     "the YAML declares everything the vendor library offers, whatever ops are asked for"),
    ("08.yaml_registration", yaml_with_functional_too,
     "an overload (.out, .Scalar, .dim) needs its op's functional form declared beside it"),
    ("08.compile_partitioning", one_island_per_node,
     "every chip node can be an island of its own: fusion happens anyway"),
    ("08.compile_partitioning", all_supported_in_one_island,
     "every chip-supported node goes into one island, whatever the paths through CPU nodes"),
    ("08.compile_partitioning", islands_end_at_cpu_nodes,
     "an island ends wherever a CPU node appears in the node list, even one the island does not depend on"),
    ("08.compile_partitioning", connected_chip_nodes,
     "chip nodes joined by an edge belong to one island; a path through a CPU node does not matter"),
    ("08.compile_partitioning", merge_into_producers_in_order,
     "merging each node into its producers' island in topological order finds the largest islands"),
    ("08.compile_partitioning", join_first_chip_producer,
     "joining the island of a node's first chip producer can never make a cycle"),
    ("08.compile_partitioning", islands_as_early_as_possible,
     "any cycle-free grouping is as good: each chip node goes into the earliest island it can"),
    ("08.compile_partitioning", islands_without_getitems,
     "getitem is not a real op, so it can stay outside the island of the node it reads"),
    ("08.compile_partitioning", islands_without_unused_getitems,
     "a getitem nobody uses is dead code and may be left out of its producer's island"),
    ("08.compile_partitioning", islands_of_nodes_not_names,
     "an island is a list of the fx.Node objects themselves"),
    ("08.porting_plan", plan_most_calls,
     "the ops that fall back most often come first, as the coverage report counts them"),
    ("08.porting_plan", plan_top_of_the_table,
     "the most expensive rows of the profile come first, whether they run on the chip or not"),
    ("08.porting_plan", plan_most_fallback_time,
     "a kernel saves all the time its fallback costs: the launches it adds are free"),
    ("08.porting_plan", plan_most_copies,
     "every copy costs the same, so the op causing the most copies comes first, whatever their size"),
    ("08.porting_plan", plan_fills_the_budget,
     "every kernel the team writes makes the step faster, so all k kernels are spent"),
    ("08.porting_plan", plan_default_data_sheet,
     "launches and bandwidth are toychip's defaults (5 us, 200 GB/s) on every chip, whatever the profile's spec says"),
    ("08.porting_plan", plan_best_saving_per_call,
     "the op that saves the most per call comes first, however often it is called"),
    ("08.porting_plan", plan_kernel_traffic_free,
     "a kernel costs its launches only: its memory traffic is free next to the copies it removes"),
    ("08.autoload_package", autoload_wrong_group,
     "import torch loads the torch.compile backends' group (torch_dynamo_backends)"),
    ("08.autoload_package", autoload_unquoted_group,
     "a TOML table header can spell the dotted group unquoted: [project.entry-points.torch.backends]"),
    ("08.autoload_package", autoload_module_not_function,
     "an entry point may name just the module: importing it is what loads the chip"),
    ("08.autoload_package", autoload_dotted_target,
     "an entry point is a dotted import path (pkg._autoload), not module:function"),
    ("08.autoload_package", autoload_chip_own_hook,
     "the entry point can point straight at toychip:_autoload; the package's own module does nothing"),
    ("08.autoload_package", autoload_returns_module_name,
     "_autoload names the backend module and torch imports it"),
    ("08.autoload_package", autoload_without_version,
     "[project] needs only a name; the version is optional"),
    ("08.autoload_package", autoload_version_as_number,
     "a version like 0.1 can be a TOML number"),
    ("08.autoload_package", autoload_dynamic_version,
     "the version can be left to the build tool with dynamic = [\"version\"]"),
    ("08.autoload_package", autoload_empty_hook_like_toychip,
     "_autoload can be empty like toychip._autoload: being called is what loads the chip"),
    ("08.autoload_package", autoload_import_without_hook,
     "importing the package loads the chip, so it needs no _autoload function"),
    ("08.port_model", port_forward_only,
     "forward kernels are enough: autograd derives the backward on the chip"),
    ("08.port_model", port_fixed_slope,
     "LeakyReLU's slope is the default 0.01, whatever negative_slope the module passes"),
    ("08.port_model", port_demo_activations_only,
     "the ops the demo's strict run reported (hardswish, leaky_relu) are all the nets need; ReLU6/Hardtanh forgotten"),
    ("08.port_model", port_backward_returns_derivative,
     "a backward kernel returns the local derivative; autograd multiplies by grad_output"),
    ("08.port_model", port_hardswish_backward_without_product_rule,
     "the derivative of a*clip(a+3,0,6)/6 is clip(a+3,0,6)/6 (product rule forgotten)"),
    ("08.port_model", port_backward_input_first,
     "a backward kernel takes the input first, like its forward: (self, grad_output, ...)"),
    ("08.port_model", port_slope_of_demo_net,
     "LeakyReLU's slope is the notebook net's 0.1, so it can be written into the kernels"),
    ("08.port_model", port_leaky_backward_like_relu,
     "leaky_relu's backward is relu's: negative inputs get no gradient"),
    ("08.port_model", port_hardtanh_as_relu6_only,
     "hardtanh is ReLU6's op, so it clips to [0, 6] whatever min_val and max_val say"),
    ("08.port_model", port_relu6_own_op,
     "nn.ReLU6 dispatches to aten::relu6, so hardtanh's backward is not needed"),
    ("08.port_model", port_hardtanh_gradient_on_closed_range,
     "hardtanh passes the gradient on the closed range [lo, hi], its ends included"),
    ("08.port_model", port_hardswish_middle_piece_closed,
     "hardswish's middle piece a/3+1/2 holds on the closed range [-3, 3], its ends included"),
    ("08.port_model", port_leaky_gradient_one_at_zero,
     "leaky_relu's gradient at 0 is 1, as x >= 0 counts as the positive side"),
]

HIDDEN_ONLY = {
    plan_kernel_traffic_free: "a kernel's memory traffic matters only where the host link is nearly as fast as device "
                              "memory and an op's saving is within it of zero: a designed chip with a fast link",
}

RIGHT_ANSWERS = [
    ("08.allocator_policy", best_fit_latest_on_ties, "best-fit with ties going to the later block, via min(key=)"),
    ("08.allocator_policy", best_fit_by_bisect, "best-fit by bisecting the blocks sorted by size"),
    ("08.allocator_policy", best_fit_by_numpy_argmin, "best-fit as NumPy argmin of the waste, masked blocks too small"),
    ("08.yaml_registration", yaml_from_op_schemas,
     "names from the ops' schemas (torch.ops), sorted, written as JSON (a YAML subset)"),
    ("08.yaml_registration", yaml_by_regex,
     "regex, quoted scalars, a comment, unindented list in reverse order"),
    ("08.yaml_registration", yaml_flow_list_keys_reordered,
     "a flow-style sorted set of names, keys in another order, trailing comments"),
    ("08.compile_partitioning", merge_into_users_in_reverse,
     "hand-written: reverse topological merge into users' islands with a path check"),
    ("08.compile_partitioning", partitioner_default_options,
     "CapabilityBasedPartitioner with its default allows_single_node_partition=False, islands as sets"),
    ("08.compile_partitioning", islands_by_cpu_crossings_from_outputs,
     "no merging: chip nodes grouped by the number of CPU crossings on their paths to the outputs"),
    ("08.porting_plan", plan_with_heapq,
     "heapq.nlargest over a dict of savings, op names without their overloads"),
    ("08.porting_plan", plan_exhaustive_over_subsets,
     "every subset of at most k fallback ops tried (itertools.combinations), the largest estimated saving kept"),
    ("08.autoload_package", autoload_dotted_keys,
     "dotted keys inside [project], a hyphenated project name, importlib.import_module, another key"),
    ("08.autoload_package", autoload_imports_at_module_level,
     "imports toychip at module level (_autoload does nothing more), single-quoted TOML strings"),
    ("08.autoload_package", autoload_guarded_import,
     "_autoload imports toychip only if sys.modules does not have it yet"),
    ("08.autoload_package", autoload_inline_table,
     "the entry points as an inline table under a dotted key, __import__ in _autoload"),
    ("08.port_model", port_with_masks_and_overloads,
     "OpOverload objects instead of names, np.select / np.minimum / boolean masks"),
    ("08.port_model", port_in_float64,
     "computes and returns float64 (the chip's kernel wrapper casts results back by type promotion), np.piecewise"),
    ("08.port_model", port_with_mask_arithmetic, "boolean masks multiplied in, OpOverload objects, dtype kept with astype"),
    ("08.port_model", port_with_default_suffixed_names,
     "names with '.default', np.select / np.piecewise / np.maximum+np.minimum formulations"),
]


# --- 08.capstone --------------------------------------------------------------------------
# The reference stack with one mistake: chip_islands, port_model and choose_block are the
# references' (a learner's notebook has its own).

capstone_without_decompositions = mutant(chip_backend, "capstone_without_decompositions",
                                         (" decompositions=pieces.decompositions,", ""))
capstone_forward_graph_only = mutant(
    chip_backend, "capstone_forward_graph_only",
    ("        compiler.expand_foreach(gm)  # the optimiser's _foreach_* ops, one op per tensor\n", ""),
    ("        return make_boxed_func(run)", "        return run"),
    ("    return aot_autograd(fw_compiler=compile_graph, bw_compiler=compile_graph, decompositions=pieces.decompositions,\n"
     "                        keep_inference_input_mutations=True)", "    return compile_graph"))
capstone_islands_not_compiled = mutant(
    chip_backend, "capstone_islands_not_compiled",
    ("""        for node in fused.graph.nodes:
            if node.op == "call_module" and node.target.startswith("island_"):
                island = stack.compile_island(getattr(fused, node.target), node.target, pieces.fusion)
                setattr(fused, node.target, island)
""", ""))
capstone_without_kernels = mutant(chip_backend, "capstone_without_kernels", ("    port_model()\n", ""))
capstone_fallback_not_installed = mutant(
    chip_backend, "capstone_fallback_not_installed",
    ("with toychip.use_fallback(pieces.fallback), allocator.use_policy(choose_block):",
     "with allocator.use_policy(choose_block):"))
capstone_policy_not_installed = mutant(
    chip_backend, "capstone_policy_not_installed",
    ("with toychip.use_fallback(pieces.fallback), allocator.use_policy(choose_block):",
     "with toychip.use_fallback(pieces.fallback):"))
capstone_input_mutations_outside = mutant(chip_backend, "capstone_input_mutations_outside",
                                          (",\n                        keep_inference_input_mutations=True)", ")"))


def capstone_as_a_class(pieces):
    """The backend as an object; islands in graph order; runtime pieces through an ExitStack;
    chapter 08's pieces written differently (catalogued right answers)."""
    import contextlib

    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

    from toychip import allocator, compiler, stack

    class ChipBackend:
        def __init__(self):
            port_with_mask_arithmetic()
            self.aot = aot_autograd(fw_compiler=self.compile, bw_compiler=self.compile,
                                    decompositions=pieces.decompositions, keep_inference_input_mutations=True)

        def __call__(self, gm, example_inputs):
            return self.aot(gm, example_inputs)

        def compile(self, gm, example_inputs):
            compiler.expand_foreach(gm)
            names = [set(island) for island in merge_into_users_in_reverse(gm)]
            partitions = [{n: None for n in gm.graph.nodes if n.name in island} for island in names if island]
            if partitions:
                gm = fuse_by_partitions(gm, partitions, prefix="island_")
            for name, child in list(gm.named_children()):
                if name.startswith("island_"):
                    setattr(gm, name, stack.compile_island(child, name, pieces.fusion))
            gm.recompile()
            return make_boxed_func(self.runner(gm))

        @staticmethod
        def runner(module):
            def run(*args):
                with contextlib.ExitStack() as scope:
                    scope.enter_context(allocator.use_policy(best_fit_by_bisect))
                    scope.enter_context(toychip.use_fallback(pieces.fallback))
                    return module(*args)
            return run

    return ChipBackend()


WRONG_ANSWERS += [
    ("08.capstone", capstone_without_decompositions,
     "AOTAutograd's graphs are already ATen, so the decomposition table is optional (gelu stays an op the chip lacks)"),
    ("08.capstone", capstone_forward_graph_only,
     "Dynamo's graph can be partitioned as it is; autograd takes care of the backward (no AOTAutograd)"),
    ("08.capstone", capstone_islands_not_compiled,
     "partitioning is the compilation: an island submodule runs well as it is, op by op"),
    ("08.capstone", capstone_without_kernels,
     "a compiled graph needs no eager kernels: every op ends up in an island"),
    ("08.capstone", capstone_fallback_not_installed,
     "the dispatcher already has a boxed fallback, so the stack's own need not be installed"),
    ("08.capstone", capstone_policy_not_installed,
     "the caching allocator already reuses cached blocks on its own, so the stack need not install choose_block"),
    ("08.capstone", capstone_input_mutations_outside,
     "the optimiser's in-place updates can be left to AOTAutograd's epilogue, outside the compiled graph"),
]

RIGHT_ANSWERS += [
    ("08.capstone", capstone_as_a_class,
     "a backend object, islands in graph order, an ExitStack, chapter 08's pieces written differently"),
]

WRONG_ANSWERS += [
    ("08.welford_combine", combine_unweighted_means,
     "the partial means are averaged as they are: every group counts the same"),
    ("08.welford_combine", combine_m2_without_spread,
     "squared deviations add up across groups, so the m2s are summed (each group's around its own mean)"),
    ("08.welford_combine", combine_returns_variance,
     "m2 is the variance, so the combined one is divided by the count"),
    ("08.welford_combine", combine_spread_around_unweighted_mean,
     "the between-group term measures each mean's distance from the plain average of the means"),
    ("08.welford_combine", combine_weight_counts_groups,
     "the combined weight is how many groups were combined"),
    ("08.welford_combine", combine_without_keepdims,
     "a reduction returns one number per row, so the reduced axis is dropped"),
]

RIGHT_ANSWERS += [
    ("08.welford_combine", combine_by_pairwise_fold, "Chan's pairwise update folded over the groups"),
    ("08.welford_combine", combine_with_np_average, "np.average in float64, the spread summed separately"),
]


# --- 08.overlap_without_races ---------------------------------------------------------------
# The reference prefetches on a side stream; each mutant leaves out or changes one of its steps.

pipeline_without_wait_stream = mutant(run_pipeline, "pipeline_without_wait_stream",
                                      ("        compute.wait_stream(side)\n", ""))
pipeline_waits_the_wrong_way = mutant(run_pipeline, "pipeline_waits_the_wrong_way",
                                      ("compute.wait_stream(side)", "side.wait_stream(compute)"))
pipeline_without_record_stream = mutant(run_pipeline, "pipeline_without_record_stream",
                                        ("        current.record_stream(compute)\n", ""))
pipeline_copies_on_the_default_stream = mutant(
    run_pipeline, "pipeline_copies_on_the_default_stream",
    ("        with torch.toychip.stream(side):\n            return batch", "        return batch"))
pipeline_blocking_copies = mutant(run_pipeline, "pipeline_blocking_copies",
                                  ('to("toychip", non_blocking=True)', 'to("toychip", non_blocking=False)'))
pipeline_from_pageable_memory = mutant(run_pipeline, "pipeline_from_pageable_memory",
                                       ("batch.pin_memory().to(", "batch.to("))
pipeline_synchronizes_every_copy = mutant(
    run_pipeline, "pipeline_synchronizes_every_copy",
    ("            upcoming = fetch(batches[i + 1])\n",
     "            upcoming = fetch(batches[i + 1])\n            torch.toychip.synchronize()\n"))


def pipeline_one_buffer(model, batches):
    """One chip buffer, refilled on the side stream for every batch; the default stream waits for each copy."""
    compute, side = torch.toychip.current_stream(), torch.toychip.Stream()
    with torch.toychip.stream(side):
        buffer = torch.empty(batches[0].shape, device="toychip")
        buffer.copy_(batches[0].pin_memory(), non_blocking=True)
    outputs = []
    for i in range(len(batches)):
        compute.wait_stream(side)
        if i + 1 < len(batches):
            with torch.toychip.stream(side):
                buffer.copy_(batches[i + 1].pin_memory(), non_blocking=True)
        outputs.append(model(buffer))
    return outputs


def pipeline_waits_once(model, batches):
    """All copies issued on the side stream up front; the default stream waits for it once, after the first."""
    compute, side = torch.toychip.current_stream(), torch.toychip.Stream()
    with torch.toychip.stream(side):
        first = batches[0].pin_memory().to("toychip", non_blocking=True)
    compute.wait_stream(side)
    with torch.toychip.stream(side):
        rest = [b.pin_memory().to("toychip", non_blocking=True) for b in batches[1:]]
    return [model(x) for x in [first, *rest]]


def pipeline_all_on_the_side_stream(model, batches):
    """Copies and compute on one side stream, so that the default stream is free."""
    side = torch.toychip.Stream()
    with torch.toychip.stream(side):
        return [model(b.pin_memory().to("toychip", non_blocking=True)) for b in batches]


def pipeline_double_buffered(model, batches):
    """Two buffers allocated once on the default stream, refilled in turn on the side stream; events
    both ways: a copy waits until the default stream is done with its buffer, the compute for its copy."""
    compute, side = torch.toychip.current_stream(), torch.toychip.Stream()
    pinned = [b.pin_memory() for b in batches]
    buffers = [torch.empty(pinned[0].shape, device="toychip") for _ in range(2)]
    free = [compute.record_event(), compute.record_event()]
    filled = [None, None]

    def fill(i):
        slot = i % 2
        side.wait_event(free[slot])
        with torch.toychip.stream(side):
            buffers[slot].copy_(pinned[i], non_blocking=True)
        filled[slot] = side.record_event()

    fill(0)
    outputs = []
    for i in range(len(pinned)):
        if i + 1 < len(pinned):
            fill(i + 1)
        compute.wait_event(filled[i % 2])
        outputs.append(model(buffers[i % 2]))
        free[i % 2] = compute.record_event()
    return outputs


def pipeline_prefetch_with_events(model, batches):
    """A prefetch queue of one batch, written as a generator; an event per copy, waited on by the default stream."""
    compute, side = torch.toychip.current_stream(), torch.toychip.Stream()

    def copies():
        for batch in batches:
            with torch.toychip.stream(side):
                chip = batch.pin_memory().to("toychip", non_blocking=True)
            yield chip, side.record_event()

    stream = copies()
    outputs, pending = [], next(stream)
    for _ in batches:
        chip, ready = pending
        compute.wait_event(ready)
        chip.record_stream(compute)
        pending = next(stream, None)
        outputs.append(model(chip))
    return outputs


def pipeline_synchronizes_the_device_per_batch(model, batches):
    """The host waits for the whole chip (torch.accelerator.synchronize) before each batch, then queues
    the next copy and this batch's compute: the copy overlaps the compute, and a batch is freed only
    after the host waited for the work that used it."""
    side = torch.toychip.Stream()

    def fetch(batch):
        with torch.toychip.stream(side):
            return batch.pin_memory().to("toychip", non_blocking=True)

    outputs, upcoming = [], fetch(batches[0])
    for i in range(len(batches)):
        torch.accelerator.synchronize()
        current = upcoming
        if i + 1 < len(batches):
            upcoming = fetch(batches[i + 1])
        outputs.append(model(current))
    return outputs


def pipeline_synchronizes_each_copy_event(model, batches):
    """An event recorded after each copy; the host waits for it (Event.synchronize) before queuing the
    compute that reads the batch; record_stream for the batch's block."""
    compute, side = torch.toychip.current_stream(), torch.toychip.Stream()

    def fetch(batch):
        with torch.toychip.stream(side):
            chip = batch.pin_memory().to("toychip", non_blocking=True)
        return chip, side.record_event()

    outputs, (upcoming, ready) = [], fetch(batches[0])
    for i in range(len(batches)):
        ready.synchronize()
        current = upcoming
        current.record_stream(compute)
        if i + 1 < len(batches):
            upcoming, ready = fetch(batches[i + 1])
        outputs.append(model(current))
    return outputs


pipeline_event_synchronize_without_record_stream = mutant(
    pipeline_synchronizes_each_copy_event, "pipeline_event_synchronize_without_record_stream",
    ("        current.record_stream(compute)\n", ""))


WRONG_ANSWERS += [
    ("08.overlap_without_races", pipeline_event_synchronize_without_record_stream,
     "the host waited for each copy, so a freed batch's block is safe to hand to the next copy"),
    ("08.overlap_without_races", pipeline_without_wait_stream,
     "a tensor returned by a copy is ready: the next op on it waits for the copy by itself"),
    ("08.overlap_without_races", pipeline_waits_the_wrong_way,
     "side.wait_stream(compute) makes the side stream's copy finish before the default stream goes on"),
    ("08.overlap_without_races", pipeline_without_record_stream,
     "a freed tensor's block is safe to reuse: the allocator knows every stream that used it"),
    ("08.overlap_without_races", pipeline_copies_on_the_default_stream,
     "non_blocking=True from pinned memory is enough to overlap; no second stream is needed"),
    ("08.overlap_without_races", pipeline_blocking_copies,
     "a side stream is what overlaps; non_blocking only concerns the host, not the chip's timeline"),
    ("08.overlap_without_races", pipeline_from_pageable_memory,
     "non_blocking=True makes any host tensor's copy asynchronous; pinning only makes it faster"),
    ("08.overlap_without_races", pipeline_synchronizes_every_copy,
     "synchronize() after each copy keeps it correct, and the copies still overlap as they are on a side stream"),
    ("08.overlap_without_races", pipeline_one_buffer,
     "one buffer refilled per batch is enough once the default stream waits for each copy"),
    ("08.overlap_without_races", pipeline_waits_once,
     "once the default stream has waited for the side stream it stays behind it, later copies included"),
    ("08.overlap_without_races", pipeline_all_on_the_side_stream,
     "running the whole loop on a side stream overlaps it with the default stream, and the caller sees the results"),
]

RIGHT_ANSWERS += [
    ("08.overlap_without_races", pipeline_double_buffered,
     "two preallocated buffers and events both ways (no record_stream, no allocation per batch)"),
    ("08.overlap_without_races", pipeline_synchronizes_the_device_per_batch,
     "torch.accelerator.synchronize() before each batch: no wait_stream, no record_stream, still overlapped"),
    ("08.overlap_without_races", pipeline_synchronizes_each_copy_event,
     "the host waits for each copy's event (Event.synchronize) instead of the default stream"),
    ("08.overlap_without_races", pipeline_prefetch_with_events,
     "a generator prefetching one batch, an event per copy waited on with wait_event"),
]
