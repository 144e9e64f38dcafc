"""Chapter 01's catalogue: plausible wrong answers, each with the belief it embodies, and
right answers written differently from the reference. Self-contained (pasted into notebooks)."""
import ast
import logging
import re
from collections import Counter, defaultdict

import torch


# --- 01.graph_recorder -------------------------------------------------------------------

def _op_counts(gm, name_of) -> dict:
    return dict(Counter(name_of(n) for n in gm.graph.nodes if n.op in ("call_function", "call_method")))


def _op_name(node) -> str:
    return node.target.__name__ if node.op == "call_function" else node.target


def record_graphs_first_call_only(fn, inputs):
    """explain() on the first input shows every graph the function will ever have."""
    explained = torch._dynamo.explain(fn)(inputs[0])
    return [_op_counts(gm, _op_name) for gm in explained.graphs]


def record_graphs_every_node(fn, inputs):
    """Every node of the graph is an op, placeholders and the output included."""
    records = []

    def backend(gm, example_inputs):
        records.append(dict(Counter(getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes)))
        return gm.forward

    compiled = torch.compile(fn, backend=backend)
    for x in inputs:
        compiled(x)
    return records


def record_graphs_node_names(fn, inputs):
    """node.name is the op's name (it is unique per node: mul, mul_1, ...)."""
    records = []

    def backend(gm, example_inputs):
        records.append(_op_counts(gm, lambda n: n.name))
        return gm.forward

    compiled = torch.compile(fn, backend=backend)
    for x in inputs:
        compiled(x)
    return records


def record_graphs_functions_only(fn, inputs):
    """Every op in a Dynamo graph is a call_function node (x.mean() is a call_method)."""
    records = []

    def backend(gm, example_inputs):
        records.append(dict(Counter(n.target.__name__ for n in gm.graph.nodes if n.op == "call_function")))
        return gm.forward

    compiled = torch.compile(fn, backend=backend)
    for x in inputs:
        compiled(x)
    return records


def record_graphs_every_run(fn, inputs):
    """The backend sees a graph on every call, so recording when the graph runs is the same."""
    records = []

    def backend(gm, example_inputs):
        counts = _op_counts(gm, _op_name)

        def run(*args):
            records.append(counts)
            return gm.forward(*args)
        return run

    compiled = torch.compile(fn, backend=backend)
    for x in inputs:
        compiled(x)
    return records


def record_graphs_reset_each_input(fn, inputs):
    """Each input must be compiled from a clean state (reset), as the notebook's demos do."""
    records = []

    def backend(gm, example_inputs):
        records.append(_op_counts(gm, _op_name))
        return gm.forward

    for x in inputs:
        torch._dynamo.reset()
        torch.compile(fn, backend=backend)(x)
    return records


def record_graphs_with_defaultdict(fn, inputs):
    """defaultdict and getattr(target, "__name__", target); the backend returns gm itself."""
    records = []

    def backend(gm, example_inputs):
        counts = defaultdict(int)
        for node in gm.graph.nodes:
            if node.op in ("call_function", "call_method"):
                counts[getattr(node.target, "__name__", node.target)] += 1
        records.append(dict(counts))
        return gm

    compiled = torch.compile(fn, backend=backend)
    for x in inputs:
        compiled(x)
    return records


def record_graphs_compile_per_input(fn, inputs):
    """torch.compile(fn) anew for each input: Dynamo's cache lives on fn's code, not on the wrapper."""
    records = []

    def backend(gm, example_inputs):
        records.append(_op_counts(gm, _op_name))
        return gm.forward

    for x in inputs:
        torch.compile(fn, backend=backend)(x)
    return records


def record_graphs_distinct_graphs(fn, inputs):
    """A recompilation that yields a graph with the same op counts is the same graph, recorded once."""
    records = []

    def backend(gm, example_inputs):
        counts = _op_counts(gm, _op_name)
        if counts not in records:
            records.append(counts)
        return gm.forward

    compiled = torch.compile(fn, backend=backend)
    for x in inputs:
        compiled(x)
    return records


def record_graphs_explain_each_input(fn, inputs):
    """explain() on each input lists the graphs the backend receives for that call."""
    return [_op_counts(gm, _op_name) for x in inputs for gm in torch._dynamo.explain(fn)(x).graphs]


