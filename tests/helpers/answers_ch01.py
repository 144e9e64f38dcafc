"""Plausible wrong answers to chapter 01's exercises, each with the belief it embodies; the checks must reject each one."""
import re
from collections import Counter

import torch

from course_models.ch01_models import adaptive_clip, running_stats


def record_graphs_first_call_only(fn, inputs):
    """Uses ``explain`` on the first input: misses the graphs of later recompiles and branches."""
    explained = torch._dynamo.explain(fn)(inputs[0])
    return [dict(Counter(n.target.__name__ if n.op == "call_function" else n.target
                         for n in gm.graph.nodes if n.op in ("call_function", "call_method")))
            for gm in explained.graphs]


def record_graphs_every_node(fn, inputs):
    """Counts placeholders and the output too."""
    records = []

    def backend(gm, example_inputs):
        records.append(dict(Counter(getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes)))
        return gm.forward

    compiled = torch.compile(fn, backend=backend)
    for x in inputs:
        compiled(x)
    return records


def count_compilations_once_per_shape(batch_sizes, dynamic):
    """The seed's claim: every new batch size compiles once."""
    return len(set(batch_sizes))


def count_compilations_no_specialization(batch_sizes, dynamic):
    """Knows automatic dynamic shapes but forgets 0/1 specialization and the recompile limit."""
    if dynamic is False:
        return len(set(batch_sizes))
    if dynamic is True:
        return 1
    return 1 if len(set(batch_sizes)) == 1 else 2


def running_stats_one_branch(x):
    """No graph break, but it always takes the ``total > 0`` branch."""
    history = []
    for _ in range(3):
        x = torch.tanh(x * 1.5 + 0.1)
        history.append(x.mean())
    return x * torch.stack(history).sum()


def running_stats_keeps_print(x):
    """The branch became ``torch.where``, but the print still breaks the graph."""
    history = []
    for _ in range(3):
        x = torch.tanh(x * 1.5 + 0.1)
        history.append(x.mean())
    print("last mean:", history[-1])
    total = torch.stack(history).sum()
    return torch.where(total > 0, x * total, x - total)


def adaptive_clip_keeps_item(x):
    """``torch.where`` for the branch, but ``.item()`` still breaks the graph."""
    limit = x.abs().mean().item() * 3
    y = x / limit
    y = torch.where(torch.tensor(limit > 1.0), y.clamp(-1, 1) * limit, y * 0.5 + 0.5)
    return torch.relu(y) + 0.01 * y


def adaptive_clip_sorted(x):
    """One graph and correct, but a sort nobody needs makes it slower than eager."""
    limit = torch.sort(x.abs()).values.mean() * 3
    y = x / limit
    y = torch.where(limit > 1.0, y.clamp(-1, 1) * limit, y * 0.5 + 0.5)
    return torch.relu(y) + 0.01 * y


def kernel_launches_definitions(code):
    """Lists the kernels the file defines: misses the library calls (extern_kernels.mm)."""
    return re.findall(r"^(cpp_fused_\w+) = async_compile", code, flags=re.MULTILINE)


def kernel_launches_everywhere(code):
    """Every ``cpp_fused_…`` name in the file: each kernel counted twice (definition and launch)."""
    return re.findall(r"cpp_fused_\w+|extern_kernels\.\w+", code)


def _stage_outputs(fn, inputs, backend):
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend)
    return [compiled(*args) for args in inputs]


def bisect_last_divergent(fn, inputs, stages):
    """Keeps looking after the first divergence: returns the last stage, not the first."""
    expected, found = [fn(*args) for args in inputs], None
    for name, backend in stages:
        if any(not torch.allclose(g, w, rtol=1e-4, atol=1e-5) for g, w in zip(_stage_outputs(fn, inputs, backend), expected)):
            found = name
    return found


def bisect_exact_equality(fn, inputs, stages):
    """Demands bit-identical outputs: a correct pass that reorders float math looks like a bug."""
    expected = [fn(*args) for args in inputs]
    for name, backend in stages:
        if any(not torch.equal(g, w) for g, w in zip(_stage_outputs(fn, inputs, backend), expected)):
            return name
    return None


def bisect_first_input_only(fn, inputs, stages):
    """Checks only the first input: a bug that shows on negative values goes unseen."""
    want = fn(*inputs[0])
    for name, backend in stages:
        if not torch.allclose(_stage_outputs(fn, inputs[:1], backend)[0], want, rtol=1e-4, atol=1e-5):
            return name
    return None


WRONG_ANSWERS = [
    ("01.graph_recorder", record_graphs_first_call_only,
     "Uses ``explain`` on the first input: misses the graphs of later recompiles and branches."),
    ("01.graph_recorder", record_graphs_every_node,
     "Counts placeholders and the output too."),
    ("01.count_compilations", count_compilations_once_per_shape,
     "The seed's claim: every new batch size compiles once."),
    ("01.count_compilations", count_compilations_no_specialization,
     "Knows automatic dynamic shapes but forgets 0/1 specialization and the recompile limit."),
    ("01.remove_graph_breaks", running_stats,
     ""),
    ("01.remove_graph_breaks", running_stats_one_branch,
     "No graph break, but it always takes the ``total > 0`` branch."),
    ("01.remove_graph_breaks", running_stats_keeps_print,
     "The branch became ``torch.where``, but the print still breaks the graph."),
    ("01.compile_friendly", adaptive_clip,
     ""),
    ("01.compile_friendly", adaptive_clip_keeps_item,
     "``torch.where`` for the branch, but ``.item()`` still breaks the graph."),
    ("01.compile_friendly", adaptive_clip_sorted,
     "One graph and correct, but a sort nobody needs makes it slower than eager."),
    ("01.fused_kernels", kernel_launches_definitions,
     "Lists the kernels the file defines: misses the library calls (extern_kernels.mm)."),
    ("01.fused_kernels", kernel_launches_everywhere,
     "Every ``cpp_fused_…`` name in the file: each kernel counted twice (definition and launch)."),
    ("01.bisect_backends", bisect_last_divergent,
     "Keeps looking after the first divergence: returns the last stage, not the first."),
    ("01.bisect_backends", bisect_exact_equality,
     "Demands bit-identical outputs: a correct pass that reorders float math looks like a bug."),
    ("01.bisect_backends", bisect_first_input_only,
     "Checks only the first input: a bug that shows on negative values goes unseen."),
]
