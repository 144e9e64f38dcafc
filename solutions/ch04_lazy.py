"""Reference solutions of chapter 04 (Lazy Tensor).

Each function body is injected into the instructor's copy of
``notebooks/04_lazy.ipynb`` between ``### BEGIN SOLUTION`` / ``### END SOLUTION``, so a
body may use only what the notebook imports: ``torch`` (with ``torch._lazy`` and its
``metrics``, ``debug``, ``computation`` and ``config`` modules), ``nn``, ``F``,
``TorchDispatchMode`` and ``toychip``.
"""
import torch
import torch._lazy
import torch._lazy.computation
import torch._lazy.metrics
from torch.utils._python_dispatch import TorchDispatchMode

import toychip


def lazy_run(fn, inputs):
    """Record ``fn`` on meta tensors (shapes only), then run only the ops its outputs need."""
    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.nodes = []                       # (func, args, kwargs, meta output)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))   # on meta tensors: shapes, no arithmetic
            self.nodes.append((func, args, kwargs or {}, out))
            return out

    def tensors(value):
        if isinstance(value, torch.Tensor):
            return [value]
        if isinstance(value, (list, tuple)):
            return [t for v in value for t in tensors(v)]
        if isinstance(value, dict):
            return tensors(list(value.values()))
        return []

    metas = [x.to("meta") for x in inputs]
    recorder = Recorder()
    with recorder:
        result = fn(*metas)
    producer = {id(t): i for i, node in enumerate(recorder.nodes) for t in tensors(node[3])}
    live, stack = set(), [producer[id(t)] for t in tensors(result) if id(t) in producer]
    while stack:                                  # walk back from the outputs: the live nodes
        i = stack.pop()
        if i not in live:
            live.add(i)
            _, args, kwargs, _ = recorder.nodes[i]
            stack += [producer[id(t)] for t in tensors((args, kwargs)) if id(t) in producer]

    values = {id(meta): x for meta, x in zip(metas, inputs)}

    def real(value):
        if isinstance(value, torch.Tensor):
            return values[id(value)]
        if isinstance(value, (list, tuple)):
            return type(value)(real(v) for v in value)
        if isinstance(value, dict):
            return {k: real(v) for k, v in value.items()}
        return value

    for i in sorted(live):                        # record order is a topological order
        func, args, kwargs, out = recorder.nodes[i]
        computed = func(*real(args), **real(kwargs))
        for meta, value in zip(tensors(out), tensors(computed)):
            values[id(meta)] = value
    return real(result)


def cache_key(nodes):
    """Structure only: ops, wiring, shapes, dtypes, outputs; every float constant (also a
    keyword one such as ``alpha=-lr``) becomes a marker, because floats are program inputs."""
    def abstract(value):
        if isinstance(value, float):
            return "float"
        if isinstance(value, tuple):
            return tuple(abstract(v) for v in value)
        return value

    return tuple((n.op, n.inputs, abstract(n.constants), n.shape, n.dtype, n.is_output)
                 for n in nodes)


def fusion_policy(nodes):
    """Greedy pointwise trees: a pointwise node absorbs the groups of producers that only it
    uses and that are no graph output (at most one matmul per group)."""
    group_of = {}
    for node in nodes:
        if node.kind not in ("pointwise", "matmul"):
            continue
        group = [node.index]
        if node.kind == "pointwise":
            has_matmul = False
            for p in dict.fromkeys(node.inputs):
                producer = nodes[p]
                if p not in group_of or producer.users != (node.index,) or producer.is_output:
                    continue
                other = group_of[p]
                other_matmul = any(nodes[i].kind == "matmul" for i in other)
                if other_matmul and has_matmul:
                    continue
                has_matmul |= other_matmul
                group = other + group
        for i in group:
            group_of[i] = group
    groups = {id(g): g for g in group_of.values()}
    return [sorted(g) for g in groups.values() if len(g) > 1]


def run_with_cuts(step, state, steps, max_nodes):
    """Cut the loop into graphs of equal length: one structure, one compile. A trial step,
    recorded and then dropped, tells the graph size of a step (dead code not counted)."""
    trial = step(state)
    per_step = sum(node.kind != "input" for node in toychip.pending_graph([trial]))
    del trial                                     # unreferenced: it never runs
    per_graph = max(k for k in range(1, steps + 1) if steps % k == 0 and k * per_step <= max_nodes)
    for done in range(1, steps + 1):
        state = step(state)
        if done % per_graph == 0:
            toychip.mark_step()
    return state


def barrier_probe(op, example):
    """Make ``t`` pending, run ``op(t)`` in lazy mode, and keep the syncs it caused (not the
    planned ones at ``mark_step`` or the end of the block)."""
    with toychip.lazy():
        pending = example.to("toychip") * 1.0
        before = len(toychip.lazy_metrics().sync_log)
        op(pending)
        caused = toychip.lazy_metrics().sync_log[before:]
    return [event.reason for event in caused if event.reason not in ("mark_step", "exit", "explicit")]


def replay_backend(gm, example_inputs):
    """A Dynamo backend on LTC: trace ``gm`` once on the lazy device, compile it, and replay
    the cached program by its graph hash on every call (no re-tracing)."""
    lazy_args = [x.to("lazy") for x in example_inputs]
    position = {torch._lazy.get_tensor_id(t): i for i, t in enumerate(lazy_args)}
    outputs = tuple(gm(*lazy_args))
    graph_hash = torch._lazy.computation.get_graph_hash(outputs)
    input_ids, input_values = torch._lazy.computation.get_tensors_ts_device_data_node(outputs)
    torch._lazy.sync_multi(outputs, [])           # compile once; cached under graph_hash

    def replay(*args):
        inputs = [args[position[i]] if i in position else value for i, value in zip(input_ids, input_values)]
        return torch._lazy.computation.run_cached_graph(graph_hash, inputs)
    return replay