def record_graphs_static_shapes(fn, inputs):
    """dynamic=False makes the count exact (one graph per shape) without changing what the backend sees."""
    records = []

    def backend(gm, example_inputs):
        records.append(_op_counts(gm, _op_name))
        return gm.forward

    compiled = torch.compile(fn, backend=backend, dynamic=False)
    for x in inputs:
        compiled(x)
    return records


def record_graphs_counters_kept(fn, inputs):
    """The backend keeps Counter objects (a dict subclass), method calls counted before functions."""
    records = []

    def backend(gm, example_inputs):
        nodes = list(gm.graph.nodes)
        counts = Counter(n.target for n in nodes if n.op == "call_method")
        counts.update(n.target.__name__ for n in nodes if n.op == "call_function")
        records.append(counts)
        return gm.forward

    compiled = torch.compile(fn, backend=backend)
    for x in inputs:
        compiled(x)
    return records


# --- 01.fused_kernels --------------------------------------------------------------------

def _call_body(code):
    return code.split("def call(self, args):", 1)[1]


def kernel_launches_definitions(code):
    """The kernels a file defines (cpp_fused_… = async_compile…) are the ones it launches."""
    return re.findall(r"^(cpp_fused_\w+) = async_compile", code, flags=re.MULTILINE)


def kernel_launches_everywhere(code):
    """Every kernel name anywhere in the file is a launch (definitions count too)."""
    return re.findall(r"cpp_fused_\w+|extern_kernels\.\w+", code)


def kernel_launches_fused_only(code):
    """Only Inductor's own fused kernels are launches; library calls are not kernels."""
    return re.findall(r"^\s+(cpp_fused_\w+)\(", _call_body(code), flags=re.MULTILINE)


def kernel_launches_distinct(code):
    """The answer is the set of kernels used: each name once, sorted."""
    return sorted(set(re.findall(r"^\s+(cpp_fused_\w+|extern_kernels\.\w+)\(", _call_body(code), flags=re.MULTILINE)))


def kernel_launches_mm_only(code):
    """The only library call Inductor makes on CPU is extern_kernels.mm (the prompt's example)."""
    return re.findall(r"^\s+(cpp_fused_\w+|extern_kernels\.mm)\(", _call_body(code), flags=re.MULTILINE)


def kernel_launches_mm_and_bmm(code):
    """The library calls on CPU are the matrix products shown in the notebook: mm and bmm."""
    return re.findall(r"^\s+(cpp_fused_\w+|extern_kernels\.(?:mm|bmm))\(", _call_body(code), flags=re.MULTILINE)


def kernel_launches_first_launch_only(code):
    """A kernel launched twice is still one kernel: list each launched name once, in order."""
    return list(dict.fromkeys(re.findall(r"^\s+(cpp_fused_\w+|extern_kernels\.\w+)\(", _call_body(code),
                                         flags=re.MULTILINE)))


def kernel_launches_definition_order(code):
    """Fused kernels run in the order the file defines them; the library calls come after them."""
    fused = re.findall(r"^(cpp_fused_\w+) = async_compile", code, flags=re.MULTILINE)
    return fused + re.findall(r"^\s+(extern_kernels\.\w+)\(", _call_body(code), flags=re.MULTILINE)


def kernel_launches_every_call(code):
    """Every call statement in call() launches a kernel (allocations and size asserts too)."""
    body = _call_body(code).split("runner = Runner", 1)[0]
    return re.findall(r"^\s+(?:\w+ = )?([\w.]+)\(", body, flags=re.MULTILINE)


def kernel_launches_line_by_line(code):
    """Walks the lines of call() until its return, keeping those that start with a kernel name."""
    launches, inside = [], False
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith("def call(self, args)"):
            inside = True
        elif inside and stripped.startswith("return"):
            break
        elif inside and stripped.startswith(("cpp_fused_", "extern_kernels.")):
            launches.append(stripped.split("(", 1)[0])
    return launches


def kernel_launches_ast(code):
    """Parses the file with ast and keeps call()'s top-level call statements, by line number."""
    call = next(node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.FunctionDef) and node.name == "call")
    names = [ast.unparse(statement.value.func) for statement in call.body
             if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)]
    return [name for name in names if name.startswith(("cpp_fused_", "extern_kernels."))]


