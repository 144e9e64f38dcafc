"""Plausible wrong answers to chapter 04's exercises, each with the belief it embodies; the checks must reject each one.

Self-contained (no import of the references): tests paste this module into notebooks
that are graded in the sandbox, where the solutions are hidden.
"""
import torch
import torch._lazy
import torch._lazy.metrics
from torch.utils._python_dispatch import TorchDispatchMode


def lazy_run_eagerly(fn, inputs):
    """Seed 000's picture of eager mode: just run it -- dead ops run too."""
    return fn(*inputs)


def lazy_run_everything_recorded(fn, inputs):
    """Records on meta tensors, but then runs every recorded op (no dead-code removal)."""
    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.nodes = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.nodes.append((func, args, kwargs or {}, out))
            return out

    metas = [x.to("meta") for x in inputs]
    recorder = Recorder()
    with recorder:
        result = fn(*metas)
    values = {id(m): x for m, x in zip(metas, inputs)}

    def real(value):
        if isinstance(value, torch.Tensor):
            return values[id(value)]
        if isinstance(value, (list, tuple)):
            return type(value)(real(v) for v in value)
        return value

    for func, args, kwargs, out in recorder.nodes:
        values[id(out)] = func(*real(args), **{k: real(v) for k, v in kwargs.items()})
    return real(result)


def cache_key_whole_nodes(nodes):
    """Hashes the records as they are: the learning rate is part of the key."""
    return tuple(nodes)


def cache_key_top_level_floats(nodes):
    """Abstracts positional floats but not keyword ones (SGD's ``alpha=-lr``)."""
    return tuple((n.op, n.inputs, tuple("float" if isinstance(c, float) else c for c in n.constants),
                  n.shape, n.dtype, n.is_output) for n in nodes)


def cache_key_without_shapes(nodes):
    """Ops and wiring only: a new batch size looks like the same graph."""
    return tuple((n.op, n.inputs) for n in nodes)


def no_fusion(nodes):
    """Every op its own kernel."""
    return []


def fuse_chains_ignoring_users(nodes):
    """Joins connected pointwise ops even when an intermediate value is used elsewhere."""
    group_of = {}
    for node in nodes:
        if node.kind != "pointwise":
            continue
        group = [node.index]
        for p in node.inputs:
            if p in group_of and group_of[p] is not group:
                group = group_of[p] + group
        for i in group:
            group_of[i] = group
    groups = {id(g): g for g in group_of.values()}
    return [sorted(g) for g in groups.values() if len(g) > 1]


def barrier_reason_seed(func, args, kwargs, compiled_ops):
    """Seed 000's list: only ``.cpu()``/``print`` and reading a value (``if z.sum() > 0``)."""
    if func is torch.ops.aten._local_scalar_dense.default:
        return "item"
    if func is torch.ops.aten._to_copy.default and str(kwargs.get("device")) == "cpu":
        return "host_copy"
    return None


def barrier_reason_views_fall_back(func, args, kwargs, compiled_ops):
    """Forgets that views only change metadata: ``t()``/``view`` reported as fallbacks."""
    aten = torch.ops.aten
    if func is aten._local_scalar_dense.default:
        return "item"
    if func is aten._to_copy.default:
        return "host_copy" if str(kwargs.get("device")) == "cpu" else None
    if torch.Tag.dynamic_output_shape in func.tags:
        return "data_dependent_shape"
    return None if str(func) in compiled_ops else "fallback"


def fallback_report_every_counter(fn, inputs):
    """Reports every counter: LTC's own lazy::* ops and compile counters included."""
    torch._lazy.metrics.reset()
    fn(*[x.to("lazy") for x in inputs])
    torch._lazy.mark_step()
    return {name: torch._lazy.metrics.counter_value(name) for name in torch._lazy.metrics.counter_names()}


def fallback_report_without_reset(fn, inputs):
    """Never resets the counters: earlier runs leak into the report."""
    fn(*[x.to("lazy") for x in inputs])
    torch._lazy.mark_step()
    return {name: torch._lazy.metrics.counter_value(name)
            for name in torch._lazy.metrics.counter_names() if name.startswith("aten::")}


def replay_by_retracing(gm, example_inputs):
    """Correct numbers, but traces the graph again on every call (LTC's cache still hits)."""
    def run(*args):
        outputs = gm(*[a.to("lazy") for a in args])
        torch._lazy.mark_step()
        return [o.cpu() for o in outputs]
    return run


def replay_frozen_values(gm, example_inputs):
    """Caches the example's *results* instead of the program: later calls ignore their inputs."""
    outputs = [o.cpu() for o in gm(*[x.to("lazy") for x in example_inputs])]
    return lambda *args: outputs


WRONG_ANSWERS = [
    ("04.lazy_recorder", lazy_run_eagerly,
     "Seed 000's picture of eager mode: just run it -- dead ops run too."),
    ("04.lazy_recorder", lazy_run_everything_recorded,
     "Records on meta tensors, but then runs every recorded op (no dead-code removal)."),
    ("04.cache_key", cache_key_whole_nodes,
     "Hashes the records as they are: the learning rate is part of the key."),
    ("04.cache_key", cache_key_top_level_floats,
     "Abstracts positional floats but not keyword ones (SGD's ``alpha=-lr``)."),
    ("04.cache_key", cache_key_without_shapes,
     "Ops and wiring only: a new batch size looks like the same graph."),
    ("04.fusion_policy", no_fusion,
     "Every op its own kernel."),
    ("04.fusion_policy", fuse_chains_ignoring_users,
     "Joins connected pointwise ops even when an intermediate value is used elsewhere."),
    ("04.barrier_finder", barrier_reason_seed,
     "Seed 000's list: only ``.cpu()``/``print`` and reading a value (``if z.sum() > 0``)."),
    ("04.barrier_finder", barrier_reason_views_fall_back,
     "Forgets that views only change metadata: ``t()``/``view`` reported as fallbacks."),
    ("04.fallback_report", fallback_report_every_counter,
     "Reports every counter: LTC's own lazy::* ops and compile counters included."),
    ("04.fallback_report", fallback_report_without_reset,
     "Never resets the counters: earlier runs leak into the report."),
    ("04.replay_backend", replay_by_retracing,
     "Correct numbers, but traces the graph again on every call (LTC's cache still hits)."),
    ("04.replay_backend", replay_frozen_values,
     "Caches the example's *results* instead of the program: later calls ignore their inputs."),
]
