"""Plausible wrong answers to chapter 08's exercises, each with the belief it embodies; the checks must reject each one.

Self-contained (no import of the references): tests paste this module into notebooks
that are graded in the sandbox, where the solutions are hidden.
"""
import numpy as np

import toychip
from toychip.compiler import ChipSupport


def first_fit(free_blocks, size):
    """The first cached block that is big enough: splits a big block for a small request."""
    for i, block in enumerate(free_blocks):
        if block >= size:
            return i
    return None


def never_reuse(free_blocks, size):
    """Always asks the device for a new block: no caching at all."""
    return None


def yaml_with_default_suffix(ops):
    """Keeps ``.default`` in the names: ATen has no overload called "default"."""
    lines = ["backend: PrivateUse1", "cpp_namespace: toychip", "supported:"]
    lines += [f"  - {op.removeprefix('aten::')}" for op in ops]
    return "\n".join(lines) + "\n"


def yaml_with_device_name(ops):
    """Writes the chip's device name as the backend: the YAML wants the dispatch key."""
    lines = ["backend: toychip", "cpp_namespace: toychip", "supported:"]
    lines += [f"  - {op.removeprefix('aten::').removesuffix('.default')}" for op in ops]
    return "\n".join(lines) + "\n"


def yaml_with_namespace(ops):
    """Keeps the aten:: prefix: the YAML's names are inside the aten namespace already."""
    lines = ["backend: PrivateUse1", "cpp_namespace: toychip", "supported:"]
    lines += [f"  - {op.removesuffix('.default')}" for op in ops]
    return "\n".join(lines) + "\n"


def yaml_first_op_only(ops):
    """Declares only the first op (a loop that returns too early)."""
    return f"backend: PrivateUse1\ncpp_namespace: toychip\nsupported:\n  - {ops[0][6:].removesuffix('.default')}\n"


def one_island_per_node(gm):
    """Every supported node is an island of its own: correct, but nothing is fused."""
    support = ChipSupport()
    return [[n.name] for n in gm.graph.nodes if support.is_node_supported(None, n)]


def all_supported_in_one_island(gm):
    """Every supported node in one island, ignoring the paths through CPU nodes (a cycle)."""
    support = ChipSupport()
    return [[n.name for n in gm.graph.nodes if support.is_node_supported(None, n)]]


def _report(profile, key, share_of):
    rows = {}
    for name, stat in profile.kernels.items():
        op = key(name)
        row = rows.setdefault(op, {"op": op, "calls": 0, "time_us": 0.0, "share": 0.0})
        row["calls"] += stat.calls
        row["time_us"] += stat.time_us
    total = share_of(profile)
    for row in rows.values():
        row["share"] = round(row["time_us"] / total, 4)
        row["time_us"] = round(row["time_us"], 3)
    return sorted(rows.values(), key=lambda r: (-r["time_us"], r["op"]))


def report_keeps_overloads(profile):
    """Does not merge overloads: add.Tensor and add.Scalar stay two rows."""
    return _report(profile, lambda name: name, lambda p: p.time_us)


def report_share_of_kernels_only(profile):
    """Divides by the kernels' time only, leaving the host<->device copies out of the total."""
    return _report(profile, lambda name: name.split(".")[0],
                   lambda p: sum(s.time_us for n, s in p.kernels.items() if not n.startswith("copy:")))


def autoload_wrong_group(name):
    """Declares the entry point in the torch.compile backends' group: import torch ignores it."""
    return {"pyproject": f'[project]\nname = "{name}"\nversion = "0.1"\n\n'
                         f'[project.entry-points."torch_dynamo_backends"]\ntoychip = "{name}:_autoload"\n',
            "module": "def _autoload():\n    import toychip\n"}


def autoload_module_not_function(name):
    """Points the entry point at the module: torch calls what the entry point loads."""
    return {"pyproject": f'[project]\nname = "{name}"\nversion = "0.1"\n\n'
                         f'[project.entry-points."torch.backends"]\ntoychip = "{name}"\n',
            "module": "import toychip\n"}


def _register(pairs):
    for name, fn in pairs:
        toychip.register_kernel(f"aten::{name}", fn)


def _hardswish(a):
    return a * np.clip(a + 3, 0, 6) / 6


def _hardswish_backward(grad, a):
    return grad * np.where(a < -3, 0, np.where(a <= 3, a / 3 + 0.5, 1)).astype(a.dtype)


def _hardtanh(a, min_val=-1.0, max_val=1.0):
    return np.clip(a, min_val, max_val)


def _hardtanh_backward(grad, a, min_val, max_val):
    return np.where((a <= min_val) | (a >= max_val), 0, grad).astype(grad.dtype)


def port_forward_only():
    """Registers the forward kernels only: every backward still falls back to the CPU."""
    _register([("hardswish", _hardswish),
               ("leaky_relu", lambda a, negative_slope=0.01: np.where(a > 0, a, a * negative_slope).astype(a.dtype)),
               ("hardtanh", _hardtanh)])


def port_fixed_slope():
    """LeakyReLU with the default slope 0.01, whatever negative_slope the module asks for."""
    _register([("hardswish", _hardswish), ("hardswish_backward", _hardswish_backward),
               ("leaky_relu", lambda a, negative_slope=0.01: np.where(a > 0, a, a * 0.01).astype(a.dtype)),
               ("leaky_relu_backward", lambda grad, a, negative_slope, self_is_result:
                   np.where(a > 0, grad, grad * 0.01).astype(grad.dtype)),
               ("hardtanh", _hardtanh), ("hardtanh_backward", _hardtanh_backward)])


WRONG_ANSWERS = [
    ("08.allocator_policy", first_fit,
     "The first cached block that is big enough: splits a big block for a small request."),
    ("08.allocator_policy", never_reuse,
     "Always asks the device for a new block: no caching at all."),
    ("08.yaml_registration", yaml_with_default_suffix,
     "Keeps ``.default`` in the names: ATen has no overload called 'default'."),
    ("08.yaml_registration", yaml_with_device_name,
     "Writes the chip's device name as the backend: the YAML wants the dispatch key."),
    ("08.yaml_registration", yaml_with_namespace,
     "Keeps the aten:: prefix: the YAML's names are inside the aten namespace already."),
    ("08.yaml_registration", yaml_first_op_only,
     "Declares only the first op (a loop that returns too early)."),
    ("08.compile_partitioning", one_island_per_node,
     "Every supported node is an island of its own: correct, but nothing is fused."),
    ("08.compile_partitioning", all_supported_in_one_island,
     "Every supported node in one island, ignoring the paths through CPU nodes (a cycle)."),
    ("08.op_report", report_keeps_overloads,
     "Does not merge overloads: add.Tensor and add.Scalar stay two rows."),
    ("08.op_report", report_share_of_kernels_only,
     "Divides by the kernels' time only, leaving the host<->device copies out of the total."),
    ("08.autoload_package", autoload_wrong_group,
     "Declares the entry point in the torch.compile backends' group: import torch ignores it."),
    ("08.autoload_package", autoload_module_not_function,
     "Points the entry point at the module: torch calls what the entry point loads."),
    ("08.port_model", port_forward_only,
     "Registers the forward kernels only: every backward still falls back to the CPU."),
    ("08.port_model", port_fixed_slope,
     "LeakyReLU with the default slope 0.01, whatever negative_slope the module asks for."),
]