def kernel_launches_calls_to_defined_kernels(code):
    """Collects the names the file defines as kernels, then keeps call()'s calls to those names
    or to extern_kernels."""
    defined = set(re.findall(r"^(\w+) = async_compile\.cpp_pybinding", code, flags=re.MULTILINE))
    body = _call_body(code).split("\nrunner = ", 1)[0]
    names = re.findall(r"^[ \t]+([\w.]+)\(", body, flags=re.MULTILINE)
    return [name for name in names if name in defined or name.startswith("extern_kernels.")]


# --- 01.count_compilations ---------------------------------------------------------------

RECOMPILE_LIMIT = 8  # torch._dynamo.config.recompile_limit


def count_compilations_once_per_shape(batch_sizes, dynamic):
    """The seed's claim: every new batch size compiles once, whatever `dynamic` says."""
    return len(set(batch_sizes))


def _static_or_dynamic_graphs(batch_sizes, dynamic, one_is_special=True):
    graphs, changed = set(), False
    for batch in batch_sizes:
        changed = changed or batch != batch_sizes[0]
        symbolic_ok = batch >= 2 or not one_is_special
        if batch in graphs or (symbolic_ok and "dynamic" in graphs):
            continue
        graphs.add("dynamic" if symbolic_ok and (dynamic is True or changed) else batch)
    return len(graphs)


def count_compilations_no_one_specialization(batch_sizes, dynamic):
    """The dynamic graph serves every batch size, 1 included (forgets 0/1 specialization)."""
    if dynamic is False:
        return min(len(set(batch_sizes)), RECOMPILE_LIMIT)
    return _static_or_dynamic_graphs(batch_sizes, dynamic, one_is_special=False)


def count_compilations_limit_counts_recompiles(batch_sizes, dynamic):
    """recompile_limit counts recompilations after the first compile, so 9 graphs fit."""
    if dynamic is False:
        return min(len(set(batch_sizes)), RECOMPILE_LIMIT + 1)
    return _static_or_dynamic_graphs(batch_sizes, dynamic)


def count_compilations_latest_graph_only(batch_sizes, dynamic):
    """Dynamo keeps only the latest graph: switching back to an earlier shape recompiles."""
    compilations, current, changed = 0, None, False
    for batch in batch_sizes:
        changed = changed or batch != batch_sizes[0]
        static = dynamic is False or batch == 1 or (dynamic is None and not changed)
        graph = batch if static else "dynamic"
        if graph != current:
            compilations, current = compilations + 1, graph
    return min(compilations, RECOMPILE_LIMIT) if dynamic is False else compilations


def count_compilations_any_change_goes_dynamic(batch_sizes, dynamic):
    """Under dynamic=None any change of batch size compiles the dynamic graph, even a change to 1."""
    if dynamic is False:
        return min(len(set(batch_sizes)), RECOMPILE_LIMIT)
    if dynamic is True:
        return _static_or_dynamic_graphs(batch_sizes, dynamic)
    first = batch_sizes[0]
    changed = any(batch != first for batch in batch_sizes)
    return 1 + changed + (first != 1 and 1 in batch_sizes)


def count_compilations_true_compiles_once(batch_sizes, dynamic):
    """dynamic=True means one graph for every batch size (0/1 specialization forgotten there only)."""
    if dynamic is True:
        return 1
    if dynamic is False:
        return min(len(set(batch_sizes)), RECOMPILE_LIMIT)
    return _static_or_dynamic_graphs(batch_sizes, dynamic)


def count_compilations_ones_apart(batch_sizes, dynamic):
    """Batch 1 lives apart; among batches >= 2 the first is static and the next new one goes dynamic,
    even when a leading 1 already made the first change."""
    big = list(dict.fromkeys(b for b in batch_sizes if b >= 2))
    ones = int(1 in batch_sizes)
    if dynamic is False:
        return min(len(set(batch_sizes)), RECOMPILE_LIMIT)
    if dynamic is True:
        return ones + int(bool(big))
    return ones + min(len(big), 2)


def count_compilations_every_change(batch_sizes, dynamic):
    """Under dynamic=False the guard remembers only the last shape: every change of batch recompiles."""
    if dynamic is False:
        changes = sum(1 for i, b in enumerate(batch_sizes) if i == 0 or b != batch_sizes[i - 1])
        return min(changes, RECOMPILE_LIMIT)
    return _static_or_dynamic_graphs(batch_sizes, dynamic)


def count_compilations_none_covers_one(batch_sizes, dynamic):
    """0/1 specialization only matters for dynamic=True; under None the dynamic graph serves batch 1 too."""
    if dynamic is None:
        return min(len(set(batch_sizes)), 2)
    if dynamic is False:
        return min(len(set(batch_sizes)), RECOMPILE_LIMIT)
    return _static_or_dynamic_graphs(batch_sizes, dynamic)


def count_compilations_frame_state(batch_sizes, dynamic):
    """Simulates the cache entries, newest first, and automatic dynamic's memory of the size
    seen when compiling (None once two sizes differed)."""
    entries, seen_size, compiles = [], "unset", 0
    for batch in batch_sizes:
        if any(entry == batch or (entry == "dynamic" and batch >= 2) for entry in reversed(entries)):
            continue
        if compiles == RECOMPILE_LIMIT:
            continue                  # Dynamo runs the frame eagerly from now on
        seen_size = batch if seen_size == "unset" else (seen_size if seen_size == batch else None)
        symbolic = dynamic is True or (dynamic is None and seen_size is None)
        entries.append("dynamic" if symbolic and batch >= 2 else batch)
        compiles += 1
    return compiles


def count_compilations_guard_list(batch_sizes, dynamic):
    """Simulates Dynamo's cache: a list of guards, each accepting one size or every size >= 2."""
    guards, first = [], batch_sizes[0]
    for batch in batch_sizes:
        if any(accepts(batch) for accepts in guards) or len(guards) == torch._dynamo.config.recompile_limit:
            continue
        symbolic = dynamic is not False and batch >= 2 and (dynamic is True or batch != first)
        guards.append((lambda b: b >= 2) if symbolic else (lambda b, size=batch: b == size))
    return len(guards)


def count_compilations_closed_form(batch_sizes, dynamic):
    """One formula per mode: a static graph per size; a dynamic one for sizes >= 2; 1 apart."""
    first, ones = batch_sizes[0], int(1 in batch_sizes)
    if dynamic is False:
        return min(len(set(batch_sizes)), 8)
    if dynamic is True:
        return int(any(b >= 2 for b in batch_sizes)) + ones
    return 1 + int(any(b >= 2 and b != first for b in batch_sizes)) + (ones if first != 1 else 0)


# --- 01.remove_graph_breaks --------------------------------------------------------------

def _stats_history(x):
    history = []
    for _ in range(3):
        x = torch.tanh(x * 1.5 + 0.1)
        history.append(x.mean())
    return x, history


def running_stats_keeps_print(x):
    """print is harmless to Dynamo; only the value-dependent `if` breaks the graph."""
    x, history = _stats_history(x)
    print("last mean:", history[-1])
    total = torch.stack(history).sum()
    return torch.where(total > 0, x * total, x - total)


def running_stats_logs_instead(x):
    """Only print is a side effect Dynamo breaks on; logging the last mean instead keeps one graph."""
    x, history = _stats_history(x)
    logging.getLogger("running_stats").info("last mean: %s", history[-1])
    total = torch.stack(history).sum()
    return torch.where(total > 0, x * total, x - total)


def running_stats_branch_on_last_mean(x):
    """The branch tests the mean that was printed (the last one), not the sum of the three."""
    x, history = _stats_history(x)
    total = torch.stack(history).sum()
    return torch.where(history[-1] > 0, x * total, x - total)


def running_stats_branch_per_element(x):
    """torch.where's condition is per element, so `if total > 0` becomes the sign of each x."""
    x, history = _stats_history(x)
    total = torch.stack(history).sum()
    return torch.where(x > 0, x * total, x - total)


def running_stats_keeps_if(x):
    """The seed's claim: list.append breaks the graph, control flow not on shapes/dtypes compiles."""
    total = torch.zeros(())
    for _ in range(3):
        x = torch.tanh(x * 1.5 + 0.1)
        total = total + x.mean()
    if total > 0:
        return x * total
    return x - total


def running_stats_item_branch(x):
    """The break comes from branching on a tensor; a Python number from .item() is fine to branch on."""
    x, history = _stats_history(x)
    total = torch.stack(history).sum()
    if total.item() > 0:
        return x * total
    return x - total


def running_stats_one_branch(x):
    """The graph keeps the branch taken at capture, so only that branch (total > 0) needs writing."""
    x, history = _stats_history(x)
    return x * torch.stack(history).sum()


def running_stats_with_cond(x):
    """torch.cond is as good as torch.where here (the prompt accepts only plain tensor ops)."""
    x, history = _stats_history(x)
    total = torch.stack(history).sum()
    return torch.cond(total > 0, lambda t, s: t * s, lambda t, s: t - s, (x, total))


def running_stats_mask_arithmetic(x):
    """Blends both branches with the 0/1 masks (total > 0) and (total <= 0) instead of torch.where."""
    x, history = _stats_history(x)
    total = torch.stack(history).sum()
    return (total > 0) * (x * total) + (total <= 0) * (x - total)


def running_stats_tensor_sum(x):
    """Accumulates the means in a 0-d tensor instead of a list, and takes the branch with torch.where."""
    total = torch.zeros((), dtype=x.dtype)
    for _ in range(3):
        x = torch.tanh(x * 1.5 + 0.1)
        total = total + x.mean()
    return torch.where(total > 0, x * total, x - total)


def running_stats_kept_outputs(x):
    """Keeps every step's output and takes the means afterwards; the sign of the mean of the
    means is the sign of their sum; methods (gt, mul, sub) instead of operators."""
    steps = []
    for _ in range(3):
        x = torch.tanh(x * 1.5 + 0.1)
        steps.append(x)
    means = torch.stack([step.mean() for step in steps])
    total = means.sum()
    return torch.where(means.mean().gt(0), steps[-1].mul(total), steps[-1].sub(total))


# --- 01.compile_friendly -----------------------------------------------------------------

def _clip_tail(y):
    return torch.relu(y) + 0.01 * y


def adaptive_clip_keeps_item(x):
    """torch.where for the branch is the whole fix; .item() is harmless to the graph."""
    limit = x.abs().mean().item() * 3
    y = x / limit
    y = torch.where(torch.tensor(limit > 1.0), y.clamp(-1, 1) * limit, y * 0.5 + 0.5)
    return _clip_tail(y)


def adaptive_clip_keeps_if(x):
    """Only .item() breaks the graph; an `if` on a 0-d tensor compiles."""
    limit = x.abs().mean() * 3
    y = x / limit
    if limit > 1.0:
        y = y.clamp(-1, 1) * limit
    else:
        y = y * 0.5 + 0.5
    return _clip_tail(y)


def adaptive_clip_float_limit(x):
    """float(t) is not .item(), so the limit may be a Python float without breaking the graph."""
    limit = float(x.abs().mean()) * 3
    y = x / limit
    y = torch.where(torch.tensor(limit > 1.0), y.clamp(-1, 1) * limit, y * 0.5 + 0.5)
    return _clip_tail(y)


def adaptive_clip_with_cond(x):
    """torch.cond keeps one graph without a break, so it compiles as well as torch.where."""
    limit = x.abs().mean() * 3
    y = torch.cond(limit > 1.0, lambda t, l: t.clamp(-1, 1) * l, lambda t, l: t * 0.5 + 0.5, (x / limit, limit))
    return _clip_tail(y)


def adaptive_clip_abs_of_mean(x):
    """The limit is three times the size of the mean, |mean(x)| (abs and mean swapped)."""
    limit = x.mean().abs() * 3
    y = x / limit
    y = torch.where(limit > 1.0, y.clamp(-1, 1) * limit, y * 0.5 + 0.5)
    return _clip_tail(y)


def adaptive_clip_method_calls(x):
    """Written with tensor methods (mul, div, relu), the branch a 0/1 blend."""
    limit = x.abs().mean().mul(3)
    y = x.div(limit)
    large = (limit > 1).to(x.dtype)
    y = large * (y.clamp(-1, 1) * limit) + (1 - large) * (y * 0.5 + 0.5)
    return y.relu() + y * 0.01


def adaptive_clip_one_branch(x):
    """The check's data always has limit > 1, so the clamp branch is all that matters."""
    limit = x.abs().mean() * 3
    return _clip_tail((x / limit).clamp(-1, 1) * limit)


def adaptive_clip_sorted(x):
    """Sorting |x| before the mean makes it more accurate (and one graph is all compile needs)."""
    limit = torch.sort(x.abs()).values.mean() * 3
    y = x / limit
    y = torch.where(limit > 1.0, y.clamp(-1, 1) * limit, y * 0.5 + 0.5)
    return _clip_tail(y)


def adaptive_clip_clamp_to_limit(x):
    """Simplifies clamp(x / limit, -1, 1) * limit to x.clamp(-limit, limit) (tensor bounds)."""
    limit = x.abs().mean() * 3
    y = torch.where(limit > 1.0, x.clamp(-limit, limit), x / limit * 0.5 + 0.5)
    return _clip_tail(y)


def adaptive_clip_mask_blend(x):
    """Blends both branches with a 0/1 float mask, and accumulates the mean in float64."""
    limit = (x.abs().double().mean() * 3).to(x.dtype)
    y = x / limit
    large = (limit > 1.0).to(x.dtype)
    y = large * (y.clamp(-1, 1) * limit) + (1 - large) * (y * 0.5 + 0.5)
    return _clip_tail(y)


# --- 01.bisect_backends ------------------------------------------------------------------

def _agrees(got, want):
    return torch.allclose(got, want, rtol=1e-4, atol=1e-5)


def _stage_outputs(fn, inputs, backend):
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend)
    return [compiled(*args) for args in inputs]


def _diverges(fn, inputs, backend, expected):
    return any(not _agrees(g, w) for g, w in zip(_stage_outputs(fn, inputs, backend), expected))


def bisect_last_divergent(fn, inputs, stages):
    """Any divergent stage will do, so the loop runs to the end and keeps the last one."""
    expected, found = [fn(*args) for args in inputs], None
    for name, backend in stages:
        if _diverges(fn, inputs, backend, expected):
            found = name
    return found


def bisect_exact_equality(fn, inputs, stages):
    """A correct stage reproduces eager bit for bit, so torch.equal is the right test."""
    expected = [fn(*args) for args in inputs]
    for name, backend in stages:
        if any(not torch.equal(g, w) for g, w in zip(_stage_outputs(fn, inputs, backend), expected)):
            return name
    return None


def bisect_first_input_only(fn, inputs, stages):
    """One input is enough to show a broken stage."""
    expected = [fn(*inputs[0])]
    for name, backend in stages:
        if _diverges(fn, inputs[:1], backend, expected):
            return name
    return None


def bisect_only_exceptions(fn, inputs, stages):
    """A broken compile stage fails loudly: the first stage that raises is the culprit."""
    for name, backend in stages:
        try:
            _stage_outputs(fn, inputs, backend)
        except Exception:
            return name
    return None


def bisect_last_agreeing(fn, inputs, stages):
    """The bug is in the last stage that still agrees with eager (the one before the divergence)."""
    expected, previous = [fn(*args) for args in inputs], None
    for name, backend in stages:
        if _diverges(fn, inputs, backend, expected):
            return previous
        previous = name
    return None


def bisect_binary_search(fn, inputs, stages):
    """Binary search over the stages: they are cumulative, so once a stage diverges every later one does."""
    expected = [fn(*args) for args in inputs]
    low, high = 0, len(stages)            # the first divergent stage lies in [low, high); high: none
    while low < high:
        middle = (low + high) // 2
        if _diverges(fn, inputs, stages[middle][1], expected):
            high = middle
        else:
            low = middle + 1
    return stages[low][0] if low < len(stages) else None


def bisect_without_reset(fn, inputs, stages):
    """A new backend makes Dynamo recompile anyway, so no reset is needed between stages
    (torch.testing.assert_close with the same tolerances)."""
    expected = [fn(*args) for args in inputs]
    for name, backend in stages:
        compiled = torch.compile(fn, backend=backend)
        try:
            for args, want in zip(inputs, expected):
                torch.testing.assert_close(compiled(*args), want, rtol=1e-4, atol=1e-5)
        except AssertionError:
            return name
    return None


def bisect_compiler_reset(fn, inputs, stages):
    """The public torch.compiler.reset(); all of a stage's outputs first, then one all()."""
    for name, backend in stages:
        torch.compiler.reset()
        compiled = torch.compile(fn, backend=backend)
        outputs = [compiled(*args) for args in inputs]
        if not all(_agrees(got, fn(*args)) for got, args in zip(outputs, inputs)):
            return name
    return None


WRONG_ANSWERS = [
    ("01.graph_recorder", record_graphs_first_call_only,
     "explain() on the first input shows every graph the function will ever compile"),
    ("01.graph_recorder", record_graphs_every_node,
     "every node of the graph is an op, placeholders and the output included"),
    ("01.graph_recorder", record_graphs_node_names,
     "node.name is the op's name (it is unique per node: mul, mul_1, ...)"),
    ("01.graph_recorder", record_graphs_functions_only,
     "every op in a Dynamo graph is a call_function node (forgets call_method such as x.mean())"),
    ("01.graph_recorder", record_graphs_every_run,
     "the backend sees a graph on every call, so recording each time the graph runs is the same"),
    ("01.graph_recorder", record_graphs_reset_each_input,
     "each input should be compiled from a clean state with torch._dynamo.reset(), like the notebook's demos"),
    ("01.graph_recorder", record_graphs_distinct_graphs,
     "a recompilation whose graph has the same op counts is the same graph, recorded once"),
    ("01.graph_recorder", record_graphs_explain_each_input,
     "explain() on each input lists the graphs the backend receives for that call"),
    ("01.graph_recorder", record_graphs_static_shapes,
     "dynamic=False makes the count exact without changing which graphs the backend receives"),
    ("01.fused_kernels", kernel_launches_definitions,
     "the kernels a file defines (cpp_fused_... = async_compile...) are the ones call() launches"),
    ("01.fused_kernels", kernel_launches_everywhere,
     "every kernel name anywhere in the file is a launch (definitions counted too)"),
    ("01.fused_kernels", kernel_launches_fused_only,
     "only Inductor's fused kernels are launches; library calls (extern_kernels) are not kernels"),
    ("01.fused_kernels", kernel_launches_distinct,
     "the answer is the set of kernels used: each name once, sorted"),
    ("01.fused_kernels", kernel_launches_mm_only,
     "extern_kernels.mm (the prompt's example) is the only library call Inductor makes on CPU"),
    ("01.fused_kernels", kernel_launches_every_call,
     "every call statement in call() launches a kernel (allocations and size asserts too)"),
    ("01.fused_kernels", kernel_launches_mm_and_bmm,
     "the library calls on CPU are the matrix products the notebook shows, mm and bmm (addmm, baddbmm forgotten)"),
    ("01.fused_kernels", kernel_launches_first_launch_only,
     "a kernel launched twice is one kernel: each launched name once, in order of first launch"),
    ("01.fused_kernels", kernel_launches_definition_order,
     "fused kernels run in the order the file defines them, the library calls after them"),
    ("01.count_compilations", count_compilations_once_per_shape,
     "the seed's claim: every new batch size compiles once, whatever dynamic says"),
    ("01.count_compilations", count_compilations_no_one_specialization,
     "the dynamic graph serves every batch size, 1 included (0/1 specialization forgotten)"),
    ("01.count_compilations", count_compilations_limit_counts_recompiles,
     "recompile_limit counts recompilations after the first compile, so limit + 1 graphs fit"),
    ("01.count_compilations", count_compilations_latest_graph_only,
     "Dynamo keeps only the latest graph, so going back to an earlier batch size recompiles"),
    ("01.count_compilations", count_compilations_any_change_goes_dynamic,
     "under dynamic=None any change of batch size compiles the dynamic graph, even a change to 1"),
    ("01.count_compilations", count_compilations_true_compiles_once,
     "dynamic=True compiles exactly once, whatever the batch sizes (batch 1 forgotten there)"),
    ("01.count_compilations", count_compilations_ones_apart,
     "batch 1 lives apart: among batches >= 2 the first is static even after a leading 1"),
    ("01.count_compilations", count_compilations_every_change,
     "under dynamic=False the guard remembers only the last shape, so every change of batch recompiles"),
    ("01.count_compilations", count_compilations_none_covers_one,
     "0/1 specialization matters only for dynamic=True; under None the dynamic graph serves batch 1 too"),
    ("01.remove_graph_breaks", running_stats_keeps_print,
     "print is harmless to Dynamo; only the value-dependent if breaks the graph"),
    ("01.remove_graph_breaks", running_stats_keeps_if,
     "the seed's claim: list.append breaks graphs, control flow that is not on shapes/dtypes compiles"),
    ("01.remove_graph_breaks", running_stats_item_branch,
     "the break comes from branching on a tensor; a Python number from .item() is fine to branch on"),
    ("01.remove_graph_breaks", running_stats_one_branch,
     "the graph keeps the branch taken at capture, so writing that branch (total > 0) is enough"),
    ("01.remove_graph_breaks", running_stats_with_cond,
     "torch.cond is as good as torch.where here (the prompt accepts only plain tensor ops)"),
    ("01.remove_graph_breaks", running_stats_logs_instead,
     "only print breaks the graph; logging the last mean instead is no Python side effect to Dynamo"),
    ("01.remove_graph_breaks", running_stats_branch_on_last_mean,
     "the branch tests the printed last mean rather than the sum of the three means"),
    ("01.remove_graph_breaks", running_stats_branch_per_element,
     "torch.where's condition is per element, so `if total > 0` becomes x > 0"),
    ("01.compile_friendly", adaptive_clip_keeps_item,
     "torch.where for the branch is the whole fix; .item() is harmless to the graph"),
    ("01.compile_friendly", adaptive_clip_keeps_if,
     "only .item() breaks the graph; an if on a 0-d tensor compiles"),
    ("01.compile_friendly", adaptive_clip_one_branch,
     "the data always has limit > 1, so the clamp branch is all that matters"),
    ("01.compile_friendly", adaptive_clip_sorted,
     "sorting |x| before the mean is more accurate, and one graph is all compile needs to be fast"),
    ("01.compile_friendly", adaptive_clip_float_limit,
     "float(t) is not .item(), so a Python float limit keeps the graph whole"),
    ("01.compile_friendly", adaptive_clip_with_cond,
     "torch.cond keeps one graph without a break, so it is as good as torch.where"),
    ("01.compile_friendly", adaptive_clip_abs_of_mean,
     "the limit is three times |mean(x)| (abs and mean taken in the other order)"),
    ("01.bisect_backends", bisect_last_divergent,
     "any divergent stage will do, so the loop runs to the end and keeps the last one"),
    ("01.bisect_backends", bisect_exact_equality,
     "a correct stage reproduces eager bit for bit, so torch.equal is the right test"),
    ("01.bisect_backends", bisect_first_input_only,
     "one input is enough to show a broken stage"),
    ("01.bisect_backends", bisect_only_exceptions,
     "a broken compile stage fails loudly: the first stage that raises is the culprit"),
    ("01.bisect_backends", bisect_last_agreeing,
     "the bug is in the last stage that still agrees with eager, the one before the divergence"),
    ("01.bisect_backends", bisect_without_reset,
     "a new backend makes Dynamo recompile anyway, so no reset is needed between stages"),
]

RIGHT_ANSWERS = [
    ("01.graph_recorder", record_graphs_with_defaultdict,
     "defaultdict with getattr(target, '__name__', target); the backend returns gm itself"),
    ("01.graph_recorder", record_graphs_compile_per_input,
     "calls torch.compile(fn, backend=...) anew for each input (Dynamo's cache lives on fn's code)"),
    ("01.graph_recorder", record_graphs_counters_kept,
     "records Counter objects (a dict subclass), method calls counted before functions"),
    ("01.fused_kernels", kernel_launches_line_by_line,
     "walks call()'s lines until its return instead of a regular expression"),
    ("01.fused_kernels", kernel_launches_ast,
     "parses the file with ast and keeps call()'s top-level call statements"),
    ("01.fused_kernels", kernel_launches_calls_to_defined_kernels,
     "collects the defined kernel names first, then keeps call()'s calls to them or to extern_kernels"),
    ("01.count_compilations", count_compilations_guard_list,
     "simulates the cache as a list of guard predicates, the limit applying in every mode"),
    ("01.count_compilations", count_compilations_closed_form,
     "a closed formula per mode instead of a simulation"),
    ("01.count_compilations", count_compilations_frame_state,
     "simulates cache entries and automatic dynamic's memory of the size seen at compile time"),
    ("01.remove_graph_breaks", running_stats_mask_arithmetic,
     "blends the branches with 0/1 masks instead of torch.where"),
    ("01.remove_graph_breaks", running_stats_tensor_sum,
     "accumulates the means in a 0-d tensor instead of a list"),
    ("01.remove_graph_breaks", running_stats_kept_outputs,
     "keeps each step's output, branches on the mean of the means, tensor methods instead of operators"),
    ("01.compile_friendly", adaptive_clip_clamp_to_limit,
     "x.clamp(-limit, limit) with tensor bounds instead of clamping x / limit"),
    ("01.compile_friendly", adaptive_clip_mask_blend,
     "a 0/1 float mask blends the branches; the mean accumulates in float64"),
    ("01.compile_friendly", adaptive_clip_method_calls,
     "tensor methods (mul, div, relu) instead of operators and functions, the branch a 0/1 blend"),
    ("01.bisect_backends", bisect_binary_search,
     "binary search over the cumulative stages"),
    ("01.bisect_backends", bisect_compiler_reset,
     "the public torch.compiler.reset(); a stage's outputs all computed before comparing"),
]
